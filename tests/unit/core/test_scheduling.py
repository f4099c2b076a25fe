"""The fleet-safety rules: when a planned reload is written, and why it waits."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kube_reloader.core import scheduling
from kube_reloader.core.objects import ObjectKey
from kube_reloader.core.scheduling import Facts, Hold, JobPolicy, Rules, decide, rules_of

ME = ObjectKey("Deployment", "ns", "web")
#: Tuesday 2026-12-01 10:00 UTC
NOW = dt.datetime(2026, 12, 1, 10, 0, tzinfo=dt.UTC).timestamp()


def rules(**annotations: str) -> Rules:
    r, warnings = rules_of(ME, annotations, {})
    assert warnings == []
    return r


@pytest.mark.parametrize(
    ("workload", "namespace", "freeze", "frozen"),
    [
        ({}, {}, False, ""),
        ({}, {}, True, "--freeze"),
        ({}, {"kube-reloader.io/freeze": "true"}, False, "namespace ns"),
        ({}, {"kube-reloader.io/freeze": "True"}, False, "namespace ns"),
        ({}, {"kube-reloader.io/freeze": "false"}, False, ""),
        ({}, {"kube-reloader.io/freeze": "yes"}, False, ""),
        ({"kube-reloader.io/freeze": "true"}, {}, False, ""),  # a namespace's, not a workload's
    ],
)
def test_a_workload_is_frozen_by_the_flag_or_its_namespace_annotation_only(
    workload: dict[str, str], namespace: dict[str, str], freeze: bool, frozen: str
) -> None:
    r, _ = rules_of(ME, workload, namespace, freeze=freeze)
    assert r.frozen == frozen


def test_the_workloads_window_wins_over_its_namespaces() -> None:
    r, _ = rules_of(ME, {"kube-reloader.io/reload-window": "0 2 * * * 1h"},
                    {"kube-reloader.io/reload-window": "0 3 * * * 1h"})  # fmt: skip
    assert r.window is not None
    assert r.window.source == "0 2 * * * 1h"
    assert r.window_from == "workload"


def test_a_namespace_window_applies_to_a_workload_without_one() -> None:
    r, _ = rules_of(ME, {}, {"kube-reloader.io/reload-window": "0 3 * * * 1h"})
    assert r.window is not None
    assert r.window_from == "namespace"


@pytest.mark.parametrize(
    ("value", "after", "error"),
    [
        ("Deployment/api", (ObjectKey("Deployment", "ns", "api"),), ""),
        (
            "deployment/api, statefulset/db",
            (ObjectKey("Deployment", "ns", "api"), ObjectKey("StatefulSet", "ns", "db")),
            "",
        ),
        ("Deployment/api,Deployment/api", (ObjectKey("Deployment", "ns", "api"),), ""),
        ("Deployment/api,,", (ObjectKey("Deployment", "ns", "api"),), ""),
        ("api", (), "is not KIND/NAME"),
        ("Pod/api", (), "is not KIND/NAME"),
        ("Deployment/API!", (), "is not an object name"),
        ("Deployment/web", (), "cannot follow itself"),
        (",".join(f"Deployment/a{i}" for i in range(17)), (), "at most 16"),
        ("x" * 5000, (), "at most 4096"),
    ],
)
def test_reload_after_names_workloads_of_the_same_namespace_or_says_why_not(
    value: str, after: tuple[ObjectKey, ...], error: str
) -> None:
    got, problem = scheduling.parse_after(value, "ns", ME)
    assert got == after
    assert (error in problem) if error else problem == ""


@pytest.mark.parametrize(
    ("value", "policy", "warned"),
    [
        (None, JobPolicy.RECREATE, False),
        ("recreate", JobPolicy.RECREATE, False),
        ("after-completion", JobPolicy.AFTER_COMPLETION, False),
        (" Never ", JobPolicy.NEVER, False),
        ("sometimes", JobPolicy.RECREATE, True),
    ],
)
def test_a_jobs_policy_is_read_and_an_unreadable_one_is_recreate_with_a_warning(
    value: str | None, policy: JobPolicy, warned: bool
) -> None:
    got, warning = scheduling.job_policy(
        {} if value is None else {"kube-reloader.io/job-policy": value}
    )
    assert got is policy
    assert (warning is not None) is warned


def test_unreadable_annotations_are_ignored_with_one_warning_each() -> None:
    r, warnings = rules_of(ObjectKey("Job", "ns", "j"), {
        "kube-reloader.io/reload-window": "every night",
        "kube-reloader.io/reload-after": "nonsense",
        "kube-reloader.io/job-policy": "maybe",
    }, {})  # fmt: skip
    assert r == Rules()
    assert len(warnings) == 3
    assert all("\n" not in w for w in warnings)


OPEN = "0 9 * * * 2h"  # 09:00-11:00 UTC: open at NOW
CLOSED = "0 2 * * * 1h"  # 02:00-03:00 UTC: next open tomorrow 02:00


@pytest.mark.parametrize(
    ("rule", "facts", "hold"),
    [
        (Rules(), Facts(now=NOW), None),
        (Rules(frozen="--freeze"), Facts(now=NOW), Hold.FROZEN),
        (Rules(frozen="--freeze"), Facts(now=NOW, urgent=True), Hold.FROZEN),  # not bypassed
        (rules(**{"kube-reloader.io/reload-window": OPEN}), Facts(now=NOW), None),
        (rules(**{"kube-reloader.io/reload-window": CLOSED}), Facts(now=NOW), Hold.WINDOW),
        (rules(**{"kube-reloader.io/reload-window": CLOSED}), Facts(now=NOW, urgent=True), None),
        (Rules(), Facts(now=NOW, halted=("Secret ns/db",)), Hold.HALTED),
        (Rules(), Facts(now=NOW, halted=("Secret ns/db",), urgent=True), Hold.HALTED),
        (
            Rules(job_policy=JobPolicy.AFTER_COMPLETION),
            Facts(now=NOW, job_active=1),
            Hold.JOB_RUNNING,
        ),
        (Rules(job_policy=JobPolicy.AFTER_COMPLETION), Facts(now=NOW, job_active=0), None),
        (Rules(job_policy=JobPolicy.RECREATE), Facts(now=NOW, job_active=3), None),
        (
            Rules(),
            Facts(now=NOW, waiting_on=(ObjectKey("Deployment", "ns", "api"),)),
            Hold.ORDER,
        ),
        (Rules(), Facts(now=NOW, cap=2, in_flight=1), None),
        (Rules(), Facts(now=NOW, cap=2, in_flight=2), Hold.SLOTS),
        (Rules(), Facts(now=NOW, cap=2, in_flight=0, ahead=1), Hold.SLOTS),  # waits its turn
        (Rules(), Facts(now=NOW, cap=0, in_flight=500, ahead=9), None),  # no cap
        (Rules(frozen="--freeze"), Facts(now=NOW, cap=1, in_flight=5), Hold.FROZEN),  # first rule
    ],
)
def test_a_reload_is_written_or_held_by_the_first_rule_that_holds_it(
    rule: Rules, facts: Facts, hold: Hold | None
) -> None:
    verdict = decide(rule, facts)
    assert verdict.write is (hold is None)
    assert verdict.hold is hold
    assert verdict.message
    assert "\n" not in verdict.message


def test_a_window_hold_says_when_it_opens_and_its_place_in_line_for_a_slot() -> None:
    v = decide(rules(**{"kube-reloader.io/reload-window": CLOSED}), Facts(now=NOW))
    assert v.until == dt.datetime(2026, 12, 2, 2, 0, tzinfo=dt.UTC).timestamp()
    assert "2026-12-02T02:00:00Z" in v.message
    v = decide(Rules(), Facts(now=NOW, cap=3, in_flight=3, ahead=4))
    assert v.position == 5
    assert "number 5 in line" in v.message


def test_an_urgent_change_says_it_bypassed_the_window() -> None:
    v = decide(rules(**{"kube-reloader.io/reload-window": CLOSED}), Facts(now=NOW, urgent=True))
    assert v.write
    assert "urgent" in v.message


@pytest.mark.parametrize(("value", "urgent"), [("true", True), ("1", True), ("false", False),
                                               ("", False), ("urgent", False)])  # fmt: skip
def test_urgent_is_a_boolean_on_the_changed_resource(value: str, urgent: bool) -> None:
    assert scheduling.urgent({"kube-reloader.io/reload-urgent": value}) is urgent


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(
    st.sampled_from(["kube-reloader.io/reload-window", "kube-reloader.io/reload-after",
                     "kube-reloader.io/job-policy", "kube-reloader.io/freeze"]),
    st.text(max_size=300),
))  # fmt: skip
def test_reading_the_rules_is_total_for_any_annotation_text(annotations: dict[str, str]) -> None:
    for own in (ME, ObjectKey("Job", "ns", "j")):
        r, warnings = rules_of(own, annotations, annotations)
        assert isinstance(r, Rules)
        assert all(isinstance(w, str) and "\n" not in w for w in warnings)
        decide(r, Facts(now=NOW, cap=1, in_flight=1))


def test_a_cycle_of_reload_after_is_found_through_other_workloads_and_missing_ones_end_it() -> None:
    def key(n: str) -> ObjectKey:
        return ObjectKey("Deployment", "ns", n)

    after = {
        "a": "Deployment/b",
        "b": "Deployment/c",
        "c": "Deployment/web",
        "d": "Deployment/gone",
    }
    annotations = {key(n): {"kube-reloader.io/reload-after": v} for n, v in after.items()}
    assert scheduling.follows(key("a"), ME, annotations.get)
    assert not scheduling.follows(key("d"), ME, annotations.get)
    assert not scheduling.follows(key("gone"), ME, annotations.get)
