"""Workers: take a workload's work item, re-plan its changes against the workload's latest
state (level-based: a duplicate or stale change writes nothing), apply the rate limits, write
through the kind's strategy (cancellable when leadership is lost), and report one outcome.

A reconcile returns what is left to do with the item, a `core.results.Result` (`Done`,
`Hold`, `Defer`, `Retry`, `Requeue`, `Drop`); `Reconciler.apply` alone applies it: the changes
put back or forgotten, the coalescer asked for the timer, the consecutive failures counted or
cleared. An admitted write's slot and token are settled after (a requeue keeps its turn)."""

from __future__ import annotations

import asyncio
import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import msgspec

from kube_reloader.core import evicting, limiting, pausing, planning
from kube_reloader.core.objects import ObjectKey, ResourceType
from kube_reloader.core.planning import Outcome
from kube_reloader.core.results import Defer, Done, Drop, Hold, Requeue, Result, Retry
from kube_reloader.core.scheduling import Hold as Held
from kube_reloader.kube import errors
from kube_reloader.runtime.cache import workload_entry
from kube_reloader.runtime.clock import Clock, utc
from kube_reloader.runtime.coalescing import Coalescer, WorkItem
from kube_reloader.runtime.counting import QueueReports
from kube_reloader.runtime.fencing import Fence
from kube_reloader.runtime.kinds import Kinds
from kube_reloader.runtime.options import Options
from kube_reloader.runtime.pauses import Pauses
from kube_reloader.runtime.reloadreports import ReloadReports
from kube_reloader.runtime.reporting import ProblemReports, log
from kube_reloader.runtime.reverts import Reverts
from kube_reloader.runtime.rotations import Rotations
from kube_reloader.runtime.scheduler import Scheduler
from kube_reloader.runtime.stores import Stores
from kube_reloader.runtime.supervisor import Supervisor
from kube_reloader.runtime.throttling import Throttle
from kube_reloader.runtime.tracking import RolloutTracker
from kube_reloader.runtime.writing import Writer

#: retry backoff: 0.2 s doubling per consecutive failure, at most a minute
BACKOFF_BASE, MAX_BACKOFF = 0.2, 60.0
#: per-pod statuses, no content time: a rotation could not tell old from new
CSI_NOT_FOLLOWED = (
    "kube-reloader.io/strategy: evict does not follow Secrets Store CSI rotations; "
    "not reloaded for them"
)


class Admitted(msgspec.Struct, frozen=True):
    """A write the scheduler admitted, settled once it ends (`Reconciler._settle`)."""

    key: ObjectKey
    todo: list[planning.Plan]
    written: bool = False
    #: its rollout (or rotation) is followed, which frees the slot when it finishes
    rolling: bool = False


@dataclass(eq=False, repr=False)  # state, not a value: compared by identity
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
    queue: QueueReports
    reloads: ReloadReports
    problems: ProblemReports
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

    async def handle(self, item: WorkItem) -> Result:
        """Reconcile one item as its own task, so that losing the lease cancels it in flight;
        whatever happens, the item's changes are never lost. Returns what became of it."""
        key = item.key
        queued = item.queued_at
        now = self.clock.monotonic()
        self.queue.dequeued(None if queued is None else now - queued, self.coalescer.depth)
        outcome = "success"
        result: Result = Retry()
        write = self.supervisor.task(f"reconcile/{key}", self.reconcile(item))
        try:
            if await self.fence.guarded(write):  # the worker's own cancellation propagates
                result = write.result()  # applied by reconcile
            else:
                outcome = "cancelled"
                # cancelled on lost leadership, perhaps before its first step: kept, it waits
                self.apply(item, result)
        except Exception as exc:  # noqa: BLE001 - a bug must not kill the worker: retry
            outcome = "error"
            self._crashed(key, exc)
            # reconcile put the changes back as it crashed: an item with no changes puts
            # nothing back, and only the backoff is applied
            self.apply(WorkItem(key), result)
        finally:
            self.coalescer.done(key)
            self.queue.reconciled(outcome, self.clock.monotonic() - now)
        return result

    def _crashed(self, key: ObjectKey, exc: Exception) -> None:
        self.queue.handler_error()
        self.problems.object_failed("reconcile", key, exc)
        self.scheduler.idle(key)  # a slot it was called for goes to the next in line
        workload = self.stores.workload(key)
        if workload is not None:
            error = type(exc).__name__
            retry = f"kube-reloader failed to reload this workload and will retry: {error}"
            self.problems.warn_once(workload, (retry,), "ReloadError")

    async def reconcile(self, item: WorkItem) -> Result:
        """Reconcile one item and apply its result; an admitted write's slot and token are
        settled after it."""
        if not item.changes:
            return Done(cleared=False)
        try:
            result, admitted = await self._reconcile(item)
            try:
                self.apply(item, result)
            finally:
                if admitted is not None:
                    self._settle(admitted, result)
        except BaseException:
            # a crash or a cancellation never loses the changes (newer ones that arrived
            # meanwhile win); the worker retries with backoff
            self._put_back(item)
            raise
        return result

    def apply(self, item: WorkItem, result: Result) -> None:
        """The one place a reconcile's result is applied: the changes put back (newer ones
        that arrived meanwhile win) or forgotten, the coalescer asked for the timer, the
        consecutive failures counted or cleared."""
        key = item.key
        match result:
            case Done(cleared=cleared):
                if cleared:
                    self.failures.pop(key, None)
            case Hold(after=after):
                self.failures.pop(key, None)
                item.queued_at = None  # queued again when it is woken
                self.coalescer.put_back(item)
                if after is not None:  # else only what it waits for wakes it
                    self.coalescer.wake_at(key, after)
            case Defer(after=after):
                item.queued_at = None  # queued again when the deferral ends
                self.coalescer.put_back(item)
                self.coalescer.schedule(key, after)
            case Retry():
                self._put_back(item)
                n = self.failures[key] = self.failures.get(key, 0) + 1
                self.queue.retrying()
                backoff = limiting.backoff(n - 1, base=BACKOFF_BASE, cap=MAX_BACKOFF)
                self.coalescer.retry_after(key, backoff)
            case Requeue():
                self._put_back(item)
                self.coalescer.requeue(key)
                self.scheduler.again(key)  # re-planned at once: it keeps its turn for a slot
            case Drop():
                self.coalescer.drop(key)
        if not (isinstance(result, Defer) and result.reason == "rate_limit"):
            self.throttle.release(key)  # it waits no longer for a token: out of the line
        self._call_front()

    def _call_front(self) -> None:
        """Wake the front of the rate's line when its token comes (its own deferral may wait
        on a window); one whose changes are gone (not waiting, not in a worker) leaves."""
        while (front := self.throttle.front()) is not None:
            key, wait = front
            if key in self.coalescer:
                self.coalescer.wake_at(key, wait)
                return
            if self.coalescer.handling(key):
                return  # its reconcile ends with its result applied: called again then
            self.throttle.release(key)

    def _put_back(self, item: WorkItem) -> None:
        item.queued_at = self.clock.monotonic()
        self.coalescer.put_back(item)

    def _settle(self, admitted: Admitted, result: Result | None = None) -> None:
        """An admitted write ended: a token not spent goes back (and, for a conflict's
        requeue, its place at the front of the rate's line); the scheduler settles the slot
        (freed, kept for a conflict's requeue, or held while the rollout is followed)."""
        key, written = admitted.key, admitted.written
        if not written:  # a retry's backoff, or no write to come: the place is not kept
            self.throttle.give_back(key, keep_place=isinstance(result, Requeue))
            self._call_front()  # the token is there again for the front
        self.scheduler.wrote(key, admitted.todo, written=written, rolling=admitted.rolling)

    async def _reconcile(self, item: WorkItem) -> tuple[Result, Admitted | None]:
        """Re-plan the item on the latest state and write it if it may be: its result, and
        the write it was admitted for, if any."""
        key = item.key
        cached = self.stores.workload(key)
        if cached is None:
            log.info("workload gone, dropping its reloads", extra={"workload": str(key)})
            return Done(cleared=False), None
        workload = self.stores.resolve(cached)
        now = self.clock.wall()
        plans = [
            planning.plan(
                change=self.stores.current(c), workload=workload, config=self.options.plan, now=now
            )
            for c in item.changes.values()
        ]
        todo = [p for p in plans if p.outcome is Outcome.RELOAD]
        if not todo:
            self.scheduler.idle(key)
            return Done(), None
        policy = todo[0].mode.policy  # (one workload: every plan has its mode)
        self.problems.warn_once(workload, todo[0].mode.warnings)
        if policy is None:  # unreadable: never fall back to a write the user ruled out
            self.scheduler.idle(key)
            return Done(), None
        deferred = self._defer(workload)
        if deferred is not None:
            return deferred, None
        verdict = self.scheduler.admit(workload, todo)
        if not verdict.write:
            # its changes wait (newer ones join them), looked at again when what it waits
            # for happens, or when the scheduler says time alone must (its window opens, a
            # slot's deadline passes), by the coalescer's timer
            reason = verdict.hold or Held.SLOTS
            return Hold(reason, self.scheduler.wake_after(verdict)), None
        self.throttle.take(key)  # admitted: its tokens are spent (a held one spends none)
        try:
            result, written, rolling = await self._reload(item, workload, policy, todo)
        except BaseException:
            self._settle(Admitted(key, todo))  # crashed or cancelled: nothing was written
            raise
        return result, Admitted(key, todo, written, rolling)

    async def _reload(
        self,
        item: WorkItem,
        workload: planning.Workload,
        policy: evicting.PodPolicy,
        todo: list[planning.Plan],
    ) -> tuple[Result, bool, bool]:
        """The admitted reload, by a rotation or a write: (its result, written, its rollout
        or rotation followed)."""
        if policy.strategy.pod_level:
            rotating = self._rotate(workload, policy, todo)
            if rotating is None:
                return Done(cleared=False), False, False
            return Done(), rotating, rotating
        self.rotations.forget(workload.key)  # switched back to patch: a rotation running ends
        return await self._write(item, workload, todo)

    async def _write(
        self, item: WorkItem, workload: planning.Workload, todo: list[planning.Plan]
    ) -> tuple[Result, bool, bool]:
        """Write the reload through the kind's strategy: (its result, written, its rollout
        followed)."""
        key = workload.key
        spec = self.kinds[workload.kind]
        when = utc(self.clock)
        write_started, read = self.clock.monotonic(), self.stores.version(key)  # before it
        if not self.fence.may_write():
            raise asyncio.CancelledError  # no longer leading: the changes are kept, and wait
        try:
            pause = await self.pauses.for_write(workload, when) if spec.pausable else None
            if not self.fence.may_write():
                raise asyncio.CancelledError
            answer = await self.writer.reload(
                workload, todo, now=when, committed=self.fence.commit, pause=pause
            )
        except errors.Conflict as exc:
            return await self._conflicted(workload, exc), False, False
        except errors.Transient as exc:
            # the changes go back (newer ones that arrived meanwhile win), backed off
            log.warning(
                "reload failed, will retry", extra={"workload": str(key), "error": str(exc)}
            )
            return Retry(), False, False
        except errors.NotFound:
            log.info("workload gone, dropping its reloads", extra={"workload": str(key)})
            return Done(cleared=False), False, False
        except errors.KubeError as exc:
            self.reloads.reload_failed(workload, todo, exc, read)
            return Done(), False, False
        return Done(), True, self._written(item, workload, todo, answer, (write_started, read))

    async def _conflicted(self, workload: planning.Workload, exc: errors.Conflict) -> Result:
        """The object changed under us: re-read it, refresh the cache, re-plan at once (its
        changes are put back when the result is applied)."""
        key = workload.key
        log.info("conflict, re-reading", extra={"workload": str(key), "error": str(exc)})
        try:
            self.refresh(workload.kind, await self.writer.read(key))
        except errors.NotFound:
            return Drop()
        except errors.KubeError:
            return Retry()
        return Requeue()

    def _written(
        self,
        item: WorkItem,
        workload: planning.Workload,
        todo: list[planning.Plan],
        answer: dict[str, Any] | None,
        started: tuple[float, str],
    ) -> bool:
        """Account for an accepted write (`started`: when, version read); True: rollout followed."""
        key = workload.key
        self.throttle.reloaded(key)
        self.pauses.written(key)
        if answer is not None:
            generation = (answer.get("metadata") or {}).get("generation")
            self.reverts.written(workload, todo, generation if isinstance(generation, int) else 0)
        (write_started, read), rolling, made = started, False, ""
        if answer is not None and answer.get("kind") == workload.kind:
            meta = answer.get("metadata") or {}  # the version it wrote (a Job made anew: none)
            made = meta.get("resourceVersion", "") if meta.get("uid", "") == workload.uid else ""
            self.refresh(workload.kind, answer)
            if self.kinds[workload.kind].status is not None:
                self.tracker.started(workload, answer)
                rolling = workload.key in self.tracker
        accepted = self.clock.monotonic()
        self.reloads.written(key.kind, accepted - write_started)
        for p in todo:
            seen = item.observed.get((p.change.rtype, p.change.name))
            waited = None if seen is None else accepted - seen
            self.reloads.reloaded(workload, p, waited, read, made)
        return rolling

    def _rotate(
        self, workload: planning.Workload, policy: evicting.PodPolicy, todo: list[planning.Plan]
    ) -> bool | None:
        """Hand the reload to a rotation (its pods replaced; the template is not written),
        for the newest of its changes: the pods created before it are replaced. True when
        one was started (or took the change over); None when none was asked (every change
        was a CSI rotation's)."""
        csi = [p for p in todo if p.change.rtype is ResourceType.SECRETPROVIDERCLASS]
        if csi:  # per-pod statuses, no content time: a rotation could not tell old from new
            self.problems.warn_once(workload, (CSI_NOT_FOLLOWED,))
            todo = [p for p in todo if p not in csi]
            if not todo:
                return None
        if not self.fence.may_write():
            raise asyncio.CancelledError  # no longer leading: the changes are kept, and wait
        written = [self.stores.changed_at(p.change) for p in todo]
        # the API server's time of the newest content write (not capped by this clock: one
        # that lags would leave pods created in between on the old content); else now
        changed_at = max((t for t in written if t is not None), default=self.clock.wall())
        self.rotations.start(workload, policy, todo, changed_at)
        self.throttle.reloaded(workload.key)
        return workload.key in self.rotations

    def _defer(self, workload: planning.Workload) -> Defer | None:
        """Ask the rate limits: a deferral (reported), or None when it may be written now."""
        wait, reason = self.throttle.wait(workload.key)
        if wait <= 0:
            return None
        until = pausing.format_time(utc(self.clock) + dt.timedelta(seconds=wait))
        self.reloads.deferred(workload, reason, until, self.options.min_interval)
        return Defer(reason, wait)

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
        self._call_front()
        self.rotations.forget(key)
        self.reverts.forget(key)
        self.scheduler.forget(key)
