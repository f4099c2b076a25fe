"""The rate limits on writes: at most one reload per workload every `--reload-min-interval`,
and a cluster-wide token bucket (`--reload-rate`, `--reload-burst`) shared among namespaces
(`core.fairness`): besides the cluster's bucket, each namespace has one of three quarters of
its rate and burst; past its own, a namespace may spend the cluster's only while a quarter of
its burst stays there for the others, so one namespace's thousands of reloads never take the
whole rate. A token is taken only for a write the scheduler admits (`take`), and given back
when the write did not happen (`give_back`): a workload woken and held again (a window, an
order, a slot) spends nothing.

The workloads the rate holds back stand in one line (`core.limiting.FairLine`: namespace by
namespace in turn) and each is told to come back when the tokens of those ahead of it will
have come, not at the next token: a fan-out of n past the burst costs about n plans, not n²
(every held workload planned again at every token). The reconciler takes a workload out of
the line when its wait ends without a token (`release`: its change was superseded, held for
something else, dropped); one that never comes back within `STALE_AFTER` of its time is
taken out when it reaches the front, so the line never waits on it."""

from __future__ import annotations

from kube_reloader.core import fairness, limiting
from kube_reloader.core.objects import ObjectKey
from kube_reloader.runtime.clock import Clock

#: namespaces' buckets kept; past it, the full ones (as good as new) are dropped
MAX_BUCKETS = 1024
#: a workload at the front of the line that has not asked again this long after the time it
#: was given is taken out (a worker backlog delays a live one by far less)
STALE_AFTER = 60.0


class Throttle:
    def __init__(self, clock: Clock, *, min_interval: float, rate: float, burst: float) -> None:
        self.clock = clock
        self.min_interval = min_interval
        self.rate, self.burst = rate, burst
        self._bucket = limiting.TokenBucket(rate, burst)
        self._namespaces: dict[str, limiting.TokenBucket] = {}
        self._last: dict[ObjectKey, float] = {}
        self._line: limiting.FairLine[ObjectKey] = limiting.FairLine(_namespace)
        #: when each workload in the line was told to come back (monotonic)
        self._due: dict[ObjectKey, float] = {}
        #: the place in the line of each workload let through whose write is under way
        self._taken: dict[ObjectKey, int] = {}

    def wait(self, key: ObjectKey) -> tuple[float, str]:
        """Seconds to wait before `key` may be written, and why (0 when it may go now: then
        `take` its token once the write is admitted). Held back by the rate, it waits its
        turn in the line: the next token, then one per workload ahead of it."""
        now = self.clock.monotonic()
        wait = limiting.min_interval_wait(self._last.get(key), now, self.min_interval)
        if wait > 0:
            return wait, "min_interval"
        self._drop_stale(key, now)
        wait = self._token(key, now)
        if wait <= 0 and not self._owed_to_first(key, now):
            return 0.0, "rate_limit"
        # no namespace gets more than the whole rate: never later than its turn can come
        wait += self._line.ahead(key) / self.rate
        self._due[key] = now + wait
        return wait, "rate_limit"

    def _token(self, key: ObjectKey, now: float) -> float:
        """Seconds until the rate has a token for `key` (0: now)."""
        cluster = self._bucket.peek(now)
        mine = self._of(key.namespace).peek(now)
        if mine > 0 and self._bucket.spare(now, self.burst * fairness.RESERVE_FRACTION):
            mine = 0.0  # past its own, what nobody else would miss
        return max(mine, cluster)

    def _owed_to_first(self, key: ObjectKey, now: float) -> bool:
        """Is the token `key` could take now owed to another at the front of the line (its
        token is there now, and would not be once `key` took one)? The front is woken for
        it, so it keeps its turn against a crowd waking at the same time."""
        first = self._line.first()
        if first is None or first == key or self._token(first, now) > 0:
            return False
        with limiting.tried(self._bucket, self._of(first.namespace), self._of(key.namespace)):
            self._spend(key, now)
            return self._token(first, now) > 0

    def front(self) -> tuple[ObjectKey, float] | None:
        """The workload at the front of the line and the seconds until its token, if any:
        woken then, it takes the token, or (its change ended meanwhile) leaves the line to
        the next, so a token never waits on one that will not come for it."""
        key = self._line.first()
        return None if key is None else (key, self._token(key, self.clock.monotonic()))

    def _drop_stale(self, asking: ObjectKey, now: float) -> None:
        """Take out of the line the workloads at its front that never came back (the one
        asking is back, however late)."""
        while (first := self._line.first()) is not None and first != asking:
            if self._due.get(first, now) + STALE_AFTER >= now:
                return
            self.release(first)

    def take(self, key: ObjectKey) -> None:
        """The write `wait` allowed is admitted: spend its tokens (it leaves the line)."""
        self._spend(key, self.clock.monotonic())
        arrival = self._line.leave(key, served=True)
        if arrival is not None:
            self._taken[key] = arrival
        self._due.pop(key, None)

    def _spend(self, key: ObjectKey, now: float) -> None:
        self._of(key.namespace).take(now)
        self._bucket.take(now)

    def release(self, key: ObjectKey) -> None:
        """`key` no longer waits for a token (let through, or its wait ended otherwise)."""
        self._line.leave(key)
        self._due.pop(key, None)

    def waiting(self) -> int:
        """Workloads in the line for a token."""
        return len(self._line)

    def give_back(self, key: ObjectKey, *, keep_place: bool = False) -> None:
        """The admitted write did not happen (a conflict, an error, a lost lease): its token
        back; with `keep_place` (asked again at once: a conflict's requeue), also its place
        in the line and its namespace's turn. One that backs off or ends asks anew."""
        self._of(key.namespace).give_back()
        self._bucket.give_back()
        arrival = self._taken.pop(key, None)
        if arrival is not None and keep_place:
            self._line.restore(key, arrival)
            self._due[key] = self.clock.monotonic()

    def _of(self, namespace: str) -> limiting.TokenBucket:
        bucket = self._namespaces.get(namespace)
        if bucket is None:
            if len(self._namespaces) >= MAX_BUCKETS:
                now = self.clock.monotonic()
                self._namespaces = {n: b for n, b in self._namespaces.items() if not b.full(now)}
            share = 1.0 - fairness.RESERVE_FRACTION
            bucket = limiting.TokenBucket(self.rate * share, self.burst * share)
            self._namespaces[namespace] = bucket
        return bucket

    def reloaded(self, key: ObjectKey) -> None:
        self._last[key] = self.clock.monotonic()
        self._taken.pop(key, None)

    def forget(self, key: ObjectKey) -> None:
        self._last.pop(key, None)
        self._taken.pop(key, None)
        self.release(key)


def _namespace(key: ObjectKey) -> str:
    return key.namespace
