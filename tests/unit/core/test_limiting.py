"""Rate-limit arithmetic with a fake clock."""

from __future__ import annotations

import math
import random

import pytest

from kube_reloader.core.limiting import TokenBucket, backoff, min_interval_wait


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


# each caller's numbers: (attempt, base, cap, jitter) -> seconds
@pytest.mark.parametrize(
    ("attempt", "base", "cap", "jitter", "seconds"),
    [
        (0, 0.5, 30.0, None, 0.5),  # reflector (LIST/WATCH): first failure
        (3, 0.5, 30.0, None, 4.0),
        (6, 0.5, 30.0, None, 30.0),  # capped
        (-1, 0.5, 30.0, None, 0.5),  # below zero counts as the first attempt
        (0, 0.2, 5.0, None, 0.2),  # reconcile retry, client request retry
        (4, 0.2, 5.0, None, 3.2),
        (5, 0.2, 5.0, None, 5.0),
        (3, 0.5, math.inf, None, 4.0),  # alert sinks: no cap
        (10**9, 0.5, 30.0, None, 30.0),  # no overflow however many failures
        (10**9, 0.5, math.inf, None, 0.5 * 2.0**1000),
        (10**9, 1e10, math.inf, 0.0, math.inf),  # an infinite wait stays one, jitter or not
        (3, 0.5, 30.0, 0.0, 2.0),  # jitter: the upper half of the ceiling
        (3, 0.5, 30.0, 0.5, 3.0),
        (6, 0.5, 30.0, 0.999, 15.0 + 15.0 * 0.999),
    ],
)
def test_backoff_doubles_from_the_base_up_to_the_cap_with_optional_jitter(
    attempt: int, base: float, cap: float, jitter: float | None, seconds: float
) -> None:
    assert backoff(attempt, base=base, cap=cap, jitter=jitter) == pytest.approx(seconds)


@pytest.mark.parametrize(("base", "cap"), [(0.5, 30.0), (0.2, 5.0), (0.5, math.inf)])
def test_jittered_backoff_draws_what_random_uniform_over_the_upper_half_draws(
    base: float, cap: float
) -> None:
    for attempt in range(12):
        ceiling = min(cap, base * 2**attempt)
        expected = random.Random(attempt).uniform(ceiling / 2, ceiling)
        drawn = random.Random(attempt).random()
        assert backoff(attempt, base=base, cap=cap, jitter=drawn) == expected
