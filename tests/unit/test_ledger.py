"""core.ledger: the book of rollout slots that the scheduler and `impact` both keep."""

from __future__ import annotations

import pytest

from kube_reloader.core import planning, rollouts
from kube_reloader.core.ledger import CYCLE, Ledger
from kube_reloader.core.objects import ObjectKey
from kube_reloader.core.references import PodTemplate
from kube_reloader.core.scheduling import Hold, Verdict

WRITE = Verdict(True, "written now")
SLOTS = Verdict(False, "in line", Hold.SLOTS, position=1)
WINDOW = Verdict(False, "outside its window", Hold.WINDOW)


def key(name: str, namespace: str = "ns") -> ObjectKey:
    return ObjectKey("Deployment", namespace, name)


A, B, C, D = key("a"), key("b"), key("c"), key("d", "other")


def test_a_written_reload_leaves_the_line_and_holds_a_slot_only_when_followed() -> None:
    book = Ledger(cap=2, line={A: None})
    assert book.settle(A, WRITE) == []
    assert (book.in_flight, book.line) == ({A}, {})
    assert book.settle(B, WRITE, takes_slot=False) == []  # a Job's run: no slot
    assert book.in_flight == {A}


def test_a_reload_held_for_a_slot_joins_the_line_once_in_order() -> None:
    book = Ledger(cap=1, in_flight={A})
    book.settle(B, SLOTS)
    book.settle(C, SLOTS)
    book.settle(B, SLOTS)
    assert list(book.line) == [B, C]


def test_a_called_reload_held_for_something_else_hands_its_slot_to_the_next() -> None:
    book = Ledger(cap=1, line={B: None, C: None})
    assert book.call() == [B]
    assert book.settle(B, WINDOW) == [C], "B was called: its slot goes to C"
    assert (book.called, list(book.line)) == ({C}, [])


def test_a_freed_slot_is_kept_for_a_conflicted_write_or_called_to_the_line() -> None:
    book = Ledger(cap=1, in_flight={A}, line={B: None})
    assert book.free(A, keep=True) == []
    assert book.called == {A}, "re-planned at once, it keeps its turn"
    book.leave_line(A)
    book.in_flight.add(A)
    assert book.free(A) == [B]
    assert book.free(A) == [], "a slot is freed once"


def test_a_free_slot_goes_to_the_namespace_holding_fewest() -> None:
    book = Ledger(cap=4, in_flight={A, B}, line={C: None, D: None})
    assert book.call() == [D], "ns holds its share (2 of 4) while another namespace holds one"
    assert list(book.line) == [C]


def test_reload_after_waits_for_the_unfinished_and_warns_of_a_cycle() -> None:
    book = Ledger(cap=0)
    annotations = {B: {"kube-reloader.io/reload-after": "Deployment/a"}, C: {}}
    waiting, warnings = book.waiting_on(
        A, (B, C), unfinished=lambda k: True, annotations_of=annotations.get
    )
    assert waiting == (C,)
    assert warnings == [CYCLE.format(kind="Deployment", name="b")]
    assert book.release_followers(C) == [A]
    assert book.release_followers(C) == []


def _deployment(kind: str = "Deployment", rolling: bool = False) -> planning.Workload:
    status = rollouts.Status(generation=2, observed_generation=1 if rolling else 2, replicas=1,
                             updated=0 if rolling else 1, available=1)  # fmt: skip
    return planning.Workload(kind, "ns", "w", {}, PodTemplate(), status=status)


UNFINISHED = [
    # (case, in the book, workload, due, pod_level, pending, unfinished)
    ("in line for a slot", "line", _deployment(), False, False, False, True),
    ("holding a slot", "in_flight", _deployment(), False, False, False, True),
    ("called from the line", "called", _deployment(), False, False, False, True),
    ("gone", "", None, True, False, True, False),
    ("a template reload not yet written", "", _deployment(), True, False, False, True),
    ("a template reload written, rolling", "", _deployment(rolling=True), False, False, False, True),
    ("a template reload written, rolled out", "", _deployment(), False, False, False, False),
    ("a pod-level reload handled", "", _deployment(), True, True, False, False),
    ("a pod-level reload still waiting", "", _deployment(), True, True, True, True),
    ("a CronJob's trigger handled", "", _deployment("CronJob"), True, False, False, False),
    ("a CronJob's trigger still waiting", "", _deployment("CronJob"), True, False, True, True),
]  # fmt: skip # one case per line


@pytest.mark.parametrize(
    ("case", "book", "w", "due", "pod_level", "pending", "want"),
    UNFINISHED,
    ids=[u[0] for u in UNFINISHED],
)
def test_a_followed_workload_is_unfinished_by_one_rule_for_the_controller_and_impact(
    case: str,
    book: str,
    w: planning.Workload | None,
    due: bool,
    pod_level: bool,
    pending: bool,
    want: bool,
) -> None:
    ledger = Ledger(cap=2)
    key = ObjectKey("Deployment", "ns", "w")
    if book == "line":
        ledger.line[key] = None
    elif book:
        getattr(ledger, book).add(key)
    got = ledger.unfinished(key, w, due=lambda: due, pod_level=pod_level, pending=pending)
    assert got is want
