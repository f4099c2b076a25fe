"""The reload mode is part of the plan: `planning.plan()` records in every plan what
`evicting.policy_of` gives for the workload's kind and annotations, with the default strategy
and the evictable kinds of the controller's options (a registered `--workload-kind` too)."""

from __future__ import annotations

import itertools

import pytest

from kube_reloader.core import evicting, planning
from kube_reloader.core.customkinds import CustomKind
from kube_reloader.core.objects import ResourceType
from kube_reloader.core.references import pod_template_from_manifest
from kube_reloader.runtime import kinds
from kube_reloader.runtime.options import Options

S = "kube-reloader.io/strategy"
AUTO = {"reloader.stakater.com/auto": "true"}
PODSETS = CustomKind("example.com", "v1", "podsets", ("spec", "template"))
REGISTRY = kinds.BUILTIN.with_kind(kinds.custom("PodSet", PODSETS))
KINDS = (
    *("Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "Rollout", "DeploymentConfig"),
    *("PodSet", "Unregistered"),
)
ANNOTATIONS = (
    {},
    AUTO,
    {**AUTO, S: "patch"},
    {**AUTO, S: "evict"},
    {**AUTO, S: "evict", "kube-reloader.io/max-unavailable": "25%"},
    {**AUTO, S: "evict", "kube-reloader.io/max-unavailable": "none"},
    {**AUTO, S: "evict", "kube-reloader.io/pod-selector": "app in ("},
    {**AUTO, S: "restart-in-place"},
    {**AUTO, S: "signal", "kube-reloader.io/signal": "SIGUSR1"},
    {**AUTO, S: "signal", "kube-reloader.io/signal": "SIGNOPE"},
    {S: "Evict"},
)
CHANGE = planning.Change(ResourceType.CONFIGMAP, "ns", "cm", "h1")
TEMPLATE = pod_template_from_manifest(
    {"spec": {"containers": [{"name": "app", "envFrom": [{"configMapRef": {"name": "cm"}}]}]}}
)


def old_rule(
    kind: str, annotations: dict[str, str], default: evicting.PodStrategy
) -> evicting.Mode:
    """What the controller's decision sites each asked before the mode was in the plan."""
    spec = REGISTRY.get(kind)
    policy, warnings = evicting.policy_of(
        kind, annotations, default, evictable=spec is not None and spec.evictable
    )
    return evicting.Mode(policy, warnings)


@pytest.mark.parametrize(
    ("kind", "annotations", "default"),
    list(itertools.product(KINDS, ANNOTATIONS, evicting.PodStrategy)),
)
def test_the_mode_in_the_plan_is_what_the_old_rule_gave(
    kind: str, annotations: dict[str, str], default: evicting.PodStrategy
) -> None:
    config = Options(kinds=REGISTRY, default_strategy=default).plan
    w = planning.Workload(kind, "ns", "w", annotations, TEMPLATE)
    p = planning.plan(change=CHANGE, workload=w, config=config, now=0)
    assert p.mode == old_rule(kind, annotations, default)
    assert planning.mode_of(w, config) == p.mode


def test_the_options_give_the_plan_their_default_strategy_and_evictable_kinds() -> None:
    config = Options(kinds=REGISTRY, default_strategy=evicting.PodStrategy.EVICT).plan
    assert config.default_strategy is evicting.PodStrategy.EVICT
    assert config.evictable == {"Deployment", "StatefulSet", "DaemonSet", "PodSet"}


def test_a_plain_config_replaces_the_pods_of_the_built_in_kinds_that_allow_it() -> None:
    assert planning.Config().evictable == evicting.EVICTABLE_KINDS
    assert Options().plan.evictable == evicting.EVICTABLE_KINDS


def test_an_unreadable_strategy_is_in_every_plan_of_the_workload_with_its_warning() -> None:
    w = planning.Workload("Deployment", "ns", "w", {**AUTO, S: "Evict"}, TEMPLATE)
    p = planning.plan(change=CHANGE, workload=w, config=planning.Config(), now=0)
    assert p.outcome is planning.Outcome.RELOAD
    assert p.mode.policy is None
    assert not p.mode.pod_level
    assert len(p.mode.warnings) == 1
    assert "invalid kube-reloader.io/strategy" in p.mode.warnings[0]
