"""What happens to a workload's pods after a reload, reported over the one sink
(`reporting.Sink`): a Deployment paused and resumed (`pauses`), a rollout followed to its end
(`tracking`: `ReloadRolloutFailed`, `ReloadRolloutStuck`), and a pod-level reload (`rotations`,
`inplacing`): each eviction, its end (one `Reloaded` per change) or its failure."""

from __future__ import annotations

from kube_reloader.core import planning, rollouts
from kube_reloader.core.objects import ObjectKey
from kube_reloader.core.planning import Plan
from kube_reloader.ctrlmetrics import PAUSES
from kube_reloader.runtime.reporting import Sink, log, log_change

#: how a pod-level reload is said in its Events, by strategy
_DONE = {"evict": "replaced", "restart-in-place": "restarted", "signal": "signalled"}
_BY = {"evict": "by eviction", "restart-in-place": "in place", "signal": "by signal"}


class RolloutReports:
    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.metrics = sink.metrics
        self.stats = sink.stats

    def paused(self, key: ObjectKey, until: str) -> None:
        """A pause written and its resume scheduled (under v2: a reconcile of its
        `deployment` controller that requeues after the period)."""
        self.stats.pauses += 1
        self.metrics.pauses.labels(action="pause").inc()
        self._pauses_reconciled("requeue_after", 0.0)
        log.info("paused deployment", extra={"workload": str(key), "until": until})

    def resumed(self, key: ObjectKey, seconds: float) -> None:
        self.stats.resumes += 1
        self.metrics.pauses.labels(action="resume").inc()
        self._pauses_reconciled("success", seconds)
        log.info("resumed deployment", extra={"workload": str(key)})

    def resume_failed(self, key: ObjectKey, error: str, seconds: float) -> None:
        self._pauses_reconciled("error", seconds)
        log.warning("resume failed, retrying", extra={"workload": str(key), "error": error})

    def _pauses_reconciled(self, result: str, seconds: float) -> None:
        """A reconcile of v2's `deployment` controller: the Deployment's event queued it."""
        ctrl = self.metrics.ctrl
        if self.sink.v2_leading() and ctrl is not None:
            ctrl.passed(PAUSES, result, seconds, again=result == "error")

    def rollout_finished(
        self,
        workload: planning.Workload,
        result: rollouts.RolloutState,
        seconds: float,
        limit: float,
    ) -> None:
        kind, name = str(workload.kind), workload.name
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
            reason = "ReloadRolloutFailed"
            text = f"Rollout of '{name}' after the reload failed: progress deadline exceeded"
        else:
            reason = "ReloadRolloutStuck"
            text = f"Rollout of '{name}' after the reload is not complete after {limit:.0f}s"
        log.warning(
            "rollout not complete", extra={"workload": str(workload.key), "result": result.value}
        )
        self.sink.event(workload, "Warning", reason, text, "reloader")
        self.sink.notify(f"{text} ({kind} in namespace {workload.namespace})")

    def eviction(self, workload: planning.Workload, pod: str, result: str, error: str) -> None:
        self.metrics.evictions.labels(result=result).inc()
        extra = {"workload": str(workload.key), "pod": pod, "result": result}
        if error:
            extra["error"] = error
        log.info("pod eviction", extra=extra)

    def rotation_done(
        self,
        workload: planning.Workload,
        plans: list[Plan],
        pods: int,
        seconds: float,
        how: str = "evict",
    ) -> None:
        """Every pod older than the change was replaced (or reloaded in place, `how`): one
        reload (of each change)."""
        key = workload.key
        self.stats.reloads += 1
        self.sink.holds.release(key)
        for p in plans:
            c = p.change
            self.metrics.reload_done(
                kind=key.kind, namespace=key.namespace, success=True, seconds=None
            )
            took = round(seconds, 2)
            log_change(
                "reloaded workload", c, workload=str(key), pods=pods, seconds=took, strategy=how
            )
            message = (
                f"Changes detected in '{c.name}' of type '{c.rtype.value}' in namespace "
                f"'{c.namespace}', {_DONE[how]} {pods} pods of '{key.name}' of type "
                f"'{key.kind}' in namespace '{key.namespace}' {_BY[how]} in {seconds:.1f}s"
            )
            self.sink.event(workload, "Normal", "Reloaded", message, f"reloader-{c.rtype.plural}")
            if self.sink.fence.may_write():
                self.sink.alert_reloaded(c, key)

    def rotation_failed(
        self, workload: planning.Workload, reason: str, pods: int, how: str = "evict"
    ) -> None:
        """A replacement did not become available in time: no more evictions for it."""
        key = workload.key
        self.stats.failures += 1
        self.metrics.rollouts.labels(workload_kind=key.kind, result="failed").inc()
        text = f"Reload of '{key.name}' {_BY[how]} stopped after {pods} pods: {reason}"
        log.warning("rotation failed", extra={"workload": str(key), "reason": reason})
        self.sink.event(workload, "Warning", "ReloadRolloutFailed", text, "reloader")
        self.sink.notify(f"{text} ({key.kind} in namespace {key.namespace})")
