"""Events correlated as client-go correlates them: counted, combined, rate-limited per object."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from kube_reloader.core.correlating import COMBINED, Correlator, Occurrence, Record

EVENT = Occurrence("reloader-configmaps", "Deployment", "apps/v1", "ns", "web", "uid-1",
                   "Normal", "Reloaded", "Changes detected in 'cm'")  # fmt: skip
WALL = 1_780_000_000.0


class Times:
    """Wall and monotonic time moving together; a fresh name per occurrence."""

    def __init__(self) -> None:
        self.now = 0.0
        self.names = (f"e{i}" for i in itertools.count(1))

    def record(self, c: Correlator, o: Occurrence, after: float = 1.0) -> Record | None:
        self.now += after
        return c.correlate(o, wall=WALL + self.now, now=self.now, fresh_name=next(self.names))


def say(message: str, **changes: str) -> Occurrence:
    return dataclasses.replace(EVENT, message=message, **changes)


def test_an_identical_event_counts_on_the_first_one_with_its_first_timestamp() -> None:
    c, t = Correlator(), Times()
    got = [t.record(c, EVENT) for _ in range(3)]
    assert got == [
        Record("e1", EVENT.message, 1, WALL + 1, WALL + 1),
        Record("e1", EVENT.message, 2, WALL + 1, WALL + 2),
        Record("e1", EVENT.message, 3, WALL + 1, WALL + 3),
    ]
    assert [r.update for r in got if r] == [False, True, True]


@pytest.mark.parametrize(
    ("what", "other"),
    [
        ("another message", say("Changes detected in 'other'")),
        ("another reason", say(EVENT.message, reason="ReloadFail")),
        ("another type", say(EVENT.message, event_type="Warning")),
        ("another object", say(EVENT.message, name="api")),
        ("the same name with another uid", say(EVENT.message, uid="uid-2")),
        ("another source", say(EVENT.message, component="reloader-secrets")),
    ],
)
def test_an_event_that_differs_in_anything_but_time_is_a_new_event(
    what: str, other: Occurrence
) -> None:
    c, t = Correlator(), Times()
    t.record(c, EVENT)
    second = t.record(c, other)
    assert second is not None
    assert (second.name, second.count) == ("e2", 1), what


def test_the_tenth_distinct_message_within_ten_minutes_is_combined_and_counted_from_then() -> None:
    c, t = Correlator(), Times()
    got = [t.record(c, say(f"problem {i}"), after=30) for i in range(12)]
    assert [r.name for r in got[:9] if r] == [f"e{i}" for i in range(1, 10)]
    combined = got[9:]
    assert [(r.name, r.count) for r in combined if r] == [("e10", 1), ("e10", 2), ("e10", 3)]
    assert [r.message for r in combined if r] == [f"{COMBINED}problem {i}" for i in (9, 10, 11)]


def test_distinct_messages_more_than_ten_minutes_apart_are_never_combined() -> None:
    c, t = Correlator(), Times()
    got = [t.record(c, say(f"problem {i}"), after=601) for i in range(12)]
    assert [(r.count, r.message) for r in got if r] == [(1, f"problem {i}") for i in range(12)]


def test_a_source_may_say_25_things_about_one_object_then_one_every_five_minutes() -> None:
    c, t = Correlator(), Times()
    said = [t.record(c, say(f"m{i % 5}"), after=0.1) for i in range(30)]
    assert [r is not None for r in said] == [True] * 25 + [False] * 5
    assert t.record(c, EVENT, after=300) is not None
    assert t.record(c, EVENT, after=1) is None


def test_a_noisy_object_never_holds_back_the_events_of_another() -> None:
    c, t = Correlator(), Times()
    for _ in range(100):
        t.record(c, EVENT, after=0.01)
    quiet = t.record(c, say(EVENT.message, name="quiet", uid="uid-q"), after=0.01)
    assert quiet is not None
    assert quiet.count == 1


def test_memory_is_bounded_and_the_least_recently_used_is_forgotten_first() -> None:
    c, t = Correlator(entries=3), Times()
    for name in ("a", "b", "c", "a", "d"):  # "b" is the least recently used when "d" comes
        t.record(c, say("m", name=name))
    assert c.sizes() == (3, 3, 3)
    again = t.record(c, say("m", name="b"))
    assert again is not None
    assert again.count == 1, "forgotten: recorded as a new Event"
    kept = t.record(c, say("m", name="a"))
    assert kept is not None
    assert kept.count == 3


def test_a_long_message_is_cut_to_1024_characters_combined_or_not() -> None:
    c, t = Correlator(max_events=2), Times()
    first = t.record(c, say("x" * 5000))
    second = t.record(c, say("y" * 5000))
    assert first is not None
    assert second is not None
    assert [len(first.message), len(second.message)] == [1024, 1024]
    assert second.message.startswith(COMBINED)
