"""Workload kinds are open: the built-in names keep their rules, any other kind name is a
generic workload whose pod template is at spec.template."""

from __future__ import annotations

from typing import Any

import pytest

from kube_reloader.core.matching import MatchConfig, Reason, decide
from kube_reloader.core.objects import ParsedKind, ResourceType, WorkloadKind, parse_workload_kind
from kube_reloader.core.planning import Change, Config, Outcome, plan, workload_from_manifest
from kube_reloader.core.rollouts import RolloutState, Status, state

AUTO = {"reloader.stakater.com/auto": "true"}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("Deployment", ParsedKind(WorkloadKind.DEPLOYMENT)),
        ("CronJob", ParsedKind(WorkloadKind.CRONJOB)),
        ("ReloadTestApp", ParsedKind("ReloadTestApp")),
        ("deployment", ParsedKind("deployment")),
        (None, ParsedKind(error="the object has no kind")),
        ("", ParsedKind(error="the object has no kind")),
        (7, ParsedKind(error="kind is a int, not a name")),
        (["Deployment"], ParsedKind(error="kind is a list, not a name")),
        ("Bad Kind", ParsedKind(error="kind 'Bad Kind' is not a kind name")),
        ("A\nB", ParsedKind(error="kind 'A\\nB' is not a kind name")),
        ("X" * 100, ParsedKind(error=f"kind {'X' * 64!r} is not a kind name")),
    ],
)
def test_a_kind_parses_to_a_name_or_a_one_line_error(value: object, expected: ParsedKind) -> None:
    parsed = parse_workload_kind(value)
    assert parsed == expected
    assert "\n" not in (parsed.error or "")


def test_a_built_in_kind_parses_to_its_enum_member() -> None:
    assert parse_workload_kind("Job").kind is WorkloadKind.JOB


def custom(annotations: dict[str, str], kind: str = "ReloadTestApp") -> Any:
    return workload_from_manifest({
        "kind": kind,
        "metadata": {"name": "app", "namespace": "ns", "annotations": annotations},
        "spec": {"template": {"spec": {"containers": [
            {"name": "main", "envFrom": [{"configMapRef": {"name": "cm"}}]},
        ]}}},
    })  # fmt: skip


def test_a_custom_kind_reads_its_pod_template_at_spec_template() -> None:
    w = custom(AUTO)
    assert w.kind == "ReloadTestApp"
    assert str(w.key) == "ReloadTestApp ns/app"
    assert [c.name for c in w.template.containers] == ["main"]


def test_a_custom_kind_plans_a_reload_like_any_pod_template_workload() -> None:
    p = plan(change=Change(ResourceType.CONFIGMAP, "ns", "cm", "h"),
             workload=custom(AUTO), config=Config(), now=0)  # fmt: skip
    assert p.outcome is Outcome.RELOAD
    assert p.target is not None
    assert p.target.container == "main"


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        (WorkloadKind.JOB, Reason.WORKLOAD_TYPE_IGNORED),
        ("Job", Reason.WORKLOAD_TYPE_IGNORED),
        ("CronJob", Reason.WORKLOAD_TYPE_IGNORED),
        ("ReloadTestApp", Reason.AUTO),
        ("Deployment", Reason.AUTO),
    ],
)
def test_ignored_workload_types_name_the_built_in_job_kinds_only(
    kind: str, expected: Reason
) -> None:
    config = MatchConfig(ignored_workload_types=("jobs", "cronjobs"))
    d = decide(rtype=ResourceType.CONFIGMAP, name="cm", resource_annotations={}, kind=kind,
               workload_annotations=AUTO, template_annotations={}, config=config)  # fmt: skip
    assert d.reason is expected


@pytest.mark.parametrize("kind", [None, "", 3])
def test_a_manifest_without_a_kind_name_is_a_one_line_value_error(kind: object) -> None:
    with pytest.raises(ValueError, match="kind") as raised:
        workload_from_manifest({"kind": kind, "metadata": {"name": "x"}})
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        (WorkloadKind.STATEFULSET, RolloutState.PROGRESSING),
        ("StatefulSet", RolloutState.PROGRESSING),
        ("ReloadTestApp", RolloutState.COMPLETE),
    ],
)
def test_the_statefulset_revision_rule_applies_to_that_kind_name_only(
    kind: str, expected: RolloutState
) -> None:
    s = Status(generation=2, observed_generation=2, replicas=1, updated=1, available=1,
               current_revision="a", update_revision="b")  # fmt: skip
    assert state(kind, 2, s) is expected
