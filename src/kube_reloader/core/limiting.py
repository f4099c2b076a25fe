"""Reload rate limits and retry backoff, as pure arithmetic on an injected clock (and, for
jitter, an injected random number).

Two limits keep a flapping config (a certificate renewed in a loop, a CI job rewriting a
ConfigMap) from rolling a workload thousands of times: a minimum interval between two reloads
of the same workload, and a cluster-wide token bucket. A reload over a limit is deferred to
the earliest time the limits allow, never dropped; the changes that arrive meanwhile are
merged into that one deferred reload.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: doublings past this are not computed: 2**1000 seconds is beyond any cap (2.0**1024 overflows)
MAX_DOUBLINGS = 1000


@dataclass
class TokenBucket:
    """`rate` tokens per second, at most `burst` saved up. rate <= 0 disables the bucket."""

    rate: float
    burst: float
    tokens: float = -1.0
    updated: float = 0.0

    def take(self, now: float) -> float:
        """Take one token: 0.0 if granted, else the seconds until one is available (none taken)."""
        wait = self.peek(now)
        if wait == 0.0 and self.rate > 0:
            self.tokens -= 1.0
        return wait

    def peek(self, now: float) -> float:
        """The seconds until a token is available (0.0: now); nothing is taken."""
        if self.rate <= 0:
            return 0.0
        if self.tokens < 0:
            self.tokens, self.updated = max(1.0, self.burst), now
        self.tokens = min(max(1.0, self.burst), self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens >= 1.0:
            return 0.0
        return (1.0 - self.tokens) / self.rate

    def give_back(self) -> None:
        """A token taken for nothing (the write did not happen) is returned."""
        if self.rate > 0 and self.tokens >= 0:
            self.tokens = min(max(1.0, self.burst), self.tokens + 1.0)

    def spare(self, now: float, keep: float) -> bool:
        """Would taking a token now leave at least `keep` tokens?"""
        return self.rate <= 0 or (self.peek(now) == 0.0 and self.tokens - 1.0 >= keep)

    def full(self, now: float) -> bool:
        """Would the bucket be full now (as good as a new one)?"""
        return (
            self.rate <= 0
            or self.tokens < 0
            or (self.tokens + (now - self.updated) * self.rate >= max(1.0, self.burst))
        )


def min_interval_wait(last_reload: float | None, now: float, interval: float) -> float:
    """Seconds to wait before this workload may be reloaded again (0.0: now)."""
    if interval <= 0 or last_reload is None:
        return 0.0
    return max(0.0, last_reload + interval - now)


def backoff(
    attempt: int, *, base: float, cap: float = math.inf, jitter: float | None = None
) -> float:
    """Exponential backoff: `base * 2**attempt` seconds (attempt 0 and below: `base`), at most
    `cap`. With `jitter` (the caller's random number in [0, 1), e.g. `random.random()`) the
    wait is drawn from the upper half, [ceiling/2, ceiling), exactly as
    `random.uniform(ceiling / 2, ceiling)` draws it from that number."""
    ceiling = min(cap, base * 2.0 ** min(max(0, attempt), MAX_DOUBLINGS))
    if jitter is None or math.isinf(ceiling):
        return ceiling
    half = ceiling / 2
    return half + (ceiling - half) * jitter
