"""The write limits: a minimum interval per workload, then a cluster-wide token bucket."""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from kube_reloader.core.objects import ObjectKey
from kube_reloader.runtime.throttling import STALE_AFTER, Throttle

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
    _clock, throttle = spent()
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


@dataclass
class Drain:
    """The reconciler's side of the rate, on a fake clock: each workload asks when its
    change arrives, is held back for the time it is told (its deferral timer, a millisecond
    late at the soonest; handing it out cancels the timer) and asks again; the front of the
    line is also woken when its token comes (`Throttle.front`); a workload whose change has
    ended by the time it is handed out (`ended`) leaves the line instead of asking."""

    throttle: Throttle
    clock: FakeClock
    ended: Callable[[ObjectKey, float], bool] = lambda _key, _now: False
    asks: Counter[ObjectKey] = field(default_factory=Counter)
    written: dict[ObjectKey, float] = field(default_factory=dict)
    _events: list[tuple[float, int, str, ObjectKey]] = field(default_factory=list)
    _timers: dict[ObjectKey, int] = field(default_factory=dict)
    _wakes: dict[ObjectKey, tuple[float, int]] = field(default_factory=dict)
    _pending: set[ObjectKey] = field(default_factory=set)
    _n: int = 0

    def run(self, arrivals: list[tuple[float, ObjectKey]]) -> Drain:
        for at, key in arrivals:
            self._push(at, "change", key)
            self._pending.add(key)
        while self._events:
            at, n, kind, key = heapq.heappop(self._events)
            if kind == "timer" and self._timers.get(key) != n:
                continue  # cancelled
            if kind == "wake":
                if self._wakes.get(key, (at, -1))[1] != n:
                    continue  # replaced by an earlier one
                del self._wakes[key]
            self._timers.pop(key, None)
            self.clock.advance(max(0.0, at - self.clock.monotonic()))
            if key in self._pending:
                self._handle(key)
        return self

    def _handle(self, key: ObjectKey) -> None:
        now = self.clock.monotonic()
        self.asks[key] += 1
        if self.ended(key, now):
            self._pending.discard(key)
            self.throttle.release(key)
        else:
            wait, _ = self.throttle.wait(key)
            if wait <= 0:
                self.throttle.take(key)
                self.written[key] = now
                self._pending.discard(key)
            else:
                self._timers[key] = self._push(now + max(wait, 0.001), "timer", key)
        front = self.throttle.front()
        if front is not None and front[0] in self._pending:
            first, due = front[0], now + front[1]
            if first not in self._wakes or self._wakes[first][0] > due:
                self._wakes[first] = (due, self._push(due, "wake", first))

    def _push(self, at: float, kind: str, key: ObjectKey) -> int:
        self._n += 1
        n = self._n
        heapq.heappush(self._events, (at, n, kind, key))
        return n

    def last(self, namespace: str) -> float:
        return max(t for k, t in self.written.items() if k.namespace == namespace)


def fan_out(*spread: tuple[str, int], at: float = 0.0) -> list[tuple[float, ObjectKey]]:
    """`n` workloads of each namespace, all changed at `at`."""
    return [(at, ObjectKey("Deployment", ns, f"w{i}")) for ns, n in spread for i in range(n)]


def drain(
    rate: float, burst: float, ended: Callable[[ObjectKey, float], bool] | None = None
) -> Drain:
    clock = FakeClock()
    throttle = Throttle(clock, min_interval=0, rate=rate, burst=burst)
    return Drain(throttle, clock) if ended is None else Drain(throttle, clock, ended)


@pytest.mark.parametrize(
    ("rate", "burst", "spread"),
    [
        (5.0, 10.0, (("ns", 300),)),  # one namespace: its own bucket, and what it may borrow
        (50.0, 20.0, (("a", 300), ("b", 300), ("c", 300))),  # the cluster's bucket binds
        (4.0, 4.0, tuple((f"n{i}", 2) for i in range(200))),  # many namespaces, two each
        (0.5, 2.0, (("hog", 60), ("other", 3))),
    ],
)
def test_a_fan_out_past_the_burst_asks_about_once_per_workload_and_spends_the_whole_rate(
    rate: float, burst: float, spread: tuple[tuple[str, int], ...]
) -> None:
    """Not every held workload woken at every new token (n² plans for n workloads): each
    is told when its turn comes, and tokens are never left unspent while one waits."""
    arrivals = fan_out(*spread)
    d = drain(rate, burst).run(arrivals)
    assert len(d.written) == len(arrivals)
    assert sum(d.asks.values()) <= 4 * len(arrivals), "n² for n were 1,000 times more"
    assert max(d.asks.values()) <= 6, "none misses its turn over and over"
    slack = max(1.0, 1.0 / rate)  # a second, or a token
    assert max(d.written.values()) <= (len(arrivals) - burst) / rate + slack, "the rate is spent"
    assert d.throttle.waiting() == 0


def test_turns_left_unused_by_changes_that_ended_go_to_the_next_in_line_at_once() -> None:
    """Half the held workloads' changes were superseded by the time their turn came (the
    reconciler finds nothing to write and takes them out of the line): the other half
    still go at the whole rate, not one per two tokens."""
    odd = lambda key, now: now > 0 and int(key.name[1:]) % 2 == 1  # noqa: E731
    d = drain(4.0, 4.0, odd).run(fan_out(("ns", 400)))
    assert sum(1 for k in d.written if int(k.name[1:]) % 2 == 0) == 200
    assert max(d.written.values()) <= (len(d.written) - 4) / 4.0 + 1.0


def test_namespaces_arriving_behind_a_line_of_ended_changes_do_not_wait_for_it() -> None:
    """A thousand namespaces' workloads held back, each change ended before its turn; two
    hundred fresh namespaces that change later are written at the whole rate."""
    gone = lambda key, now: key.namespace.startswith("a") and now > 0  # noqa: E731
    arrivals = fan_out(*((f"a{i}", 1) for i in range(1000)))
    arrivals += fan_out(*((f"b{i}", 1) for i in range(200)), at=20.0)
    d = drain(4.0, 4.0, gone).run(arrivals)
    fresh = [t - 20.0 for k, t in d.written.items() if k.namespace.startswith("b")]
    assert len(fresh) == 200
    assert max(fresh) <= (200 - 4) / 4.0 + 1.0


@pytest.mark.parametrize("hogs", [1, 3])
def test_a_namespace_behind_the_long_lines_of_others_goes_within_a_few_tokens(hogs: int) -> None:
    arrivals = fan_out(*((f"hog{h}", 200) for h in range(hogs)))
    arrivals += fan_out(("victim", 3), at=10.0)
    d = drain(4.0, 4.0).run(arrivals)
    assert min(d.last(f"hog{h}") for h in range(hogs)) > 40
    fair_share = (3 * (hogs + 1) + 1) / 4.0  # a token in turn with each hog, and one more
    assert d.last("victim") - 10.0 <= fair_share, "it starts level with the front of the line"


def test_asking_again_keeps_the_turn() -> None:
    clock, throttle = spent()
    first, _ = throttle.wait(B)
    c = ObjectKey("Deployment", "ns", "c")
    behind, _ = throttle.wait(c)
    assert behind == pytest.approx(first + 1.0), "one token after the one ahead of it"
    clock.advance(first / 2)
    assert throttle.wait(c)[0] == pytest.approx(behind - first / 2)
    assert throttle.wait(B)[0] == pytest.approx(first / 2)
    assert throttle.front() == (B, pytest.approx(first / 2))


def test_a_token_owed_to_the_front_of_the_line_is_not_taken_by_another() -> None:
    clock, throttle = spent()
    first, _ = throttle.wait(B)
    clock.advance(first)
    c = ObjectKey("Deployment", "other", "c")
    wait, _ = throttle.wait(c)
    assert wait == pytest.approx(1.0), "B's token: c comes one token later"
    assert throttle.wait(B) == (0.0, "rate_limit")


def test_a_workload_that_never_comes_back_is_taken_out_when_it_reaches_the_front() -> None:
    clock, throttle = spent()
    lost, _ = throttle.wait(B)  # never asks again, never released
    c = ObjectKey("Deployment", "ns", "c")
    clock.advance(lost + STALE_AFTER - 0.5)
    assert throttle.wait(c)[0] == pytest.approx(1.0), "B's token: c comes one token later"
    assert throttle.waiting() == 2, "not yet: a worker backlog delays one this long at most"
    clock.advance(1.0)
    assert throttle.wait(c) == (0.0, "rate_limit"), "B is taken out: its token is c's"
    assert throttle.front() == (c, 0.0)
    assert throttle.waiting() == 1


def test_a_released_or_forgotten_workload_leaves_the_line() -> None:
    _clock, throttle = spent()
    throttle.wait(B)
    c = ObjectKey("Deployment", "ns", "c")
    throttle.wait(c)
    throttle.release(B)
    assert throttle.front() == (c, pytest.approx(4 / 3)), "its namespace's three quarters"
    throttle.forget(c)
    assert (throttle.front(), throttle.waiting()) == (None, 0)


def test_with_tokens_enough_for_the_front_and_another_both_go() -> None:
    clock = FakeClock()
    throttle = Throttle(clock, min_interval=0, rate=1.0, burst=8.0)
    assert spend(throttle, "hog", 7) == 6
    assert throttle.waiting() == 1, "hog/w6 holds the front"
    clock.advance(2.0)  # the hog's own bucket has a token again, the cluster's four
    other = ObjectKey("Deployment", "other", "o")
    assert throttle.wait(other) == (0.0, "rate_limit"), "the front's token is left"


def test_the_front_coming_back_late_keeps_its_place() -> None:
    clock, throttle = spent()
    throttle.wait(B)  # the front, due in 4/3 s
    c = ObjectKey("Deployment", "ns", "c")
    throttle.wait(c)
    clock.advance(50.0)
    throttle.wait(c)  # c asks again: due soon
    clock.advance(50.0)  # B is past STALE_AFTER, c is not
    assert throttle.wait(B) == (0.0, "rate_limit"), "back, however late: not taken out"


def test_a_write_that_did_not_happen_keeps_its_place_at_the_front_and_its_namespaces_turn() -> None:
    throttle, other = b_let_through_before_other()
    throttle.give_back(B, keep_place=True)  # a conflict: re-planned at once
    assert throttle.front() == (B, 0.0), "not sent behind the other namespace"
    assert throttle.wait(other)[0] > 0
    assert throttle.wait(B) == (0.0, "rate_limit")


def test_a_write_given_back_after_an_earlier_one_was_written_does_not_rejoin_the_line() -> None:
    clock, throttle = spent()
    throttle.wait(B)
    clock.advance(2.0)
    throttle.take(B)  # let through from the line, and written
    throttle.reloaded(B)
    clock.advance(2.0)
    assert throttle.wait(B) == (0.0, "rate_limit")  # the line is empty: straight through
    throttle.take(B)
    throttle.give_back(B)  # this write failed
    assert throttle.waiting() == 0


def test_a_write_that_failed_and_backs_off_gives_its_token_back_but_not_its_place() -> None:
    throttle, other = b_let_through_before_other()
    throttle.give_back(B)  # a 429: retried after a backoff, or never
    assert throttle.front() == (other, 0.0), "the token goes to the next in line"
    assert throttle.waiting() == 1


def test_a_workload_given_its_place_back_that_never_asks_again_is_taken_out_in_time() -> None:
    clock, throttle = spent()
    throttle.wait(B)
    clock.advance(2.0)
    throttle.take(B)
    throttle.give_back(B, keep_place=True)  # requeued, then (a bug) never handled
    clock.advance(STALE_AFTER + 1.0)
    other = ObjectKey("Deployment", "other", "o")
    assert throttle.wait(other) == (0.0, "rate_limit")
    assert throttle.waiting() == 0


def spent() -> tuple[FakeClock, Throttle]:
    """A rate of one reload a second, burst one, its token spent (on A)."""
    clock = FakeClock()
    throttle = Throttle(clock, min_interval=0, rate=1.0, burst=1.0)
    throttle.take(A)
    return clock, throttle


def b_let_through_before_other() -> tuple[Throttle, ObjectKey]:
    """B and another namespace's workload held back; B's turn comes and it is let through."""
    clock, throttle = spent()
    other = ObjectKey("Deployment", "other", "o")
    for k in (B, other):
        throttle.wait(k)
    clock.advance(2.0)
    assert throttle.wait(B) == (0.0, "rate_limit")
    throttle.take(B)
    return throttle, other
