"""Prometheus metrics: every Reloader v1 name, type and label, plus kube-reloader's own.

One private registry and one `Recorder`; every name lives in this module (checked by a golden
test). Outside it, only the controller's reporting point (`runtime.reporting`) touches metric
objects; the manager passes the recorder to the API client as its request observer and uses
`set_leader` (checked by tests/unit/test_architecture.py). Reloader's names are kept exactly,
so dashboards and alerts built for Reloader keep working; ours use the `kube_reloader_` prefix.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections import defaultdict
from collections.abc import Sequence

import msgspec

from kube_reloader.core import fairness
from kube_reloader.ctrlmetrics import ControllerRuntime, VersionTwo
from kube_reloader.promseries import Counter, Gauge, Histogram, Registry
from kube_reloader.promtext import ProcessCollector, render

RECONCILE_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
ACTION_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
QUEUE_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
#: Reloader v1's buckets for client-go's request latency
REST_CLIENT_BUCKETS = (0.001, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30)
BY_NAMESPACE = "reloader_reload_executed_total_by_namespace"
#: series of kube_reloader_stale_workloads exported at most (the audit's cardinality cap),
#: shared among namespaces by `core.fairness.water_fill`
MAX_STALE_SERIES = 10_000
#: how late the event loop runs a timer: one bucket edge at 0.25 s, the tenant-proofing bound
LAG_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class Recorder:
    """All metrics of one controller process."""

    def __init__(self, *, by_namespace: bool | None = None, v2: VersionTwo | None = None) -> None:
        """With `v2`, Reloader v2's families: client-go's request latency left out, and
        controller-runtime's (`ctrlmetrics`) for its controllers and Lease."""
        if by_namespace is None:
            by_namespace = os.environ.get("METRICS_COUNT_BY_NAMESPACE") == "enabled"
        self.by_namespace = by_namespace
        self._by_ns: dict[tuple[str, str], float] = defaultdict(float)
        self._lock = threading.Lock()
        r = self.registry = Registry()
        #: collectors that read the controller's state at scrape time: rendered on the event
        #: loop (the rest may be rendered in a worker thread: `promseries` locks them)
        self.loop_registry = Registry()
        r.register(ProcessCollector())

        self._reloader_v1(r)
        self._reloader_v1_events(r)
        self._client_go(r, latency=v2 is None)
        self.ctrl = None if v2 is None else ControllerRuntime(r, v2.controllers, v2.lease)
        self._ours(r)
        self._ours_state(r)

    def _reloader_v1(self, r: Registry) -> None:
        """Reloader v1's families (compat-spec §8.2), named, typed and labelled exactly: reloads,
        reconciles, writes, skips here; the work queue, errors and events next."""
        self.reload_executed = Counter(
            "reloader_reload_executed", "Reloads executed, by success", ["success"], registry=r
        )
        self.reload_executed.labels(success="true")
        self.reload_executed.labels(success="false")
        self.reconcile = Counter(
            "reloader_reconcile", "Reconciles, by result", ["result"], registry=r
        )
        self.reconcile_duration = Histogram(
            "reloader_reconcile_duration_seconds",
            "Reconcile duration",
            ["result"],
            buckets=RECONCILE_BUCKETS,
            registry=r,
        )
        self.action = Counter(
            "reloader_action",
            "Workload writes, by kind and result",
            ["workload_kind", "result"],
            registry=r,
        )
        self.action_latency = Histogram(
            "reloader_action_latency_seconds",
            "Workload write latency",
            ["workload_kind"],
            buckets=ACTION_BUCKETS,
            registry=r,
        )
        self.skipped = Counter(
            "reloader_skipped", "Skipped reloads, by reason", ["reason"], registry=r
        )

    def _reloader_v1_events(self, r: Registry) -> None:
        """Reloader v1's work queue, error, event and workload families (compat-spec §8.2),
        and our count of the queue's reconciles (Reloader v2 counts a change's instead)."""
        self.queue_depth = Gauge("reloader_workqueue_depth", "Work queue depth", registry=r)
        self.queue_adds = Counter("reloader_workqueue_adds", "Work queue adds", registry=r)
        self.queue_latency = Histogram(
            "reloader_workqueue_latency_seconds",
            "Time from queued to picked by a worker",
            buckets=QUEUE_BUCKETS,
            registry=r,
        )
        self.reconciles = Counter(
            "kube_reloader_reconciles",
            "Work items of the write queue reconciled, by result (each take ends in one)",
            ["result"],
            registry=r,
        )
        self.errors = Counter("reloader_errors", "Errors, by type", ["type"], registry=r)
        self.retries = Counter("reloader_retries", "Retried reloads", registry=r)
        self.events_received = Counter(
            "reloader_events_received",
            "Watch events received",
            ["event_type", "resource_type"],
            registry=r,
        )
        self.events_processed = Counter(
            "reloader_events_processed",
            "Changes processed",
            ["event_type", "resource_type", "result"],
            registry=r,
        )
        self.workloads_scanned = Counter(
            "reloader_workloads_scanned", "Workloads examined for a change", ["kind"], registry=r
        )
        self.workloads_matched = Counter(
            "reloader_workloads_matched", "Workloads that matched a change", ["kind"], registry=r
        )

    def _client_go(self, r: Registry, *, latency: bool) -> None:
        """client-go's request metrics, with the labels Reloader v1's adapters give them."""
        self.rest_latency: Histogram | None = None
        self.rest_requests = Counter(
            "rest_client_requests",
            "API server requests (each attempt), by code, method, host",
            ["code", "method", "host"],
            registry=r,
        )
        if not latency:
            return
        self.rest_latency = Histogram(
            "rest_client_request_duration_seconds",
            "API server request duration with its retries (watches excepted), by verb and host",
            ["verb", "host"],
            buckets=REST_CLIENT_BUCKETS,
            registry=r,
        )

    def _ours(self, r: Registry) -> None:
        """kube-reloader's own: reloads, decisions, holds, rollouts."""
        self.reload_latency = Histogram(
            "kube_reloader_reload_latency_seconds",
            "Config change observed to workload write accepted",
            ["workload_kind"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.decisions = Counter(
            "kube_reloader_decisions",
            "Decisions, by outcome and reason",
            ["outcome", "reason"],
            registry=r,
        )
        self.coalesced = Counter(
            "kube_reloader_coalesced", "Changes merged into a reload already pending", registry=r
        )
        self.deferred = Counter(
            "kube_reloader_deferred",
            "Reloads deferred, by reason (rate limits; fleet-safety holds)",
            ["reason"],
            registry=r,
        )
        self.halted = Gauge(
            "kube_reloader_halted",
            "1 while the circuit breaker holds reloads for a resource's content",
            ["namespace", "resource"],
            registry=r,
        )
        self.api_requests = Counter(
            "kube_reloader_api_requests",
            "Kubernetes API requests, by verb and code",
            ["verb", "code"],
            registry=r,
        )
        self.side_channel = Counter(
            "kube_reloader_side_channel",
            "Alerts and webhooks, by channel and result",
            ["channel", "result"],
            registry=r,
        )
        self.pauses = Counter(
            "kube_reloader_pauses", "Deployment pauses and resumes", ["action"], registry=r
        )
        self.rollouts = Counter(
            "kube_reloader_rollouts",
            "Rollouts started by a reload, by outcome",
            ["workload_kind", "result"],
            registry=r,
        )
        self.rollout_duration = Histogram(
            "kube_reloader_rollout_duration_seconds",
            "Reload write to rollout complete",
            ["workload_kind"],
            buckets=(1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800),
            registry=r,
        )

    def _ours_state(self, r: Registry) -> None:
        """kube-reloader's own: leadership, readiness, the audit, tasks, the event loop."""
        self.leader = Gauge(
            "kube_reloader_leader", "1 when this replica holds the lease", registry=r
        )
        self.ready = Gauge("kube_reloader_ready", "1 once the caches are synced", registry=r)
        self.stale_workloads = Gauge(
            "kube_reloader_stale_workloads",
            "1 per workload whose pods predate the last change of a ConfigMap/Secret they "
            "consume that no rule reloads (the staleness audit)",
            ["namespace", "kind", "name", "resource"],
            registry=r,
        )
        self._stale: set[tuple[str, str, str, str]] = set()
        self.task_restarts = Counter(
            "kube_reloader_task_restarts",
            "Background tasks restarted after a crash, by task",
            ["task"],
            registry=r,
        )
        self.evictions = Counter(
            "kube_reloader_evictions",
            "Pod evictions of pod-level reloads, by result",
            ["result"],
            registry=r,
        )
        self.reverted = Counter(
            "kube_reloader_reverted",
            "Template reloads undone within a minute, by workload kind",
            ["workload_kind"],
            registry=r,
        )
        self.loop_lag = Histogram(
            "kube_reloader_event_loop_lag_seconds",
            "How late the event loop ran a timer due now (sampled every 0.1 s while it works, "
            "every second while idle): the longest any one step held the loop",
            buckets=LAG_BUCKETS,
            registry=r,
        )
        self.loop_lag_max = Gauge(
            "kube_reloader_event_loop_lag_max_seconds",
            "The worst event-loop lag of the last minute",
            registry=r,
        )
        self.dropped = Counter(
            "kube_reloader_dropped",
            "Events and metric series left out because their namespace was over its share of "
            "a shared limit, by namespace and what (event, stale_series)",
            ["namespace", "what"],
            registry=r,
        )
        self.object_errors = Counter(
            "kube_reloader_object_errors",
            "Objects whose handling failed unexpectedly (that object skipped), by stage",
            ["stage"],
            registry=r,
        )

    # ------------------------------------------------------------------ domain methods

    def reload_done(
        self, *, kind: str, namespace: str, success: bool, seconds: float | None
    ) -> None:
        label = "true" if success else "false"
        self.reload_executed.labels(success=label).inc()
        self.action.labels(workload_kind=kind, result="success" if success else "error").inc()
        if self.by_namespace:
            with self._lock:
                self._by_ns[(label, namespace)] += 1
        if success and seconds is not None:
            self.reload_latency.labels(workload_kind=kind).observe(seconds)

    def api_request(self, method: str, code: str, host: str) -> None:
        """One attempt of a request (`kube.transport.RequestObserver`); `code` is client-go's
        (`<error>` when nothing answered, `error` in our own counter)."""
        self.rest_requests.labels(code=code, method=method, host=host).inc()
        ours = "error" if code == "<error>" else code
        self.api_requests.labels(verb=method, code=ours).inc()

    def api_request_done(self, verb: str, host: str, seconds: float) -> None:
        """One request, its retries included (`kube.transport.RequestObserver`)."""
        if self.rest_latency is not None:
            self.rest_latency.labels(verb=verb, host=host).observe(seconds)

    def set_leader(self, leading: bool) -> None:
        self.leader.set(1 if leading else 0)
        if self.ctrl is not None:
            self.ctrl.set_leader(leading)

    def task_crashed(self, name: str) -> None:
        """A supervised task crashed; its label drops the per-namespace part of its name."""
        self.task_restarts.labels(task=name.split("@", 1)[0]).inc()

    def event_loop_lag(self, seconds: float, worst: float) -> None:
        """One sample of the event loop's lag, and the worst of the last minute."""
        self.loop_lag.observe(seconds)
        self.loop_lag_max.set(worst)

    def set_stale_workloads(self, series: set[tuple[str, str, str, str]]) -> dict[str, int]:
        """The audit's stale (namespace, kind, name, resource) pairs, set at once (see
        `stale_update`); returns how many of each namespace's were left out."""
        update = self.stale_update(series)
        self.apply_stale(update.remove, update.add)
        return update.left_out

    def stale_update(self, series: set[tuple[str, str, str, str]]) -> StaleUpdate:
        """What makes the stale gauge say `series`: each pair a series of 1, the pairs no
        longer stale removed (the cardinality is what is stale now). At most
        `MAX_STALE_SERIES` are exported, shared fairly among namespaces (each keeps the first
        of its pairs in label order, up to its part); the left out are counted in
        `kube_reloader_dropped_total{what="stale_series"}` now. Apply it with `apply_stale`,
        in parts if it is large."""
        kept, left_out = fairness.fair_subset(series, MAX_STALE_SERIES)
        for ns, n in left_out.items():
            self.dropped.labels(namespace=ns, what="stale_series").inc(n)
        return StaleUpdate(sorted(self._stale - kept), sorted(kept - self._stale), left_out)

    def apply_stale(
        self, remove: Sequence[tuple[str, str, str, str]], add: Sequence[tuple[str, str, str, str]]
    ) -> None:
        for labels in remove:
            if labels in self._stale:
                self.stale_workloads.remove(*labels)
                self._stale.discard(labels)
        for labels in add:
            if labels not in self._stale:
                self.stale_workloads.labels(*labels).set(1)
                self._stale.add(labels)

    def dropped_event(self, namespace: str) -> None:
        self.dropped.labels(namespace=namespace, what="event").inc()

    def exposition(self) -> bytes:
        """The text served on /metrics (with v1's by-namespace family, named exactly)."""
        return self._exposition() + render(self.loop_registry)

    def exposition_soon(self) -> asyncio.Future[bytes]:
        """`exposition`, its costly part (every labelled series: up to 10,000 stale ones,
        ~0.1 s of formatting) in a worker thread so the event loop runs meanwhile; the
        collectors that read the controller's own state (`loop_registry`) on the loop, now.
        A future, not a coroutine: the listener's protocol runs no task."""
        on_loop = render(self.loop_registry)
        loop = asyncio.get_running_loop()
        return loop.run_in_executor(None, lambda: self._exposition() + on_loop)

    def _exposition(self) -> bytes:
        text = render(self.registry)
        if not self.by_namespace:
            return text
        lines = [
            f"# HELP {BY_NAMESPACE} Reloads executed, by success and namespace",
            f"# TYPE {BY_NAMESPACE} counter",
        ]
        with self._lock:
            for (success, ns), value in sorted(self._by_ns.items()):
                lines.append(f'{BY_NAMESPACE}{{namespace="{ns}",success="{success}"}} {value}')
        return text + ("\n".join(lines) + "\n").encode()


class StaleUpdate(msgspec.Struct, frozen=True):
    """The stale gauge's series to remove and to add, and what was left out per namespace."""

    remove: list[tuple[str, str, str, str]]
    add: list[tuple[str, str, str, str]]
    left_out: dict[str, int]


def names(recorder: Recorder) -> list[str]:
    """Every metric family name exposed (for the golden test and the docs)."""
    out = set()
    for line in recorder.exposition().decode().splitlines():
        if line.startswith("# TYPE "):
            out.add(line.split()[2])
    return sorted(out)
