"""The rate limits on writes: at most one reload per workload every `--reload-min-interval`,
and a cluster-wide token bucket (`--reload-rate`, `--reload-burst`) shared among namespaces
(`core.fairness`): besides the cluster's bucket, each namespace has one of three quarters of
its rate and burst; past its own, a namespace may spend the cluster's only while a quarter of
its burst stays there for the others, so one namespace's thousands of reloads never take the
whole rate. A token is taken only for a write the scheduler admits (`take`), and given back
when the write did not happen (`give_back`): a workload woken and held again (a window, an
order, a slot) spends nothing."""

from __future__ import annotations

from kube_reloader.core import fairness, limiting
from kube_reloader.core.objects import ObjectKey
from kube_reloader.runtime.clock import Clock

#: namespaces' buckets kept; past it, the full ones (as good as new) are dropped
MAX_BUCKETS = 1024


class Throttle:
    def __init__(self, clock: Clock, *, min_interval: float, rate: float, burst: float) -> None:
        self.clock = clock
        self.min_interval = min_interval
        self.rate, self.burst = rate, burst
        self._bucket = limiting.TokenBucket(rate, burst)
        self._namespaces: dict[str, limiting.TokenBucket] = {}
        self._last: dict[ObjectKey, float] = {}

    def wait(self, key: ObjectKey) -> tuple[float, str]:
        """Seconds to wait before `key` may be written, and why (0 when it may go now: then
        `take` its token once the write is admitted)."""
        now = self.clock.monotonic()
        wait = limiting.min_interval_wait(self._last.get(key), now, self.min_interval)
        if wait > 0:
            return wait, "min_interval"
        cluster = self._bucket.peek(now)
        mine = self._of(key.namespace).peek(now)
        if mine > 0 and self._bucket.spare(now, self.burst * fairness.RESERVE_FRACTION):
            mine = 0.0  # past its own, what nobody else would miss
        return max(mine, cluster), "rate_limit"

    def take(self, key: ObjectKey) -> None:
        """The write `wait` allowed is admitted: spend its tokens."""
        now = self.clock.monotonic()
        self._of(key.namespace).take(now)
        self._bucket.take(now)

    def give_back(self, key: ObjectKey) -> None:
        """The admitted write did not happen (a conflict, an error, a lost lease)."""
        self._of(key.namespace).give_back()
        self._bucket.give_back()

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

    def forget(self, key: ObjectKey) -> None:
        self._last.pop(key, None)
