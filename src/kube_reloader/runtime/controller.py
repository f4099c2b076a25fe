"""The reload controller: reflectors feed caches, changes fan out to workloads, workers patch.

Data flow:
1. Reflectors mirror ConfigMaps and Secrets (reduced to hashes at decode time) and the
   watched workload kinds (reduced to the core's `Workload` value), per watched namespace.
2. After the initial sync, a content change (hash differs), a creation (with
   `--reload-on-create`) or a deletion (with `--reload-on-delete`) becomes a `core.Change`.
3. The change fans out through the reverse index to candidate workloads; `core.planning.plan`
   decides for each; every workload that must change is queued by key with its changes.
4. A worker takes a workload key, re-plans all its pending changes against the latest cached
   workload (level-based: a duplicate or stale change writes nothing), merges them into one
   strategic-merge patch (field manager `Reloader`), applies it, records Events and logs, and
   updates the cache from the patch answer. Transient failures back off and retry; nothing
   seen is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import msgspec

from kube_reloader.core import planning
from kube_reloader.core.annotations import Keys
from kube_reloader.core.objects import ObjectKey, ResourceType, WorkloadKind
from kube_reloader.core.planning import Change, Event, Outcome
from kube_reloader.core.strategies import PatchType
from kube_reloader.kube import errors, events, projections, resources
from kube_reloader.kube.client import Client
from kube_reloader.kube.client import PatchType as WirePatchType
from kube_reloader.kube.watching import EventType, Reflector, ReflectorEvent
from kube_reloader.runtime.cache import (
    ConfigEntry,
    WorkloadEntry,
    WorkloadIndex,
    configmap_entry,
    secret_entry,
    workload_entry,
)
from kube_reloader.runtime.options import Options
from kube_reloader.runtime.queueing import WorkQueue

log = logging.getLogger(__name__)


CONTENT_TYPES: dict[ResourceType, type[Any]] = {
    ResourceType.CONFIGMAP: projections.ConfigMapContent,
    ResourceType.SECRET: projections.SecretContent,
}


def _config_transform(rtype: ResourceType, keys: Keys) -> Callable[[Any], ConfigEntry]:
    def transform(obj: Any) -> ConfigEntry:
        if rtype is ResourceType.CONFIGMAP:
            return configmap_entry(obj, keys)
        return secret_entry(obj, keys)

    return transform


def _workload_transform(kind: WorkloadKind, keys: Keys) -> Callable[[Any], WorkloadEntry]:
    def transform(obj: Any) -> WorkloadEntry:
        return workload_entry(kind, obj, keys)

    return transform


WORKLOAD_RESOURCES = {
    WorkloadKind.DEPLOYMENT: resources.DEPLOYMENTS,
    WorkloadKind.DAEMONSET: resources.DAEMONSETS,
    WorkloadKind.STATEFULSET: resources.STATEFULSETS,
}
_WIRE = {
    PatchType.STRATEGIC: WirePatchType.STRATEGIC,
    PatchType.MERGE: WirePatchType.MERGE,
    PatchType.JSON: WirePatchType.JSON,
}
MAX_BACKOFF = 60.0


@dataclass
class Stats:
    """Counters the controller keeps about itself (exported as metrics later)."""

    changes: int = 0
    reloads: int = 0
    failures: int = 0
    retries: int = 0
    patches: int = 0
    skipped: dict[str, int] = field(default_factory=dict)


class Controller:
    def __init__(
        self,
        client: Client,
        options: Options,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.options = options
        self.clock = clock
        self.keys = options.plan.match.keys
        self.index = WorkloadIndex(self.keys)
        self.queue: WorkQueue[ObjectKey] = WorkQueue()
        self.pending: dict[ObjectKey, dict[tuple[ResourceType, str], Change]] = {}
        self.failures: dict[ObjectKey, int] = {}
        self.stats = Stats()
        self.ready = asyncio.Event()
        self._stashed: dict[tuple[str, ResourceType, str], Change] = {}
        self._config_reflectors: list[Reflector[ConfigEntry]] = []
        self._workload_reflectors: list[Reflector[WorkloadEntry]] = []
        self._ns_reflector: Reflector[projections.Object] | None = None
        self._selected_namespaces: set[str] = set()
        self._warned: set[tuple[ObjectKey, str]] = set()
        self._tasks: list[asyncio.Task[None]] = []

    # ------------------------------------------------------------------ lifecycle

    def _scopes(self) -> list[str | None]:
        return list(self.options.namespaces) if self.options.namespaces else [None]

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
                        transform=_config_transform(rtype, keys),
                    )
                )
            for kind in self.options.workload_kinds:
                self._workload_reflectors.append(
                    Reflector(
                        self.client,
                        WORKLOAD_RESOURCES[kind],
                        type=projections.Workload,
                        namespace=ns,
                        transform=_workload_transform(kind, keys),
                    )
                )
        if self.options.namespace_selector and not self.options.namespaces:
            self._ns_reflector = Reflector(
                self.client,
                resources.NAMESPACES,
                type=projections.Object,
                label_selector=self.options.namespace_selector,
            )

    async def run(self, stop: asyncio.Event) -> None:
        """Run until `stop` is set; then stop taking work and finish in-flight patches."""
        self._build_reflectors()
        consumers: list[Coroutine[Any, Any, None]] = [
            self._consume_workloads(r) for r in self._workload_reflectors
        ]
        consumers += [self._consume_configs(r) for r in self._config_reflectors]
        if self._ns_reflector is not None:
            consumers.append(self._consume_namespaces(self._ns_reflector))
        self._tasks = [asyncio.create_task(c) for c in consumers]
        workers = [asyncio.create_task(self._worker(i)) for i in range(self.options.workers)]
        started = time.monotonic()
        waiter = asyncio.create_task(self._wait_synced(started))
        await stop.wait()
        log.info("stopping", extra={"in_flight": self.queue.active, "queued": len(self.queue)})
        for t in [waiter, *self._tasks]:
            t.cancel()
        self.queue.close()
        # let in-flight patches finish (bounded), then cancel the idle workers
        deadline = time.monotonic() + 10
        while self.queue.active and time.monotonic() < deadline:  # noqa: ASYNC110 - bounded drain
            await asyncio.sleep(0.05)
        for w in workers:
            w.cancel()
        for t in [waiter, *self._tasks, *workers]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t

    async def _wait_synced(self, started: float) -> None:
        reflectors: list[Any] = [*self._workload_reflectors, *self._config_reflectors]
        if self._ns_reflector is not None:
            reflectors.append(self._ns_reflector)
        await asyncio.gather(*(r.synced.wait() for r in reflectors))
        self.ready.set()
        stashed, self._stashed = self._stashed, {}
        for change in stashed.values():
            self._fan_out(change)
        log.info(
            "caches synced",
            extra={
                "seconds": round(time.monotonic() - started, 3),
                "workloads": len(self.index),
                "configs": sum(len(r.store) for r in self._config_reflectors),
            },
        )

    # ------------------------------------------------------------------ consumers

    async def _consume_workloads(self, refl: Reflector[WorkloadEntry]) -> None:
        async for ev in refl.events():
            if ev.type is EventType.DELETED and ev.object is not None:
                self.index.remove(ev.object.workload.key)
            elif ev.type in (EventType.ADDED, EventType.MODIFIED) and ev.object is not None:
                self.index.put(ev.object.workload)

    async def _consume_namespaces(self, refl: Reflector[projections.Object]) -> None:
        async for ev in refl.events():
            if ev.object is None:
                continue
            if ev.type is EventType.DELETED:
                self._selected_namespaces.discard(ev.object.metadata.name)
            else:
                self._selected_namespaces.add(ev.object.metadata.name)

    async def _consume_configs(self, refl: Reflector[ConfigEntry]) -> None:
        initial = True
        async for ev in refl.events():
            if ev.type is EventType.SYNCED:
                initial = False
                continue
            change = self._change_for(ev, initial=initial)
            if change is not None:
                self.stats.changes += 1
                log.info(
                    "change detected",
                    extra={
                        "resource": str(change),
                        "event": change.event.value,
                        "hash": change.hash,
                        "missed_while_not_watching": ev.synthesized,
                    },
                )
                if self.ready.is_set():
                    self._fan_out(change)
                else:
                    self._stashed[(change.namespace, change.rtype, change.name)] = change

    def _change_for(self, ev: ReflectorEvent[ConfigEntry], *, initial: bool) -> Change | None:
        obj = ev.object
        if obj is None:
            return None
        ns = obj.metadata.namespace
        if not self._namespace_wanted(ns):
            return None
        opts = self.options
        annotations = obj.metadata.annotations
        if ev.type is EventType.MODIFIED:
            if ev.old is not None and ev.old.hash == obj.hash:
                return None  # metadata-only update
            return Change(obj.rtype, ns, obj.metadata.name, obj.hash, Event.UPDATED, annotations)
        if ev.type is EventType.ADDED:
            if not opts.reload_on_create:
                return None
            if initial and not opts.sync_after_restart and not ev.synthesized:
                return None  # existed before we started
            return Change(obj.rtype, ns, obj.metadata.name, obj.hash, Event.CREATED, annotations)
        if ev.type is EventType.DELETED and opts.reload_on_delete:
            return Change(obj.rtype, ns, obj.metadata.name, "", Event.DELETED, annotations)
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

    def _fan_out(self, change: Change) -> None:
        now = int(self.clock())
        for workload in self.index.candidates(change.namespace, change.rtype, change.name):
            p = planning.plan(change=change, workload=workload, config=self.options.plan, now=now)
            self._warn_once(workload, p.decision.warnings)
            if p.outcome is Outcome.RELOAD:
                self.pending.setdefault(workload.key, {})[(change.rtype, change.name)] = change
                self.queue.add(workload.key)
            else:
                self.stats.skipped[p.outcome.value] = self.stats.skipped.get(p.outcome.value, 0) + 1
                log.debug(
                    "not reloading",
                    extra={"workload": str(workload.key), "resource": str(change),
                           "outcome": p.outcome.value, "reason": p.message},
                )  # fmt: skip

    def _warn_once(self, workload: planning.Workload, warnings: tuple[str, ...]) -> None:
        for text in warnings:
            marker = (workload.key, text)
            if marker in self._warned:
                continue
            self._warned.add(marker)
            log.warning(
                "bad reload annotation", extra={"workload": str(workload.key), "problem": text}
            )
            self._spawn_event(workload, "Warning", "ReloadAnnotationInvalid", text, "reloader")

    # ------------------------------------------------------------------ workers

    async def _worker(self, n: int) -> None:
        while True:
            key = await self.queue.get()
            try:
                await self._reconcile(key)
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug must not kill the worker: log, back off, retry
                log.exception("reconcile crashed", extra={"workload": str(key)})
                self._retry(key)
            finally:
                self.queue.done(key)

    def _retry(self, key: ObjectKey) -> None:
        n = self.failures.get(key, 0) + 1
        self.failures[key] = n
        self.stats.retries += 1
        self.queue.add_after(key, min(MAX_BACKOFF, 0.2 * 2 ** (n - 1)))

    async def _reconcile(self, key: ObjectKey) -> None:
        changes = self.pending.pop(key, {})
        if not changes:
            return
        workload = self.index.workloads.get(key)
        if workload is None:
            log.info("workload gone, dropping its reloads", extra={"workload": str(key)})
            return
        now = int(self.clock())
        plans = [
            planning.plan(change=c, workload=workload, config=self.options.plan, now=now)
            for c in changes.values()
        ]
        todo = [p for p in plans if p.outcome is Outcome.RELOAD]
        if not todo:
            self.failures.pop(key, None)
            return
        resource = WORKLOAD_RESOURCES[workload.kind]
        try:
            answer: dict[str, Any] | None = None
            for ptype, body in planning.combine(todo):
                answer = await self.client.patch(
                    resource, key.name, body, namespace=key.namespace,
                    patch_type=_WIRE[ptype], field_manager=self.options.field_manager,
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
            return
        except errors.KubeError as exc:
            self.failures.pop(key, None)
            self.stats.failures += 1
            for p in todo:
                log.error(
                    "reload failed",
                    extra={"workload": str(key), "resource": str(p.change), "error": str(exc)},
                )
                self._spawn_event(
                    workload, "Warning", "ReloadFail",
                    f"Update for '{key.name}' of type '{key.kind}' in namespace '{key.namespace}' "
                    f"failed with error {exc}",
                    f"reloader-{p.change.rtype.plural}",
                )  # fmt: skip
            return
        self.failures.pop(key, None)
        if answer is not None:
            self._refresh_cache(workload.kind, answer)
        for p in todo:
            self.stats.reloads += 1
            c = p.change
            log.info(
                "reloaded workload",
                extra={"workload": str(key), "resource": str(c), "event": c.event.value,
                       "hash": c.hash, "reason": p.message},
            )  # fmt: skip
            self._spawn_event(
                workload, "Normal", "Reloaded",
                f"Changes detected in '{c.name}' of type '{c.rtype.value}' in namespace "
                f"'{c.namespace}', Updated '{key.name}' of type '{key.kind}' in namespace "
                f"'{key.namespace}'",
                f"reloader-{c.rtype.plural}",
            )  # fmt: skip

    def _refresh_cache(self, kind: WorkloadKind, answer: dict[str, Any]) -> None:
        """The patch answer is the new object: index it now, before its watch event."""
        try:
            obj = msgspec.convert(answer, projections.Workload)
        except (msgspec.ValidationError, TypeError):
            return
        self.index.put(workload_entry(kind, obj, self.keys).workload)

    def _spawn_event(
        self,
        workload: planning.Workload,
        event_type: str,
        reason: str,
        message: str,
        component: str,
    ) -> None:
        async def send() -> None:
            try:
                await events.record(
                    self.client, kind=workload.kind.value,
                    api_version=WORKLOAD_RESOURCES[workload.kind].api_version,
                    namespace=workload.namespace, name=workload.name, uid=workload.uid,
                    event_type=event_type, reason=reason, message=message, component=component,
                )  # fmt: skip
            except errors.KubeError as exc:
                log.warning("could not record event", extra={"reason": reason, "error": str(exc)})

        task = asyncio.get_running_loop().create_task(send())
        self._tasks.append(task)
        task.add_done_callback(lambda t: self._tasks.remove(t) if t in self._tasks else None)
