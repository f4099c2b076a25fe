"""One fairness rule for every limit that namespaces share (docs/limits.md).

A limit shared by the namespaces of a cluster (rotation slots, rollout slots, the Event
queue, the stale-series and StaleCertificate caps) — or by the clients of a listener (the
admission webhook's reading slots) — gives each of them, its *tenants*, a share:

* **Share.** Alone, a tenant may hold three quarters of a limit: the last quarter (at least
  one, once the limit is two or more) is a reserve, so the next tenant starts at once. While
  `others` other tenants hold or wait for some, each may hold an equal part of the whole
  limit, rounded up: `share(cap, others)`. Beyond its share a tenant may still take what
  nobody else wants, as long as the reserve stays free (`may_take`: room is never left idle
  while work waits, but for the reserve). A tenant over its share keeps what it holds, and
  room that frees goes first to those under theirs. (A limit of one cannot be shared: its one
  slot goes round in turn.)
* **Rates.** A rate shared by tenants (the cluster-wide reload rate) works the same way: a
  tenant spends its own three quarters, and beyond them only what would leave the shared
  reserve (a quarter of the burst) untouched, so the last quarter is always there for others.
* **Turns.** Room that frees goes to the waiting tenant holding the fewest (among equals,
  round-robin: a tenant served goes to the back); within a tenant, first come, first served.
* **Sets.** A set sized at once (the stale series of one audit round) is cut max-min fairly
  (`water_fill`): each tenant keeps all of its part up to a level that fills the cap.

A tenant over its share waits: nothing is dropped but Events and metric series, and then only
a tenant's part beyond its share. This module is the rule and its bookkeeping only (no clock,
no waiting): `turns.FairSlots` waits on it (rotations, the admission edge), the Event queue
and the reporter keep their own counts with it.
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from collections.abc import Hashable, Iterable, Mapping
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


#: the part of a limit no tenant may take alone
RESERVE_FRACTION = 0.25


def reserve(cap: int) -> int:
    """The part of `cap` no tenant may take alone: a quarter, at least one (none of one)."""
    return 0 if cap < 2 else max(1, int(cap * RESERVE_FRACTION))


def share(cap: int, others: int) -> int:
    """How much of `cap` one tenant may hold while `others` other tenants hold or wait for
    some (at least 1; `cap` <= 0: no limit)."""
    if cap <= 0:
        return 1 << 62
    if others <= 0:
        return max(1, cap - reserve(cap))
    return max(1, -(-cap // (others + 1)))


def may_take(cap: int, held: int, total: int, others: int) -> bool:
    """May a tenant holding `held` of a limit of `cap` (`total` held by all) take one more
    while `others` other tenants hold or wait for some? Under its share, while room is
    left; over it, only while the reserve would stay free (`cap` <= 0: always)."""
    if cap <= 0:
        return True
    if total >= cap:
        return False
    return held < share(cap, others) or cap - total - 1 >= reserve(cap)


def water_fill(demands: Mapping[str, int], cap: int) -> dict[str, int]:
    """Max-min fair parts of `cap` for tenants asking `demands`: every tenant gets all it asks
    up to a common level, the level as high as the cap allows; what the level leaves over
    goes one each to the tenants cut at it, in name order (deterministic)."""
    wanted = {t: max(0, d) for t, d in demands.items()}
    if sum(wanted.values()) <= cap:
        return dict(wanted)
    parts = dict.fromkeys(wanted, 0)
    left = max(0, cap)
    open_ = sorted(t for t, d in wanted.items() if d > 0)
    while open_ and left > 0:
        level = left // len(open_)
        if level == 0:
            for t in open_[:left]:
                parts[t] += 1
            break
        still: list[str] = []
        for t in open_:
            give = min(level, wanted[t] - parts[t])
            parts[t] += give
            left -= give
            if parts[t] < wanted[t]:
                still.append(t)
        open_ = still
    return parts


class Ledger(Generic[K]):
    """Slots of a limit of `cap` (<= 0: no limit) held per tenant, and who waits for one.

    Pure bookkeeping: `take` says whether a slot is taken now; otherwise the caller `wait`s
    and later learns from `grants` (called after every `release`) which waiters were given
    one. A waiter given up (`leave`) loses its place."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.held: Counter[str] = Counter()
        #: waiting tenants, in the order they began to wait; each its waiters in order
        self._line: dict[str, deque[K]] = {}

    @property
    def total(self) -> int:
        return sum(self.held.values())

    @property
    def waiting(self) -> int:
        return sum(len(q) for q in self._line.values())

    def others(self, tenant: str) -> int:
        """Tenants other than `tenant` that hold or wait for a slot."""
        wanting = {t for t, n in self.held.items() if n > 0} | set(self._line)
        wanting.discard(tenant)
        return len(wanting)

    def limit(self, tenant: str) -> int:
        """`tenant`'s share now."""
        return share(self.cap, self.others(tenant))

    def room(self, tenant: str) -> bool:
        """May `tenant` take a slot now (`may_take`)?"""
        return may_take(self.cap, self.held[tenant], self.total, self.others(tenant))

    def take(self, tenant: str) -> bool:
        """Take a slot now if the rule allows and none of `tenant`'s waiters is ahead."""
        if self._line.get(tenant) or not self.room(tenant):
            return False
        self.held[tenant] += 1
        return True

    def wait(self, tenant: str, waiter: K) -> None:
        self._line.setdefault(tenant, deque()).append(waiter)

    def leave(self, tenant: str, waiter: K) -> None:
        line = self._line.get(tenant)
        if line is None:
            return
        try:
            line.remove(waiter)
        except ValueError:
            return
        if not line:
            del self._line[tenant]

    def release(self, tenant: str) -> None:
        if self.held[tenant] > 0:
            self.held[tenant] -= 1
        if self.held[tenant] <= 0:
            del self.held[tenant]

    def grants(self) -> list[tuple[str, K]]:
        """Give free slots to waiters by the rule's turns; returns who got one (their slot is
        already counted as held)."""
        out: list[tuple[str, K]] = []
        while self._line:
            best = self._next()
            if best is None:
                break
            line = self._line.pop(best)
            waiter = line.popleft()
            if line:
                self._line[best] = line  # to the back: among equals, turns go round
            self.held[best] += 1
            out.append((best, waiter))
        return out

    def _next(self) -> str | None:
        best: str | None = None
        for tenant in self._line:  # in turn order
            if not self.room(tenant):
                continue
            if best is None or self.held[tenant] < self.held[best]:
                best = tenant
        return best


def fair_order(items: Iterable[tuple[str, K]]) -> list[K]:
    """`items` (tenant, item) interleaved tenant by tenant (round-robin, tenants in order of
    first appearance, each tenant's items in their order): a walk over many tenants' objects
    in this order reaches every tenant early, however many objects one of them has."""
    lanes: dict[str, deque[K]] = {}
    for tenant, item in items:
        lanes.setdefault(tenant, deque()).append(item)
    out: list[K] = []
    while lanes:
        for tenant in list(lanes):
            lane = lanes[tenant]
            out.append(lane.popleft())
            if not lane:
                del lanes[tenant]
    return out


def fair_subset(
    series: set[tuple[str, str, str, str]], cap: int
) -> tuple[set[tuple[str, str, str, str]], dict[str, int]]:
    """At most `cap` of `series` (namespace first in each), cut fairly among namespaces
    (`water_fill`), each keeping its first in label order; and how many of
    each namespace's were left out."""
    if len(series) <= cap:
        return set(series), {}
    by_ns: dict[str, list[tuple[str, str, str, str]]] = defaultdict(list)
    for s in series:
        by_ns[s[0]].append(s)
    parts = water_fill({ns: len(v) for ns, v in by_ns.items()}, cap)
    kept: set[tuple[str, str, str, str]] = set()
    left_out: dict[str, int] = {}
    for ns, items in by_ns.items():
        n = parts.get(ns, 0)
        kept.update(sorted(items)[:n])
        if len(items) > n:
            left_out[ns] = len(items) - n
    return kept, left_out
