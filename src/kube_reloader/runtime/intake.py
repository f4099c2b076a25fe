"""Watch consumers: reflector events become cache updates and changes, one guarded event at a
time; optional kinds (Argo, DeploymentConfig, CSI) are discovered, watched, and given the
changes they missed while listing."""

from __future__ import annotations

import asyncio
import functools
import time
from typing import Any

import msgspec

from kube_reloader.core.objects import ObjectKey, ResourceType, WorkloadKind
from kube_reloader.core.planning import Change, Event
from kube_reloader.kube import errors, projections, resources
from kube_reloader.kube.resources import Resource
from kube_reloader.kube.watching import EventType, Reflector, ReflectorEvent
from kube_reloader.runtime.base import EVENT_NAMES, WORKLOAD_RESOURCES, log, spc_transform
from kube_reloader.runtime.cache import (
    ConfigEntry,
    WorkloadEntry,
    spc_status_entry,
)
from kube_reloader.runtime.reconciling import Reconciling


class Intake(Reconciling):
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
                namespace=ns, transform=spc_transform(self.keys),
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
            # a status is a config source: one updated before its first list completes would be
            # seen as "added" and ignored, so its list is part of the initial sync
            self._config_reflectors.append(status)
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
            event_type=EVENT_NAMES[ev.type], resource_type=resource_type
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
