"""What becomes of a planned reload, reported over the one sink (`reporting.Sink`): the
decision for each candidate workload (the fan-out), a deferral by the rate limits, the write,
the reload (its log line, metrics, `Reloaded` Event and alert), a failed one (`ReloadFail`;
Reloader v2's `events.k8s.io/v1` Events and texts under `--compat=v2`), and one undone by
another controller (`ReloadReverted`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kube_reloader.core import planning
from kube_reloader.core.objects import ResourceType
from kube_reloader.core.planning import Outcome, Plan
from kube_reloader.kube import errors
from kube_reloader.runtime.counting import ChangeReports
from kube_reloader.runtime.reporting import Sink, log, log_change

#: the action of Reloader v2's reload Events
V2_ACTION = "Reloading"


class ReloadReports:
    def __init__(self, sink: Sink, changes: ChangeReports) -> None:
        self.sink = sink
        self.metrics = sink.metrics
        self.stats = sink.stats
        #: a failed reload drops its changes, as v1 drops the event after its last attempt
        self.changes = changes
        #: v1's series of each kind listed have been made (`listed`)
        self._listed = False

    def decided(self, workload: planning.Workload, change: planning.Change, p: Plan) -> bool:
        """One candidate decided; whether Reloader v2 would count it matched (it reloads, or
        v2 would find at its write that it already carries the hash: `no_change`)."""
        kind, v2, m = str(workload.kind), self.sink.v2, self.metrics
        m.decisions.labels(outcome=p.outcome.value, reason=p.decision.reason.value).inc()
        v2_decision = p.outcome in (Outcome.RELOAD, Outcome.UP_TO_DATE)
        if not v2 or self.sink.v2_leading():  # v2's standbys run no controller
            if not v2:  # v2 counts every workload of the namespace (`listed_v2`)
                m.workloads_scanned.labels(kind=kind).inc()
            if p.outcome is Outcome.RELOAD or (v2 and v2_decision):
                m.workloads_matched.labels(kind=kind).inc()
            if v2 and p.outcome is Outcome.UP_TO_DATE:  # v2 finds it at its write: no change
                m.action.labels(workload_kind=kind, result="no_change").inc()
                m.action_latency.labels(workload_kind=kind).observe(0.0)
            elif not v2 and p.outcome not in (Outcome.RELOAD, Outcome.SKIPPED):
                m.skipped.labels(reason="strategy_not_updated").inc()  # no container, up to date
        if p.outcome is Outcome.RELOAD:
            return True
        self.stats.skipped[p.outcome.value] = self.stats.skipped.get(p.outcome.value, 0) + 1
        log.debug(
            "not reloading",
            extra={
                "workload": str(workload.key),
                "resource": str(change),
                "outcome": p.outcome.value,
                "reason": "" if change.rtype is ResourceType.SECRET else p.message,
            },
        )
        return v2_decision

    def listed(self, kinds: Iterable[str]) -> None:
        """Reloader v1 lists every kind it reloads on each change and counts each list, empty
        or not: a series of `workloads_scanned`/`_matched` for each (v1 mode; the counts are
        of the workloads decided here, the ones the change can reach). Made once: a series
        stays."""
        if self.sink.v2 or self._listed:
            return
        self._listed = True
        for kind in kinds:
            self.metrics.workloads_scanned.labels(kind=kind)
            self.metrics.workloads_matched.labels(kind=kind)

    def listed_v2(self, kinds: Mapping[str, int]) -> None:
        """Reloader v2 lists every workload of the change's namespace and counts them by
        kind (`kinds`: how many of each the namespace has; v2 mode, on the leader)."""
        if self.sink.v2_leading():
            for kind, n in kinds.items():
                self.metrics.workloads_scanned.labels(kind=kind).inc(n)

    def matched(self, kind: str) -> None:
        """A workload a webhook's body names (v2 mode: nothing else is decided)."""
        if self.sink.v2_leading():
            self.metrics.workloads_matched.labels(kind=kind).inc()

    def deferred(
        self, workload: planning.Workload, reason: str, until: str, min_interval: float
    ) -> None:
        key = workload.key
        self.metrics.deferred.labels(reason=reason).inc()
        if not self.sink.holds.new(key, reason):
            return  # said when the reason began; the counter counts every deferral
        log.info("reload deferred", extra={"workload": str(key), "reason": reason, "until": until})
        if reason == "min_interval":
            message = (
                f"Reload of '{key.name}' deferred until {until}: at most one "
                f"reload every {min_interval:g}s per workload"
            )
            self.sink.event(workload, "Normal", "ReloadDeferred", message, "reloader")

    def written(self, kind: str, seconds: float) -> None:
        self.stats.patches += 1
        self.metrics.action_latency.labels(workload_kind=kind).observe(seconds)

    def reloaded(
        self,
        workload: planning.Workload,
        p: Plan,
        seconds: float | None,
        read: str = "",
        made: str = "",
    ) -> None:
        """A reload was written: its Event regards the workload at the resourceVersion `read`
        before the write (v1's, and v2's for an object it did not update itself: a Job made
        anew, a CronJob's Job) or the one the write `made` (v2's update answers it)."""
        key, c = workload.key, p.change
        version = (made or read) if self.sink.v2 else read
        self.stats.reloads += 1
        self.sink.holds.release(key)
        self.metrics.reload_done(
            kind=key.kind, namespace=key.namespace, success=True, seconds=seconds
        )
        log_change("reloaded workload", c, workload=str(key), reason=p.message)
        if self.sink.v2:
            message = f"Reloaded due to {c.rtype.kind} {c.name} change"
            self.sink.event(workload, "Normal", "Reloaded", message, "reloader", V2_ACTION, version)
        else:
            message = (
                f"Changes detected in '{c.name}' of type '{c.rtype.value}' in namespace "
                f"'{c.namespace}', Updated '{key.name}' of type '{key.kind}' in namespace "
                f"'{key.namespace}'"
            )
            source = f"reloader-{c.rtype.plural}"
            self.sink.event(workload, "Normal", "Reloaded", message, source, version=version)
        self.sink.alert_reloaded(c, key)

    def reload_failed(
        self,
        workload: planning.Workload,
        plans: list[Plan],
        exc: errors.KubeError,
        version: str = "",
    ) -> None:
        """A reload's write failed for good (`version`: the workload's resourceVersion read)."""
        key = workload.key
        self.stats.failures += 1
        if not self.sink.v2:
            self.metrics.errors.labels(type="handler_error").inc()
        for p in plans:  # one per change of the work item
            if self.sink.v2:  # v2: one per decision (a change's, for this workload)
                self.metrics.errors.labels(type="update_workload").inc()
            self.changes.processed(p.change, "dropped")  # v1 drops it after its last attempt
            self.metrics.reload_done(
                kind=key.kind, namespace=key.namespace, success=False, seconds=None
            )
            log.error(
                "reload failed",
                extra={"workload": str(key), "resource": str(p.change), "error": str(exc)},
            )
            self._failed_event(workload, p.change, exc, version)

    def _failed_event(
        self, workload: planning.Workload, c: planning.Change, exc: errors.KubeError, version: str
    ) -> None:
        key, error = workload.key, errors.client_go_error(exc)
        if self.sink.v2:
            message = f"Failed to reload due to {c.rtype.kind} {c.name} change: {error}"
            self.sink.event(
                workload, "Warning", "ReloadFailed", message, "reloader", V2_ACTION, version
            )
            return
        message = (
            f"Update for '{key.name}' of type '{key.kind}' in namespace '{key.namespace}' "
            f"failed with error {error}"
        )
        source = f"reloader-{c.rtype.plural}"
        self.sink.event(workload, "Warning", "ReloadFail", message, source, version=version)

    def reverted(self, workload: planning.Workload, p: Plan) -> None:
        """A reload's template write was undone: the pods keep the old content."""
        key, c = workload.key, p.change
        self.metrics.reverted.labels(workload_kind=key.kind).inc()
        log.warning("reload reverted", extra={"workload": str(key), "resource": str(c)})
        message = (
            f"The reload of '{key.name}' for {c.rtype.kind} '{c.name}' was undone: its pod "
            "template no longer carries it, so its pods keep the old content (does another "
            "controller own this template?). Set kube-reloader.io/strategy: evict to replace "
            "its pods instead of writing the template."
        )
        self.sink.event(workload, "Warning", "ReloadReverted", message, "reloader")
