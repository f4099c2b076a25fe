"""Reload rate limits, as pure arithmetic on an injected clock.

Two limits keep a flapping config (a certificate renewed in a loop, a CI job rewriting a
ConfigMap) from rolling a workload thousands of times: a minimum interval between two reloads
of the same workload, and a cluster-wide token bucket. A reload over a limit is deferred to
the earliest time the limits allow, never dropped; the changes that arrive meanwhile are
merged into that one deferred reload.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class TokenBucket:
    """`rate` tokens per second, at most `burst` saved up. rate <= 0 disables the bucket."""

    rate: float
    burst: float
    tokens: float = -1.0
    updated: float = 0.0

    def take(self, now: float) -> float:
        """Take one token: 0.0 if granted, else the seconds until one is available (none taken)."""
        if self.rate <= 0:
            return 0.0
        if self.tokens < 0:
            self.tokens, self.updated = max(1.0, self.burst), now
        self.tokens = min(max(1.0, self.burst), self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate


def min_interval_wait(last_reload: float | None, now: float, interval: float) -> float:
    """Seconds to wait before this workload may be reloaded again (0.0: now)."""
    if interval <= 0 or last_reload is None:
        return 0.0
    return max(0.0, last_reload + interval - now)
