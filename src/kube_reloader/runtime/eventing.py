"""The Event queue: Kubernetes Events waiting to be written, one lane per namespace.

Events share the API client with the Lease renewals and the reload writes, so at most
`WRITERS` are written at once, and at most `CAP` wait. The cap is shared by `core.fairness`'s
rule: a namespace may have at most its share waiting (alone, three quarters; less as more namespaces
have Events waiting), so one namespace's thousands of Warnings never crowd out another's.
Lanes are written in turn (round-robin), so a long lane delays another namespace's next Event
by at most one write per lane. An Event beyond its namespace's share is dropped and counted
per namespace (`kube_reloader_dropped_total{what="event"}`); the first drop of a namespace
(then at most once per `NOTICE_SECONDS`) is told to that namespace itself by one Warning
`ReloadEventsDropped` on the object whose Event was dropped, queued past the share.

Writers are one-shot tasks started as Events arrive (at most `WRITERS` at once), each
writing until the queue is empty: nothing runs while nothing waits.
"""

from __future__ import annotations

import logging
from collections import Counter, deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from kube_reloader.core import fairness, planning
from kube_reloader.kube import errors, events
from kube_reloader.runtime.fencing import Fence

log = logging.getLogger("kube_reloader.runtime.controller")

#: Events waiting for a write (client-go's recorder keeps 1,000), shared among namespaces
CAP = 1000
#: Events written at once
WRITERS = 4
#: a namespace is told its Events are being dropped at most this often
NOTICE_SECONDS = 600.0

Spawn = Callable[[str, Coroutine[Any, Any, None]], object]


@dataclass(frozen=True, slots=True)
class Pending:
    workload: planning.Workload
    event_type: str
    reason: str
    message: str
    component: str


class EventQueue:
    def __init__(
        self, sink: events.EventSink, fence: Fence, spawn: Spawn, monotonic: Callable[[], float],
        dropped: Callable[[str], None],
    ) -> None:  # fmt: skip
        self.sink = sink
        self.fence = fence
        self.spawn = spawn
        self.monotonic = monotonic
        #: counts one dropped Event of a namespace (the metric)
        self.on_dropped = dropped
        self._lanes: dict[str, deque[Pending]] = {}
        self._waiting: Counter[str] = Counter()
        self._writers = 0
        self._noticed: dict[str, float] = {}
        self.dropped = 0

    @property
    def pending(self) -> int:
        return sum(self._waiting.values())

    def waiting(self, namespace: str) -> int:
        return self._waiting[namespace]

    def room(self, namespace: str) -> bool:
        others = sum(1 for ns, n in self._waiting.items() if n and ns != namespace)
        return fairness.may_take(CAP, self._waiting[namespace], self.pending, others)

    def offer(self, p: Pending) -> bool:
        """Queue `p` if its namespace is within its share; False when it was dropped."""
        ns = p.workload.namespace
        if self.room(ns):
            self._queue(p)
            return True
        self.dropped += 1
        self.on_dropped(ns)
        if self.dropped in (1, 10, 100) or self.dropped % 1000 == 0:
            log.warning("too many Events waiting, dropped one", extra={
                "namespace": ns, "reason": p.reason, "dropped": self.dropped,
                "waiting_in_namespace": self._waiting[ns]})  # fmt: skip
        self._notice(p)
        return False

    def _notice(self, p: Pending) -> None:
        ns, now = p.workload.namespace, self.monotonic()
        last = self._noticed.get(ns)
        if last is not None and now - last < NOTICE_SECONDS:
            return
        self._noticed[ns] = now
        if len(self._noticed) > 10_000:
            del self._noticed[next(iter(self._noticed))]
        text = (
            f"kube-reloader is dropping Events about namespace {ns}: it has "
            f"{self._waiting[ns]} waiting, its share of the Event queue; reloads go on"
        )
        notice = Pending(p.workload, "Warning", "ReloadEventsDropped", text, "reloader")
        self._queue(notice, first=True)  # the next of its namespace's to be written

    def _queue(self, p: Pending, *, first: bool = False) -> None:
        ns = p.workload.namespace
        lane = self._lanes.setdefault(ns, deque())
        if first:
            lane.appendleft(p)
        else:
            lane.append(p)
        self._waiting[ns] += 1
        if self._writers < WRITERS:
            self._writers += 1
            self.spawn(f"events@{self._writers}", self._write_all())

    def _next(self) -> Pending | None:
        if not self._lanes:
            return None
        ns = next(iter(self._lanes))
        lane = self._lanes.pop(ns)
        p = lane.popleft()
        if lane:
            self._lanes[ns] = lane  # to the back of the turn order
        return p

    async def _write_all(self) -> None:
        try:
            while (p := self._next()) is not None:
                try:
                    if self.fence.may_write():  # Events are writes too: the leader's only
                        await self.sink.send(p.workload, p.event_type, p.reason, p.message,
                                             p.component)  # fmt: skip
                except errors.KubeError as exc:
                    log.warning("could not record event",
                                extra={"reason": p.reason, "error": str(exc)})  # fmt: skip
                except Exception:
                    log.exception("could not record event", extra={"reason": p.reason})
                finally:
                    self._done(p.workload.namespace)
        finally:
            self._writers -= 1

    def _done(self, namespace: str) -> None:
        self._waiting[namespace] -= 1
        if self._waiting[namespace] <= 0:
            del self._waiting[namespace]
