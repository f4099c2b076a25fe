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
    assert [step for step, _ in got] == steps
    entry = got[-1][1]
    assert (entry.name, entry.count) == ("e0", count), "the series is the first Event's"


def test_a_sweep_writes_a_series_quiet_for_six_minutes_once_and_forgets_it() -> None:
    cache = SeriesCache()
    cache.record("k", "e", "ns", T0)
    cache.record("k", "e", "ns", T0 + 10)
    assert cache.sweep(T0 + 10 + FINISH_SECONDS) == [], "not quiet for longer than 6 minutes"
    (done,) = cache.sweep(T0 + 11 + FINISH_SECONDS)
    assert (done.name, done.count, done.last_observed) == ("e", 2, T0 + 10)
    assert len(cache) == 0
    assert cache.record("k", "e2", "ns", T0 + 20 + FINISH_SECONDS)[0] is Step.CREATE


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


def test_the_cache_forgets_its_oldest_event_beyond_its_bound() -> None:
    cache = SeriesCache(max_entries=2)
    for key in ("a", "b", "c"):
        cache.record(key, key, "ns", T0)
    assert len(cache) == 2
    assert cache.record("a", "a2", "ns", T0 + 1)[0] is Step.CREATE, "a was forgotten"
    assert cache.record("c", "c", "ns", T0 + 1)[0] is Step.SERIES
