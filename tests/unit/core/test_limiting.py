"""Rate-limit arithmetic with a fake clock."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kube_reloader.core.limiting import FairLine, TokenBucket, backoff, min_interval_wait, tried


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


def test_a_tried_take_leaves_each_bucket_as_it_was_even_one_named_twice() -> None:
    shared, own = TokenBucket(rate=2.0, burst=3.0), TokenBucket(rate=1.0, burst=1.0)
    shared.take(0.0)
    before = [(b.tokens, b.updated) for b in (shared, own)]
    with tried(shared, own, shared):
        assert [shared.take(0.5), shared.take(0.5), own.take(0.5)] == [0.0, 0.0, 0.0]
        assert own.peek(0.5) > 0
    assert [(b.tokens, b.updated) for b in (shared, own)] == before

    def failing_trial() -> None:
        with tried(own):
            own.take(1.0)
            raise RuntimeError("a trial that fails")

    with pytest.raises(RuntimeError):
        failing_trial()
    assert (own.tokens, own.updated) == before[1], "restored on the way out of a failure too"


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


def line_of(*keys: str) -> FairLine[str]:
    """A line whose tenant is a key's first letter (`a1`: tenant `a`), joined in order."""
    line: FairLine[str] = FairLine(lambda k: k[0])
    for k in keys:
        line.ahead(k)
    return line


def order(line: FairLine[str], keys: Iterable[str]) -> list[str]:
    return sorted(keys, key=line.ahead)


def test_the_fair_line_lets_tenants_through_in_turn_each_first_come_first_served() -> None:
    keys = ["a1", "a2", "a3", "a4", "b1", "b2"]
    line = line_of(*keys)
    assert order(line, keys) == ["a1", "b1", "a2", "b2", "a3", "a4"]
    assert line.first() == "a1"
    assert len(line) == 6


def test_a_tenant_new_to_the_line_starts_level_with_its_front_not_behind_its_length() -> None:
    line = line_of("a1", "a2", "a3", "a4")
    line.leave("a1")
    line.leave("a2")
    assert line.ahead("c1") == 1, "behind the front only"
    assert order(line, ["a3", "a4", "c1"]) == ["a3", "c1", "a4"]


def test_asking_again_keeps_a_place_and_one_leaving_moves_those_behind_it_up() -> None:
    line = line_of("a1", "a2", "a3")
    assert [line.ahead("a3"), line.ahead("a3")] == [2, 2]
    line.leave("a2")
    assert line.ahead("a3") == 1
    line.leave("zz")  # not in the line: nothing happens
    assert "a2" not in line
    assert "a3" in line
    assert len(line) == 2


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["join", "leave", "serve"]),
            st.sampled_from(["a1", "a2", "a3", "b1", "b2", "c1"]),
        )
    )
)
def test_the_fair_line_ranks_its_members_once_each_and_forgets_a_tenant_gone(
    steps: list[tuple[str, str]],
) -> None:
    line: FairLine[str] = FairLine(lambda k: k[0])
    members: list[str] = []  # in the order they joined
    for step, key in steps:
        if step == "join":
            line.ahead(key)
            members += [] if key in members else [key]
        else:
            line.leave(key, served=step == "serve")
            members = [m for m in members if m != key]
        assert sorted(line.ahead(m) for m in members) == list(range(len(members)))
        assert line.first() == (min(members, key=line.ahead) if members else None)
        for tenant in "abc":
            places = [line.ahead(m) for m in members if m[0] == tenant]
            assert places == sorted(places), "first come, first served within a tenant"
    for m in members:
        line.leave(m)
    assert len(line) == 0
    assert line.ahead("c1") == 0, "an empty line starts afresh"


def test_a_tenant_is_charged_for_the_tokens_it_spent_not_for_workloads_that_left() -> None:
    line = line_of(*(f"{t}{i}" for i in range(1000) for t in "ac"))
    for i in range(999):
        line.leave(f"a{i}")  # deleted, or their changes ended: no token spent
    assert line.ahead("a999") == 0, "not behind the other tenant's whole line"
    served = line_of("a1", "a2", "b1", "b2")
    served.leave("a1", served=True)
    assert served.first() == "b1", "the tenant served goes behind the next"
    unserved = line_of("a1", "a2", "b1", "b2")
    unserved.leave("a1")
    assert unserved.first() == "a2", "one that left unserved costs its tenant nothing"


def test_a_tenant_whose_workloads_all_left_comes_back_level_with_the_front() -> None:
    line = line_of("a1", "a2", "a3")
    for k in ("a1", "a2", "a3"):
        line.leave(k)
    line.ahead("b1")
    line.ahead("b2")
    assert line.ahead("a4") == 1, "not after the places its earlier workloads had"


def test_a_token_short_only_by_rounding_is_a_whole_one_and_taking_it_leaves_none() -> None:
    b = TokenBucket(rate=10.0, burst=1)
    assert b.take(0.0) == 0.0
    now = 0.0
    for _ in range(10):  # ten refills of a tenth of a token add up to 0.9999999999999999
        now += 0.01
        b.peek(now)
    assert b.tokens < 1.0
    assert b.take(now) == 0.0, "not a wait of 1e-17 s"
    assert b.take(now) == pytest.approx(0.1), "none left: not a new bucket's burst"


def test_a_tenant_new_to_the_line_starts_level_with_the_front_not_ahead_of_it() -> None:
    line = line_of("a1", "a2", "a3", "a4", "a5", "a6", "b1", "b2", "b3")
    for k in ("a1", "a2", "a3", "a4", "b1"):
        line.leave(k, served=True)  # a spent four tokens, b one: b's b2 is at the front
    assert line.first() == "b2"
    assert line.ahead("c1") == 1, "behind b2 only: not before it, not behind a's turns"
    assert order(line, ["a5", "a6", "b2", "b3", "c1"]) == ["b2", "c1", "b3", "a5", "a6"]


def test_tenants_that_empty_and_come_back_at_once_do_not_starve_a_backlogged_one() -> None:
    """Two tenants each keep one workload in line and add the next the moment theirs is let
    through: coming back, a tenant resumes at the turn it had reached, not at the front."""
    line = line_of(*(f"a{i}" for i in range(500)), "m0", "n0")
    served: Counter[str] = Counter()
    for i in range(1, 301):
        first = line.first()
        assert first is not None
        line.leave(first, served=True)
        served[first[0]] += 1
        if first[0] in "mn":
            line.ahead(f"{first[0]}{i}")
    assert min(served.values()) >= 99, served  # a third each, as in turn


def test_a_workload_whose_write_did_not_happen_gets_its_place_and_its_tenants_turn_back() -> None:
    line = line_of("a1", "a2", "b1")
    before = {k: line.ahead(k) for k in ("a1", "a2", "b1")}
    arrival = line.leave("a1", served=True)
    assert arrival is not None
    assert line.first() == "b1"
    line.restore("a1", arrival)
    assert {k: line.ahead(k) for k in ("a1", "a2", "b1")} == before
    alone = line_of("c1")
    back = alone.leave("c1", served=True)
    assert back is not None
    alone.restore("c1", back)
    assert (alone.first(), len(alone)) == ("c1", 1)


def test_tenants_that_left_are_remembered_only_while_the_front_has_not_passed_them() -> None:
    line: FairLine[str] = FairLine(lambda k: k.split("/")[0])
    for i in range(5000):
        line.ahead(f"z/{i}")

    def come_and_go(tenant: str) -> None:  # let through at once: its next turn is kept
        line.ahead(f"{tenant}/w")
        line.leave(f"{tenant}/w", served=True)

    for i in range(3000):
        come_and_go(f"t{i}")
    assert len(line._departed) == 3000  # all still ahead of the front
    for i in range(3000):
        line.leave(f"z/{i}", served=True)  # the front moves on past all of them
    for i in range(2000):
        come_and_go(f"u{i}")
    assert len(line._departed) <= 2000, "those the front passed are dropped"


def test_a_tenant_comes_back_no_earlier_than_the_front_and_afresh_once_the_line_emptied() -> None:
    line: FairLine[str] = FairLine(lambda k: k.split("/")[0])
    for i in range(6):
        line.ahead(f"z/{i}")
    line.ahead("t/a")
    line.leave("t/a", served=True)  # t had reached turn 1
    for i in range(5):
        line.leave(f"z/{i}", served=True)  # the front is at turn 5 now
    assert line.ahead("t/b") == 1, "behind z's front, not before it"
    line.leave("t/b")
    line.leave("z/5", served=True)  # nobody waits
    line.ahead("u/a")
    line.ahead("u/b")
    assert line.ahead("t/c") == 1, "level with the front again"


def test_restoring_a_workload_twice_puts_it_back_once() -> None:
    line = line_of("a1", "b1")
    arrival = line.leave("a1", served=True)
    assert arrival is not None
    line.restore("a1", arrival)
    line.restore("a1", arrival)
    assert len(line) == 2
    assert [line.ahead("a1"), line.ahead("b1")] == [0, 1]
