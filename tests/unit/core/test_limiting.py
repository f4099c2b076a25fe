"""Rate-limit arithmetic with a fake clock."""

from __future__ import annotations

import pytest

from kube_reloader.core.limiting import TokenBucket, min_interval_wait


def test_the_bucket_grants_a_burst_then_one_per_period() -> None:
    b = TokenBucket(rate=2.0, burst=3)
    assert [b.take(0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert b.take(0.0) == pytest.approx(0.5)
    assert b.take(0.5) == 0.0
    assert b.take(0.5) == pytest.approx(0.5)


def test_the_bucket_refills_up_to_its_burst_only() -> None:
    b = TokenBucket(rate=10.0, burst=2)
    b.take(0.0)
    b.take(0.0)
    granted = [b.take(100.0) for _ in range(3)]
    assert granted[:2] == [0.0, 0.0]
    assert granted[2] > 0


def test_a_zero_rate_disables_the_bucket() -> None:
    b = TokenBucket(rate=0, burst=0)
    assert all(b.take(0.0) == 0.0 for _ in range(1000))


@pytest.mark.parametrize(
    ("last", "now", "interval", "wait"),
    [(None, 10.0, 5.0, 0.0), (8.0, 10.0, 5.0, 3.0), (2.0, 10.0, 5.0, 0.0), (9.0, 10.0, 0.0, 0.0)],
)
def test_min_interval(last: float | None, now: float, interval: float, wait: float) -> None:
    assert min_interval_wait(last, now, interval) == pytest.approx(wait)
