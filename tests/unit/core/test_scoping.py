"""Key-level reloads (core.scoping) and `--reload-tls-secrets` (core.matching), through plan()."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kube_reloader.core import hashing, scoping
from kube_reloader.core.catchup import carried, missed_while_away
from kube_reloader.core.matching import MatchConfig, Reason, is_tls_secret
from kube_reloader.core.objects import ResourceType
from kube_reloader.core.planning import (
    Before,
    Change,
    Config,
    Outcome,
    plan,
    workload_from_manifest,
)
from kube_reloader.core.references import pod_template_from_manifest
from kube_reloader.core.strategies import Strategy

CM = ResourceType.CONFIGMAP
SECRET = ResourceType.SECRET
AUTO = {"reloader.stakater.com/auto": "true"}
KEYS = {scoping.SCOPE_ANNOTATION: "keys"}


def template(container: dict[str, Any], volumes: list[dict[str, Any]] | None = None) -> Any:
    return {"spec": {"containers": [{"name": "app", **container}], "volumes": volumes or []}}


def key_ref(name: str, key: str, kind: str = "configMapKeyRef") -> dict[str, Any]:
    return {"env": [{"name": "V", "valueFrom": {kind: {"name": name, "key": key}}}]}


MOUNT = {"volumeMounts": [{"name": "v", "mountPath": "/c"}]}
SUBPATH = {"volumeMounts": [{"name": "v", "mountPath": "/c/f", "subPath": "animal"}]}


@pytest.mark.parametrize(
    ("case", "tmpl", "rtype", "consumed"),
    [
        ("configMapKeyRef", template(key_ref("cm", "animal")), CM, {"animal"}),
        ("secretKeyRef", template(key_ref("s", "pw", "secretKeyRef")), SECRET, {"pw"}),
        ("keyRef of another map", template(key_ref("other", "animal")), CM, None),
        ("envFrom", template({"envFrom": [{"configMapRef": {"name": "cm"}}]}), CM, None),
        ("whole volume", template(MOUNT, [{"name": "v", "configMap": {"name": "cm"}}]), CM, None),
        (
            "subPath of a whole volume",
            template(SUBPATH, [{"name": "v", "configMap": {"name": "cm"}}]),
            CM,
            None,
        ),
        (
            "volume items",
            template(
                MOUNT,
                [
                    {
                        "name": "v",
                        "configMap": {
                            "name": "cm",
                            "items": [{"key": "a", "path": "a"}, {"key": "b", "path": "b"}],
                        },
                    }
                ],
            ),
            CM,
            {"a", "b"},
        ),
        (
            "secret volume items",
            template(
                MOUNT,
                [
                    {
                        "name": "v",
                        "secret": {"secretName": "s", "items": [{"key": "tls.crt", "path": "c"}]},
                    }
                ],
            ),
            SECRET,
            {"tls.crt"},
        ),
        (
            "projected items and a keyRef",
            template(
                {**MOUNT, **key_ref("cm", "c")},
                [
                    {
                        "name": "v",
                        "projected": {
                            "sources": [
                                {"configMap": {"name": "cm", "items": [{"key": "a", "path": "a"}]}},
                                {"secret": {"name": "s"}},
                            ]
                        },
                    }
                ],
            ),
            CM,
            {"a", "c"},
        ),
        (
            "projected whole source",
            template(
                MOUNT,
                [
                    {
                        "name": "v",
                        "projected": {
                            "sources": [
                                {"configMap": {"name": "cm", "items": [{"key": "a", "path": "a"}]}},
                                {"configMap": {"name": "cm"}},
                            ]
                        },
                    }
                ],
            ),
            CM,
            None,
        ),
        (
            "keyRef plus envFrom",
            template({**key_ref("cm", "a"), "envFrom": [{"configMapRef": {"name": "cm"}}]}),
            CM,
            None,
        ),
    ],
)
def test_consumed_keys_follow_each_kind_of_reference(
    case: str, tmpl: Any, rtype: ResourceType, consumed: set[str] | None
) -> None:
    name = "cm" if rtype is CM else "s"
    got = scoping.consumed_keys(pod_template_from_manifest(tmpl), rtype, name)
    assert got == (None if consumed is None else frozenset(consumed)), case


def packed(data: dict[str, str]) -> bytes:
    out = scoping.digests(hashing.configmap_items(data))
    assert out is not None
    return out


def test_the_scoped_hash_changes_only_with_the_consumed_keys() -> None:
    before = packed({"animal": "cat", "animal2": "dog"})
    other_changed = packed({"animal": "cat", "animal2": "wolf"})
    consumed_changed = packed({"animal": "lion", "animal2": "dog"})
    keys = frozenset({"animal"})
    assert scoping.scoped_hash(before, keys) == scoping.scoped_hash(other_changed, keys)
    assert scoping.scoped_hash(before, keys) != scoping.scoped_hash(consumed_changed, keys)


def test_a_consumed_key_that_appears_or_goes_away_changes_the_scoped_hash() -> None:
    keys = frozenset({"new"})
    assert scoping.scoped_hash(packed({"a": "1"}), keys) != scoping.scoped_hash(
        packed({"a": "1", "new": "x"}), keys
    )


def test_keyed_digests_differ_from_plain_ones_and_keep_no_value() -> None:
    items = hashing.secret_items({"pw": b"hunter2"})
    plain, keyed = scoping.digests(items), scoping.digests(items, secret_key=b"k" * 32)
    assert plain is not None
    assert keyed is not None
    assert plain != keyed
    assert b"hunter2" not in plain
    assert b"hunter2" not in keyed
    assert len(plain) == 28


def test_more_keys_than_the_bound_keep_no_digests() -> None:
    items = [(f"k{i}", f"k{i}=v".encode()) for i in range(scoping.MAX_KEYS + 1)]
    assert scoping.digests(items) == scoping.OVERFLOW
    assert scoping.digests(items[: scoping.MAX_KEYS]) != scoping.OVERFLOW


def test_readers_of_an_object_with_too_many_keys_compare_its_own_hash_exactly() -> None:
    c = Change(CM, "ns", "cm", "h" * 40, digests=scoping.OVERFLOW,
               previous=Before("g" * 40, scoping.OVERFLOW))  # fmt: skip
    p = plan(change=c, workload=workload({**AUTO, **KEYS}, ANIMAL2), config=Config(), now=0)
    assert p.outcome is Outcome.RELOAD
    assert p.written == c.hash
    assert p.exact
    assert "more than 1024 keys" in p.message


@given(st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=12),
       st.frozensets(st.text(max_size=8), max_size=4))  # fmt: skip
def test_the_scoped_hash_depends_only_on_the_consumed_items(
    data: dict[str, str], keys: frozenset[str]
) -> None:
    subset = {k: v for k, v in data.items() if k in keys}
    assert scoping.scoped_hash(packed(data), keys) == scoping.scoped_hash(packed(subset), keys)


@pytest.mark.parametrize(
    ("raw", "scope", "warned"),
    [("keys", scoping.Scope.KEYS, False), (" object ", scoping.Scope.OBJECT, False),
     ("Keys", scoping.Scope.OBJECT, True), ("", scoping.Scope.OBJECT, True)],
)  # fmt: skip
def test_the_scope_annotation_is_parsed_totally(
    raw: str, scope: scoping.Scope, warned: bool
) -> None:
    got, warning = scoping.scope_of({scoping.SCOPE_ANNOTATION: raw}, {}, scoping.Scope.OBJECT)
    assert got is scope
    assert (warning is not None) is warned


# ------------------------------------------------------------------- through plan()


def workload(annotations: dict[str, str], tmpl: Any) -> Any:
    return workload_from_manifest({
        "kind": "Deployment", "metadata": {"name": "w", "namespace": "ns",
                                           "annotations": annotations},
        "spec": {"template": tmpl},
    })  # fmt: skip


def change(data: dict[str, str]) -> Change:
    items = hashing.configmap_items(data)
    return Change(CM, "ns", "cm", hashing.items_hash(items), digests=scoping.digests(items))


ANIMAL2 = template(key_ref("cm", "animal2"))


@pytest.mark.parametrize("strategy", list(Strategy))
def test_a_keys_workload_is_up_to_date_when_only_another_key_changed(strategy: Strategy) -> None:
    cfg = Config(strategy=strategy)
    first = plan(change=change({"animal": "cat", "animal2": "dog"}),
                 workload=workload({**AUTO, **KEYS}, ANIMAL2), config=cfg, now=0)  # fmt: skip
    assert first.outcome is Outcome.RELOAD
    assert first.written != first.change.hash
    assert "only 'animal2' count" in first.message
    # the workload as written: the same plan for a change of `animal` finds nothing to do
    env = [{"name": "STAKATER_CM_CONFIGMAP", "value": first.written}]
    tmpl = template({**key_ref("cm", "animal2"), "env": [*ANIMAL2["spec"]["containers"][0]["env"],
                                                         *env]})  # fmt: skip
    if strategy is Strategy.ANNOTATIONS:
        record = first.patch["spec"]["template"]["metadata"]["annotations"]
        tmpl = {**ANIMAL2, "metadata": {"annotations": record}}
    again = plan(change=change({"animal": "lion", "animal2": "dog"}),
                 workload=workload({**AUTO, **KEYS}, tmpl), config=cfg, now=0)  # fmt: skip
    assert again.outcome is Outcome.UP_TO_DATE, again.message
    moved = plan(change=change({"animal": "lion", "animal2": "wolf"}),
                 workload=workload({**AUTO, **KEYS}, tmpl), config=cfg, now=0)  # fmt: skip
    assert moved.outcome is Outcome.RELOAD


def test_an_object_scope_workload_reloads_for_any_key_as_reloader_does() -> None:
    p = plan(change=change({"animal": "cat"}), workload=workload(AUTO, ANIMAL2), config=Config(),
             now=0)  # fmt: skip
    assert p.outcome is Outcome.RELOAD
    assert p.written == p.change.hash


def test_reload_scope_keys_as_the_default_applies_without_the_annotation() -> None:
    cfg = Config(scope=scoping.Scope.KEYS)
    p = plan(change=change({"animal": "cat"}), workload=workload(AUTO, ANIMAL2), config=cfg, now=0)
    assert p.written != p.change.hash
    opted = plan(change=change({"animal": "cat"}),
                 workload=workload({**AUTO, scoping.SCOPE_ANNOTATION: "object"}, ANIMAL2),
                 config=cfg, now=0)  # fmt: skip
    assert opted.written == opted.change.hash


def test_a_keys_workload_consuming_every_key_writes_reloaders_own_hash() -> None:
    tmpl = template({"envFrom": [{"configMapRef": {"name": "cm"}}]})
    p = plan(change=change({"a": "1"}), workload=workload({**AUTO, **KEYS}, tmpl),
             config=Config(), now=0)  # fmt: skip
    assert p.written == p.change.hash == hashing.configmap_hash({"a": "1"})


def test_a_keys_workload_without_known_digests_falls_back_to_the_objects_hash() -> None:
    c = Change(CM, "ns", "cm", hashing.configmap_hash({"animal2": "x"}))
    p = plan(change=c, workload=workload({**AUTO, **KEYS}, ANIMAL2), config=Config(), now=0)
    assert p.written == c.hash
    assert "no per-key digests" in p.message


# ------------------------------------------------------------------- --reload-tls-secrets

TLS_MOUNT = template(MOUNT, [{"name": "v", "secret": {"secretName": "s"}}])
TLS_ON = Config(match=MatchConfig(reload_tls_secrets=True))


@pytest.mark.parametrize(
    ("case", "annotations", "config", "tls", "reloads"),
    [
        ("on, TLS Secret, no annotation", {}, TLS_ON, True, True),
        ("off by default", {}, Config(), True, False),
        ("on, but an Opaque Secret", {}, TLS_ON, False, False),
        ("auto: false opts out", {"reloader.stakater.com/auto": "false"}, TLS_ON, True, False),
        ("secret auto: false opts out", {"secret.reloader.stakater.com/auto": "false"}, TLS_ON,
         True, False),
        ("ignore-tls opts out", {"kube-reloader.io/ignore-tls": "true"}, TLS_ON, True, False),
        ("an exclude list wins", {"secrets.exclude.reloader.stakater.com/reload": "s"}, TLS_ON,
         True, False),
    ],
)  # fmt: skip
def test_tls_secrets_reload_their_consumers_unless_opted_out(
    case: str, annotations: dict[str, str], config: Config, tls: bool, reloads: bool
) -> None:
    c = Change(SECRET, "ns", "s", "h" * 40, tls=tls)
    p = plan(change=c, workload=workload(annotations, TLS_MOUNT), config=config, now=0)
    assert (p.outcome is Outcome.RELOAD) is reloads, f"{case}: {p.message}"
    if reloads:
        assert p.decision.reason is Reason.TLS_SECRET


def test_tls_secrets_reload_only_workloads_that_use_them() -> None:
    unrelated = template({"env": [{"name": "X", "value": "1"}]})
    c = Change(SECRET, "ns", "s", "h" * 40, tls=True)
    p = plan(change=c, workload=workload({}, unrelated), config=TLS_ON, now=0)
    assert p.outcome is Outcome.NO_CONTAINER


def test_a_resource_ignore_annotation_stops_a_tls_reload() -> None:
    c = Change(
        SECRET, "ns", "s", "h" * 40, annotations={"reloader.stakater.com/ignore": "true"}, tls=True
    )
    p = plan(change=c, workload=workload({}, TLS_MOUNT), config=TLS_ON, now=0)
    assert p.outcome is Outcome.SKIPPED


@pytest.mark.parametrize(
    ("secret_type", "annotations", "tls"),
    [("kubernetes.io/tls", {}, True), ("Opaque", {"cert-manager.io/certificate-name": "c"}, True),
     ("Opaque", {}, False), ("", {}, False)],
)  # fmt: skip
def test_tls_secrets_are_told_by_type_or_cert_managers_annotation(
    secret_type: str, annotations: dict[str, str], tls: bool
) -> None:
    assert is_tls_secret(secret_type, annotations) is tls


# ------------------------------------------------------------------- previous content


def was(c: Change) -> Before:
    assert c.digests is not None
    return Before(c.hash, c.digests)


def test_a_keys_workload_carrying_nothing_is_left_alone_when_its_keys_did_not_change() -> None:
    before = change({"animal": "cat", "animal2": "dog"})
    after = dataclasses.replace(change({"animal": "lion", "animal2": "dog"}),
                                previous=was(before))  # fmt: skip
    p = plan(change=after, workload=workload({**AUTO, **KEYS}, ANIMAL2), config=Config(), now=0)
    assert p.outcome is Outcome.UP_TO_DATE
    assert "did not change" in p.message
    moved = dataclasses.replace(change({"animal": "cat", "animal2": "wolf"}),
                                previous=was(before))  # fmt: skip
    p = plan(change=moved, workload=workload({**AUTO, **KEYS}, ANIMAL2), config=Config(), now=0)
    assert p.outcome is Outcome.RELOAD


def test_coalesced_changes_compare_with_the_content_before_the_first() -> None:
    first = dataclasses.replace(change({"animal2": "wolf"}),
                                previous=was(change({"animal2": "dog"})))  # fmt: skip
    second = dataclasses.replace(change({"animal2": "wolf", "animal": "x"}),
                                 previous=was(first))  # fmt: skip
    merged = second.since(first)
    assert merged.previous == first.previous
    p = plan(change=merged, workload=workload({**AUTO, **KEYS}, ANIMAL2), config=Config(), now=0)
    assert p.outcome is Outcome.RELOAD
    unknown = second.since(dataclasses.replace(first, previous=None))
    assert unknown.previous is None


def test_a_workload_switched_to_keys_carrying_the_objects_current_hash_missed_nothing() -> None:
    c = change({"animal": "cat", "animal2": "dog"})
    env = [*key_ref("cm", "animal2")["env"], {"name": "STAKATER_CM_CONFIGMAP", "value": c.hash}]
    w = workload({**AUTO, **KEYS}, template({"env": env}))
    p = plan(change=c, workload=w, config=Config(), now=0)
    assert p.outcome is Outcome.RELOAD  # a live change would write the scoped hash
    missed, why = missed_while_away(
        plan=p, carried_hash=carried(p, w, Strategy.ENV_VARS), config_changed_at=10.0,
        template_changed_at=5.0,
    )  # fmt: skip
    assert not missed, why


def test_a_keys_workload_is_left_alone_at_start_when_the_digests_it_needs_are_unknown() -> None:
    c = Change(CM, "ns", "cm", hashing.configmap_hash({"animal2": "x"}))  # no digests
    env = [*key_ref("cm", "animal2")["env"], {"name": "STAKATER_CM_CONFIGMAP", "value": "0" * 40}]
    w = workload({**AUTO, **KEYS}, template({"env": env}))
    p = plan(change=c, workload=w, config=Config(), now=0)
    assert not p.exact
    missed, why = missed_while_away(
        plan=p, carried_hash=carried(p, w, Strategy.ENV_VARS), config_changed_at=10.0,
        template_changed_at=5.0,
    )  # fmt: skip
    assert not missed
    assert "not known" in why


def test_the_unchanged_keys_shortcut_does_not_hide_a_reload_the_workload_missed() -> None:
    # it carries the hash of an older animal2 (a reload that failed), then `animal` changes
    before = change({"animal": "cat", "animal2": "dog"})
    after = dataclasses.replace(change({"animal": "lion", "animal2": "dog"}), previous=was(before))
    env = [*key_ref("cm", "animal2")["env"], {"name": "STAKATER_CM_CONFIGMAP", "value": "1" * 40}]
    p = plan(change=after, workload=workload({**AUTO, **KEYS}, template({"env": env})),
             config=Config(), now=0)  # fmt: skip
    assert p.outcome is Outcome.RELOAD


def test_one_pass_consumption_matches_each_resources_consumed_keys() -> None:
    tmpl = pod_template_from_manifest(template(
        {**key_ref("a", "k1"), "envFrom": [{"configMapRef": {"name": "b"}}]},
        [{"name": "v", "configMap": {"name": "a", "items": [{"key": "k2", "path": "p"}]}},
         {"name": "w", "secret": {"secretName": "s"}}],
    ))  # fmt: skip
    assert scoping.consumption(tmpl) == {
        (CM, "a"): frozenset({"k1", "k2"}), (CM, "b"): None, (SECRET, "s"): None,
    }  # fmt: skip


def test_a_rollout_with_a_workload_ref_stays_in_object_scope_with_a_warning() -> None:
    w = dataclasses.replace(workload({**AUTO, **KEYS}, ANIMAL2), workload_ref="web")
    p = plan(change=change({"animal2": "x"}), workload=w, config=Config(), now=0)
    assert p.written == p.change.hash
    assert any("workloadRef" in warning for warning in p.decision.warnings)


def test_a_keys_workload_whose_template_is_newer_than_the_change_missed_nothing() -> None:
    # it carries the hash of `a` alone, then starts reading `c` too: its pods restarted anyway
    c = change({"a": "1", "c": "2"})
    env = [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "a"}}},
           {"name": "C", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "c"}}},
           {"name": "STAKATER_CM_CONFIGMAP", "value": "2" * 40}]  # fmt: skip
    w = workload({**AUTO, **KEYS}, template({"env": env}))
    p = plan(change=c, workload=w, config=Config(), now=0)
    missed, why = missed_while_away(
        plan=p, carried_hash=carried(p, w, Strategy.ENV_VARS), config_changed_at=5.0,
        template_changed_at=10.0,
    )  # fmt: skip
    assert not missed, why
    missed, _ = missed_while_away(
        plan=p, carried_hash=carried(p, w, Strategy.ENV_VARS), config_changed_at=10.0,
        template_changed_at=5.0,
    )  # fmt: skip
    assert missed
