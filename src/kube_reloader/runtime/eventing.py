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

Each Event is recorded as client-go's recorder records it (Reloader v1's, `EventRecorder`):
it goes through a `core.correlating.Correlator` first, so an Event identical to one already
recorded patches that Event's `count`, `lastTimestamp` and `message` instead of creating
another, similar Events are combined past a threshold, and a source that keeps talking about
one object is rate-limited (that object only). An Event deleted meanwhile is created again
under its name. Without RBAC to patch Events (`create` only), repeated Events are created as
new ones, after one warning. Writes for one Event object are made one at a time, in order;
writes for different Events never wait for each other. Events are best effort: failing to
record one is logged, never fatal. Time comes from the injected clock.
"""

from __future__ import annotations

import datetime as dt
import logging
import secrets
import uuid
from collections import Counter, deque
from collections.abc import Callable
from typing import Any, Protocol

import msgspec

from kube_reloader.core import fairness, planning
from kube_reloader.core.correlating import Correlator, Occurrence, Record
from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client, PatchType
from kube_reloader.runtime.clock import Clock
from kube_reloader.runtime.fencing import Fence
from kube_reloader.runtime.v2events import MAX_NAME, Spawn, Turns, V2Recorder, reference

log = logging.getLogger("kube_reloader.runtime.controller")

#: Events waiting for a write (client-go's recorder keeps 1,000), shared among namespaces
CAP = 1000
#: Events written at once
WRITERS = 4
#: a namespace is told its Events are being dropped at most this often
NOTICE_SECONDS = 600.0


class EventSink(Protocol):
    async def send(
        self,
        workload: planning.Workload,
        event_type: str,
        reason: str,
        message: str,
        component: str,
        action: str = "",
        version: str = "",
    ) -> None: ...


class Pending(msgspec.Struct, frozen=True):
    workload: planning.Workload
    event_type: str
    reason: str
    message: str
    component: str
    #: set: an `events.k8s.io/v1` Event with this action (Reloader v2's), else a core/v1 one
    action: str = ""
    #: the workload's resourceVersion the Event regards (v2's: after its write, if any)
    version: str = ""


class EventQueue:
    def __init__(
        self,
        sink: EventSink,
        fence: Fence,
        spawn: Spawn,
        monotonic: Callable[[], float],
        dropped: Callable[[str], None],
    ) -> None:
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
            log.warning(
                "too many Events waiting, dropped one",
                extra={
                    "namespace": ns,
                    "reason": p.reason,
                    "dropped": self.dropped,
                    "waiting_in_namespace": self._waiting[ns],
                },
            )
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
                        await self.sink.send(
                            p.workload,
                            p.event_type,
                            p.reason,
                            p.message,
                            p.component,
                            p.action,
                            p.version,
                        )
                except errors.KubeError as exc:
                    log.warning(
                        "could not record event", extra={"reason": p.reason, "error": str(exc)}
                    )
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


def stamp(wall: float) -> str:
    """An Event timestamp (whole seconds, UTC), as `metav1.Time` is written."""
    return dt.datetime.fromtimestamp(wall, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def fresh_name(involved: str) -> str:
    """A new Event's name: the object's name and a unique suffix (client-go's shape)."""
    name = f"{involved}.{secrets.token_hex(8)}"
    return name if len(name) <= MAX_NAME else str(uuid.uuid4())


def body(o: Occurrence, r: Record, version: str = "") -> dict[str, Any]:
    """The Event object to create: its involvedObject is the workload (at `version`)."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": r.name, "namespace": o.namespace},
        "involvedObject": reference(o, version),
        "type": o.event_type,
        "reason": o.reason,
        "message": r.message,
        "source": {"component": o.component},
        "firstTimestamp": stamp(r.first),
        "lastTimestamp": stamp(r.last),
        "count": r.count,
        "reportingComponent": o.component,
    }


class EventRecorder:
    """Events about workloads, created and counted through the API (`EventSink`)."""

    def __init__(
        self,
        client: Client,
        clock: Clock,
        api_version: Callable[[str], str],
        *,
        correlator: Correlator | None = None,
        instance: str = "",
        spawn: Spawn | None = None,
        may_write: Callable[[], bool] = lambda: True,
    ) -> None:
        self.client = client
        self.clock = clock
        #: the reportingInstance of `events.k8s.io/v1` Events
        self.instance = instance
        #: Reloader v2's Events (`events.k8s.io/v1`, series as client-go's recorder keeps them)
        self.v2 = V2Recorder(client, clock, instance, spawn, may_write)
        #: the involved object's apiVersion, by its kind
        self.api_version = api_version
        self.correlator = correlator or Correlator()
        #: set after the API refused a PATCH of an Event (RBAC grants `create` only)
        self.patch_forbidden = False
        self._turns = Turns()

    async def send(
        self,
        workload: planning.Workload,
        event_type: str,
        reason: str,
        message: str,
        component: str,
        action: str = "",
        version: str = "",
    ) -> None:
        kind = str(workload.kind)
        o = Occurrence(
            component,
            kind,
            self.api_version(kind),
            workload.namespace,
            workload.name,
            workload.uid,
            event_type,
            reason,
            message,
        )
        if action:  # v2's recorder (a reload changes the object's version: a new Event)
            await self.v2.send(o, action, version)
            return
        r = self.correlator.correlate(
            o, wall=self.clock.wall(), now=self.clock.monotonic(), fresh_name=fresh_name(o.name)
        )
        if r is None:
            where = f"{kind} {o.namespace}/{o.name}"
            log.debug(
                "event not recorded: too many about this object",
                extra={"object": where, "reason": reason},
            )
            return
        async with self._turns.turn(r.name):
            await self._write(o, r, version)

    async def _write(self, o: Occurrence, r: Record, version: str) -> None:
        if r.update and not self.patch_forbidden:
            patch = {"count": r.count, "lastTimestamp": stamp(r.last), "message": r.message}
            try:
                await self.client.patch(
                    resources.EVENTS,
                    r.name,
                    patch,
                    namespace=o.namespace,
                    patch_type=PatchType.STRATEGIC,
                )
                return
            except errors.NotFound:
                pass  # gone (Events expire): created again under its name, with its count
            except errors.Forbidden as exc:
                self.patch_forbidden = True
                log.warning(
                    "cannot patch Events: repeated Events are created as new ones "
                    "(grant patch on events)",
                    extra={"error": exc.message},
                )
        if r.update and self.patch_forbidden:
            r = Record(fresh_name(o.name), r.message, 1, r.last, r.last)
        await self.client.create(resources.EVENTS, body(o, r, version), namespace=o.namespace)
