"""Kubernetes Events (core/v1) about workloads: `Reloaded`, `ReloadFail` and warnings.

Recorded as client-go's recorder records them (Reloader v1's): each one goes through a
`core.correlating.Correlator` first, so an Event identical to one already recorded patches
that Event's `count`, `lastTimestamp` and `message` instead of creating another, similar
Events are combined past a threshold, and a source that keeps talking about one object is
rate-limited (that object only). An Event deleted meanwhile is created again under its name.
Without RBAC to patch Events (`create` only), repeated Events are created as new ones, as
before, after one warning.

Writes for one Event object are made one at a time, in order; writes for different Events
never wait for each other. Events are best effort: failing to record one is logged by the
caller, never fatal. Time comes from the injected clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import secrets
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from kube_reloader.core import planning
from kube_reloader.core.correlating import Correlator, Occurrence, Record
from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client, PatchType

log = logging.getLogger(__name__)
#: the longest valid Event name (a DNS subdomain); longer generated names become a UUID
MAX_NAME = 253


class Clock(Protocol):
    def wall(self) -> float: ...

    def monotonic(self) -> float: ...


class EventSink(Protocol):
    async def send(
        self, workload: planning.Workload, event_type: str, reason: str, message: str,
        component: str,
    ) -> None: ...  # fmt: skip


def stamp(wall: float) -> str:
    """An Event timestamp (whole seconds, UTC), as `metav1.Time` is written."""
    return dt.datetime.fromtimestamp(wall, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def fresh_name(involved: str) -> str:
    """A new Event's name: the object's name and a unique suffix (client-go's shape)."""
    name = f"{involved}.{secrets.token_hex(8)}"
    return name if len(name) <= MAX_NAME else str(uuid.uuid4())


def body(o: Occurrence, r: Record) -> dict[str, Any]:
    """The Event object to create: its involvedObject is the workload."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": r.name, "namespace": o.namespace},
        "involvedObject": {
            "kind": o.kind,
            "apiVersion": o.api_version,
            "namespace": o.namespace,
            "name": o.name,
            "uid": o.uid,
        },
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
    ) -> None:
        self.client = client
        self.clock = clock
        #: the involved object's apiVersion, by its kind
        self.api_version = api_version
        self.correlator = correlator or Correlator()
        #: set after the API refused a PATCH of an Event (RBAC grants `create` only)
        self.patch_forbidden = False
        self._turns: dict[str, tuple[asyncio.Lock, int]] = {}

    async def send(
        self, workload: planning.Workload, event_type: str, reason: str, message: str,
        component: str,
    ) -> None:  # fmt: skip
        kind = str(workload.kind)
        o = Occurrence(component, kind, self.api_version(kind), workload.namespace,
                       workload.name, workload.uid, event_type, reason, message)  # fmt: skip
        r = self.correlator.correlate(
            o, wall=self.clock.wall(), now=self.clock.monotonic(), fresh_name=fresh_name(o.name)
        )
        if r is None:
            where = f"{kind} {o.namespace}/{o.name}"
            log.debug("event not recorded: too many about this object",
                      extra={"object": where, "reason": reason})  # fmt: skip
            return
        async with self._turn(r.name):
            await self._write(o, r)

    async def _write(self, o: Occurrence, r: Record) -> None:
        if r.update and not self.patch_forbidden:
            patch = {"count": r.count, "lastTimestamp": stamp(r.last), "message": r.message}
            try:
                await self.client.patch(resources.EVENTS, r.name, patch, namespace=o.namespace,
                                        patch_type=PatchType.STRATEGIC)  # fmt: skip
                return
            except errors.NotFound:
                pass  # gone (Events expire): created again under its name, with its count
            except errors.Forbidden as exc:
                self.patch_forbidden = True
                log.warning("cannot patch Events: repeated Events are created as new ones "
                            "(grant patch on events)", extra={"error": exc.message})  # fmt: skip
        if r.update and self.patch_forbidden:
            r = Record(fresh_name(o.name), r.message, 1, r.last, r.last)
        await self.client.create(resources.EVENTS, body(o, r), namespace=o.namespace)

    @contextlib.asynccontextmanager
    async def _turn(self, name: str) -> AsyncIterator[None]:
        """One write at a time per Event object; the lock lives while someone waits."""
        lock, users = self._turns.get(name) or (asyncio.Lock(), 0)
        self._turns[name] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._turns[name]
            if users <= 1:
                del self._turns[name]
            else:
                self._turns[name] = (lock, users - 1)
