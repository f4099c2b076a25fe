"""Intake: reflector events become cache updates and changes, one guarded event at a time.

A content change (hash differs), a creation (with `--reload-on-create`) or a deletion (with
`--reload-on-delete`) of a ConfigMap, Secret or CSI pod status becomes a `core.Change`,
handed to the fan-out — or, before the initial sync, stashed (the latest per resource) until
it completes. The fan-out runs beside the watch consumers, never inside them: changes wait in
a lane per namespace (the latest per resource) and are fanned out lane by lane, in turn, by
one drain task, so a namespace whose changes each cost thousands of decisions (or that changes
hundreds of ConfigMaps at once) delays another namespace's next change by at most one of its
own, and the watch consumers keep up whatever the fan-out costs. Any other event is counted
as Reloader v1 counts it: an update without a data change (`no_data_change`), an event v1
would handle in a namespace not watched, or a creation listed at start
(`ignored_or_not_selected`). Workload events keep the index current and are
passed on to the rooms that follow workloads (rollout tracking, pauses)."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import msgspec

from kube_reloader.core import planning
from kube_reloader.core.objects import ObjectKey, ResourceType
from kube_reloader.core.planning import Change, Event
from kube_reloader.core.strategies import Compat
from kube_reloader.kube import projections
from kube_reloader.kube.watching import EventType, Reflector, ReflectorEvent
from kube_reloader.runtime import memory
from kube_reloader.runtime.cache import ConfigEntry, WorkloadEntry
from kube_reloader.runtime.clock import Clock, Pacer
from kube_reloader.runtime.counting import NO_DATA_CHANGE, NOT_SELECTED, ChangeReports
from kube_reloader.runtime.options import Options
from kube_reloader.runtime.reporting import ProblemReports, log
from kube_reloader.runtime.stores import Stores
from kube_reloader.runtime.supervisor import Supervisor

EVENT_NAMES = {EventType.ADDED: "add", EventType.MODIFIED: "update", EventType.DELETED: "delete"}
#: a time read from managedFields (which a client may write) is taken at most this far ahead
#: of this clock: an API server's clock may run a little ahead, a tenant's forged entry years
MAX_AHEAD_SECONDS = 60.0
FanOutFn = Callable[[Change, float], Awaitable[None]]


@dataclass(eq=False, repr=False)  # state, not a value: compared by identity
class Intake:
    options: Options
    clock: Clock
    stores: Stores
    changes: ChangeReports
    problems: ProblemReports
    supervisor: Supervisor
    ready: asyncio.Event
    #: a change's decisions, one per candidate workload (`fanout.FanOut.fan_out`)
    fan_out: FanOutFn
    #: a workload's new state, for the rooms that follow workloads
    workload_seen: Callable[[planning.Workload], None]
    #: a workload was deleted: nothing of it is kept
    workload_gone: Callable[[ObjectKey], None]
    #: an optional kind finished its list after readiness (replay, then catch up)
    optional_synced: Callable[[], Awaitable[None]]
    #: a namespace's annotations changed (freeze, reload-window)
    namespace_changed: Callable[[str], None]
    _selected_namespaces: set[str] = field(default_factory=set, init=False)
    _stashed: dict[tuple[str, ResourceType, str], tuple[Change, float]] = field(
        default_factory=dict, init=False
    )
    #: changes waiting for their fan-out: a lane per namespace, in turn order
    _lanes: dict[str, dict[tuple[ResourceType, str], tuple[Change, float]]] = field(
        default_factory=dict, init=False
    )
    _draining: bool = field(default=False, init=False)
    #: how many changes of each type wait in the lanes (their work queues' depth)
    _waiting: collections.Counter[ResourceType] = field(
        default_factory=collections.Counter, init=False
    )

    def watch(
        self, refl: Reflector[Any], consume: Callable[[Any], Coroutine[Any, Any, None]]
    ) -> None:
        scope = f"@{refl.namespace}" if refl.namespace else ""
        self.supervisor.spawn(f"watch/{refl.resource.plural}{scope}", lambda: consume(refl))

    async def synced(self) -> None:
        """Wait for every required initial list; then the stashed changes fan out. Automatic
        garbage collections wait meanwhile, then what the lists made is frozen out of them
        and the pages they freed go back to the OS (`runtime.memory`)."""
        memory.defer_collections()
        try:
            await self._initial_lists()
        finally:
            memory.release_free_memory()
        self.stores.settle()
        self.ready.set()
        self.changes.synced()
        stashed, self._stashed = self._stashed, {}
        for change, observed in stashed.values():
            self._deliver(change, observed)

    async def _initial_lists(self) -> None:
        await asyncio.gather(*(r.synced.wait() for r in self.stores.required()))
        policies = self.stores.namespaces
        listed = policies is None or policies.synced.is_set() or policies.forbidden
        while not listed:  # the list, or RBAC saying no: no one event tells both
            await asyncio.sleep(0.1)
            listed = policies is None or policies.synced.is_set() or policies.forbidden
        if policies is not None and not policies.synced.is_set():
            log.warning(
                "namespaces cannot be listed: freeze and reload-window annotations "
                "on namespaces are not read (grant list/watch on namespaces, or set "
                "--namespace-policies=false)"
            )

    def _deliver(self, change: Change, observed: float) -> None:
        """Put `change` in its namespace's lane (joining a change of the same resource still
        waiting there, in its place), and make sure the lanes are being drained."""
        lane = self._lanes.setdefault(change.namespace, {})
        key = (change.rtype, change.name)
        earlier = lane.get(key)
        if earlier is not None:  # seen from before the first, observed at the first
            change, observed = change.since(earlier[0]), earlier[1]
        else:
            self._waiting[change.rtype] += 1
            self.changes.lane_added(change, self._waiting[change.rtype])
        lane[key] = (change, observed)
        if not self._draining:
            self._draining = True
            self.supervisor.oneshot("fan-out", self._drain())

    async def _drain(self) -> None:
        """Fan the waiting changes out, one per namespace in turn, until none waits."""
        try:
            while self._lanes:
                namespace = next(iter(self._lanes))
                lane = self._lanes.pop(namespace)
                key = next(iter(lane))
                change, observed = lane.pop(key)
                if lane:
                    self._lanes[namespace] = lane  # to the back of the turn order
                self._waiting[change.rtype] -= 1
                waited = self.clock.monotonic() - observed
                self.changes.lane_taken(change, waited, self._waiting[change.rtype])
                try:
                    await self.fan_out(change, observed)
                except Exception as exc:  # noqa: BLE001 - one change never stops the others
                    self.problems.object_failed("fan-out", change, exc)
        finally:
            self._draining = False

    @property
    def waiting(self) -> int:
        """Changes waiting for their fan-out."""
        return sum(len(lane) for lane in self._lanes.values())

    async def drained(self) -> None:
        """Wait until no change waits for its fan-out (tests, and an orderly stop)."""
        while self._lanes or self._draining:  # noqa: ASYNC110 - tests and stops poll it
            await asyncio.sleep(0)

    # -- workloads --------------------------------------------------------------------------
    async def consume_workloads(self, refl: Reflector[WorkloadEntry]) -> None:
        optional = refl in self.stores.optional
        pacer = Pacer(self.clock)  # events already buffered are handled without a yield
        async for ev in refl.events():
            await pacer.step()
            try:
                if ev.type is EventType.SYNCED and optional:
                    self.stores.workloads_listed()
                    if self.ready.is_set():
                        await self.optional_synced()
                else:
                    self.on_workload(ev)
            except Exception as exc:  # noqa: BLE001 - one bad object never stops the others
                self.problems.object_failed("workload", ev.key, exc)
                if ev.object is not None:
                    self.problems.warn_once(
                        ev.object.workload,
                        (f"kube-reloader could not handle this object: {type(exc).__name__}",),
                        "ReloadError",
                    )

    def on_workload(self, ev: ReflectorEvent[WorkloadEntry]) -> None:
        if ev.type is EventType.SYNCED:
            self.stores.workloads_listed()
        if ev.object is None:
            return
        if ev.type is EventType.DELETED:
            self.stores.index.remove(ev.object.workload.key)
            self.workload_gone(ev.object.workload.key)
        elif ev.type in (EventType.ADDED, EventType.MODIFIED):
            workload = ev.object.workload
            ahead = self.clock.wall() + MAX_AHEAD_SECONDS
            if workload.template_changed_at is not None and workload.template_changed_at > ahead:
                workload = dataclasses.replace(workload, template_changed_at=ahead)
            self.stores.index.put(workload)
            self.workload_seen(workload)

    # -- namespaces -------------------------------------------------------------------------
    async def consume_namespaces(self, refl: Reflector[projections.Object]) -> None:
        async for ev in refl.events():
            if ev.object is None:
                continue
            name = ev.object.metadata.name
            if ev.type is EventType.DELETED:
                self._selected_namespaces.discard(name)
            else:
                self._selected_namespaces.add(name)
            old = ev.old.metadata.annotations if ev.old is not None else {}
            if ev.type is EventType.MODIFIED and old != ev.object.metadata.annotations:
                self.namespace_changed(name)

    def namespace_wanted(self, namespace: str) -> bool:
        if self.options.namespaces:
            return namespace in self.options.namespaces
        if namespace in self.options.namespaces_to_ignore:
            return False
        if self.options.namespace_selector and self.stores.namespaces is not None:
            return namespace in self._selected_namespaces
        return True

    # -- configs ----------------------------------------------------------------------------
    async def consume_configs(self, refl: Reflector[ConfigEntry]) -> None:
        # a restarted consumer of a synced reflector is past its initial list
        initial = not refl.synced.is_set()
        resource_type = refl.resource.plural
        pacer = Pacer(self.clock)
        async for ev in refl.events():
            await pacer.step()
            if ev.type is EventType.SYNCED:
                initial = False
                continue
            try:
                keep_content_time(refl.store, ev)
                clamp_content_time(refl.store, ev, self.clock.wall() + MAX_AHEAD_SECONDS)
                await self.on_config(ev, resource_type, initial=initial)
            except Exception as exc:  # noqa: BLE001 - one bad object never stops the others
                self.problems.object_failed("config", ev.key, exc)

    async def drain(self, refl: Reflector[Any]) -> None:
        async for _ in refl.events():
            pass

    async def on_config(
        self, ev: ReflectorEvent[ConfigEntry], resource_type: str, *, initial: bool
    ) -> None:
        self.changes.event_received(EVENT_NAMES.get(ev.type, ""), resource_type)
        change = self.triage(ev, initial=initial)
        if not isinstance(change, Change):
            if change == NOT_SELECTED and self._v2_reconciles_unselected(ev, initial=initial):
                self.changes.selector_skipped(ev.object.rtype if ev.object else None)
            self.changes.not_changed(change, resource_type)
            return
        observed = self.clock.monotonic()
        self.changes.change_detected(change, synthesized=ev.synthesized)
        if self.ready.is_set():
            self._deliver(change, observed)
        else:
            key = (change.namespace, change.rtype, change.name)
            earlier = self._stashed.get(key)
            if earlier is not None:  # seen from before the first, observed at the first
                change, observed = change.since(earlier[0]), earlier[1]
            self._stashed[key] = (change, observed)

    def change_for(self, ev: ReflectorEvent[ConfigEntry], *, initial: bool) -> Change | None:
        change = self.triage(ev, initial=initial)
        return change if isinstance(change, Change) else None

    def _v2_reconciles_unselected(self, ev: ReflectorEvent[ConfigEntry], *, initial: bool) -> bool:
        """Under `--compat=v2`, whether v2 would reconcile this event of a namespace that
        `--namespace-selector` leaves out (its predicates do not read the selector; its
        reconcile skips it, counted) — a change but for its namespace."""
        o, obj = self.options, ev.object
        if o.plan.compat is not Compat.V2 or not o.namespace_selector or o.namespaces:
            return False
        if obj is None or obj.metadata.namespace in o.namespaces_to_ignore:
            return False
        return isinstance(self.triage(ev, initial=initial, namespaces=False), Change)

    def triage(
        self, ev: ReflectorEvent[ConfigEntry], *, initial: bool, namespaces: bool = True
    ) -> Change | str:
        """The change an event makes; else why not, as v1 counts it (`NOT_SELECTED`,
        `NO_DATA_CHANGE`, or "" for an event v1 does not handle: not counted). Without
        `namespaces`, as if its namespace were watched."""
        obj = ev.object
        if obj is None:
            return ""
        opts = self.options
        if ev.type is not EventType.MODIFIED:
            if obj.rtype is ResourceType.SECRETPROVIDERCLASS:
                return ""  # v1: creates and deletes of a CSI pod status are ignored
            if not (opts.reload_on_create if ev.type is EventType.ADDED else opts.reload_on_delete):
                return ""
        ns = obj.metadata.namespace
        if namespaces and not self.namespace_wanted(ns):
            return NOT_SELECTED
        if ev.type is EventType.ADDED:
            if initial and not opts.sync_after_restart and not ev.synthesized:
                return NOT_SELECTED  # existed before we started (v1's guard, same count)
            return obj.change(Event.CREATED)
        if ev.type is EventType.DELETED and opts.plan.compat is Compat.V2:
            # v2 filters an ignored object's events, then decides a delete on its name alone
            if obj.metadata.annotations.get(opts.plan.match.keys.ignore) == "true":
                return NOT_SELECTED
            return obj.change(Event.DELETED, {}, hash="")
        if ev.type is EventType.DELETED:
            return obj.change(Event.DELETED, hash="")
        if obj.rtype is ResourceType.SECRETPROVIDERCLASS:
            if not obj.name:
                return ""
            if ev.old is not None and ev.old.hash == obj.hash and ev.old.hash:
                return NO_DATA_CHANGE
            annotations = self.stores.spc_annotations(ns, obj.name)
            return obj.change(Event.UPDATED, annotations)
        if ev.old is not None and ev.old.hash == obj.hash:
            return NO_DATA_CHANGE  # metadata-only update
        return obj.change(Event.UPDATED, previous=None if ev.old is None else ev.old.before)


def keep_content_time(store: dict[Any, ConfigEntry], ev: ReflectorEvent[ConfigEntry]) -> None:
    """A write that left the content alone (a label, an annotation: the same field manager's
    managedFields time moves anyway) keeps the time of the last content change."""
    new, old = ev.object, ev.old
    if ev.type is not EventType.MODIFIED or new is None or old is None:
        return
    moved = old.changed_at is not None and new.changed_at != old.changed_at
    if new.hash == old.hash and moved and store.get(ev.key) is new:
        store[ev.key] = msgspec.structs.replace(new, changed_at=old.changed_at)


def clamp_content_time(
    store: dict[Any, ConfigEntry], ev: ReflectorEvent[ConfigEntry], latest: float
) -> None:
    """A content time later than `latest` (a managedFields entry a client wrote, not the API
    server) is taken as `latest`: nothing sleeps or orders on a tenant's year 9999."""
    new = store.get(ev.key)
    if new is not None and new.changed_at is not None and new.changed_at > latest:
        store[ev.key] = msgspec.structs.replace(new, changed_at=latest)
