"""Workers: take a workload's work item, re-plan its changes against the workload's latest
state (level-based: a duplicate or stale change writes nothing), apply the rate limits, write
through the kind's strategy (cancellable when leadership is lost), retry with backoff, and
report one outcome."""

from __future__ import annotations

import asyncio
import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import msgspec

from kube_reloader.core import evicting, limiting, pausing, planning
from kube_reloader.core.objects import ObjectKey, ResourceType
from kube_reloader.core.planning import Outcome
from kube_reloader.core.scheduling import Verdict
from kube_reloader.kube import errors
from kube_reloader.runtime.cache import workload_entry
from kube_reloader.runtime.clock import Clock, utc
from kube_reloader.runtime.coalescing import Coalescer, WorkItem
from kube_reloader.runtime.fencing import Fence
from kube_reloader.runtime.kinds import Kinds
from kube_reloader.runtime.options import Options
from kube_reloader.runtime.pauses import Pauses
from kube_reloader.runtime.reporting import Reporter, log
from kube_reloader.runtime.reverts import Reverts
from kube_reloader.runtime.rotations import Rotations
from kube_reloader.runtime.scheduler import Scheduler
from kube_reloader.runtime.stores import Stores
from kube_reloader.runtime.supervisor import Supervisor
from kube_reloader.runtime.throttling import Throttle
from kube_reloader.runtime.tracking import RolloutTracker
from kube_reloader.runtime.writing import Writer

#: retry backoff: 0.2 s doubling per consecutive failure, at most a minute
BACKOFF_BASE = 0.2
MAX_BACKOFF = 60.0
#: per-pod statuses, no content time: a rotation could not tell old from new
CSI_NOT_FOLLOWED = (
    "kube-reloader.io/strategy: evict does not follow Secrets Store CSI rotations; "
    "not reloaded for them"
)


@dataclass
class Reconciler:
    options: Options
    kinds: Kinds
    clock: Clock
    stores: Stores
    coalescer: Coalescer
    throttle: Throttle
    pauses: Pauses
    tracker: RolloutTracker
    writer: Writer
    fence: Fence
    reporter: Reporter
    supervisor: Supervisor
    #: pod-level reloads (`kube-reloader.io/strategy: evict`)
    rotations: Rotations
    #: template writes watched for a minute, in case they are undone
    reverts: Reverts
    #: when a reload may be written (slots, windows, freeze, breaker, order, Jobs)
    scheduler: Scheduler
    #: consecutive failures per workload, for the backoff
    failures: dict[ObjectKey, int] = field(default_factory=dict, init=False)

    async def worker(self) -> None:
        while True:
            await self.fence.leading.wait()  # standbys keep caches and queue warm, never write
            item = await self.coalescer.get()
            await self.handle(item)

    async def handle(self, item: WorkItem) -> None:
        """Reconcile one item as its own task, so that losing the lease cancels it in flight;
        whatever happens, the item's changes are never lost."""
        key = item.key
        queued = item.queued_at
        now = self.clock.monotonic()
        self.reporter.dequeued(None if queued is None else now - queued, self.coalescer.depth)
        result = "success"
        write = self.supervisor.task(f"reconcile/{key}", self.reconcile(item))
        try:
            if not await self.fence.guarded(write):  # the worker's own cancellation propagates
                result = "cancelled"
                self._put_back(item)  # perhaps cancelled before its first step: keep the changes
                self._retry(key)  # cancelled on lost leadership: the changes wait, kept
        except Exception as exc:  # noqa: BLE001 - a bug must not kill the worker: retry
            result = "error"
            self.reporter.handler_error()
            self.reporter.object_failed("reconcile", key, exc)
            self.scheduler.idle(key)  # a slot it was called for goes to the next in line
            workload = self.stores.workload(key)
            if workload is not None:
                error = type(exc).__name__
                retry = f"kube-reloader failed to reload this workload and will retry: {error}"
                self.reporter.warn_once(workload, (retry,), "ReloadError")
            self._retry(key)
        finally:
            self.coalescer.done(key)
            self.reporter.reconciled(result, self.clock.monotonic() - now)

    def _retry(self, key: ObjectKey) -> None:
        n = self.failures.get(key, 0) + 1
        self.failures[key] = n
        self.reporter.retrying()
        self.coalescer.retry_after(key, limiting.backoff(n - 1, base=BACKOFF_BASE, cap=MAX_BACKOFF))

    async def reconcile(self, item: WorkItem) -> None:
        if not item.changes:
            return
        try:
            await self._reconcile(item)
        except BaseException:
            # a crash or a cancellation never loses the changes (newer ones that arrived
            # meanwhile win); the worker retries with backoff
            self._put_back(item)
            raise

    def _put_back(self, item: WorkItem) -> None:
        item.queued_at = self.clock.monotonic()
        self.coalescer.put_back(item)

    async def _reconcile(self, item: WorkItem) -> None:
        key = item.key
        cached = self.stores.workload(key)
        if cached is None:
            log.info("workload gone, dropping its reloads", extra={"workload": str(key)})
            return
        workload = self.stores.resolve(cached)
        now = int(self.clock.wall())
        plans = [
            planning.plan(
                change=self._current(c), workload=workload, config=self.options.plan, now=now
            )
            for c in item.changes.values()
        ]
        todo = [p for p in plans if p.outcome is Outcome.RELOAD]
        if not todo:
            self.failures.pop(key, None)
            self.scheduler.idle(key)
            return
        kind = self.kinds.get(workload.kind)
        policy, warnings = evicting.policy_of(
            workload.kind,
            workload.annotations,
            self.options.default_strategy,
            evictable=kind is not None and kind.evictable,
        )
        self.reporter.warn_once(workload, warnings)
        if policy is None:  # unreadable: never fall back to a write the user ruled out
            self.failures.pop(key, None)
            self.scheduler.idle(key)
            return
        if self._defer(item, workload):
            return
        verdict = self.scheduler.admit(workload, todo)
        if not verdict.write:
            self._hold(item, verdict)
            return
        self.throttle.take(key)  # admitted: its tokens are spent (a held one spends none)
        written = rolling = False
        try:
            if policy.strategy.pod_level:
                written = rolling = self._rotate(workload, policy, todo)
            else:
                self.rotations.forget(key)  # switched back to patch: a rotation running ends
                written, rolling = await self._write(item, workload, todo)
        finally:
            if not written:
                self.throttle.give_back(key)  # nothing was written: its token was not spent
            self.scheduler.wrote(key, todo, written=written, rolling=rolling)

    def _hold(self, item: WorkItem, verdict: Verdict) -> None:
        """The scheduler holds the reload: its changes wait (newer ones join them), looked at
        again when what it waits for happens, or at the time the scheduler names (its window
        opens, a slot's deadline passes), by the coalescer's timer."""
        self.failures.pop(item.key, None)
        item.queued_at = None
        self.coalescer.put_back(item)
        delay = self.scheduler.wake_after(verdict)
        if delay is not None:
            self.coalescer.wake_at(item.key, delay)

    async def _write(
        self, item: WorkItem, workload: planning.Workload, todo: list[planning.Plan]
    ) -> tuple[bool, bool]:
        """Write the reload through the kind's strategy: (written, its rollout followed)."""
        key = workload.key
        spec = self.kinds[workload.kind]
        when = utc(self.clock)
        write_started = self.clock.monotonic()
        if not self.fence.may_write():
            raise asyncio.CancelledError  # no longer leading: the changes are kept, and wait
        try:
            if spec.pausable:
                await self.pauses.before_write(workload, when)
            if not self.fence.may_write():
                raise asyncio.CancelledError
            answer = await self.writer.reload(workload, todo, now=when, committed=self.fence.commit)
        except errors.Conflict as exc:
            await self._conflicted(item, workload, exc)
            return False, False
        except errors.Transient as exc:
            # put the changes back (newer ones that arrived meanwhile win) and back off
            self._put_back(item)
            log.warning(
                "reload failed, will retry", extra={"workload": str(key), "error": str(exc)}
            )
            self._retry(key)
            return False, False
        except errors.NotFound:
            log.info("workload gone, dropping its reloads", extra={"workload": str(key)})
            return False, False
        except errors.KubeError as exc:
            self.failures.pop(key, None)
            self.reporter.reload_failed(workload, todo, exc)
            return False, False
        return True, self._written(item, workload, todo, answer, write_started)

    async def _conflicted(
        self, item: WorkItem, workload: planning.Workload, exc: errors.Conflict
    ) -> None:
        """The object changed under us: re-read it, refresh the cache, re-plan at once."""
        key = workload.key
        self._put_back(item)
        log.info("conflict, re-reading", extra={"workload": str(key), "error": str(exc)})
        try:
            self.refresh(workload.kind, await self.writer.read(key))
        except errors.NotFound:
            self.coalescer.drop(key)
            return
        except errors.KubeError:
            self._retry(key)
            return
        self.coalescer.requeue(key)
        self.scheduler.again(key)  # re-planned at once: it keeps its turn for a slot

    def _written(
        self,
        item: WorkItem,
        workload: planning.Workload,
        todo: list[planning.Plan],
        answer: dict[str, Any] | None,
        write_started: float,
    ) -> bool:
        """Account for a write the API server accepted; True when its rollout is followed."""
        key = workload.key
        self.failures.pop(key, None)
        self.throttle.reloaded(key)
        if answer is not None:
            generation = (answer.get("metadata") or {}).get("generation")
            self.reverts.written(workload, todo, generation if isinstance(generation, int) else 0)
        rolling = False
        if answer is not None and answer.get("kind") == workload.kind:
            self.refresh(workload.kind, answer)
            if self.kinds[workload.kind].status is not None:
                self.tracker.started(workload, answer)
                rolling = workload.key in self.tracker
        accepted = self.clock.monotonic()
        self.reporter.written(key.kind, accepted - write_started)
        for p in todo:
            seen = item.observed.get((p.change.rtype, p.change.name))
            self.reporter.reloaded(workload, p, None if seen is None else accepted - seen)
        return rolling

    def _rotate(
        self, workload: planning.Workload, policy: evicting.PodPolicy, todo: list[planning.Plan]
    ) -> bool:
        """Hand the reload to a rotation (its pods replaced; the template is not written),
        for the newest of its changes: the pods created before it are replaced. True when
        one was started (or took the change over)."""
        csi = [p for p in todo if p.change.rtype is ResourceType.SECRETPROVIDERCLASS]
        if csi:  # per-pod statuses, no content time: a rotation could not tell old from new
            self.reporter.warn_once(workload, (CSI_NOT_FOLLOWED,))
            todo = [p for p in todo if p not in csi]
            if not todo:
                return False
        if not self.fence.may_write():
            raise asyncio.CancelledError  # no longer leading: the changes are kept, and wait
        written = [self._changed_at(p.change) for p in todo]
        # the API server's time of the newest content write (not capped by this clock: one
        # that lags would leave pods created in between on the old content); else now
        changed_at = max((t for t in written if t is not None), default=self.clock.wall())
        self.rotations.start(workload, policy, todo, changed_at)
        self.failures.pop(workload.key, None)
        self.throttle.reloaded(workload.key)
        return workload.key in self.rotations

    def _current(self, change: planning.Change) -> planning.Change:
        """The change with its resource's content as cached now: a change that waited (a
        window, a freeze, a slot) and was reverted meanwhile writes nothing."""
        if change.event is not planning.Event.UPDATED:
            return change
        if change.rtype is ResourceType.SECRETPROVIDERCLASS:
            return change
        entry = self.stores.config(change.rtype, change.namespace, change.name)
        if entry is None or entry.hash == change.hash:
            return change
        return entry.change(change.event, previous=change.previous)

    def _changed_at(self, change: planning.Change) -> float | None:
        """When the config's content was last written (the API server's whole seconds)."""
        entry = self.stores.config(change.rtype, change.namespace, change.name)
        return None if entry is None else entry.changed_at

    def _defer(self, item: WorkItem, workload: planning.Workload) -> bool:
        """Apply the rate limits: True when the reload was deferred (its changes kept)."""
        wait, reason = self.throttle.wait(item.key)
        if wait <= 0:
            return False
        item.queued_at = None  # queued again when the deferral ends
        self.coalescer.put_back(item)
        until = pausing.format_time(utc(self.clock) + dt.timedelta(seconds=wait))
        self.reporter.deferred(workload, reason, until, self.options.min_interval)
        self.coalescer.schedule(item.key, wait)
        return True

    def refresh(self, kind: str, answer: dict[str, Any]) -> None:
        """The write's answer is the new object: index it now, before its watch event."""
        spec = self.kinds[kind]
        try:
            # through JSON, as watch events are decoded: raw fields (managedFields) cannot be
            # converted from Python objects
            obj = msgspec.json.decode(msgspec.json.encode(answer), type=spec.projection)
        except (msgspec.ValidationError, msgspec.EncodeError, TypeError):
            return
        entry = workload_entry(kind, spec.workload(obj), self.stores.keys, spec.status)
        self.stores.index.put(entry.workload)

    def forget(self, key: ObjectKey) -> None:
        self.failures.pop(key, None)
        self.throttle.forget(key)
        self.rotations.forget(key)
        self.reverts.forget(key)
        self.scheduler.forget(key)
