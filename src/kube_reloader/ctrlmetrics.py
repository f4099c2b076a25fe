"""controller-runtime's metric families, as Reloader v2 exposes them (`--compat=v2` only).

Reloader v2 runs one controller-runtime controller per kind it watches (`configmap`,
`secret`, `secretproviderclasspodstatus` with CSI, `namespace` with a namespace selector) and
one for its pauses (`deployment`); a dashboard built for v2 reads their reconciles and work
queues here. kube-reloader's pipeline carries the same meaning under the same labels:

- a ConfigMap's (Secret's) **work queue** is the intake's lane of changes waiting to be fanned
  out: an add is a resource put in its lane (one already waiting there is joined, as a
  client-go queue does not add a key twice), the queue duration is the time it waited there;
- its **reconcile** is the fan-out of one change: every candidate workload decided and its
  reload queued (the writes follow in kube-reloader's own write queue, `reloader_workqueue_*`);
  a crash of one is a panic, counted as an error; in webhook mode a change's reconcile is its
  send (a failed attempt an error, queued again);
- the `deployment` controller's reconciles are the pauses' work: a reload that pauses a
  Deployment schedules its resume (`requeue_after`, a delayed add: a retry), a resume is
  a reconcile that succeeded or failed;
- `leader_election_master_status{name}` is 1 while this replica holds the Lease (with HA).

A controller's series are made when it starts: at once, or with an election when this replica
first leads (a v2 standby starts none); only the leader counts (`runtime.counting`).

Names, labels, help texts and buckets are controller-runtime v0.24's.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence

import msgspec

from kube_reloader.promseries import Counter, Gauge, Histogram, Registry

#: controller-runtime's reconcile-time buckets
RECONCILE_TIME_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.15,
    0.2,
    0.25,
    0.3,
    0.35,
    0.4,
    0.45,
    0.5,
    0.6,
    0.7,
    0.8,
    0.9,
    1,
    1.25,
    1.5,
    1.75,
    2,
    2.5,
    3,
    3.5,
    4,
    4.5,
    5,
    6,
    7,
    8,
    9,
    10,
    15,
    20,
    25,
    30,
    40,
    50,
    60,
)
#: client-go's work-queue buckets (10 ns to 1,000 s, each ten times the last, as Go
#: multiplies them: 9.999999999999999e-06 is its fourth)
QUEUE_BUCKETS = tuple(itertools.accumulate(range(11), lambda b, _: b * 10, initial=1e-8))
RESULTS = ("success", "error", "requeue", "requeue_after")
#: the controller of each resource type's reconciles (`ResourceType.value`)
CONTROLLER_OF = {
    "CONFIGMAP": "configmap",
    "SECRET": "secret",
    "SECRETPROVIDERCLASS": "secretproviderclasspodstatus",
}
PAUSES = "deployment"


class VersionTwo(msgspec.Struct, frozen=True):
    """What Reloader v2 would run: its controllers, and the Lease it elects on (None: no
    election, no leader family)."""

    controllers: tuple[str, ...]
    lease: str | None = None

    @classmethod
    def of(
        cls, resources: Sequence[str], *, csi: bool, selector: bool, lease: str | None
    ) -> VersionTwo:
        """v2's controllers for the watched resource types (`ResourceType` values): the
        namespace one with a namespace selector, one per type, and the pauses'."""
        controllers = ["namespace"] if selector else []
        controllers += [CONTROLLER_OF[r] for r in resources if r in CONTROLLER_OF]
        if csi:
            controllers.append(CONTROLLER_OF["SECRETPROVIDERCLASS"])
        return cls((*dict.fromkeys(controllers), PAUSES), lease)


def per_controller(r: Registry, name: str, what: str) -> Counter:
    """controller-runtime's `controller_runtime_<name>_total{controller}` counter of `what`."""
    return Counter(
        f"controller_runtime_{name}",
        f"Total number of {what} per controller",
        ["controller"],
        registry=r,
    )


class ControllerRuntime:
    """The families; each controller's series are made when it starts (`_start_all`)."""

    def __init__(
        self,
        r: Registry,
        controllers: Sequence[str],
        lease: str | None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.controllers = tuple(controllers)
        self._monotonic = monotonic
        #: when each controller's running reconcile began (one worker each)
        self._working: dict[str, float] = {}
        self._reconciles(r)
        self._queues(r)
        self.leader = None
        if lease is not None:
            self.leader = Gauge(
                "leader_election_master_status",
                "Gauge of if the reporting system is master of the relevant lease, 0 indicates "
                "backup, 1 indicates master. 'name' is the string used to identify the lease. "
                "Please make sure to group by name.",
                ["name"],
                registry=r,
            ).labels(name=lease)
            self.leader.set(0)
        #: the controllers' series are made when they start: at once without an election,
        #: else when this replica first leads (a v2 standby runs no controller)
        self.started = False
        if lease is None:
            self._start_all()

    def _reconciles(self, r: Registry) -> None:
        c = ["controller"]
        self.total = Counter(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            ["controller", "result"],
            registry=r,
        )
        self.errors = per_controller(r, "reconcile_errors", "reconciliation errors")
        self.terminal = per_controller(
            r, "terminal_reconcile_errors", "terminal reconciliation errors"
        )
        self.panics = per_controller(r, "reconcile_panics", "reconciliation panics")
        self.timeouts = per_controller(r, "reconcile_timeouts", "reconciliation timeouts")
        self.time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            c,
            buckets=RECONCILE_TIME_BUCKETS,
            registry=r,
        )
        self.max_workers = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            c,
            registry=r,
        )
        self.active = Gauge(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            c,
            registry=r,
        )

    def _queues(self, r: Registry) -> None:
        q = ["controller", "name"]
        self.depth = Gauge(
            "workqueue_depth",
            "Current depth of workqueue by workqueue and priority",
            [*q, "priority"],
            registry=r,
        )
        self.adds = Counter(
            "workqueue_adds", "Total number of adds handled by workqueue", q, registry=r
        )
        self.queue_time = Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            q,
            buckets=QUEUE_BUCKETS,
            registry=r,
        )
        self.work_time = Histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            q,
            buckets=QUEUE_BUCKETS,
            registry=r,
        )
        self.unfinished = Gauge(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been "
            "observed by work_duration. Large values indicate stuck threads. One can deduce "
            "the number of stuck threads by observing the rate at which this increases.",
            q,
            registry=r,
        )
        self.longest = Gauge(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            q,
            registry=r,
        )
        self.retries = Counter(
            "workqueue_retries",
            "Total number of items added to the workqueue with a non-zero delay (rate-limited "
            "requeues, explicit RequeueAfter or AddAfter calls)",
            q,
            registry=r,
        )

    def _start_all(self) -> None:
        self.started = True
        for c in self.controllers:
            self._start(c)

    def _start(self, c: str) -> None:
        """`c`'s series as controller-runtime makes them when it starts (its reconcile time
        and queue depth come with the first reconcile and the first add)."""
        for result in RESULTS:
            self.total.labels(controller=c, result=result)
        for family in (self.errors, self.terminal, self.panics, self.timeouts):
            family.labels(controller=c)
        self.max_workers.labels(controller=c).set(1)
        self.active.labels(controller=c).set(0)
        for queued in (self.adds, self.retries):
            queued.labels(controller=c, name=c)
        for timed in (self.queue_time, self.work_time):
            timed.labels(controller=c, name=c)
        self.unfinished.labels(controller=c, name=c).set_function(lambda: self._running(c))
        self.longest.labels(controller=c, name=c).set_function(lambda: self._running(c))

    def _running(self, c: str) -> float:
        began = self._working.get(c)
        return 0.0 if began is None else max(0.0, self._monotonic() - began)

    # ------------------------------------------------------------------ domain methods

    def queued(self, c: str, depth: int) -> None:
        """A new item in controller `c`'s queue, which now holds `depth`."""
        if self.started and c in self.controllers:
            self.adds.labels(controller=c, name=c).inc()
            self.depth.labels(controller=c, name=c, priority="0").set(depth)

    def taken(self, c: str, waited: float, depth: int) -> None:
        """An item left `c`'s queue after `waited` seconds; its reconcile begins."""
        if self.started and c in self.controllers:
            self.queue_time.labels(controller=c, name=c).observe(max(0.0, waited))
            self.depth.labels(controller=c, name=c, priority="0").set(depth)
            self._working[c] = self._monotonic()
            self.active.labels(controller=c).set(1)

    def reconciled(
        self, c: str, result: str, seconds: float, *, panicked: bool = False, again: bool = False
    ) -> None:
        """A reconcile of `c` ended: `success`, `error`, `requeue_after` (a delayed add, a
        retry); `again`: the item is queued again after a delay (a retry too)."""
        if not self.started or c not in self.controllers:
            return
        self._working.pop(c, None)
        self.active.labels(controller=c).set(0)
        self._ended(c, result, seconds, panicked=panicked, again=again)

    def _ended(
        self, c: str, result: str, seconds: float, *, panicked: bool = False, again: bool = False
    ) -> None:
        self.total.labels(controller=c, result=result).inc()
        self.time.labels(controller=c).observe(max(0.0, seconds))
        self.work_time.labels(controller=c, name=c).observe(max(0.0, seconds))
        if result == "error":
            self.errors.labels(controller=c).inc()
        if again or result == "requeue_after":
            self.retries.labels(controller=c, name=c).inc()
        if panicked:
            self.panics.labels(controller=c).inc()

    def passed(self, c: str, result: str, seconds: float, *, again: bool = False) -> None:
        """An item added to `c`'s queue and reconciled at once, beside its one worker (the
        queue's depth and the worker's gauges left as they are)."""
        if not self.started or c not in self.controllers:
            return
        self.adds.labels(controller=c, name=c).inc()
        self.depth.labels(controller=c, name=c, priority="0")  # made by an add, left as it is
        self.queue_time.labels(controller=c, name=c).observe(0.0)
        self._ended(c, result, seconds, again=again)

    def set_leader(self, leading: bool) -> None:
        if self.leader is not None:
            self.leader.set(1 if leading else 0)
        if leading and not self.started:
            self._start_all()
