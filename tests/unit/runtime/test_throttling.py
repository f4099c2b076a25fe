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
    throttle = Throttle(clock, min_interval=0, rate=2.0, burst=1.0)
    assert throttle.wait(A) == (0.0, "rate_limit")
    wait, why = throttle.wait(B)
    assert why == "rate_limit"
    assert wait == pytest.approx(0.5)


def test_a_forgotten_workload_has_no_interval_to_wait() -> None:
    clock = FakeClock()
    throttle = Throttle(clock, min_interval=5.0, rate=0, burst=0)
    throttle.reloaded(A)
    throttle.forget(A)
    assert throttle.wait(A)[0] == 0
