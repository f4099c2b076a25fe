"""The one sink every outcome is reported through, and the problems every room reports.

The rooms report through small domain reporters, each a class over one `Sink` with only its
domain's methods: `counting` (the changes taken in, the work queue, webhook mode, with
Reloader v1's labels), `reloadreports` (decisions, deferrals, writes, reloads),
`rolloutreports` (pauses, rollouts, pod-level reloads), `fleetreports` (holds, the circuit
breaker), `auditreports` (the staleness audit) and `ProblemReports` here (an object's handling
failed, a warning recorded once). `reports.Reports` builds one of each over one sink. The sink
holds what they share: the metrics recorder, the Event queue and the fence (only the leader
records Events and sends alerts), the alert sender, the clock, `Stats`, and the memories more
than one domain reads (what was warned once; a held or deferred workload's last reason). No
other room touches a metric object, records an Event or sends an alert (scrape-time gauges
live in `observing`)."""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from kube_reloader.core import planning
from kube_reloader.core.objects import ObjectKey, ResourceType
from kube_reloader.core.planning import Change
from kube_reloader.edges.alerts import AlertSender
from kube_reloader.kube.client import Client
from kube_reloader.metrics import Recorder
from kube_reloader.runtime.clock import Clock
from kube_reloader.runtime.eventing import EventQueue, EventRecorder, EventSink, Pending
from kube_reloader.runtime.fencing import Fence
from kube_reloader.runtime.kinds import Kinds

__all__ = ["KubeEvents", "ProblemReports", "Sink", "Spawn", "Stats", "log", "log_change"]

# one logger for all the controller's rooms, named as before they were split
log = logging.getLogger("kube_reloader.runtime.controller")

#: distinct (workload, warning) pairs remembered so each is recorded once (oldest forgotten)
MAX_WARNED = 10_000
#: workloads whose last hold or deferral reason is remembered (logged when it changes)
MAX_HELD_REASONS = 10_000


Spawn = Callable[[str, Coroutine[Any, Any, None]], object]


@dataclass
class Stats:
    """Counters the controller keeps about itself (also exported as metrics)."""

    changes: int = 0
    reloads: int = 0
    failures: int = 0
    retries: int = 0
    patches: int = 0
    webhooks: int = 0
    pauses: int = 0
    resumes: int = 0
    skipped: dict[str, int] = field(default_factory=dict)


class KubeEvents(EventRecorder):
    """Events about workloads (and ConfigMaps, Secrets), correlated as client-go does; v2's
    Events with its reportingInstance, `reloader-<hostname>`."""

    def __init__(
        self,
        client: Client,
        kinds: Kinds,
        clock: Clock,
        spawn: Spawn | None = None,
        fence: Fence | None = None,
    ) -> None:
        """`spawn` starts the v2 series' sweeps (none without it), which `fence` allows."""

        def api_version(kind: str) -> str:
            spec = kinds.get(kind)  # else a ConfigMap or Secret
            return "v1" if spec is None else spec.resource.api_version

        instance = f"reloader-{socket.gethostname()}"
        may_write = fence.may_write if fence is not None else (lambda: True)
        super().__init__(
            client, clock, api_version, instance=instance, spawn=spawn, may_write=may_write
        )


class Holds:
    """Each held or deferred workload's last reason (bounded, the oldest forgotten): a hold
    (`fleetreports`) or a deferral (`reloadreports`) is said when its reason begins; a write
    (a reload, a pod-level reload's end) makes the next one news again."""

    def __init__(self) -> None:
        self._last: dict[ObjectKey, str] = {}

    def new(self, key: ObjectKey, reason: str) -> bool:
        """Remember `key`'s hold reason; True when it differs from the last one."""
        if self._last.get(key) == reason:
            return False
        self._last.pop(key, None)
        self._last[key] = reason
        if len(self._last) > MAX_HELD_REASONS:
            del self._last[next(iter(self._last))]
        return True

    def release(self, key: ObjectKey) -> None:
        """`key` was written (or has nothing to wait for): its next hold is news again."""
        self._last.pop(key, None)


class Sink:
    """The shared outputs of every domain reporter (built once, by the controller)."""

    def __init__(
        self,
        metrics: Recorder,
        events: EventSink,
        fence: Fence,
        spawn: Spawn,
        clock: Clock,
        alerts: AlertSender | None,
        *,
        v2: bool = False,
    ) -> None:
        self.metrics = metrics
        #: reloads are told as Reloader v2 tells them (`--compat=v2`): `events.k8s.io/v1`
        #: Events, its reasons and notes, and its metrics' label values (`counting`)
        self.v2 = v2
        self.fence = fence
        self.clock = clock
        #: where outcomes are alerted (the options' `alerts`, started by the controller)
        self.alerts = alerts
        self.stats = Stats()
        self.events = EventQueue(events, fence, spawn, clock.monotonic, metrics.dropped_event)
        #: (workload, warning) pairs recorded once (`ProblemReports.warn_once`)
        self.warned: dict[tuple[ObjectKey, str], None] = {}
        #: each held or deferred workload's last reason: logged again only when it changes
        self.holds = Holds()

    def v2_leading(self) -> bool:
        """Counted as Reloader v2 counts (`--compat=v2`) by this replica now: v2's
        controllers run on the leader only."""
        return self.v2 and self.fence.leading.is_set()

    def event(
        self,
        workload: planning.Workload,
        event_type: str,
        reason: str,
        message: str,
        component: str,
        action: str = "",
        version: str = "",
    ) -> bool:
        """Queue an Event (`eventing.EventQueue`; with `action`, an `events.k8s.io/v1` one
        regarding the workload at `version`); False when its namespace is over its share of
        the queue and it was dropped."""
        p = Pending(workload, event_type, reason, message, component, action, version)
        return self.events.offer(p)

    def notify(self, text: str) -> None:
        """An alert, sent by the leader only."""
        if self.alerts is not None and self.fence.may_write():
            self.alerts.notify(text)

    def alert_reloaded(self, c: Change, key: ObjectKey) -> None:
        """The alert of a reload (whoever wrote it is the leader)."""
        if self.alerts is not None:
            self.alerts.reloaded(
                resource=c.name,
                rtype=c.rtype.value,
                namespace=c.namespace,
                workload=key.name,
                kind=key.kind,
            )


def log_change(message: str, change: Change, **extra: object) -> None:
    """An info line about a change; a Secret's content hash only at debug (a short Secret can
    be guessed from its unsalted hash)."""
    fields: dict[str, object] = {"resource": str(change), "event": change.event.value}
    fields.update(extra)
    if change.rtype is ResourceType.SECRET:
        # the decision's reason names the value written (the hash): debug only too
        log.info(message, extra={k: v for k, v in fields.items() if k != "reason"})
        log.debug(message, extra={**fields, "hash": change.hash})
    else:
        log.info(message, extra={**fields, "hash": change.hash})


class ProblemReports:
    """What goes wrong with one object, whichever room handles it: an unexpected error (the
    object skipped, the rest carry on), a warning about a workload recorded once."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink

    def object_failed(self, stage: str, key: object, exc: BaseException) -> None:
        """One object's handling raised: log it with the object, count it, carry on."""
        self.sink.metrics.object_errors.labels(stage=stage).inc()
        log.error(
            "object skipped after an unexpected error",
            exc_info=exc,
            extra={"stage": stage, "object": str(key), "error": f"{type(exc).__name__}"},
        )

    def warn_once(
        self,
        workload: planning.Workload,
        warnings: tuple[str, ...],
        reason: str = "ReloadAnnotationInvalid",
    ) -> None:
        """One Warning Event per (workload, problem); the leader records them. The memory
        of what was warned is bounded (the oldest is forgotten, then warned again)."""
        if not warnings or not self.sink.fence.may_write():
            return
        warned = self.sink.warned
        for text in warnings:
            marker = (workload.key, text)
            if marker in warned:
                continue
            if not self.sink.event(workload, "Warning", reason, text, "reloader"):
                continue  # its namespace is over its share: warned when next seen
            warned[marker] = None
            if len(warned) > MAX_WARNED:
                del warned[next(iter(warned))]
            log.warning(
                "bad reload annotation" if reason == "ReloadAnnotationInvalid" else "reload error",
                extra={"workload": str(workload.key), "problem": text},
            )
