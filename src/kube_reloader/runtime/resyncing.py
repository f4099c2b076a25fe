"""The level-based catch-up: at start and each time this replica starts writing (a won
election), reload what changed while no kube-reloader was writing.

The walk is over every workload of the cluster, and tenants choose how many there are and
what they name, so it never holds the event loop: it lets other tasks run every
`clock.STEP_SECONDS` (leases, probes and every namespace's reloads go on meanwhile), visits the
namespaces in turn (one workload of each, round-robin: a namespace with thousands is caught up
beside the others, not before them), and costs each workload the configs that can concern it:
its references, and for a named list the configs of its namespace the list matches, found once
per (namespace, type, list) of the round — never a scan of the whole cache per workload."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from kube_reloader.core import catchup, fairness, planning, scheduling
from kube_reloader.core.kindtraits import traits
from kube_reloader.core.planning import Event
from kube_reloader.runtime.clock import Clock, Pacer
from kube_reloader.runtime.coalescing import Coalescer
from kube_reloader.runtime.counting import ChangeReports
from kube_reloader.runtime.fencing import Fence
from kube_reloader.runtime.freshness import Freshness, Suspect
from kube_reloader.runtime.kinds import Kinds
from kube_reloader.runtime.options import Options
from kube_reloader.runtime.reporting import ProblemReports, log
from kube_reloader.runtime.stores import Names, Stores


@dataclass(eq=False, repr=False)  # state, not a value: compared by identity
class Resync:
    options: Options
    kinds: Kinds
    clock: Clock
    stores: Stores
    coalescer: Coalescer
    fence: Fence
    changes: ChangeReports
    problems: ProblemReports
    ready: asyncio.Event
    #: the namespace filter (`--namespace-selector`, `--namespaces-to-ignore`): the index of a
    #: cluster-wide watch holds every namespace's workloads
    namespace_wanted: Callable[[str], bool]
    #: a rollout in flight found here takes a slot of `--max-concurrent-rollouts`
    adopt: Callable[[planning.Workload], bool]
    #: where changes missed on time alone go to have the workload's pods looked at first
    #: (`freshness.Freshness`, which queues what it finds stale itself); None: they are
    #: caught up at once
    freshness: Freshness | None

    async def loop(self) -> None:
        """Catch up each time this replica starts writing (startup, or a won election)."""
        while True:
            await self.ready.wait()
            await self.fence.leading.wait()
            await self.reconcile_missed()
            await self.fence.following.wait()

    async def reconcile_missed(self) -> int:
        """Queue a reload for every workload whose configs changed while nobody watched;
        returns how many workloads were queued (or have their pods looked at first, see
        `freshness`). Kinds without catch-up (Jobs, CronJobs: their next run reads the
        current content anyway) are left out. Stops early when this replica stops leading
        (the next won election walks again)."""
        now = int(self.clock.wall())
        queued = 0
        names, pacer = Names(self.stores), Pacer(self.clock)
        workloads = list(self.stores.index.workloads.values())
        for key in fairness.fair_order((w.namespace, w.key) for w in workloads):
            if await pacer.step() and not self.fence.leading.is_set():
                log.info("startup reconciliation stopped: no longer leading")
                return queued
            candidate = self.stores.workload(key)  # as it is now: the walk yields
            if candidate is None or not self.namespace_wanted(candidate.namespace):
                continue
            spec = self.kinds.get(candidate.kind)
            if spec is None:
                continue
            self.adopt(candidate)
            if not spec.catch_up and not _held_job(candidate):
                continue
            try:
                queued += await self._catch_up(candidate, now, names, pacer)
            except Exception as exc:  # noqa: BLE001 - one workload never stops the catch-up
                self.problems.object_failed("catch-up", candidate.key, exc)
                error = type(exc).__name__
                unchecked = f"kube-reloader could not check this workload at start: {error}"
                self.problems.warn_once(candidate, (unchecked,), "ReloadError")
        log.info("startup reconciliation done", extra={"workloads_queued": queued})
        return queued

    async def _catch_up(
        self, candidate: planning.Workload, now: int, names: Names, pacer: Pacer
    ) -> int:
        """Queue what one workload missed; 1 when it was queued, else 0 (a workload with
        thousands of references yields between them too)."""
        workload = self.stores.resolve(candidate)
        queued = 0
        on_time: list[Suspect] = []
        for rtype, name in sorted(self.stores.wanted(workload, names)):
            await pacer.step()
            entry = self.stores.config(rtype, workload.namespace, name)
            if entry is None:
                continue
            change = entry.change(Event.UPDATED)
            p = planning.plan(change=change, workload=workload, config=self.options.plan, now=now)
            carried = catchup.carried(p, workload, self.options.plan.strategy)
            missed, why = catchup.due_at_start(
                plan=p,
                carried_hash=carried,
                config_changed_at=entry.changed_at,
                template_changed_at=workload.template_changed_at,
            )
            # a template that records nothing, and time alone: its pods are asked (a
            # pod-level reload's rotation compares its pods with the change itself)
            on_time_only = missed and carried is None and entry.changed_at is not None
            if on_time_only and not p.mode.pod_level and self.freshness is not None:
                on_time.append(Suspect(change, entry.changed_at or 0.0, why))
                continue
            if not missed:
                continue
            self.changes.log_change(
                "reloading a change missed while not watching",
                change,
                workload=str(workload.key),
                reason=why,
            )
            if workload.key not in self.coalescer:
                queued = 1
            self.coalescer.add(workload.key, change, None, self.options.coalesce_window)
        if on_time and self.freshness is not None and self.freshness.check(workload, on_time):
            queued = 1
        return queued


def _held_job(workload: planning.Workload) -> bool:
    """A Job under `job-policy: after-completion` may have been held when the controller
    stopped: its re-creation is caught up like any rollout."""
    if not traits(workload.kind).job:
        return False
    policy, _ = scheduling.job_policy(workload.annotations)
    return policy is scheduling.JobPolicy.AFTER_COMPLETION
