"""Reloader v2's Events, as client-go's `events.k8s.io/v1` recorder writes them (v2 records
through it): each named after its object and the time in hex nanoseconds, reporting
controller and instance, regarding the workload at the resourceVersion the reload read or
made; an Event isomorphic to a recent one is a series of that one (`core.eventseries`), whose
counts a sweep writes `FINISH_SECONDS` apart while any Event is remembered (nothing runs
while none is). Writes are best effort, as the Event queue's (`eventing`)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from kube_reloader.core.correlating import Occurrence
from kube_reloader.core.eventseries import FINISH_SECONDS, Entry, SeriesCache, Step
from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client, PatchType
from kube_reloader.runtime.clock import Clock, Timer

log = logging.getLogger("kube_reloader.runtime.controller")

#: the longest valid Event name (a DNS subdomain); longer generated names become a UUID
MAX_NAME = 253

Spawn = Callable[[str, Coroutine[Any, Any, None]], object]


def micro_time(wall: float) -> str:
    """A `metav1.MicroTime` (an `events.k8s.io/v1` Event's eventTime): microseconds, UTC."""
    return dt.datetime.fromtimestamp(wall, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def series_name(involved: str, wall_ns: int) -> str:
    """client-go's `events` recorder's name: the object's name and its time in hex
    nanoseconds (a UUID when that is no valid name)."""
    name = f"{involved}.{wall_ns:x}"
    return name if len(name) <= MAX_NAME else str(uuid.uuid4())


def reference(o: Occurrence, version: str = "") -> dict[str, str]:
    """The workload an Event is about, as an object reference (at `version` when known)."""
    ref = {
        "kind": o.kind,
        "apiVersion": o.api_version,
        "namespace": o.namespace,
        "name": o.name,
        "uid": o.uid,
    }
    if version:
        ref["resourceVersion"] = version
    return ref


def v2_body(
    o: Occurrence, action: str, instance: str, wall: float, version: str = ""
) -> dict[str, Any]:
    """The `events.k8s.io/v1` Event Reloader v2 records (client-go's `events` recorder:
    reportingController, reportingInstance `<controller>-<hostname>`, regarding at `version`,
    note)."""
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": series_name(o.name, int(wall * 1e9)), "namespace": o.namespace},
        "eventTime": micro_time(wall),
        "reportingController": o.component,
        "reportingInstance": instance,
        "action": action,
        "reason": o.reason,
        "regarding": reference(o, version),
        "note": o.message,
        "type": o.event_type,
    }


class Turns:
    """One write at a time per Event object (by name); a lock lives while someone waits."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    def __len__(self) -> int:
        return len(self._locks)

    @contextlib.asynccontextmanager
    async def turn(self, name: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(name) or (asyncio.Lock(), 0)
        self._locks[name] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[name]
            if users <= 1:
                del self._locks[name]
            else:
                self._locks[name] = (lock, users - 1)


class V2Recorder:
    """Reloader v2's Events through `client`; `spawn` starts the series sweeps (none without
    it), `may_write` says whether this replica writes (the leader)."""

    def __init__(
        self,
        client: Client,
        clock: Clock,
        instance: str,
        spawn: Spawn | None = None,
        may_write: Callable[[], bool] = lambda: True,
    ) -> None:
        self.client, self.clock, self.instance = client, clock, instance
        self.spawn, self.may_write = spawn, may_write
        self.series = SeriesCache()
        self.turns = Turns()
        self._sweeping: Timer | None = None

    async def send(self, o: Occurrence, action: str, version: str) -> None:
        """Reloader v2's Event, as client-go's `events` recorder writes it: an Event
        isomorphic to a recent one is a series of that one (`core.eventseries`)."""
        wall = self.clock.wall()
        body = v2_body(o, action, self.instance, wall, version)
        regarding = (o.kind, o.api_version, o.namespace, o.name, o.uid, version)
        key = (o.event_type, action, o.reason, o.component, self.instance, regarding)
        step, entry, forgotten = self.series.record(
            key, body["metadata"]["name"], o.namespace, wall
        )
        self._arm()
        if forgotten is not None:  # made room: its count is written now, or never
            with contextlib.suppress(errors.KubeError):
                await self.write_series(forgotten)
        async with self.turns.turn(entry.name):  # its create before its series' PATCHes
            if step is Step.CREATE:
                entry.body = body
                await self.client.create(resources.EVENTS_V1, body, namespace=o.namespace)
            elif step is Step.SERIES:
                await self.write_series(entry, locked=True)

    async def write_series(self, entry: Entry, *, locked: bool = False) -> None:
        """A series' count by a PATCH of its Event (created again with it when gone; a PATCH
        again when another write created it meanwhile)."""
        if not locked:
            async with self.turns.turn(entry.name):
                await self.write_series(entry, locked=True)
            return
        series = {"count": entry.count, "lastObservedTime": micro_time(entry.last_observed)}
        patch = {"series": series}
        for _ in range(2):
            try:
                await self.client.patch(
                    resources.EVENTS_V1,
                    entry.name,
                    patch,
                    namespace=entry.namespace,
                    patch_type=PatchType.STRATEGIC,
                )
                return
            except errors.NotFound:
                if entry.body is None:
                    return
            try:
                again = {**entry.body, "series": series}
                await self.client.create(resources.EVENTS_V1, again, namespace=entry.namespace)
                return
            except errors.AlreadyExists:
                continue  # created meanwhile: patch it

    def _arm(self) -> None:
        """A sweep of the series FINISH_SECONDS on, while any Event is remembered."""
        if self._sweeping is None and self.spawn is not None and len(self.series):
            self._sweeping = self.clock.call_later(FINISH_SECONDS, self._swept)

    def _swept(self) -> None:
        self._sweeping = None
        if self.spawn is not None:
            self.spawn("event-series", self._sweep())

    async def _sweep(self) -> None:
        """Write the counts the sweep names (the leader only; a finished series forgotten
        once written, kept for the next sweep when its write failed), then arm the next."""
        for entry in self.series.sweep(self.clock.wall()):
            if not self.may_write():
                continue
            try:
                await self.write_series(entry)
            except errors.KubeError as exc:
                log.warning("could not record event", extra={"reason": "series", "error": str(exc)})
                continue
            self.series.forget(entry)
        self._arm()
