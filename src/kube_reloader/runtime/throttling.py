"""The rate limits on writes: at most one reload per workload every `--reload-min-interval`,
and a cluster-wide token bucket (`--reload-rate`, `--reload-burst`)."""

from __future__ import annotations

from kube_reloader.core import limiting
from kube_reloader.core.objects import ObjectKey
from kube_reloader.runtime.clock import Clock


class Throttle:
    def __init__(self, clock: Clock, *, min_interval: float, rate: float, burst: float) -> None:
        self.clock = clock
        self.min_interval = min_interval
        self._bucket = limiting.TokenBucket(rate, burst)
        self._last: dict[ObjectKey, float] = {}

    def wait(self, key: ObjectKey) -> tuple[float, str]:
        """Seconds to wait before `key` may be written, and why (0 when it may go now; a
        token is taken then)."""
        now = self.clock.monotonic()
        wait = limiting.min_interval_wait(self._last.get(key), now, self.min_interval)
        if wait > 0:
            return wait, "min_interval"
        return self._bucket.take(now), "rate_limit"

    def reloaded(self, key: ObjectKey) -> None:
        self._last[key] = self.clock.monotonic()

    def forget(self, key: ObjectKey) -> None:
        self._last.pop(key, None)
