"""The one place an outcome is reported: each call here turns what happened into its log
line, its metrics, its Kubernetes Event and its alert. No other room touches a metric object,
records an Event or sends an alert (scrape-time gauges live in `observing`; the counts of the
event stream, with Reloader v1's labels, are `counting`'s, which `Reporter` is built on)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any

from kube_reloader.core import planning, rollouts
from kube_reloader.core.objects import ObjectKey, ResourceType
from kube_reloader.core.planning import Change, Outcome, Plan
from kube_reloader.edges.alerts import AlertSender
from kube_reloader.kube import errors
from kube_reloader.kube.client import Client
from kube_reloader.metrics import Recorder
from kube_reloader.runtime.auditreports import AuditReports
from kube_reloader.runtime.clock import Clock
from kube_reloader.runtime.counting import Counting, log
from kube_reloader.runtime.eventing import EventQueue, EventRecorder, EventSink, Pending
from kube_reloader.runtime.fencing import Fence
from kube_reloader.runtime.kinds import Kinds

__all__ = ["KubeEvents", "Reporter", "Spawn", "log"]
#: distinct (workload, warning) pairs remembered so each is recorded once (oldest forgotten)
MAX_WARNED = 10_000
#: workloads whose last hold or deferral reason is remembered (logged when it changes)
MAX_HELD_REASONS = 10_000


Spawn = Callable[[str, Coroutine[Any, Any, None]], object]


#: how a pod-level reload is said in its Events, by strategy
_DONE = {"evict": "replaced", "restart-in-place": "restarted", "signal": "signalled"}
_BY = {"evict": "by eviction", "restart-in-place": "in place", "signal": "by signal"}


class KubeEvents(EventRecorder):
    """Events about workloads (and ConfigMaps, Secrets), correlated as client-go does."""

    def __init__(self, client: Client, kinds: Kinds, clock: Clock) -> None:
        def api_version(kind: str) -> str:
            spec = kinds.get(kind)  # else a ConfigMap or Secret
            return "v1" if spec is None else spec.resource.api_version

        super().__init__(client, clock, api_version)


class Reporter(Counting):
    def __init__(
        self,
        metrics: Recorder,
        sink: EventSink,
        fence: Fence,
        spawn: Spawn,
        clock: Clock,
        alerts: AlertSender | None,
    ) -> None:
        super().__init__(metrics)
        self.fence = fence
        #: where outcomes are alerted (the options' `alerts`, started by the controller)
        self.alerts = alerts
        self.events = EventQueue(sink, fence, spawn, clock.monotonic, metrics.dropped_event)
        self._warned: dict[tuple[ObjectKey, str], None] = {}
        #: each held or deferred workload's last reason: logged again only when it changes
        self._holds: dict[ObjectKey, str] = {}
        #: the staleness audit's series and StaleCertificate Events
        self.audit = AuditReports(metrics, fence, self.event)

    # -- problems ---------------------------------------------------------------------------
    def object_failed(self, stage: str, key: object, exc: BaseException) -> None:
        """One object's handling raised: log it with the object, count it, carry on."""
        self.metrics.object_errors.labels(stage=stage).inc()
        log.error(
            "object skipped after an unexpected error",
            exc_info=exc,
            extra={"stage": stage, "object": str(key), "error": f"{type(exc).__name__}"},
        )

    def warn_once(
        self,
        workload: planning.Workload,
        warnings: tuple[str, ...],
        reason: str = "ReloadAnnotationInvalid",
    ) -> None:
        """One Warning Event per (workload, problem); the leader records them. The memory
        of what was warned is bounded (the oldest is forgotten, then warned again)."""
        if not warnings or not self.fence.may_write():
            return
        for text in warnings:
            marker = (workload.key, text)
            if marker in self._warned:
                continue
            if not self.event(workload, "Warning", reason, text, "reloader"):
                continue  # its namespace is over its share: warned when next seen
            self._warned[marker] = None
            if len(self._warned) > MAX_WARNED:
                del self._warned[next(iter(self._warned))]
            log.warning(
                "bad reload annotation" if reason == "ReloadAnnotationInvalid" else "reload error",
                extra={"workload": str(workload.key), "problem": text},
            )

    def event(
        self,
        workload: planning.Workload,
        event_type: str,
        reason: str,
        message: str,
        component: str,
    ) -> bool:
        """Queue an Event (`eventing.EventQueue`); False when its namespace is over its share
        of the queue and it was dropped."""
        return self.events.offer(Pending(workload, event_type, reason, message, component))

    def loop_lag(self, seconds: float, worst: float) -> None:
        self.metrics.event_loop_lag(seconds, worst)

    def change_detected(self, change: Change, *, synthesized: bool) -> None:
        self.stats.changes += 1
        self.log_change("change detected", change, missed_while_not_watching=synthesized)

    def log_change(self, message: str, change: Change, **extra: object) -> None:
        """An info line about a change; a Secret's content hash only at debug (a short
        Secret can be guessed from its unsalted hash)."""
        fields: dict[str, object] = {"resource": str(change), "event": change.event.value}
        fields.update(extra)
        if change.rtype is ResourceType.SECRET:
            # the decision's reason names the value written (the hash): debug only too
            log.info(message, extra={k: v for k, v in fields.items() if k != "reason"})
            log.debug(message, extra={**fields, "hash": change.hash})
        else:
            log.info(message, extra={**fields, "hash": change.hash})

    # -- decisions and the queue ------------------------------------------------------------
    def decided(self, workload: planning.Workload, change: Change, p: Plan) -> None:
        kind = str(workload.kind)
        self.metrics.workloads_scanned.labels(kind=kind).inc()
        self.metrics.decisions.labels(outcome=p.outcome.value, reason=p.decision.reason.value).inc()
        if p.outcome is Outcome.RELOAD:
            self.metrics.workloads_matched.labels(kind=kind).inc()
            return
        if p.outcome is not Outcome.SKIPPED:  # v1: no container, or it already carries the hash
            self.metrics.skipped.labels(reason="strategy_not_updated").inc()
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

    def deferred(
        self, workload: planning.Workload, reason: str, until: str, min_interval: float
    ) -> None:
        key = workload.key
        self.metrics.deferred.labels(reason=reason).inc()
        if not self._new_hold(key, reason):
            return  # said when the reason began; the counter counts every deferral
        log.info("reload deferred", extra={"workload": str(key), "reason": reason, "until": until})
        if reason == "min_interval":
            message = (
                f"Reload of '{key.name}' deferred until {until}: at most one "
                f"reload every {min_interval:g}s per workload"
            )
            self.event(workload, "Normal", "ReloadDeferred", message, "reloader")

    # -- writes -----------------------------------------------------------------------------
    def written(self, kind: str, seconds: float) -> None:
        self.stats.patches += 1
        self.metrics.action_latency.labels(workload_kind=kind).observe(seconds)

    def reloaded(self, workload: planning.Workload, p: Plan, seconds: float | None) -> None:
        key, c = workload.key, p.change
        self.stats.reloads += 1
        self.released(key)
        self.metrics.reload_done(
            kind=key.kind, namespace=key.namespace, success=True, seconds=seconds
        )
        self.log_change("reloaded workload", c, workload=str(key), reason=p.message)
        message = (
            f"Changes detected in '{c.name}' of type '{c.rtype.value}' in namespace "
            f"'{c.namespace}', Updated '{key.name}' of type '{key.kind}' in namespace "
            f"'{key.namespace}'"
        )
        self.event(workload, "Normal", "Reloaded", message, f"reloader-{c.rtype.plural}")
        if self.alerts is not None:
            self._alert_reloaded(self.alerts, c, key)

    def reload_failed(
        self, workload: planning.Workload, plans: list[Plan], exc: errors.KubeError
    ) -> None:
        key = workload.key
        self.stats.failures += 1
        self.metrics.errors.labels(type="handler_error").inc()
        for p in plans:  # one per change of the work item
            self.processed(p.change, "dropped")  # v1 drops the event after its last attempt
            self.metrics.reload_done(
                kind=key.kind, namespace=key.namespace, success=False, seconds=None
            )
            log.error(
                "reload failed",
                extra={"workload": str(key), "resource": str(p.change), "error": str(exc)},
            )
            message = (
                f"Update for '{key.name}' of type '{key.kind}' in namespace '{key.namespace}' "
                f"failed with error {errors.client_go_error(exc)}"
            )
            component = f"reloader-{p.change.rtype.plural}"
            self.event(workload, "Warning", "ReloadFail", message, component)

    def paused(self, key: ObjectKey, until: str) -> None:
        self.stats.pauses += 1
        self.metrics.pauses.labels(action="pause").inc()
        log.info("paused deployment", extra={"workload": str(key), "until": until})

    def resumed(self, key: ObjectKey) -> None:
        self.stats.resumes += 1
        self.metrics.pauses.labels(action="resume").inc()
        log.info("resumed deployment", extra={"workload": str(key)})

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
        self.event(workload, "Warning", reason, text, "reloader")
        if self.alerts is not None and self.fence.may_write():
            self.alerts.notify(f"{text} ({kind} in namespace {workload.namespace})")

    # -- pod-level reloads (runtime/rotations.py) -------------------------------------------
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
        self.released(key)
        for p in plans:
            c = p.change
            self.metrics.reload_done(
                kind=key.kind, namespace=key.namespace, success=True, seconds=None
            )
            took = round(seconds, 2)
            self.log_change(
                "reloaded workload", c, workload=str(key), pods=pods, seconds=took, strategy=how
            )
            message = (
                f"Changes detected in '{c.name}' of type '{c.rtype.value}' in namespace "
                f"'{c.namespace}', {_DONE[how]} {pods} pods of '{key.name}' of type "
                f"'{key.kind}' in namespace '{key.namespace}' {_BY[how]} in {seconds:.1f}s"
            )
            self.event(workload, "Normal", "Reloaded", message, f"reloader-{c.rtype.plural}")
            if self.alerts is not None and self.fence.may_write():
                self._alert_reloaded(self.alerts, c, key)

    @staticmethod
    def _alert_reloaded(alerts: AlertSender, c: Change, key: ObjectKey) -> None:
        alerts.reloaded(
            resource=c.name,
            rtype=c.rtype.value,
            namespace=c.namespace,
            workload=key.name,
            kind=key.kind,
        )

    def rotation_failed(
        self, workload: planning.Workload, reason: str, pods: int, how: str = "evict"
    ) -> None:
        """A replacement did not become available in time: no more evictions for it."""
        key = workload.key
        self.stats.failures += 1
        self.metrics.rollouts.labels(workload_kind=key.kind, result="failed").inc()
        text = f"Reload of '{key.name}' {_BY[how]} stopped after {pods} pods: {reason}"
        log.warning("rotation failed", extra={"workload": str(key), "reason": reason})
        self.event(workload, "Warning", "ReloadRolloutFailed", text, "reloader")
        if self.alerts is not None and self.fence.may_write():
            self.alerts.notify(f"{text} ({key.kind} in namespace {key.namespace})")

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
        self.event(workload, "Warning", "ReloadReverted", message, "reloader")

    # -- fleet-safe rotations (runtime/scheduler.py, runtime/breaker.py) --------------------
    def held(self, workload: planning.Workload, hold: str, text: str, *, first: bool) -> None:
        """A reload waits (ReloadHalted when the circuit breaker holds it); one log line and
        one Event per hold (`first`), however often the workload is woken and held again."""
        self.metrics.deferred.labels(reason=hold).inc()
        self._new_hold(workload.key, hold)  # a deferral that follows is news again (bounded)
        if first:  # the scheduler's own memory: it forgets a hold as soon as it ends
            log.info("reload held", extra={"workload": str(workload.key), "reason": hold})
            warn = hold == "halted"
            event_type, reason = (
                ("Warning", "ReloadHalted") if warn else ("Normal", "ReloadDeferred")
            )
            self.event(workload, event_type, reason, text, "reloader")

    def _new_hold(self, key: ObjectKey, reason: str) -> bool:
        """Remember `key`'s hold reason; True when it differs from the last one."""
        if self._holds.get(key) == reason:
            return False
        self._holds.pop(key, None)
        self._holds[key] = reason
        if len(self._holds) > MAX_HELD_REASONS:
            del self._holds[next(iter(self._holds))]
        return True

    def released(self, key: ObjectKey) -> None:
        """`key` was written (or has nothing to wait for): its next hold is news again."""
        self._holds.pop(key, None)

    def halted(self, resource: planning.Workload, text: str, *, on: bool) -> None:
        """The circuit breaker opened for (or was reset by new content of) a ConfigMap/Secret."""
        label = f"{resource.kind}/{resource.name}"
        self.metrics.halted.labels(namespace=resource.namespace, resource=label).set(int(on))
        log.log(
            logging.WARNING if on else logging.INFO,
            "circuit breaker open" if on else "circuit breaker reset by new content",
            extra={"resource": str(resource.key)},
        )
        if on:
            self.event(resource, "Warning", "ReloadHalted", text, "reloader")
        if on and self.alerts is not None and self.fence.may_write():
            self.alerts.notify(text)
