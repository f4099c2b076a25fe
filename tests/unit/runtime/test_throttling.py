"""The write limits: a minimum interval per workload, then a cluster-wide token bucket."""

from __future__ import annotations

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
