"""`Keys`: the sets and lookups derived from the annotation keys in effect, computed once per
instance, follow every renamed key (`--auto-annotation` ...), also through `replace`."""

from __future__ import annotations

import dataclasses

import pytest

from kube_reloader.core import annotations as a
from kube_reloader.core.annotations import Keys
from kube_reloader.core.objects import ResourceType as R

RENAMED = Keys(
    auto="x.io/auto",
    configmap_auto="x.io/cm-auto",
    secret_auto="x.io/secret-auto",
    spc_auto="x.io/spc-auto",
    configmap_reload="x.io/cm-reload",
    secret_reload="x.io/secret-reload",
    spc_reload="x.io/spc-reload",
    configmap_exclude="x.io/cm-exclude",
    secret_exclude="x.io/secret-exclude",
    spc_exclude="x.io/spc-exclude",
    search="x.io/search",
    match="x.io/match",
    ignore="x.io/ignore",
    pause_period="x.io/pause-period",
    paused_at="x.io/paused-at",
)


@pytest.mark.parametrize(
    ("rtype", "typed_auto", "named", "exclude"),
    [
        (R.CONFIGMAP, "x.io/cm-auto", "x.io/cm-reload", "x.io/cm-exclude"),
        (R.SECRET, "x.io/secret-auto", "x.io/secret-reload", "x.io/secret-exclude"),
        (R.SECRETPROVIDERCLASS, "x.io/spc-auto", "x.io/spc-reload", "x.io/spc-exclude"),
    ],
)
def test_each_type_reads_its_own_renamed_keys(
    rtype: R, typed_auto: str, named: str, exclude: str
) -> None:
    assert RENAMED.typed_auto(rtype) == typed_auto
    assert RENAMED.named(rtype) == named
    assert RENAMED.exclude(rtype) == exclude
    assert RENAMED.trigger_keys(rtype) == (named, "x.io/search", "x.io/auto", typed_auto)


def test_the_workload_keys_are_every_renamed_workload_key_and_ours() -> None:
    renamed = {
        "x.io/auto", "x.io/search", "x.io/pause-period", "x.io/paused-at",
        *(f"x.io/{t}-{w}" for t in ("cm", "secret", "spc") for w in ("auto", "reload", "exclude")),
    }  # fmt: skip
    ours = {a.ROLLOUT_STRATEGY, a.LAST_RELOADED_FROM, a.RELOADED_HASHES, a.POD_STRATEGY,
            a.MAX_UNAVAILABLE, a.POD_SELECTOR, a.SIGNAL, a.RELOAD_WINDOW, a.RELOAD_AFTER,
            a.JOB_POLICY, a.RELOAD_SCOPE, a.IGNORE_TLS}  # fmt: skip
    assert RENAMED.workload_keys() == renamed | ours
    assert RENAMED.resource_keys() == {"x.io/ignore", "x.io/match", a.RELOAD_URGENT}
    assert not any(k.startswith(a.DOMAIN) for k in RENAMED.workload_keys() - ours)


def test_a_replaced_key_is_derived_again() -> None:
    keys = dataclasses.replace(Keys(), auto="y.io/auto", secret_reload="y.io/s")
    assert "y.io/auto" in keys.workload_keys()
    assert "reloader.stakater.com/auto" not in keys.workload_keys()
    assert keys.trigger_keys(R.SECRET)[:3] == ("y.io/s", Keys().search, "y.io/auto")
    assert keys.named(R.SECRET) == "y.io/s"


def test_keys_compare_hash_and_reflect_as_the_keys_alone_once_derived() -> None:
    used = Keys()
    used.workload_keys()
    assert used == Keys()
    assert hash(used) == hash(Keys())
    assert used != RENAMED
    assert dataclasses.asdict(used) == dataclasses.asdict(Keys())
    assert [f.name for f in dataclasses.fields(Keys)][:2] == ["auto", "configmap_auto"]
    assert all(not f.name.startswith("_") for f in dataclasses.fields(Keys))
    assert "_derived" not in repr(used)


def test_what_keys_derive_cannot_be_changed_by_a_caller() -> None:
    keys = Keys()
    with pytest.raises(TypeError):
        keys._derived.typed[R.SECRET] = ("a", "b", "c")  # type: ignore[index]
    assert keys.named(R.SECRET) == "secret.reloader.stakater.com/reload"


@pytest.mark.parametrize(
    ("workload", "template", "shadowed"),
    [
        ({"reloader.stakater.com/auto": "true"}, {}, {}),
        (
            {"reloader.stakater.com/auto": "true"},
            {"configmap.reloader.stakater.com/reload": "a"},
            {"configmap.reloader.stakater.com/reload": "a"},
        ),
        ({}, {"configmap.reloader.stakater.com/reload": "a"}, {}),
        (
            {"secret.reloader.stakater.com/reload": "s"},
            {
                "configmap.reloader.stakater.com/reload": "a",
                "secret.reloader.stakater.com/auto": "true",
            },
            {"secret.reloader.stakater.com/auto": "true"},
        ),
    ],
)
def test_template_keys_are_shadowed_only_by_a_trigger_of_their_own_type(
    workload: dict[str, str], template: dict[str, str], shadowed: dict[str, str]
) -> None:
    assert a.shadowed_template_keys(workload, template, Keys()) == shadowed
