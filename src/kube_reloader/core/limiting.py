"""Reload rate limits and retry backoff, as pure arithmetic on an injected clock (and, for
jitter, an injected random number).

Two limits keep a flapping config (a certificate renewed in a loop, a CI job rewriting a
ConfigMap) from rolling a workload thousands of times: a minimum interval between two reloads
of the same workload, and a cluster-wide token bucket. A reload over a limit is deferred to
the earliest time the limits allow, never dropped; the changes that arrive meanwhile are
merged into that one deferred reload. The reloads a rate holds back wait in a `FairLine`,
tenant by tenant in turn, each told how many stand ahead of it.
"""

from __future__ import annotations

import contextlib
import math
from bisect import bisect_left, insort
from collections.abc import Callable, Hashable, Iterator
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


@contextlib.contextmanager
def tried(*buckets: TokenBucket) -> Iterator[None]:
    """What is taken from `buckets` inside the block is a trial: after it, each bucket is
    as it was before (one named twice is restored once)."""
    saved = [(b, b.tokens, b.updated) for b in {id(b): b for b in buckets}.values()]
    try:
        yield
    finally:
        for b, tokens, updated in saved:
            b.tokens, b.updated = tokens, updated


@dataclass
class _Tenant:
    """A tenant in a `FairLine`: its workloads in arrival order, and where its first stands."""

    #: the turn of its first in line (each workload let through moves it on one)
    base: int
    #: when it joined the line (among equal turns, the earlier tenant goes first)
    order: int
    arrivals: list[int]


#: departed tenants' turns kept before those the front has passed are dropped (then again
#: once they have doubled)
DEPARTED_SLACK = 1024


class FairLine(Generic[K]):
    """The workloads a rate holds back, in the order the rate's tokens should go to them:
    tenant by tenant in turn, first come first served within a tenant (start-time fair
    queuing). A tenant's i-th workload has turn `base + i`; each one let through moves its
    tenant's base on one, so a tenant is charged for the tokens it spent and for nothing else:
    one that leaves unserved (its change ended, its workload gone) moves those behind it up,
    and one let through whose write did not happen is put back (`restore`). A tenant new to
    the line starts level with the front; one that left comes back no earlier than the turn
    it had reached (emptying the line and coming back never jumps it ahead). Among equal
    turns, the tenant that joined first goes first. A workload keeps its place when it asks
    again, and learns how many stand ahead of it: told to come back once they have gone
    through, the held back wake about once each, not all at every token."""

    def __init__(self, tenant: Callable[[K], str]) -> None:
        self._tenant = tenant
        self._tenants: dict[str, _Tenant] = {}
        self._names: dict[int, str] = {}  # a tenant's name by its join order
        #: (turn, tenant's order) of every workload in line, ascending: a rank is a bisect
        self._turns: list[tuple[int, int]] = []
        self._arrival: dict[K, int] = {}
        self._by_arrival: dict[int, K] = {}
        #: the next turn and join order of each tenant that left while others still waited
        self._departed: dict[str, tuple[int, int]] = {}
        self._prune_at = DEPARTED_SLACK
        self._arrivals = self._joined = 0

    def __len__(self) -> int:
        return len(self._arrival)

    def __contains__(self, key: object) -> bool:
        return key in self._arrival

    def ahead(self, key: K) -> int:
        """How many stand ahead of `key`, which joins the line if it is not in it."""
        mine = self._of(key)
        arrival = self._arrival.get(key)
        if arrival is None:
            arrival = self._arrivals
            self._arrivals += 1
            self._add(key, arrival, mine)
            insort(self._turns, (mine.base + len(mine.arrivals) - 1, mine.order))
        turn = mine.base + bisect_left(mine.arrivals, arrival)
        return bisect_left(self._turns, (turn, mine.order))

    def first(self) -> K | None:
        """The one at the front of the line, if any."""
        if not self._turns:
            return None
        mine = self._tenants[self._names[self._turns[0][1]]]
        return self._by_arrival[mine.arrivals[0]]

    def leave(self, key: K, *, served: bool = False) -> int | None:
        """`key` no longer waits: let through (`served`: its tenant's turn moves on), or its
        wait ended otherwise (those behind it move up). Its arrival, to `restore` it."""
        arrival = self._arrival.pop(key, None)
        if arrival is None:
            return None
        del self._by_arrival[arrival]
        name = self._tenant(key)
        mine = self._tenants[name]
        last = mine.base + len(mine.arrivals) - 1
        del mine.arrivals[bisect_left(mine.arrivals, arrival)]
        del self._turns[bisect_left(self._turns, (mine.base if served else last, mine.order))]
        mine.base += served
        if not mine.arrivals:
            del self._tenants[name], self._names[mine.order]
            self._depart(name, mine.base, mine.order)
        return arrival

    def restore(self, key: K, arrival: int) -> None:
        """`key`, let through, spent no token after all: back in its place, and its tenant
        its turn."""
        if key in self._arrival:
            return
        mine = self._of(key, rejoining=True)
        mine.base -= 1
        self._add(key, arrival, mine)
        insort(self._turns, (mine.base, mine.order))

    def _of(self, key: K, *, rejoining: bool = False) -> _Tenant:
        """`key`'s tenant, in the line (`rejoining`: with the join order it left with)."""
        name = self._tenant(key)
        mine = self._tenants.get(name)
        if mine is None:
            front = self._turns[0][0] if self._turns else 0
            turn, order = self._departed.pop(name, (front, -1))
            if not rejoining or order < 0:
                order, self._joined = self._joined, self._joined + 1
            mine = self._tenants[name] = _Tenant(max(front, turn), order, [])
            self._names[order] = name
        return mine

    def _add(self, key: K, arrival: int, mine: _Tenant) -> None:
        insort(mine.arrivals, arrival)
        self._arrival[key], self._by_arrival[arrival] = arrival, key

    def _depart(self, name: str, turn: int, order: int) -> None:
        """Remember where a tenant that left had got to, while others wait behind its turn."""
        if not self._turns:
            self._departed.clear()  # nobody waits: every tenant starts afresh
            return
        self._departed[name] = (turn, order)
        if len(self._departed) > self._prune_at:  # the turns the front has passed: as new
            front = self._turns[0][0]
            self._departed = {n: t for n, t in self._departed.items() if t[0] > front}
            self._prune_at = 2 * len(self._departed) + DEPARTED_SLACK


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
