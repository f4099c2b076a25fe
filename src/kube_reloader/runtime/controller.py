"""The reload controller: wiring only. It builds the rooms in order, each given in its
constructor what it uses and whom it tells, and starts and stops them in order; each room
owns one thing (see docs/architecture.md):

    intake (reflector events -> changes)  ->  fanout (a decision per candidate workload)
      ->  coalescing (one work item per workload)  ->  reconciling (re-plan on the latest
          state, throttling; scheduling: slots, windows, freeze, breaker, order; the kind's
          strategy)  ->  tracking (rollout progress frees the slot)
    resyncing (catch-up at start and on winning the lease; freshness: its look at pods),
    discovery, reports (a reporter per domain over one sink), fencing, supervisor.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kube_reloader.core import planning
from kube_reloader.core.objects import ObjectKey
from kube_reloader.core.planning import Change
from kube_reloader.core.strategies import Compat
from kube_reloader.edges.alerts import AlertSender, WebhookNotifier
from kube_reloader.kube.client import Client
from kube_reloader.metrics import Recorder
from kube_reloader.runtime import sources, writeseam
from kube_reloader.runtime.clock import Clock, SystemClock
from kube_reloader.runtime.coalescing import Coalescer
from kube_reloader.runtime.fanout import FanOut, Webhook
from kube_reloader.runtime.fencing import Fence
from kube_reloader.runtime.freshness import Freshness
from kube_reloader.runtime.intake import Intake
from kube_reloader.runtime.looplag import LoopLag
from kube_reloader.runtime.observing import ControllerCollector
from kube_reloader.runtime.optionalapis import Discovery
from kube_reloader.runtime.options import Options
from kube_reloader.runtime.pauses import Pauses
from kube_reloader.runtime.reconciling import Reconciler
from kube_reloader.runtime.reporting import KubeEvents, Sink, log
from kube_reloader.runtime.reports import Reports
from kube_reloader.runtime.resyncing import Resync
from kube_reloader.runtime.reverts import Reverts
from kube_reloader.runtime.rotations import Rotations
from kube_reloader.runtime.scheduler import Scheduler
from kube_reloader.runtime.stores import Stores
from kube_reloader.runtime.supervisor import Supervisor
from kube_reloader.runtime.throttling import Throttle
from kube_reloader.runtime.tracking import RolloutTracker
from kube_reloader.runtime.writing import KubeWriter, Writer

#: seconds shutdown waits for in-flight writes (a committed Job re-creation gets its own time)
DRAIN_SECONDS = 10.0


class Controller:
    def __init__(
        self,
        client: Client,
        options: Options,
        *,
        clock: Clock | None = None,
        metrics: Recorder | None = None,
        writer: Writer | None = None,
    ) -> None:
        self.client = client
        self.options = options
        clock = self.clock = clock or SystemClock()
        self.metrics = metrics or Recorder(by_namespace=False)
        kinds = self.kinds = options.kinds
        ready = self.ready = asyncio.Event()
        fence = self.fence = Fence()
        self.leading = fence.leading
        #: every background task runs under it: a crash is logged, counted and restarted
        sup = self.supervisor = Supervisor(on_crash=self.metrics.task_crashed)
        events, spawn = KubeEvents(client, kinds, clock, sup.oneshot, fence), sup.oneshot
        v2 = options.plan.compat is Compat.V2  # alerts: started by run()
        sink = Sink(self.metrics, events, fence, spawn, clock, _alerts(options), v2=v2)
        r = self.reports = Reports.over(sink)
        stores = self.stores = Stores(options.plan.match.keys, options.plan.scope)
        self.stats, self.index = r.sink.stats, stores.index
        coalescer = self.coalescer = Coalescer(clock, on_queued=r.queue.queued)
        writer = self.writer = writer or KubeWriter(client, kinds, options.field_manager, v2=v2)
        rate, burst = options.reload_rate, options.reload_burst
        self.throttle = Throttle(clock, min_interval=options.min_interval, rate=rate, burst=burst)
        self.pauses = Pauses(clock, stores.keys, writer, fence, r.rollouts, r.problems, spawn, v2)
        sched = self.scheduler = Scheduler(options, clock, stores, coalescer, r.fleet, r.problems)
        trk = self.tracker = RolloutTracker(clock, r.rollouts, stores.workload, sched.finished)
        rot = self.rotations = Rotations(
            clock, writer, fence, r.rollouts, r.problems, sup, stores.workload, sched.rotation_done
        )
        webhook: Webhook | None = WebhookNotifier(u) if (u := options.webhook_url) else None
        told = (r.changes, r.queue, r.reloads, r.webhooks, r.problems)
        self.fanout = FanOut(options, clock, stores, coalescer, fence, *told, webhook)
        rev = self.reverts = Reverts(clock, r.reloads, options.plan.strategy)
        self.reconciler = Reconciler(
            *(options, kinds, clock, stores, coalescer, self.throttle, self.pauses, trk, writer),
            *(fence, r.queue, r.reloads, r.problems, sup, rot, rev, sched),
        )
        # the one cycle (an optional kind's list ends -> the catch-up, which asks the intake's
        # filter) goes through the controller's own `_optional_synced` (called once run() runs)
        self.intake = Intake(
            *(options, clock, stores, r.changes, r.problems, sup, ready),
            fan_out=self.fanout.fan_out,
            workload_seen=self._workload_seen,
            workload_gone=self._workload_gone,
            optional_synced=self._optional_synced,
            namespace_changed=sched.namespace_changed,
        )
        fresh = Freshness(clock, writer, fence, r.changes, r.problems, sup, self._catch_up)
        self.resync = Resync(
            *(options, kinds, clock, stores, coalescer, fence, r.changes, r.problems, ready),
            *(self.intake.namespace_wanted, sched.adopt, fresh),
        )
        self.discovery = Discovery(client, options, stores, self.intake, sup)
        self.metrics.loop_registry.register(ControllerCollector(self))

    # -- leadership (called by the manager's elector, synchronously) ------------------------
    def start_leading(self) -> None:
        self.fence.start_leading()

    def stop_leading(self) -> None:
        self.fence.stop_leading()

    def may_write(self) -> bool:
        return self.fence.may_write()

    @property
    def alerts(self) -> AlertSender | None:
        return self.reports.sink.alerts

    @property
    def pending(self) -> int:
        return len(self.coalescer)

    def all_reflectors(self) -> list[Any]:
        return self.stores.all_reflectors()

    def fleet(self) -> tuple[int, dict[str, int]]:
        self.scheduler.expire_due()  # a slot past its deadline is not counted as in flight
        return len(self.scheduler.in_flight), self.scheduler.counts()

    async def reconcile_missed(self) -> int:
        return await self.resync.reconcile_missed()

    # -- wiring between rooms ---------------------------------------------------------------
    def _workload_seen(self, workload: planning.Workload) -> None:
        self.fanout.warn_shadowed(workload)
        self.reverts.observe(workload)
        if workload.key in self.tracker:
            self.tracker.observe(workload)
        self.scheduler.observe(workload)
        spec = self.kinds.get(workload.kind)
        if spec is not None and spec.pausable:
            self.pauses.observe(workload)

    def _workload_gone(self, key: ObjectKey) -> None:
        """A deleted workload leaves nothing behind: timers, tracking, records."""
        self.reconciler.forget(key)
        self.pauses.forget(key)
        self.tracker.forget(key)

    def _catch_up(self, key: ObjectKey, change: Change) -> None:
        """A change the catch-up's look at the pods found missed: queued as the catch-up
        queues (after the coalescing window)."""
        self.coalescer.add(key, change, None, self.options.coalesce_window)

    async def _optional_synced(self) -> None:
        """An optional kind finished its list after readiness: replay, then catch up."""
        await self.fanout.replay()
        if self.options.reconcile_on_start and self.fanout.webhook is None:
            await self.reconcile_missed()

    async def run(self, stop: asyncio.Event) -> None:
        """Run until `stop` is set; then stop taking work and finish in-flight writes."""
        sources.build(self.client, self.options, self.stores)
        opts, intake, sup = self.options, self.intake, self.supervisor
        alerts = self.reports.sink.alerts
        if alerts is not None:
            alerts.start()
            sup.spawn("alerts", alerts.run)
        if self.fanout.webhook is not None:
            sup.spawn("webhook", self.fanout.send_webhooks)
        for r in self.stores.workloads:
            intake.watch(r, intake.consume_workloads)
        for c in self.stores.configs:
            intake.watch(c, intake.consume_configs)
        if self.stores.namespaces is not None:
            intake.watch(self.stores.namespaces, intake.consume_namespaces)
        await self.discovery.start()
        for i in range(opts.workers):
            sup.spawn(f"worker@{i}", self.reconciler.worker)
        if opts.reconcile_on_start and self.fanout.webhook is None:
            sup.spawn("catch-up", self.resync.loop)
        started = self.clock.monotonic()
        sup.spawn("sync", lambda: self._synced(started))
        sup.spawn("loop-lag", LoopLag(self.clock, self.reports.queue.loop_lag).run)
        await stop.wait()
        await self._stop()

    async def _synced(self, started: float) -> None:
        await self.intake.synced()  # the initial LISTs' garbage goes back to the OS there
        seconds = round(self.clock.monotonic() - started, 3)
        configs = sum(len(r.store) for r in self.stores.configs)
        extra = {"seconds": seconds, "workloads": len(self.index), "configs": configs}
        log.info("caches synced", extra=extra)

    async def _stop(self) -> None:
        log.info(
            "stopping",
            extra={"in_flight": self.coalescer.active, "queued": self.coalescer.depth},
        )
        self.pauses.close()
        self.tracker.close()
        self.coalescer.close()
        # let in-flight writes finish (bounded), then cancel everything else; a Job deleted
        # and not yet re-created gets the time its re-creation may take
        started = self.clock.monotonic()
        while self.coalescer.active:
            waited = self.clock.monotonic() - started
            if waited > DRAIN_SECONDS and (
                not self.fence.committed or waited > writeseam.JOB_RECREATE_SECONDS
            ):
                break
            await asyncio.sleep(0.05)
        alerts = self.reports.sink.alerts
        if alerts is not None:
            await alerts.drain()
        await self.supervisor.close()
        if alerts is not None:
            await alerts.stop()
        if self.fanout.webhook is not None:
            await self.fanout.webhook.close()


def _alerts(options: Options) -> AlertSender | None:
    """The alert sender the options ask for (not started), or None."""
    a = options.alerts
    if a is None:
        return None
    proxy = a.proxy or None
    return AlertSender(
        url=a.url,
        sink=a.sink,
        additional_info=a.additional_info,
        proxy=proxy,
        structured=a.structured,
    )
