"""The controller's state and what every part of it shares: the watch caches and index, the
queue and pending changes, leadership, background jobs, Warning Events and change logs.

`Controller` is built in layers, each module owning one concern and using only the layers
below it: `base` -> `tracking` (rollout progress, pause timers) -> `fanout` (decisions,
coalescing, start-up catch-up, webhooks) -> `reconciling` (workers, limits, writes) ->
`intake` (watch consumers, API discovery) -> `controller` (wiring and lifecycle).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from kube_reloader.alerts import AlertSender, WebhookNotifier
from kube_reloader.core import limiting, planning
from kube_reloader.core.annotations import Keys
from kube_reloader.core.objects import ObjectKey, ResourceType, WorkloadKind
from kube_reloader.core.planning import Change
from kube_reloader.kube import errors, events, projections
from kube_reloader.kube.client import Client
from kube_reloader.kube.watching import EventType, Reflector
from kube_reloader.metrics import Recorder
from kube_reloader.runtime import writing
from kube_reloader.runtime.cache import (
    ConfigEntry,
    WorkloadEntry,
    WorkloadIndex,
    configmap_entry,
    secret_entry,
    workload_entry,
)
from kube_reloader.runtime.observing import ControllerCollector
from kube_reloader.runtime.options import Options
from kube_reloader.runtime.queueing import WorkQueue
from kube_reloader.runtime.supervisor import Supervisor

# one logger for all the controller's modules, named as before they were split
log = logging.getLogger("kube_reloader.runtime.controller")

WORKLOAD_RESOURCES = writing.RESOURCES
PROJECTIONS: dict[WorkloadKind, type[Any]] = {
    kind: projections.CronJob if kind is WorkloadKind.CRONJOB else projections.Workload
    for kind in WorkloadKind
}
CONTENT_TYPES: dict[ResourceType, type[Any]] = {
    ResourceType.CONFIGMAP: projections.ConfigMapContent,
    ResourceType.SECRET: projections.SecretContent,
}
MAX_BACKOFF = 60.0
#: distinct (workload, warning) pairs remembered so each is recorded once (oldest forgotten)
MAX_WARNED = 10_000
#: changes remembered for an optional kind still listing (the oldest are dropped past it)
MAX_REPLAY = 10_000
#: seconds of decisions a fan-out makes before it lets other tasks run
FAN_OUT_SLICE = 0.005
EVENT_NAMES = {EventType.ADDED: "add", EventType.MODIFIED: "update", EventType.DELETED: "delete"}


def config_transform(
    rtype: ResourceType, keys: Keys, hash_key: bytes | None
) -> Callable[[Any], ConfigEntry]:
    def transform(obj: Any) -> ConfigEntry:
        if rtype is ResourceType.CONFIGMAP:
            return configmap_entry(obj, keys, hash_key)
        return secret_entry(obj, keys, hash_key)

    return transform


def workload_transform(kind: WorkloadKind, keys: Keys) -> Callable[[Any], WorkloadEntry]:
    def transform(obj: Any) -> WorkloadEntry:
        return workload_entry(kind, obj, keys)

    return transform


def spc_transform(keys: Keys) -> Callable[[Any], projections.Object]:
    keep = keys.resource_keys()

    def transform(obj: Any) -> projections.Object:
        meta = obj.metadata
        return projections.Object(
            projections.ObjectMeta(
                name=meta.name,
                namespace=meta.namespace,
                uid=meta.uid,
                resourceVersion=meta.resourceVersion,
                annotations={k: v for k, v in meta.annotations.items() if k in keep},
            )
        )

    return transform


@dataclass
class Stats:
    """Counters the controller keeps about itself (exported as metrics later)."""

    changes: int = 0
    reloads: int = 0
    failures: int = 0
    retries: int = 0
    patches: int = 0
    webhooks: int = 0
    pauses: int = 0
    resumes: int = 0
    skipped: dict[str, int] = field(default_factory=dict)


class ControllerBase:
    def __init__(
        self,
        client: Client,
        options: Options,
        *,
        clock: Callable[[], float] = time.time,
        metrics: Recorder | None = None,
    ) -> None:
        self.client = client
        self.options = options
        self.clock = clock
        self.metrics = metrics or Recorder(by_namespace=False)
        #: when each pending workload key was queued, and when each change was first observed
        self._queued_at: dict[ObjectKey, float] = {}
        self._observed_at: dict[tuple[ObjectKey, ResourceType, str], float] = {}
        self.keys = options.plan.match.keys
        self.index = WorkloadIndex(self.keys)
        self.queue: WorkQueue[ObjectKey] = WorkQueue()
        self.pending: dict[ObjectKey, dict[tuple[ResourceType, str], Change]] = {}
        self.failures: dict[ObjectKey, int] = {}
        self.stats = Stats()
        self.ready = asyncio.Event()
        self.alerts: AlertSender | None = None
        self.webhook: WebhookNotifier[tuple[Change, tuple[ObjectKey, ...]]] | None = None
        self._stashed: dict[tuple[str, ResourceType, str], tuple[Change, float]] = {}
        self._config_reflectors: list[Reflector[ConfigEntry]] = []
        self._workload_reflectors: list[Reflector[WorkloadEntry]] = []
        self._ns_reflector: Reflector[projections.Object] | None = None
        self._spc_reflectors: list[Reflector[projections.Object]] = []
        self._selected_namespaces: set[str] = set()
        self._warned: dict[tuple[ObjectKey, str], None] = {}
        self._resumes: dict[ObjectKey, asyncio.TimerHandle] = {}
        #: every background task runs under it: a crash is logged, counted and restarted
        self.supervisor = Supervisor(on_crash=self.metrics.task_crashed)
        #: optional kinds (Argo, DeploymentConfig, CSI): watched when served, never awaited
        #: for readiness
        self._optional_reflectors: list[Reflector[Any]] = []
        #: changes fanned out while an optional kind was still listing (see `_optional_synced`)
        self._replay: dict[tuple[str, ResourceType, str], tuple[Change, float]] = {}
        #: reconciles in flight, cancelled the moment this replica stops leading
        self._writing: set[asyncio.Task[None]] = set()
        #: of those, the ones past their point of no return (a Job deleted, not re-created
        #: yet): they finish even when leadership is lost, and shutdown waits for them
        self._committed: set[asyncio.Task[Any]] = set()
        self._scheduled: dict[ObjectKey, asyncio.TimerHandle] = {}
        #: rollouts being followed: key -> (generation written, started (monotonic), deadline,
        #: the deadline timer); one entry and one timer per workload, however many reloads
        self._tracking: dict[ObjectKey, tuple[int, float, float, asyncio.TimerHandle]] = {}
        self._last_reload: dict[ObjectKey, float] = {}
        self._bucket = limiting.TokenBucket(options.reload_rate, options.reload_burst)
        #: set while this replica may write (always without HA; while leading with HA)
        self.leading = asyncio.Event()
        self.leading.set()
        self.metrics.registry.register(ControllerCollector(self))

    def _scopes(self) -> list[str | None]:
        return list(self.options.namespaces) if self.options.namespaces else [None]

    def _now(self) -> dt.datetime:
        """The injected clock as an aware UTC datetime."""
        return dt.datetime.fromtimestamp(self.clock(), dt.UTC)

    def _spawn(self, name: str, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """A short background job (an Event, a resume): a crash is logged and counted."""
        return self.supervisor.oneshot(name, coro)

    def _watch(
        self, refl: Reflector[Any], consume: Callable[[Any], Coroutine[Any, Any, None]]
    ) -> None:
        scope = f"@{refl.namespace}" if refl.namespace else ""
        self.supervisor.spawn(f"watch/{refl.resource.plural}{scope}", lambda: consume(refl))

    def _workload_reflector(self, kind: WorkloadKind, ns: str | None) -> Reflector[WorkloadEntry]:
        return Reflector(
            self.client,
            WORKLOAD_RESOURCES[kind],
            type=PROJECTIONS[kind],
            namespace=ns,
            transform=workload_transform(kind, self.keys),
            poll_interval=self.options.poll_interval,
        )

    def _object_failed(self, stage: str, key: object, exc: Exception) -> None:
        """One object's handling raised: log it with the object, count it, carry on."""
        self.metrics.object_errors.labels(stage=stage).inc()
        log.error(
            "object skipped after an unexpected error",
            exc_info=exc,
            extra={"stage": stage, "object": str(key), "error": f"{type(exc).__name__}"},
        )

    def _log_change(self, message: str, change: Change, **extra: object) -> None:
        """An info line about a change; a Secret's content hash only at debug (a short
        Secret can be guessed from its unsalted hash)."""
        fields: dict[str, object] = {"resource": str(change), "event": change.event.value}
        fields.update(extra)
        if change.rtype is ResourceType.SECRET:
            # the decision's reason names the value written (the hash): debug only too
            log.info(message, extra={k: v for k, v in fields.items() if k != "reason"})
            log.debug(message, extra={**fields, "hash": change.hash})
        else:
            log.info(message, extra={**fields, "hash": change.hash})

    def _warn_once(
        self,
        workload: planning.Workload,
        warnings: tuple[str, ...],
        reason: str = "ReloadAnnotationInvalid",
    ) -> None:
        """One Warning Event per (workload, problem); the leader records them. The memory
        of what was warned is bounded (the oldest is forgotten, then warned again)."""
        if not warnings or not self.leading.is_set():
            return
        for text in warnings:
            marker = (workload.key, text)
            if marker in self._warned:
                continue
            self._warned[marker] = None
            if len(self._warned) > MAX_WARNED:
                del self._warned[next(iter(self._warned))]
            log.warning(
                "bad reload annotation" if reason == "ReloadAnnotationInvalid" else "reload error",
                extra={"workload": str(workload.key), "problem": text},
            )
            self._event(workload, "Warning", reason, text, "reloader")

    def _event(
        self,
        workload: planning.Workload,
        event_type: str,
        reason: str,
        message: str,
        component: str,
    ) -> None:
        async def send() -> None:
            if not self.may_write():
                return  # Events are writes too: the leader records them
            try:
                await events.record(
                    self.client, kind=workload.kind.value,
                    api_version=WORKLOAD_RESOURCES[workload.kind].api_version,
                    namespace=workload.namespace, name=workload.name, uid=workload.uid,
                    event_type=event_type, reason=reason, message=message, component=component,
                )  # fmt: skip
            except errors.KubeError as exc:
                log.warning("could not record event", extra={"reason": reason, "error": str(exc)})

        self._spawn(f"event/{reason}", send())

    def start_leading(self) -> None:
        """This replica may write from now on (called by the elector when it wins)."""
        self.leading.set()

    def stop_leading(self) -> None:
        """Stop writing at once: no new write starts, and those in flight are cancelled
        (called by the elector in the very step it decides it no longer leads)."""
        self.leading.clear()
        for write in list(self._writing):
            if write not in self._committed:  # a half-done Job re-creation must finish
                write.cancel()
        if self._writing:
            log.warning("leadership lost: in-flight writes cancelled",
                        extra={"writes": len(self._writing)})  # fmt: skip

    def _commit_write(self) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._committed.add(task)
            task.add_done_callback(self._committed.discard)

    def may_write(self) -> bool:
        """Checked right before every write is sent."""
        return self.leading.is_set()

    def _schedule(self, key: ObjectKey, delay: float) -> None:
        """Queue `key` after `delay`; changes arriving meanwhile join the same reload."""
        if key in self._scheduled:
            return
        if delay <= 0:
            self._enqueue(key)
            return

        def fire() -> None:
            self._scheduled.pop(key, None)
            self._enqueue(key)

        self._scheduled[key] = asyncio.get_running_loop().call_later(delay, fire)

    def _enqueue(self, key: ObjectKey) -> None:
        self._queued_at.setdefault(key, time.monotonic())
        self.queue.add(key)
        self.metrics.queue_adds.inc()
        self.metrics.queue_depth.set(len(self.queue))

    def _configs(self, rtype: ResourceType) -> list[Reflector[ConfigEntry]]:
        plural = "configmaps" if rtype is ResourceType.CONFIGMAP else "secrets"
        return [r for r in self._config_reflectors if r.resource.plural == plural]

    def _config_entry(self, rtype: ResourceType, namespace: str, name: str) -> ConfigEntry | None:
        for refl in self._configs(rtype):
            entry = refl.store.get((namespace, name))
            if entry is not None:
                return entry
        return None

    def all_reflectors(self) -> list[Reflector[Any]]:
        out: list[Reflector[Any]] = [*self._workload_reflectors, *self._config_reflectors]
        out += self._optional_reflectors
        out += self._spc_reflectors
        if self._ns_reflector is not None:
            out.append(self._ns_reflector)
        return out
