"""The write limits: a minimum interval per workload, then a cluster-wide token bucket."""

from __future__ import annotations

import heapq

import pytest

from kube_reloader.core.objects import ObjectKey
from kube_reloader.runtime.throttling import Throttle

from .fakes import FakeClock

A = ObjectKey("Deployment", "ns", "a")
B = ObjectKey("Deployment", "ns", "b")


@pytest.mark.parametrize(
    ("since_last", "expected_wait", "reason"),
    [(None, 0.0, "rate_limit"), (1.0, 4.0, "min_interval"), (5.0, 0.0, "rate_limit")],
)
def test_a_workload_waits_out_its_minimum_interval_since_its_last_reload(
    since_last: float | None, expected_wait: float, reason: str
) -> None:
    clock = FakeClock()
    throttle = Throttle(clock, min_interval=5.0, rate=100.0, burst=100.0)
    if since_last is not None:
        throttle.reloaded(A)
        clock.advance(since_last)
    wait, why = throttle.wait(A)
    assert (wait, why) == (pytest.approx(expected_wait), reason)


def test_the_token_bucket_spaces_reloads_across_workloads_once_the_burst_is_spent() -> None:
    clock = FakeClock()
    throttle = Throttle(clock, min_interval=0, rate=4.0, burst=4.0)
    for k in (A, B, A):
        assert throttle.wait(k) == (0.0, "rate_limit")
        throttle.take(k)
    wait, why = throttle.wait(B)
    assert why == "rate_limit"
    assert wait == pytest.approx(1 / 3), "its namespace's bucket: three quarters of the rate"


def test_asking_spends_nothing_only_an_admitted_write_takes_a_token() -> None:
    clock = FakeClock()
    throttle = Throttle(clock, min_interval=0, rate=1.0, burst=4.0)
    for _ in range(100):  # woken and held again, over and over
        assert throttle.wait(A) == (0.0, "rate_limit")
    throttle.take(A)
    assert throttle.wait(B) == (0.0, "rate_limit")


def test_one_namespace_spending_its_whole_share_leaves_a_quarter_of_the_rate_to_others() -> None:
    clock = FakeClock()
    throttle = Throttle(clock, min_interval=0, rate=4.0, burst=4.0)
    assert spend(throttle, "hog", 100) == 3, "three quarters of the burst"
    canary = ObjectKey("Deployment", "canary", "c")
    assert throttle.wait(canary) == (0.0, "rate_limit"), "the last quarter is there for it"


def test_a_forgotten_workload_has_no_interval_to_wait() -> None:
    clock = FakeClock()
    throttle = Throttle(clock, min_interval=5.0, rate=0, burst=0)
    throttle.reloaded(A)
    throttle.forget(A)
    assert throttle.wait(A)[0] == 0


def test_a_token_taken_for_a_write_that_did_not_happen_is_given_back() -> None:
    clock = FakeClock()
    throttle = Throttle(clock, min_interval=0, rate=1.0, burst=1.0)
    throttle.take(A)
    assert throttle.wait(B)[0] > 0
    throttle.give_back(A)  # a conflict: re-planned at once, not deferred
    assert throttle.wait(B) == (0.0, "rate_limit")


def test_one_busy_namespace_alone_spends_the_rate_but_the_reserve() -> None:
    clock = FakeClock()
    throttle = Throttle(clock, min_interval=0, rate=8.0, burst=8.0)
    assert spend(throttle, "busy", 100) == 8 - 2, "its own six, and none of the reserved quarter"


def spend(throttle: Throttle, namespace: str, workloads: int) -> int:
    """Try to write `workloads` of `namespace` at once; how many the rate let through."""
    written = 0
    for i in range(workloads):
        k = ObjectKey("Deployment", namespace, f"w{i}")
        if throttle.wait(k)[0] == 0:
            throttle.take(k)
            written += 1
    return written


def drain(
    throttle: Throttle, clock: FakeClock, keys: list[ObjectKey]
) -> tuple[int, dict[str, float]]:
    """Every key asks at once, then again at the time it was told (a timer fires a
    millisecond late at the soonest), as the reconciler's deferrals do, until each was let
    through: how many asks it took, and when each namespace's last one went (seconds)."""
    start, asks, done = clock.monotonic(), 0, {}
    due = [(start, i, k) for i, k in enumerate(keys)]
    heapq.heapify(due)
    while due:
        at, i, k = heapq.heappop(due)
        clock.advance(max(0.0, at - clock.monotonic()))
        asks += 1
        wait, _ = throttle.wait(k)
        if wait <= 0:
            throttle.take(k)
            done[k.namespace] = clock.monotonic() - start
        else:
            heapq.heappush(due, (clock.monotonic() + max(wait, 0.001), i, k))
    return asks, done


def keys_of(*spread: tuple[str, int]) -> list[ObjectKey]:
    return [ObjectKey("Deployment", ns, f"w{i}") for ns, n in spread for i in range(n)]


@pytest.mark.parametrize(
    ("rate", "burst", "spread"),
    [
        (5.0, 10.0, (("ns", 50),)),  # one namespace: its own bucket binds
        (50.0, 20.0, (("a", 100), ("b", 100), ("c", 100))),  # the cluster's bucket binds
        (4.0, 4.0, (("hog", 60), ("other", 3))),
    ],
)
def test_workloads_held_back_by_the_rate_each_wait_for_a_turn_of_their_own(
    rate: float, burst: float, spread: tuple[tuple[str, int], ...]
) -> None:
    """A fan-out past the burst is not woken all at once at every new token (each woken
    workload is planned again: n² plans for n workloads): each gets its own turn."""
    clock = FakeClock()
    throttle = Throttle(clock, min_interval=0, rate=rate, burst=burst)
    keys = keys_of(*spread)
    asks, done = drain(throttle, clock, keys)
    assert asks <= 3 * len(keys), "each asks at once, at its turn, and seldom again"
    assert max(done.values()) <= (len(keys) - burst) / rate + 1.0, "the whole rate is spent"


def test_a_namespace_behind_a_long_line_of_another_is_not_made_to_wait_for_it() -> None:
    clock = FakeClock()
    throttle = Throttle(clock, min_interval=0, rate=4.0, burst=4.0)
    _, done = drain(throttle, clock, keys_of(("hog", 200), ("other", 3)))
    assert done["hog"] > 45, "the hog's line: 200 workloads at 4 a second"
    assert done["other"] < 2, "the reserved quarter of the rate is there for it"


def test_asking_again_before_its_turn_keeps_the_turn() -> None:
    clock = FakeClock()
    throttle = Throttle(clock, min_interval=0, rate=1.0, burst=1.0)
    throttle.take(A)
    first, _ = throttle.wait(B)
    c = ObjectKey("Deployment", "ns", "c")
    behind, _ = throttle.wait(c)
    clock.advance(first / 2)
    assert throttle.wait(B)[0] == pytest.approx(first / 2)
    assert throttle.wait(c)[0] == pytest.approx(behind - first / 2)
    assert behind > first, "the second held back waits for the next turn"
