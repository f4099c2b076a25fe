"""Event series as client-go's `events.k8s.io/v1` recorder keeps them: what each occurrence
costs (a create, a series write, a count) and what each sweep writes and forgets."""

from __future__ import annotations

import pytest

from kube_reloader.core.eventseries import FINISH_SECONDS, REFRESH_SECONDS, SeriesCache, Step

T0 = 1_780_000_000.0


@pytest.mark.parametrize(
    ("occurrences", "steps", "count"),
    [
        ([0.0], [Step.CREATE], 0),
        ([0.0, 1.0], [Step.CREATE, Step.SERIES], 2),
        ([0.0, 1.0, 2.0, 3.0], [Step.CREATE, Step.SERIES, Step.COUNTED, Step.COUNTED], 4),
    ],
    ids=["single", "second-starts-a-series", "later-ones-only-count"],
)
def test_each_occurrence_of_one_event_is_a_create_a_series_write_or_a_count(
    occurrences: list[float], steps: list[Step], count: int
) -> None:
    cache = SeriesCache()
    got = [cache.record("k", f"e{i}", "ns", T0 + t) for i, t in enumerate(occurrences)]
    assert [step for step, _, _ in got] == steps
    entry = got[-1][1]
    assert (entry.name, entry.count) == ("e0", count), "the series is the first Event's"


def test_a_sweep_names_a_series_quiet_for_six_minutes_until_its_last_count_is_written() -> None:
    cache = SeriesCache()
    cache.record("k", "e", "ns", T0)
    cache.record("k", "e", "ns", T0 + 10)
    assert cache.sweep(T0 + 10 + FINISH_SECONDS) == [], "not quiet for longer than 6 minutes"
    (done,) = cache.sweep(T0 + 11 + FINISH_SECONDS)
    assert (done.name, done.count, done.last_observed, done.finished) == ("e", 2, T0 + 10, True)
    (again,) = cache.sweep(T0 + 12 + FINISH_SECONDS)  # its write failed: named again
    cache.forget(again)
    assert len(cache) == 0
    assert cache.record("k", "e2", "ns", T0 + 20 + FINISH_SECONDS)[0] is Step.CREATE


def test_an_occurrence_before_a_finished_series_is_forgotten_counts_in_it() -> None:
    cache = SeriesCache()
    cache.record("k", "e", "ns", T0)
    cache.record("k", "e", "ns", T0 + 1)
    (done,) = cache.sweep(T0 + 2 + FINISH_SECONDS)
    step, entry, _ = cache.record("k", "e", "ns", T0 + 3 + FINISH_SECONDS)
    cache.forget(done)  # its last write ended after the new occurrence
    assert (step, entry.count, len(cache)) == (Step.COUNTED, 3, 1)


def test_a_single_event_is_forgotten_after_six_minutes_without_a_write() -> None:
    cache = SeriesCache()
    cache.record("k", "e", "ns", T0)
    assert cache.sweep(T0 + FINISH_SECONDS + 1) == []
    assert len(cache) == 0


def test_every_live_series_is_written_again_each_thirty_minutes() -> None:
    cache = SeriesCache()
    cache.record("k", "e", "ns", T0)
    t = T0
    while t < T0 + REFRESH_SECONDS:  # an occurrence each minute: never quiet
        t += 60
        cache.record("k", "e", "ns", t)
        written = cache.sweep(t)
        assert written == [] if t < T0 + REFRESH_SECONDS else [e.name for e in written] == ["e"]
    assert len(cache) == 1


def test_a_namespace_past_its_share_forgets_its_own_oldest_event_never_anothers() -> None:
    cache = SeriesCache(max_entries=8)
    for i in range(3):  # a quiet tenant's series
        cache.record(("quiet", i), f"q{i}", "quiet", T0)
        cache.record(("quiet", i), f"q{i}", "quiet", T0 + 1)
    forgotten = []
    for i in range(50):  # a busy tenant's reloads, each a new Event
        step, _, gone = cache.record(("busy", i), f"b{i}", "busy", T0 + 2 + i)
        assert step is Step.CREATE
        forgotten.append(gone)
    assert all(cache.record(("quiet", i), f"q{i}", "quiet", T0 + 60)[0] is Step.COUNTED
               for i in range(3)), "the quiet tenant's series are all still counted"  # fmt: skip
    assert forgotten.count(None) == 50, "the busy tenant's singles had no count to write"
    assert len(cache) <= 8


def test_a_forgotten_series_is_handed_back_for_its_count_to_be_written() -> None:
    cache = SeriesCache(max_entries=2)  # one namespace alone: its share is one (a reserve)
    cache.record("a", "a", "ns", T0)
    cache.record("a", "a", "ns", T0 + 1)  # a series of 2
    step, _, gone = cache.record("b", "b", "ns", T0 + 2)
    assert step is Step.CREATE
    assert gone is not None
    assert (gone.name, gone.count) == ("a", 2)
    assert cache.record("a", "a2", "ns", T0 + 3)[0] is Step.CREATE
