"""The reload controller: reflectors feed caches, changes fan out to workloads, workers write.

Data flow:
1. Reflectors mirror ConfigMaps and Secrets (reduced to hashes at decode time), optionally
   SecretProviderClassPodStatuses (CSI), and the watched workload kinds (reduced to the core's
   `Workload` value), per watched namespace. Optional kinds (Argo Rollouts, DeploymentConfigs,
   CSI) start when API discovery finds them, so a CRD installed later is noticed.
2. After the initial sync, a content change (hash differs), a creation (with
   `--reload-on-create`) or a deletion (with `--reload-on-delete`) becomes a `core.Change`.
3. The change fans out through the reverse index to candidate workloads; `core.planning.plan`
   decides for each; every workload that must change is queued by key with its changes (or,
   in webhook mode, one notification is sent instead).
4. A worker takes a workload key, re-plans all its pending changes against the latest cached
   workload (level-based: a duplicate or stale change writes nothing), writes them in one go
   (`writing`), records Events, logs and alerts, and refreshes the cache from the answer.
   Deployments with a pause period are paused first and resumed on time; the resume time is
   derived from the object, so it survives restarts. Transient failures back off and retry.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import functools
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import msgspec

from kube_reloader.alerts import AlertSender, WebhookNotifier
from kube_reloader.core import limiting, matching, pausing, planning, rollouts
from kube_reloader.core.annotations import Keys
from kube_reloader.core.objects import ObjectKey, ResourceType, WorkloadKind
from kube_reloader.core.parsing import quote
from kube_reloader.core.planning import Change, Event, Outcome
from kube_reloader.kube import errors, events, projections, resources
from kube_reloader.kube.client import Client
from kube_reloader.kube.resources import Resource
from kube_reloader.kube.watching import EventType, Reflector, ReflectorEvent
from kube_reloader.metrics import Recorder
from kube_reloader.runtime import writing
from kube_reloader.runtime.cache import (
    ConfigEntry,
    WorkloadEntry,
    WorkloadIndex,
    configmap_entry,
    secret_entry,
    spc_status_entry,
    workload_entry,
)
from kube_reloader.runtime.memory import release_free_memory
from kube_reloader.runtime.observing import ControllerCollector
from kube_reloader.runtime.options import Options
from kube_reloader.runtime.queueing import WorkQueue
from kube_reloader.runtime.supervisor import Supervisor

log = logging.getLogger(__name__)

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
_EVENT_NAMES = {EventType.ADDED: "add", EventType.MODIFIED: "update", EventType.DELETED: "delete"}


def _config_transform(
    rtype: ResourceType, keys: Keys, hash_key: bytes | None
) -> Callable[[Any], ConfigEntry]:
    def transform(obj: Any) -> ConfigEntry:
        if rtype is ResourceType.CONFIGMAP:
            return configmap_entry(obj, keys, hash_key)
        return secret_entry(obj, keys, hash_key)

    return transform


def _workload_transform(kind: WorkloadKind, keys: Keys) -> Callable[[Any], WorkloadEntry]:
    def transform(obj: Any) -> WorkloadEntry:
        return workload_entry(kind, obj, keys)

    return transform


def _spc_transform(keys: Keys) -> Callable[[Any], projections.Object]:
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


class Controller:
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

    # ------------------------------------------------------------------ lifecycle

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

    def _build_reflectors(self) -> None:
        keys = self.keys
        selector = self.options.resource_label_selector or None
        for ns in self._scopes():
            for rtype in self.options.resources:
                res = resources.CONFIGMAPS if rtype is ResourceType.CONFIGMAP else resources.SECRETS
                self._config_reflectors.append(
                    Reflector(
                        self.client,
                        res,
                        type=CONTENT_TYPES[rtype],
                        namespace=ns,
                        label_selector=selector,
                        transform=_config_transform(rtype, keys, self.options.hash_key),
                        poll_interval=self.options.poll_interval,
                    )
                )
            for kind in self.options.workload_kinds:
                self._workload_reflectors.append(self._workload_reflector(kind, ns))
        if self.options.namespace_selector and not self.options.namespaces:
            self._ns_reflector = Reflector(
                self.client,
                resources.NAMESPACES,
                type=projections.Object,
                label_selector=self.options.namespace_selector,
            )

    def _workload_reflector(self, kind: WorkloadKind, ns: str | None) -> Reflector[WorkloadEntry]:
        return Reflector(
            self.client,
            WORKLOAD_RESOURCES[kind],
            type=PROJECTIONS[kind],
            namespace=ns,
            transform=_workload_transform(kind, self.keys),
            poll_interval=self.options.poll_interval,
        )

    async def run(self, stop: asyncio.Event) -> None:
        """Run until `stop` is set; then stop taking work and finish in-flight writes."""
        self._build_reflectors()
        if self.options.alerts is not None:
            a = self.options.alerts
            self.alerts = AlertSender(
                url=a.url, sink=a.sink, additional_info=a.additional_info, proxy=a.proxy or None
            )
            self.alerts.start()
            self.supervisor.spawn("alerts", self.alerts.run)
        if self.options.webhook_url:
            self.webhook = WebhookNotifier(self.options.webhook_url)
            self.supervisor.spawn("webhook", self._send_webhooks)
        for r in self._workload_reflectors:
            self._watch(r, self._consume_workloads)
        for c in self._config_reflectors:
            self._watch(c, self._consume_configs)
        if self._ns_reflector is not None:
            self._watch(self._ns_reflector, self._consume_namespaces)
        # Optional APIs are watched when served and polled for otherwise; they never hold up
        # readiness (a broken CRD or a slow optional LIST must not stop every other reload).
        if self.options.argo_rollouts:
            await self._optional_kind(WorkloadKind.ROLLOUT, required=True)
        if self.options.deployment_configs:
            await self._optional_kind(WorkloadKind.DEPLOYMENTCONFIG, required=False)
        if self.options.csi:
            await self._optional_csi()
        for i in range(self.options.workers):
            self.supervisor.spawn(f"worker@{i}", self._worker)
        if self.options.reconcile_on_start and self.webhook is None:
            self.supervisor.spawn("catch-up", self._level_loop)
        started = time.monotonic()
        self.supervisor.spawn("sync", lambda: self._wait_synced(started))
        await stop.wait()
        log.info("stopping", extra={"in_flight": self.queue.active, "queued": len(self.queue)})
        for h in [*self._resumes.values(), *self._scheduled.values()]:
            h.cancel()
        for tracked in self._tracking.values():
            tracked[3].cancel()
        self.queue.close()
        # let in-flight writes finish (bounded), then cancel everything else; a Job deleted
        # and not yet re-created gets the time its re-creation may take
        started_drain = time.monotonic()
        while self.queue.active:
            waited = time.monotonic() - started_drain
            if waited > 10 and (not self._committed or waited > writing.JOB_RECREATE_SECONDS):
                break
            await asyncio.sleep(0.05)
        if self.alerts is not None:
            await self.alerts.drain()
        await self.supervisor.close()
        if self.alerts is not None:
            await self.alerts.stop()
        if self.webhook is not None:
            await self.webhook.close()

    async def _wait_synced(self, started: float) -> None:
        reflectors: list[Any] = [*self._workload_reflectors, *self._config_reflectors]
        if self._ns_reflector is not None:
            reflectors.append(self._ns_reflector)
        await asyncio.gather(*(r.synced.wait() for r in reflectors))
        self.ready.set()
        self.metrics.ready.set(1)
        stashed, self._stashed = self._stashed, {}
        for change, observed in stashed.values():
            await self._fan_out(change, observed)
        # The initial LISTs' pages are garbage now; hand their memory back to the OS.
        release_free_memory()
        log.info(
            "caches synced",
            extra={
                "seconds": round(time.monotonic() - started, 3),
                "workloads": len(self.index),
                "configs": sum(len(r.store) for r in self._config_reflectors),
            },
        )

    def all_reflectors(self) -> list[Reflector[Any]]:
        out: list[Reflector[Any]] = [*self._workload_reflectors, *self._config_reflectors]
        out += self._optional_reflectors
        out += self._spc_reflectors
        if self._ns_reflector is not None:
            out.append(self._ns_reflector)
        return out

    # ------------------------------------------------------------------ level-based start

    async def _level_loop(self) -> None:
        """Each time this replica starts writing (startup, or a won election), catch up on
        the changes nobody applied while no kube-reloader was writing."""
        while True:
            await self.ready.wait()
            await self.leading.wait()
            self.reconcile_missed()
            while self.leading.is_set():  # noqa: ASYNC110 - a state change, not a handoff
                await asyncio.sleep(0.5)

    def _configs(self, rtype: ResourceType) -> list[Reflector[ConfigEntry]]:
        plural = "configmaps" if rtype is ResourceType.CONFIGMAP else "secrets"
        return [r for r in self._config_reflectors if r.resource.plural == plural]

    def _config_entry(self, rtype: ResourceType, namespace: str, name: str) -> ConfigEntry | None:
        for refl in self._configs(rtype):
            entry = refl.store.get((namespace, name))
            if entry is not None:
                return entry
        return None

    def _wanted(self, workload: planning.Workload) -> set[tuple[ResourceType, str]]:
        """The ConfigMaps/Secrets a workload may reload for: its references, plus every one
        of its namespace when it carries a named list for that type."""
        wanted = {
            r
            for r in workload.template.references()
            if r[0] is not ResourceType.SECRETPROVIDERCLASS
        }
        for rtype in (ResourceType.CONFIGMAP, ResourceType.SECRET):
            key = self.keys.named(rtype)
            if key in workload.annotations or key in workload.template.annotations:
                for refl in self._configs(rtype):
                    wanted.update((rtype, n) for ns, n in refl.store if ns == workload.namespace)
        return wanted

    def reconcile_missed(self) -> int:
        """Queue a reload for every workload whose configs changed while nobody watched;
        returns how many workloads were queued.

        CronJobs and Jobs are left out: their next run reads the current content anyway,
        and re-running them because kube-reloader restarted would surprise."""
        now = int(self.clock())
        queued = 0
        for candidate in list(self.index.workloads.values()):
            if candidate.kind in (WorkloadKind.CRONJOB, WorkloadKind.JOB):
                continue
            try:
                queued += self._catch_up(candidate, now)
            except Exception as exc:  # noqa: BLE001 - one workload never stops the catch-up
                self._object_failed("catch-up", candidate.key, exc)
                self._warn_once(
                    candidate,
                    (f"kube-reloader could not check this workload at start: "
                     f"{type(exc).__name__}",),
                    "ReloadError",
                )  # fmt: skip
        log.info("startup reconciliation done", extra={"workloads_queued": queued})
        return queued

    def _catch_up(self, candidate: planning.Workload, now: int) -> int:
        """Queue what one workload missed; 1 when it was queued, else 0."""
        workload = self._resolve_template(candidate)
        queued = 0
        for rtype, name in sorted(self._wanted(workload)):
            entry = self._config_entry(rtype, workload.namespace, name)
            if entry is None:
                continue
            change = Change(
                rtype, workload.namespace, name, entry.hash, Event.UPDATED,
                entry.metadata.annotations,
            )  # fmt: skip
            p = planning.plan(change=change, workload=workload, config=self.options.plan, now=now)
            missed, why = planning.missed_while_away(
                plan=p,
                carried_hash=planning.carried(p, workload, self.options.plan.strategy),
                config_changed_at=entry.changed_at,
                template_changed_at=workload.template_changed_at,
            )
            if not missed:
                continue
            self._log_change(
                "reloading a change missed while not watching", change,
                workload=str(workload.key), reason=why,
            )  # fmt: skip
            pending = self.pending.setdefault(workload.key, {})
            if not pending:
                queued = 1
            pending[(rtype, name)] = change
            self._schedule(workload.key, self.options.coalesce_window)
        return queued

    # ------------------------------------------------------------------ optional APIs

    async def _served(self, res: Resource) -> bool:
        path = f"/apis/{res.group}/{res.version}"
        try:
            doc = msgspec.json.decode(await self.client.request("GET", path))
        except errors.NotFound:
            return False
        return any(r.get("name") == res.plural for r in doc.get("resources") or ())

    async def _check_served(self, res: Resource) -> bool:
        try:
            return await self._served(res)
        except errors.KubeError as exc:
            log.warning("API discovery failed", extra={"resource": str(res), "error": str(exc)})
            return False

    async def _wait_served(self, res: Resource, *, what: str, required: bool) -> None:
        (log.error if required else log.info)(
            "API not served; will check again",
            extra={
                "resource": f"{res.plural}.{res.group}/{res.version}",
                "feature": what,
                "retry_seconds": self.options.discovery_interval,
            },
        )
        while True:
            await asyncio.sleep(self.options.discovery_interval)
            if await self._check_served(res):
                log.info("API found, watching it", extra={"resource": str(res), "feature": what})
                return

    async def _optional_kind(self, kind: WorkloadKind, *, required: bool) -> None:
        """Watch `kind` now if its API is served; otherwise poll discovery in the background."""
        res = WORKLOAD_RESOURCES[kind]
        if await self._check_served(res):
            for ns in self._scopes():
                refl = self._workload_reflector(kind, ns)
                self._optional_reflectors.append(refl)
                self._watch(refl, self._consume_workloads)
            return
        what = "--is-Argo-Rollouts" if kind is WorkloadKind.ROLLOUT else "DeploymentConfig support"

        async def later() -> None:
            await self._wait_served(res, what=what, required=required)
            await self._optional_kind(kind, required=required)

        self.supervisor.spawn(f"discover/{res.plural}", later)

    async def _optional_csi(self) -> None:
        res = resources.SECRETPROVIDERCLASSPODSTATUSES
        if not await self._check_served(res):

            async def later() -> None:
                await self._wait_served(res, what="--enable-csi-integration", required=True)
                await self._optional_csi()

            self.supervisor.spawn(f"discover/{res.plural}", later)
            return
        for ns in self._scopes():
            spc = Reflector(
                self.client, resources.SECRETPROVIDERCLASSES, type=projections.Object,
                namespace=ns, transform=_spc_transform(self.keys),
            )  # fmt: skip
            self._spc_reflectors.append(spc)
            self._watch(spc, self._drain)
            status = Reflector(
                self.client,
                resources.SECRETPROVIDERCLASSPODSTATUSES,
                type=projections.SpcPodStatus,
                namespace=ns,
                transform=functools.partial(spc_status_entry, hash_key=self.options.hash_key),
            )
            self._optional_reflectors.append(status)
            self._watch(status, self._consume_configs)

    async def _drain(self, refl: Reflector[Any]) -> None:
        async for _ in refl.events():
            pass

    def _spc_annotations(self, namespace: str, name: str) -> dict[str, str]:
        for refl in self._spc_reflectors:
            obj = refl.store.get((namespace, name))
            if obj is not None:
                return dict(obj.metadata.annotations)
        return {}

    # ------------------------------------------------------------------ consumers

    def _object_failed(self, stage: str, key: object, exc: Exception) -> None:
        """One object's handling raised: log it with the object, count it, carry on."""
        self.metrics.object_errors.labels(stage=stage).inc()
        log.error(
            "object skipped after an unexpected error",
            exc_info=exc,
            extra={"stage": stage, "object": str(key), "error": f"{type(exc).__name__}"},
        )

    async def _consume_workloads(self, refl: Reflector[WorkloadEntry]) -> None:
        optional = refl in self._optional_reflectors
        async for ev in refl.events():
            try:
                if ev.type is EventType.SYNCED and optional:
                    await self._optional_synced()
                else:
                    self._on_workload(ev)
            except Exception as exc:  # noqa: BLE001 - one bad object never stops the others
                self._object_failed("workload", ev.key, exc)
                if ev.object is not None:
                    self._warn_once(
                        ev.object.workload,
                        (f"kube-reloader could not handle this object: {type(exc).__name__}",),
                        "ReloadError",
                    )

    async def _optional_synced(self) -> None:
        """An optional kind finished its list after readiness: give its workloads the changes
        fanned out before they were indexed (re-planning is level-based, so workloads that
        already carry a change are not reloaded twice), then the start-up catch-up."""
        if not self.ready.is_set():
            return  # the ready-time fan-out and catch-up will see its workloads
        if all(r.synced.is_set() for r in self._optional_reflectors):
            replay, self._replay = self._replay, {}
        else:
            replay = dict(self._replay)
        if self.webhook is None:  # a webhook is not level-based: never sent twice
            for change, observed in replay.values():
                await self._fan_out(change, observed)
        if self.options.reconcile_on_start:
            self.reconcile_missed()

    def _remember_for_optional(self, change: Change, observed: float) -> None:
        """While an optional kind has not finished its list, keep the changes fanned out
        (the latest per resource, bounded) to replay them to its workloads."""
        if all(r.synced.is_set() for r in self._optional_reflectors):
            return
        key = (change.namespace, change.rtype, change.name)
        self._replay.pop(key, None)
        self._replay[key] = (change, observed)
        if len(self._replay) > MAX_REPLAY:
            del self._replay[next(iter(self._replay))]

    def _on_workload(self, ev: ReflectorEvent[WorkloadEntry]) -> None:
        if ev.type is EventType.DELETED and ev.object is not None:
            self._forget_workload(ev.object.workload.key)
        elif ev.type in (EventType.ADDED, EventType.MODIFIED) and ev.object is not None:
            self.index.put(ev.object.workload)
            self._warn_shadowed(ev.object.workload)
            if ev.object.workload.key in self._tracking:
                self._check_rollout(ev.object.workload)
            if ev.object.workload.kind is WorkloadKind.DEPLOYMENT:
                self._track_pause(ev.object.workload)

    def _forget_workload(self, key: ObjectKey) -> None:
        """A deleted workload leaves nothing behind: index, timers, tracking, records."""
        self.index.remove(key)
        self._last_reload.pop(key, None)
        self.failures.pop(key, None)
        handle = self._resumes.pop(key, None)
        if handle is not None:
            handle.cancel()
        tracked = self._tracking.pop(key, None)
        if tracked is not None:
            tracked[3].cancel()

    async def _consume_namespaces(self, refl: Reflector[projections.Object]) -> None:
        async for ev in refl.events():
            if ev.object is None:
                continue
            if ev.type is EventType.DELETED:
                self._selected_namespaces.discard(ev.object.metadata.name)
            else:
                self._selected_namespaces.add(ev.object.metadata.name)

    async def _consume_configs(self, refl: Reflector[ConfigEntry]) -> None:
        # a restarted consumer of a synced reflector is past its initial list
        initial = not refl.synced.is_set()
        resource_type = refl.resource.plural
        async for ev in refl.events():
            if ev.type is EventType.SYNCED:
                initial = False
                continue
            try:
                await self._on_config(ev, resource_type, initial=initial)
            except Exception as exc:  # noqa: BLE001 - one bad object never stops the others
                self._object_failed("config", ev.key, exc)

    async def _on_config(
        self, ev: ReflectorEvent[ConfigEntry], resource_type: str, *, initial: bool
    ) -> None:
        self.metrics.events_received.labels(
            event_type=_EVENT_NAMES[ev.type], resource_type=resource_type
        ).inc()
        change = self._change_for(ev, initial=initial)
        if change is None:
            if ev.type is EventType.MODIFIED:
                self.metrics.skipped.labels(reason="no_data_change").inc()
            return
        self.stats.changes += 1
        observed = time.monotonic()
        self.metrics.events_processed.labels(
            event_type=change.event.value, resource_type=resource_type, result="success"
        ).inc()
        self._log_change("change detected", change, missed_while_not_watching=ev.synthesized)
        if self.ready.is_set():
            await self._fan_out(change, observed)
        else:
            self._stashed[(change.namespace, change.rtype, change.name)] = (change, observed)

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

    def _change_for(self, ev: ReflectorEvent[ConfigEntry], *, initial: bool) -> Change | None:
        obj = ev.object
        if obj is None:
            return None
        ns = obj.metadata.namespace
        if not self._namespace_wanted(ns):
            return None
        opts = self.options
        if obj.rtype is ResourceType.SECRETPROVIDERCLASS:
            # only updates of a pod status count (v1): creates and deletes are ignored
            if ev.type is not EventType.MODIFIED or not obj.name:
                return None
            if ev.old is not None and ev.old.hash == obj.hash and ev.old.hash:
                return None
            annotations = self._spc_annotations(ns, obj.name)
            return Change(obj.rtype, ns, obj.name, obj.hash, Event.UPDATED, annotations)
        annotations = obj.metadata.annotations
        if ev.type is EventType.MODIFIED:
            if ev.old is not None and ev.old.hash == obj.hash:
                return None  # metadata-only update
            return Change(obj.rtype, ns, obj.name, obj.hash, Event.UPDATED, annotations)
        if ev.type is EventType.ADDED:
            if not opts.reload_on_create:
                return None
            if initial and not opts.sync_after_restart and not ev.synthesized:
                return None  # existed before we started
            return Change(obj.rtype, ns, obj.name, obj.hash, Event.CREATED, annotations)
        if ev.type is EventType.DELETED and opts.reload_on_delete:
            return Change(obj.rtype, ns, obj.name, "", Event.DELETED, annotations)
        return None

    def _namespace_wanted(self, namespace: str) -> bool:
        if self.options.namespaces:
            return namespace in self.options.namespaces
        if namespace in self.options.namespaces_to_ignore:
            return False
        if self._ns_reflector is not None:
            return namespace in self._selected_namespaces
        return True

    # ------------------------------------------------------------------ fan-out

    def _resolve_template(self, workload: planning.Workload) -> planning.Workload:
        """A workloadRef Rollout's pod template is its referenced Deployment's."""
        if not workload.workload_ref:
            return workload
        ref = self.index.workloads.get(
            ObjectKey(WorkloadKind.DEPLOYMENT.value, workload.namespace, workload.workload_ref)
        )
        if ref is None:
            return workload
        return dataclasses.replace(
            workload, template=ref.template, template_changed_at=ref.template_changed_at
        )

    async def _fan_out(self, change: Change, observed: float) -> None:
        """Decide for every candidate workload; queue the reloads. The loop yields to the
        other tasks every few milliseconds, so a change with thousands of candidates (or a
        tenant's many distinct named lists to compile) slows its own fan-out, not the
        probes, watches and writes of everyone else."""
        self._remember_for_optional(change, observed)
        now = int(self.clock())
        matched: list[ObjectKey] = []
        slice_started = time.monotonic()
        for candidate in self.index.candidates(change.namespace, change.rtype, change.name):
            if time.monotonic() - slice_started > FAN_OUT_SLICE:
                await asyncio.sleep(0)
                slice_started = time.monotonic()
            try:
                if self._decide(change, candidate, now):
                    matched.append(candidate.key)
            except Exception as exc:  # noqa: BLE001 - one decision never stops the others
                self._object_failed("decision", candidate.key, exc)
                self._warn_once(
                    candidate,
                    (f"kube-reloader could not decide on this workload: {type(exc).__name__}",),
                    "ReloadError",
                )
        if self.webhook is not None:
            if matched and self.leading.is_set():
                self.webhook.enqueue((change, tuple(matched)))
            return
        for key in matched:
            pending = self.pending.setdefault(key, {})
            if pending:
                self.metrics.coalesced.inc()
            pending[(change.rtype, change.name)] = change
            self._observed_at.setdefault((key, change.rtype, change.name), observed)
            self._schedule(key, self.options.coalesce_window)

    def _decide(self, change: Change, candidate: planning.Workload, now: int) -> bool:
        """Plan `change` for one workload; True when it must reload."""
        workload = self._resolve_template(candidate)
        p = planning.plan(change=change, workload=workload, config=self.options.plan, now=now)
        self._warn_once(workload, p.decision.warnings)
        kind = workload.kind.value
        self.metrics.workloads_scanned.labels(kind=kind).inc()
        self.metrics.decisions.labels(outcome=p.outcome.value, reason=p.decision.reason.value).inc()
        if p.outcome is Outcome.RELOAD:
            self.metrics.workloads_matched.labels(kind=kind).inc()
            return True
        reason = "strategy_not_updated" if p.outcome is Outcome.NO_CONTAINER else p.outcome.value
        self.metrics.skipped.labels(reason=reason).inc()
        self.stats.skipped[p.outcome.value] = self.stats.skipped.get(p.outcome.value, 0) + 1
        log.debug(
            "not reloading",
            extra={"workload": str(workload.key), "resource": str(change),
                   "outcome": p.outcome.value,
                   "reason": "" if change.rtype is ResourceType.SECRET else p.message},
        )  # fmt: skip
        return False

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

    async def _send_webhooks(self) -> None:
        """Webhook mode: one POST per queued change, in order (the queue is bounded: a
        hanging endpoint costs dropped notifications, counted, never memory)."""
        assert self.webhook is not None
        while True:
            change, workloads = await self.webhook.next()
            try:
                await self._notify_webhook(change, workloads)
            except Exception as exc:  # noqa: BLE001 - one notification never stops the sender
                self._object_failed("webhook", change, exc)

    async def _notify_webhook(self, change: Change, workloads: tuple[ObjectKey, ...]) -> None:
        assert self.webhook is not None
        if await self.webhook.notify():
            self.stats.webhooks += 1
            self.metrics.side_channel.labels(channel="webhook", result="success").inc()
            self.metrics.reload_executed.labels(success="true").inc()
            self.metrics.action.labels(workload_kind="webhook", result="success").inc()
            log.info(
                "webhook sent instead of reloading",
                extra={"resource": str(change), "workloads": ",".join(map(str, workloads))},
            )
        else:
            self.metrics.side_channel.labels(channel="webhook", result="error").inc()
            self.metrics.errors.labels(type="webhook_send").inc()

    def _warn_shadowed(self, workload: planning.Workload) -> None:
        """One Warning per workload whose pod-template reload annotations can never be used."""
        shadowed = matching.shadowed_template_keys(
            workload.annotations, workload.template.annotations, self.keys
        )
        if shadowed:
            listed = ", ".join(f"{k}={quote(v)}" for k, v in sorted(shadowed.items()))
            self._warn_once(
                workload,
                (
                    f"pod-template annotations {listed} are never used: the workload's own "
                    "metadata has a reload annotation for the same type; move them to the "
                    "workload's metadata",
                ),
            )

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

    # ------------------------------------------------------------------ workers

    async def _worker(self) -> None:
        while True:
            await self.leading.wait()  # standbys keep caches and queue warm, but never write
            key = await self.queue.get()
            queued = self._queued_at.pop(key, None)
            if queued is not None:
                self.metrics.queue_latency.observe(time.monotonic() - queued)
            self.metrics.queue_depth.set(len(self.queue))
            started = time.monotonic()
            result = "success"
            # the write runs as its own task so that losing the lease can cancel it in flight
            write = self.supervisor.task(f"reconcile/{key}", self._reconcile(key))
            self._writing.add(write)
            try:
                await asyncio.shield(write)
            except asyncio.CancelledError:
                me = asyncio.current_task()
                if not write.cancelled() or (me is not None and me.cancelling()):
                    write.cancel()
                    raise  # the worker itself is being stopped
                result = "cancelled"
                self._retry(key)  # cancelled on lost leadership: the changes wait, kept
            except Exception as exc:  # noqa: BLE001 - a bug must not kill the worker: retry
                result = "error"
                self.metrics.errors.labels(type="handler_error").inc()
                self._object_failed("reconcile", key, exc)
                workload = self.index.workloads.get(key)
                if workload is not None:
                    self._warn_once(
                        workload,
                        (f"kube-reloader failed to reload this workload and will retry: "
                         f"{type(exc).__name__}",),
                        "ReloadError",
                    )  # fmt: skip
                self._retry(key)
            finally:
                self._writing.discard(write)
                self.queue.done(key)
                self.metrics.reconcile.labels(result=result).inc()
                self.metrics.reconcile_duration.labels(result=result).observe(
                    time.monotonic() - started
                )

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

    def _retry(self, key: ObjectKey) -> None:
        n = self.failures.get(key, 0) + 1
        self.failures[key] = n
        self.stats.retries += 1
        self.metrics.retries.inc()
        self.metrics.deferred.labels(reason="retry_backoff").inc()
        self._queued_at.setdefault(key, time.monotonic())
        self.queue.add_after(key, min(MAX_BACKOFF, 0.2 * 2 ** (n - 1)))

    async def _reconcile(self, key: ObjectKey) -> None:
        changes = self.pending.pop(key, {})
        if not changes:
            return
        try:
            await self._reconcile_changes(key, changes)
        except BaseException:
            # a crash or a cancellation never loses the changes (newer ones that arrived
            # meanwhile win); the worker retries with backoff
            self.pending[key] = {**changes, **self.pending.get(key, {})}
            raise

    async def _reconcile_changes(
        self, key: ObjectKey, changes: dict[tuple[ResourceType, str], Change]
    ) -> None:
        cached = self.index.workloads.get(key)
        if cached is None:
            log.info("workload gone, dropping its reloads", extra={"workload": str(key)})
            self._forget(key, changes)
            return
        workload = self._resolve_template(cached)
        now = int(self.clock())
        plans = [
            planning.plan(change=c, workload=workload, config=self.options.plan, now=now)
            for c in changes.values()
        ]
        todo = [p for p in plans if p.outcome is Outcome.RELOAD]
        if not todo:
            self.failures.pop(key, None)
            self._forget(key, changes)
            return
        if self._defer(key, workload, changes):
            return
        resource = WORKLOAD_RESOURCES[workload.kind]
        when = self._now()
        write_started = time.monotonic()
        if not self.may_write():
            raise asyncio.CancelledError  # no longer leading: the changes are kept, and wait
        try:
            if workload.kind is WorkloadKind.DEPLOYMENT:
                await self._maybe_pause(workload, when)
            if not self.may_write():
                raise asyncio.CancelledError
            answer = await writing.write(
                self.client, workload, todo, field_manager=self.options.field_manager, now=when,
                committed=self._commit_write,
            )  # fmt: skip
            self.stats.patches += 1
        except errors.Conflict as exc:
            # the object changed under us: re-read it, refresh the cache, re-plan at once
            self.pending[key] = {**changes, **self.pending.get(key, {})}
            log.info("conflict, re-reading", extra={"workload": str(key), "error": str(exc)})
            try:
                fresh = await self.client.get(resource, key.name, namespace=key.namespace)
                self._refresh_cache(workload.kind, fresh)
            except errors.NotFound:
                self.pending.pop(key, None)
                return
            except errors.KubeError:
                self._retry(key)
                return
            self.queue.add(key)
            return
        except errors.Transient as exc:
            # put the changes back (newer ones that arrived meanwhile win) and back off
            self.pending[key] = {**changes, **self.pending.get(key, {})}
            log.warning(
                "reload failed, will retry", extra={"workload": str(key), "error": str(exc)}
            )
            self._retry(key)
            return
        except errors.NotFound:
            log.info("workload gone, dropping its reloads", extra={"workload": str(key)})
            self._forget(key, changes)
            return
        except errors.KubeError as exc:
            self.failures.pop(key, None)
            self._forget(key, changes)
            self.stats.failures += 1
            self.metrics.errors.labels(type="update_workload").inc()
            for p in todo:
                self.metrics.reload_done(
                    kind=key.kind, namespace=key.namespace, success=False, seconds=None
                )
                log.error(
                    "reload failed",
                    extra={"workload": str(key), "resource": str(p.change), "error": str(exc)},
                )
                self._event(
                    workload, "Warning", "ReloadFail",
                    f"Update for '{key.name}' of type '{key.kind}' in namespace '{key.namespace}' "
                    f"failed with error {exc}",
                    f"reloader-{p.change.rtype.plural}",
                )  # fmt: skip
            return
        self.failures.pop(key, None)
        self._last_reload[key] = time.monotonic()
        if answer is not None and answer.get("kind") == workload.kind.value:
            self._refresh_cache(workload.kind, answer)
            self._track_rollout(workload, answer)
        accepted = time.monotonic()
        self.metrics.action_latency.labels(workload_kind=key.kind).observe(accepted - write_started)
        for p in todo:
            self.stats.reloads += 1
            c = p.change
            seen = self._observed_at.pop((key, c.rtype, c.name), None)
            self.metrics.reload_done(
                kind=key.kind,
                namespace=key.namespace,
                success=True,
                seconds=None if seen is None else accepted - seen,
            )
            self._log_change("reloaded workload", c, workload=str(key), reason=p.message)
            self._event(
                workload, "Normal", "Reloaded",
                f"Changes detected in '{c.name}' of type '{c.rtype.value}' in namespace "
                f"'{c.namespace}', Updated '{key.name}' of type '{key.kind}' in namespace "
                f"'{key.namespace}'",
                f"reloader-{c.rtype.plural}",
            )  # fmt: skip
            if self.alerts is not None:
                self.alerts.reloaded(
                    resource=c.name, rtype=c.rtype.value, namespace=c.namespace,
                    workload=key.name, kind=key.kind,
                )  # fmt: skip

    def _defer(
        self,
        key: ObjectKey,
        workload: planning.Workload,
        changes: dict[tuple[ResourceType, str], Change],
    ) -> bool:
        """Apply the rate limits: True when the reload was deferred (its changes kept)."""
        now = time.monotonic()
        wait = limiting.min_interval_wait(
            self._last_reload.get(key), now, self.options.min_interval
        )
        reason = "min_interval"
        if wait <= 0:
            wait = self._bucket.take(now)
            reason = "rate_limit"
        if wait <= 0:
            return False
        self.pending[key] = {**changes, **self.pending.get(key, {})}
        self.metrics.deferred.labels(reason=reason).inc()
        until = self._now() + dt.timedelta(seconds=wait)
        log.info(
            "reload deferred",
            extra={"workload": str(key), "reason": reason, "until": pausing.format_time(until)},
        )
        if reason == "min_interval":
            self._event(
                workload, "Normal", "ReloadDeferred",
                f"Reload of '{key.name}' deferred until {pausing.format_time(until)}: at most one "
                f"reload every {self.options.min_interval:g}s per workload",
                "reloader",
            )  # fmt: skip
        self._schedule(key, wait)
        return True

    def _forget(self, key: ObjectKey, changes: dict[tuple[ResourceType, str], Change]) -> None:
        for rtype, name in changes:
            self._observed_at.pop((key, rtype, name), None)
        self._queued_at.pop(key, None)

    def _refresh_cache(self, kind: WorkloadKind, answer: dict[str, Any]) -> None:
        """The write's answer is the new object: index it now, before its watch event."""
        try:
            obj = msgspec.convert(answer, PROJECTIONS[kind])
        except (msgspec.ValidationError, TypeError):
            return
        self.index.put(workload_entry(kind, obj, self.keys).workload)

    # ------------------------------------------------------------------ rollout tracking

    def _track_rollout(self, workload: planning.Workload, answer: dict[str, Any]) -> None:
        if workload.kind not in (
            WorkloadKind.DEPLOYMENT, WorkloadKind.STATEFULSET, WorkloadKind.DAEMONSET
        ):  # fmt: skip
            return
        generation = int((answer.get("metadata") or {}).get("generation") or 0)
        fresh = self.index.workloads.get(workload.key)
        status = fresh.status if fresh is not None else None
        limit = (
            rollouts.deadline(status) if status is not None else rollouts.DEFAULT_DEADLINE_SECONDS
        )
        previous = self._tracking.pop(workload.key, None)
        if previous is not None:
            previous[3].cancel()  # one timer per workload: a newer reload replaces the old one
        key = workload.key
        timer = asyncio.get_running_loop().call_later(
            limit, lambda: self._rollout_timed_out(key, generation)
        )
        self._tracking[key] = (generation, time.monotonic(), limit, timer)
        if fresh is not None:
            self._check_rollout(fresh)

    def _check_rollout(self, workload: planning.Workload) -> None:
        tracked = self._tracking.get(workload.key)
        if tracked is None or workload.status is None:
            return
        written = tracked[0]
        result = rollouts.state(workload.kind, written, workload.status)
        if result is not rollouts.RolloutState.PROGRESSING:
            self._finish_rollout(workload, result)

    def _rollout_timed_out(self, key: ObjectKey, generation: int) -> None:
        tracked = self._tracking.get(key)
        workload = self.index.workloads.get(key)
        if tracked is None or tracked[0] != generation or workload is None:
            return
        self._finish_rollout(workload, rollouts.RolloutState.STUCK)

    def _finish_rollout(self, workload: planning.Workload, result: rollouts.RolloutState) -> None:
        _written, started, limit, timer = self._tracking.pop(workload.key)
        timer.cancel()
        seconds = time.monotonic() - started
        kind, name = workload.kind.value, workload.name
        self.metrics.rollouts.labels(workload_kind=kind, result=result.value).inc()
        if result is rollouts.RolloutState.COMPLETE:
            self.metrics.rollout_duration.labels(workload_kind=kind).observe(seconds)
            log.info(
                "rollout complete",
                extra={"workload": str(workload.key), "seconds": round(seconds, 2)},
            )
            # no Event for a success: one per reload would double the controller's API writes;
            # the metric and the log line record it, failures get Warning Events
            return
        if result is rollouts.RolloutState.FAILED:
            reason, text = (
                "ReloadRolloutFailed",
                (f"Rollout of '{name}' after the reload failed: progress deadline exceeded"),
            )
        else:
            reason, text = (
                "ReloadRolloutStuck",
                (f"Rollout of '{name}' after the reload is not complete after {limit:.0f}s"),
            )
        log.warning(
            "rollout not complete", extra={"workload": str(workload.key), "result": result.value}
        )
        self._event(workload, "Warning", reason, text, "reloader")
        if self.alerts is not None and self.leading.is_set():
            self.alerts.notify(f"{text} ({kind} in namespace {workload.namespace})")

    # ------------------------------------------------------------------ pause period

    async def _maybe_pause(self, workload: planning.Workload, now: dt.datetime) -> None:
        keys = self.keys
        decision = pausing.plan_pause(
            annotations=dict(workload.annotations), paused=workload.paused, now=now,
            period_key=keys.pause_period, paused_at_key=keys.paused_at,
        )  # fmt: skip
        if decision.action is pausing.PauseAction.INVALID:
            self._warn_once(workload, (decision.message,))
        elif decision.action is pausing.PauseAction.PAUSE:
            await self.client.patch(
                resources.DEPLOYMENTS, workload.name, pausing.pause_patch(keys.paused_at, now),
                namespace=workload.namespace, field_manager=self.options.field_manager,
            )  # fmt: skip
            self.stats.pauses += 1
            self.metrics.pauses.labels(action="pause").inc()
            log.info(
                "paused deployment",
                extra={"workload": str(workload.key), "until": str(decision.resume_at)},
            )
            assert decision.resume_at is not None
            self._schedule_resume(workload.key, decision.resume_at)

    def _track_pause(self, workload: planning.Workload) -> None:
        """Called for every Deployment seen: (re)arm the resume timer of a pause of ours."""
        _due, when = pausing.resume_due(
            annotations=dict(workload.annotations), paused=workload.paused,
            now=self._now(), period_key=self.keys.pause_period,
            paused_at_key=self.keys.paused_at,
        )  # fmt: skip
        if when is None:
            handle = self._resumes.pop(workload.key, None)
            if handle is not None:
                handle.cancel()
            return
        if workload.key not in self._resumes:
            self._schedule_resume(workload.key, when)

    def _schedule_resume(self, key: ObjectKey, when: dt.datetime) -> None:
        old = self._resumes.pop(key, None)
        if old is not None:
            old.cancel()
        delay = max(0.0, (when - self._now()).total_seconds())
        loop = asyncio.get_running_loop()
        self._resumes[key] = loop.call_later(
            delay, lambda: self._spawn(f"resume/{key}", self._resume(key))
        )

    async def _resume(self, key: ObjectKey) -> None:
        self._resumes.pop(key, None)
        if not self.leading.is_set():  # the leader resumes; check again later in case we lead
            self._schedule_resume(key, self._now() + dt.timedelta(seconds=5))
            return
        try:
            obj = await self.client.get(resources.DEPLOYMENTS, key.name, namespace=key.namespace)
            annotations = (obj.get("metadata") or {}).get("annotations") or {}
            paused = bool((obj.get("spec") or {}).get("paused"))
            if not (paused and annotations.get(self.keys.paused_at)):
                return  # resumed by someone else, or not our pause
            if not self.may_write():  # lost the lease while reading: the new leader resumes
                self._schedule_resume(key, self._now() + dt.timedelta(seconds=5))
                return
            await self.client.patch(
                resources.DEPLOYMENTS, key.name, pausing.resume_patch(self.keys.paused_at),
                namespace=key.namespace, field_manager=self.options.field_manager,
            )  # fmt: skip
            self.stats.resumes += 1
            self.metrics.pauses.labels(action="resume").inc()
            log.info("resumed deployment", extra={"workload": str(key)})
        except errors.NotFound:
            return
        except errors.KubeError as exc:
            log.warning("resume failed, retrying", extra={"workload": str(key), "error": str(exc)})
            self._schedule_resume(key, self._now() + dt.timedelta(seconds=5))

    # ------------------------------------------------------------------ events

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
