"""The one fairness rule for limits namespaces share (`core.fairness`): shares, turns, sets."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kube_reloader.core import fairness
from kube_reloader.core.fairness import Ledger


@pytest.mark.parametrize(
    ("cap", "others", "share"),
    [
        (1, 0, 1), (1, 3, 1),  # one slot cannot be shared: it goes round
        (2, 0, 1), (2, 1, 1),
        (3, 0, 2), (3, 1, 2), (3, 2, 1),
        (4, 0, 3), (4, 1, 2), (4, 2, 2), (4, 3, 1),
        (32, 0, 24), (32, 1, 16), (32, 2, 11), (32, 40, 1),
        (1000, 0, 750), (1000, 1, 500), (1000, 3, 250),
        (0, 5, 1 << 62),  # no limit
    ],
)  # fmt: skip
def test_a_tenant_alone_takes_three_quarters_and_an_equal_part_once_others_want_some(
    cap: int, others: int, share: int
) -> None:
    assert fairness.share(cap, others) == share


def test_a_hog_alone_leaves_room_and_the_newcomer_starts_at_once() -> None:
    ledger: Ledger[str] = Ledger(32)
    taken = 0
    while ledger.take("hog"):
        taken += 1
    assert taken == 24
    assert ledger.take("canary"), "the quarter left free"
    assert not ledger.room("hog"), "over its share now that another wants some"


def test_freed_slots_go_to_the_waiting_tenant_holding_fewest_never_over_its_share() -> None:
    ledger: Ledger[str] = Ledger(4)
    for _ in range(3):
        assert ledger.take("hog")
    ledger.wait("hog", "h3")
    assert ledger.take("other")
    ledger.wait("other", "o1")
    ledger.release("hog")
    assert ledger.grants() == [("other", "o1")], "fewer held, and under its share"
    ledger.release("hog")
    assert ledger.grants() == [("hog", "h3")]
    assert ledger.total == 4


def test_a_tenant_with_waiters_never_jumps_its_own_line() -> None:
    ledger: Ledger[str] = Ledger(2)
    assert ledger.take("a")
    ledger.wait("a", "a2")
    ledger.release("a")
    assert not ledger.take("a"), "a2 waits first"
    assert ledger.grants() == [("a", "a2")]


def test_a_waiter_that_leaves_is_never_granted() -> None:
    ledger: Ledger[str] = Ledger(1)
    assert ledger.take("a")
    ledger.wait("b", "b1")
    ledger.leave("b", "b1")
    ledger.release("a")
    assert ledger.grants() == []
    assert ledger.total == 0


@settings(max_examples=300, deadline=None)
@given(
    st.integers(min_value=1, max_value=40),
    st.lists(st.tuples(st.sampled_from(["take", "release"]), st.sampled_from("abcde")),
             max_size=200),
)  # fmt: skip
def test_whatever_tenants_do_the_cap_holds_and_a_new_tenant_is_never_left_without_a_turn(
    cap: int, ops: list[tuple[str, str]]
) -> None:
    ledger: Ledger[int] = Ledger(cap)
    held: dict[str, int] = {}
    waiter = 0
    for op, tenant in ops:
        if op == "take":
            if ledger.take(tenant):
                held[tenant] = held.get(tenant, 0) + 1
            else:
                waiter += 1
                ledger.wait(tenant, waiter)
        elif held.get(tenant):
            held[tenant] -= 1
            ledger.release(tenant)
            for t, _ in ledger.grants():
                held[t] = held.get(t, 0) + 1
        assert ledger.total == sum(held.values()) <= cap
    if cap >= 2 and ledger.total < cap:
        assert ledger.room("newcomer"), "a tenant holding nothing finds room while any is free"


@pytest.mark.parametrize(
    ("demands", "cap", "parts"),
    [
        ({"a": 3, "b": 2}, 10, {"a": 3, "b": 2}),  # everything fits
        ({"hog": 10_000, "b": 5, "c": 1}, 100, {"hog": 94, "b": 5, "c": 1}),
        ({"a": 10, "b": 10, "c": 10}, 10, {"a": 4, "b": 3, "c": 3}),
        ({"a": 7}, 0, {"a": 0}),
    ],
)  # fmt: skip
def test_a_set_is_cut_max_min_fairly(
    demands: dict[str, int], cap: int, parts: dict[str, int]
) -> None:
    assert fairness.water_fill(demands, cap) == parts


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=3), st.integers(0, 500), max_size=12),
       st.integers(0, 2000))  # fmt: skip
def test_water_fill_never_exceeds_the_cap_and_never_cuts_a_tenant_below_a_bigger_one(
    demands: dict[str, int], cap: int
) -> None:
    parts = fairness.water_fill(demands, cap)
    assert sum(parts.values()) <= cap or sum(demands.values()) <= cap
    for t, d in demands.items():
        assert 0 <= parts[t] <= d
        for u in demands:
            if parts[t] < d:  # t was cut: nobody keeps more than t plus one
                assert parts[u] <= parts[t] + 1
    if sum(demands.values()) > cap:
        assert sum(parts.values()) == cap, "work-conserving"


def test_a_walk_in_fair_order_reaches_every_tenant_early() -> None:
    items = [("big", f"b{i}") for i in range(1000)] + [("small", "s")]
    order = fairness.fair_order(items)
    assert order[:3] == ["b0", "s", "b1"], "one of each tenant in turn"
    assert sorted(order) == sorted(v for _, v in items), "each item once"
    assert fairness.fair_order([]) == []


def test_a_tenant_over_its_share_takes_what_nobody_else_wants_but_the_reserve() -> None:
    ledger: Ledger[str] = Ledger(10)
    for tenant in "BCDEF":  # five namespaces each running one long rollout
        assert ledger.take(tenant)
    taken = 0
    while ledger.take("A"):
        taken += 1
    assert taken == 10 - 5 - fairness.reserve(10), "work waits only for the reserve"
    assert ledger.take("G"), "the reserve: a newcomer starts at once"


def test_tenants_that_always_keep_a_waiter_never_starve_a_later_one() -> None:
    ledger: Ledger[str] = Ledger(8)
    attackers = [f"pod{i}" for i in range(8)]
    for a in attackers:
        assert ledger.take(a)
        ledger.wait(a, f"{a}-1")
        ledger.wait(a, f"{a}-2")
    ledger.wait("apiserver", "review")
    served = 0
    for turn in range(1000):
        holder = attackers[turn % 8] if ledger.held.get(attackers[turn % 8]) else None
        if holder is None:
            holder = next(t for t, n in ledger.held.items() if n)
        ledger.release(holder)
        for tenant, waiter in ledger.grants():
            if tenant == "apiserver":
                served += 1
                ledger.release(tenant)
                ledger.wait("apiserver", "review")
            else:
                ledger.wait(tenant, waiter)  # the attacker queues again at once
    assert served >= 1000 // 9 - 1, "its turn comes round with the others'"
