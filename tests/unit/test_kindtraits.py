"""The one table of per-kind traits: each built-in kind's facts, the custom kinds' default, and
the registries that must agree with it (`runtime.kinds`, `kube.pods`)."""

from __future__ import annotations

import pytest

from kube_reloader.core import evicting, kindtraits
from kube_reloader.core.customkinds import CustomKind
from kube_reloader.core.kindtraits import CRONJOB_TEMPLATE_PATH, TEMPLATE_PATH, KindTraits, traits
from kube_reloader.core.objects import WorkloadKind
from kube_reloader.kube.pods import OWNED_KINDS
from kube_reloader.runtime import kinds

#: kind -> (template path, evictable, ordered, per_node, revisions, job, scheduled, pausable,
#: long_running, reverts_watched, lends_template, catch_up, pause_field)
T, C = TEMPLATE_PATH, CRONJOB_TEMPLATE_PATH
EXPECTED: dict[str, tuple[object, ...]] = {
    "Deployment": (T, True, False, False, False, False, False, True, True, True, True, True, "paused"),
    "DaemonSet": (T, True, False, True, False, False, False, False, True, True, False, True, "paused"),
    "StatefulSet": (T, True, True, False, True, False, False, False, True, True, False, True, "paused"),
    "CronJob": (C, False, False, False, False, False, True, False, False, False, False, False, "suspend"),
    "Job": (T, False, False, False, False, True, False, False, False, False, False, False, "paused"),
    "Rollout": (T, False, False, False, False, False, False, False, True, False, False, True, "paused"),
    "DeploymentConfig": (T, False, False, False, False, False, False, False, False, False, False, True, "paused"),
    "PodSet": (T, True, False, False, False, False, False, False, False, False, False, True, "paused"),
}  # fmt: skip  # reason: one kind per row, its traits in columns


def row(t: KindTraits) -> tuple[object, ...]:
    return (t.template_path, t.evictable, t.ordered, t.per_node, t.revisions, t.job, t.scheduled,
            t.pausable, t.long_running, t.reverts_watched, t.lends_template, t.catch_up,
            t.pause_field)  # fmt: skip  # reason: the columns of EXPECTED


@pytest.mark.parametrize("kind", list(EXPECTED))
def test_each_kind_has_its_traits(kind: str) -> None:
    assert row(traits(kind)) == EXPECTED[kind]


def test_every_built_in_kind_is_in_the_table_and_any_other_name_gets_the_custom_default() -> None:
    assert set(kindtraits.BUILTIN) == {k.value for k in WorkloadKind}
    assert traits("PodSet") is kindtraits.CUSTOM
    assert traits("") is kindtraits.CUSTOM  # (no owner: not a CronJob)


def test_the_built_in_kinds_whose_pods_are_replaced_are_the_evictable_ones() -> None:
    assert {"Deployment", "StatefulSet", "DaemonSet"} == evicting.EVICTABLE_KINDS


def test_the_registry_reads_its_kinds_traits_from_the_table() -> None:
    custom = kinds.custom("PodSet", CustomKind("example.com", "v1", "podsets", ("spec", "x")))
    for spec in [*kinds.BUILTIN, custom]:
        t = traits(spec.kind)
        assert (spec.evictable, spec.catch_up, spec.pausable) == (
            t.evictable,
            t.catch_up,
            t.pausable,
        )


def test_the_long_running_kinds_are_those_whose_rollout_is_read_and_whose_pods_are_known() -> None:
    long_running = {k for k, t in kindtraits.BUILTIN.items() if t.long_running}
    assert long_running == {spec.kind for spec in kinds.BUILTIN if spec.status is not None}
    assert long_running == OWNED_KINDS
