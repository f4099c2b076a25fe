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
from bisect import bisect_left, insort
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

#: a token short by less than this is a whole one (what refills add up to in floating point
#: falls short by some 1e-16: one asked to wait that long would be woken for nothing)
TOKEN_ROUNDING = 1e-9
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
            self.tokens = max(0.0, self.tokens - 1.0)
        return wait

    def peek(self, now: float) -> float:
        """The seconds until a token is available (0.0: now); nothing is taken."""
        if self.rate <= 0:
            return 0.0
        if self.tokens < 0:
            self.tokens, self.updated = max(1.0, self.burst), now
        self.tokens = min(max(1.0, self.burst), self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens >= 1.0 - TOKEN_ROUNDING:
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


class FairLine(Generic[K]):
    """The workloads a rate holds back, in the order the rate's tokens should go to them:
    tenant by tenant in turn, first come first served within a tenant (start-time fair
    queuing: a tenant's n-th in line starts n places after its first; a tenant new to the
    line starts level with the front). A workload joins when it is first held back and
    leaves when it is let through or no longer waits (its change ended, its workload is
    gone); one that asks again keeps its place. Each asker learns how many stand ahead of it:
    told to come back once they have gone through, the held back wake about once each, not
    all at every token."""

    def __init__(self, tenant: Callable[[K], str]) -> None:
        self._tenant = tenant
        #: (start tag, arrival): ascending, the order the line is let through in
        self._order: list[tuple[int, int]] = []
        self._places: dict[K, tuple[int, int]] = {}
        self._at: dict[tuple[int, int], K] = {}
        #: per tenant in the line: (its next start tag, how many of it wait)
        self._tenants: dict[str, tuple[int, int]] = {}
        self._arrivals = 0

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, key: object) -> bool:
        return key in self._places

    def ahead(self, key: K) -> int:
        """How many stand ahead of `key`, which joins the line if it is not in it."""
        place = self._places.get(key)
        if place is None:
            tenant = self._tenant(key)
            front = self._order[0][0] if self._order else 0
            tag, waiting = self._tenants.get(tenant, (front, 0))  # its next is never before
            place = (tag, self._arrivals)
            self._arrivals += 1
            self._tenants[tenant] = (place[0] + 1, waiting + 1)
            insort(self._order, place)
            self._places[key], self._at[place] = place, key
        return bisect_left(self._order, place)

    def first(self) -> K | None:
        """The one at the front of the line, if any."""
        return self._at[self._order[0]] if self._order else None

    def leave(self, key: K) -> None:
        """`key` no longer waits: let through, or its wait ended otherwise."""
        place = self._places.pop(key, None)
        if place is None:
            return
        del self._at[place]
        del self._order[bisect_left(self._order, place)]
        tenant = self._tenant(key)
        tag, waiting = self._tenants[tenant]
        if waiting > 1:
            self._tenants[tenant] = (tag, waiting - 1)
        else:
            del self._tenants[tenant]


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
