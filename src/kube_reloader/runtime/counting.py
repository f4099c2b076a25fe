"""The counts of the event stream, with Reloader v1's metric labels and values, in three
domain reporters over the one sink (`reporting.Sink`): the changes taken in (`ChangeReports`:
watch events received, changes processed or skipped), the work queue and its workers
(`QueueReports`: the queue, reconciles, failed attempts and retries, the event loop's lag),
and webhook mode (`WebhookReports`: a change is a notification, never a reload). v1's values:
`events_processed_total{event_type="unknown", resource_type, result="success"|"dropped"}`,
`errors_total{type="handler_error"}` for each failed attempt, `skipped_total{reason}` in
`ignored_or_not_selected`, `no_data_change`, `strategy_not_updated`.

Under `--compat=v2` (`Sink.v2`), Reloader v2's: it counts reconciles, not watch events (one
per change fanned out: `events_received_total{event_type="reconcile"|"delete",
resource_type="configmap"|"secret"|"secretproviderclass"}`, `reconcile_total`,
`skipped_total{reason="no_match"}` when no workload matches (`namespace_selector` for a change
in a namespace the selector leaves out), and controller-runtime's families
(`ctrlmetrics`: the intake's lanes are its work queues); it never counts `events_processed`;
its errors are `update_workload` and `webhook_send`; its webhook sends are `action_total`
of kind `webhook` and reloads executed.
"""

from __future__ import annotations

from kube_reloader.core.objects import ResourceType
from kube_reloader.core.planning import Change, Event
from kube_reloader.ctrlmetrics import CONTROLLER_OF
from kube_reloader.runtime.reporting import Sink, log, log_change

#: why a watch event is no change (v1's `skipped_total` reasons)
NOT_SELECTED = "ignored_or_not_selected"
NO_DATA_CHANGE = "no_data_change"


class ChangeReports:
    """The changes taken in: by the intake, the fan-out, the catch-up and its look at pods."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.metrics = sink.metrics

    def event_received(self, event_type: str, resource_type: str) -> None:
        if self.sink.v2:
            return  # v2 counts its reconciles (`fanned_out`), not watch events
        self.metrics.events_received.labels(
            event_type=event_type, resource_type=resource_type
        ).inc()

    def not_changed(self, reason: str, resource_type: str) -> None:
        """A watch event that is no change, and why: `NOT_SELECTED`, `NO_DATA_CHANGE`, or ""
        for an event v1 does not handle at all (not counted). v1 processes an update without
        a data change, successfully. v2's predicates drop these before counting anything."""
        if self.sink.v2:
            return
        if reason:
            self.metrics.skipped.labels(reason=reason).inc()
        if reason == NO_DATA_CHANGE:
            self.metrics.events_processed.labels(
                event_type="unknown", resource_type=resource_type, result="success"
            ).inc()

    def processed(self, change: Change, result: str) -> None:
        """A change was handled: `success`, or `dropped` (given up). v2 never counts it."""
        if self.sink.v2:
            return
        self.metrics.events_processed.labels(
            event_type="unknown", resource_type=change.rtype.plural, result=result
        ).inc()

    def lane_added(self, change: Change, depth: int) -> None:
        """A resource put in its namespace's lane (`depth` of its type now wait): under v2,
        an add to its controller's work queue."""
        if self.sink.v2_leading() and self.metrics.ctrl is not None:
            self.metrics.ctrl.queued(CONTROLLER_OF[change.rtype.value], depth)

    def lane_taken(self, change: Change, waited: float, depth: int) -> None:
        """A change left its lane after `waited` seconds to be fanned out."""
        if self.sink.v2_leading() and self.metrics.ctrl is not None:
            self.metrics.ctrl.taken(CONTROLLER_OF[change.rtype.value], waited, depth)

    def fanned_out(
        self,
        change: Change,
        seconds: float,
        *,
        matched: int,
        result: str,
        crashed: bool = False,
        again: bool = False,
    ) -> None:
        """Reloader v2's reconcile of a change (under v2, on the leader; v2's standbys run
        none): its fan-out to `matched` workloads v2 would decide on, or in webhook mode its
        send; `result` `success` or `error` (`crashed`: a panic; `again`: tried again)."""
        if not self.sink.v2_leading():
            return
        m = self.metrics
        self._v2_reconcile(change.rtype, result, seconds)
        if change.event is Event.DELETED:
            resource_type = change.rtype.value.lower()
            m.events_received.labels(event_type="delete", resource_type=resource_type).inc()
        if result == "success" and not matched:
            m.skipped.labels(reason="no_match").inc()
        if m.ctrl is not None:
            c = CONTROLLER_OF[change.rtype.value]
            m.ctrl.reconciled(c, result, seconds, panicked=crashed, again=again)

    def selector_skipped(self, rtype: ResourceType | None) -> None:
        """Under v2 (on the leader), a change in a namespace `--namespace-selector` leaves
        out: v2 reconciles it and skips it there (`namespace_selector`)."""
        if rtype is None or not self.sink.v2_leading():
            return
        m = self.metrics
        self._v2_reconcile(rtype, "success", 0.0)
        m.skipped.labels(reason="namespace_selector").inc()
        if m.ctrl is not None:
            m.ctrl.passed(CONTROLLER_OF[rtype.value], "success", 0.0)

    def _v2_reconcile(self, rtype: ResourceType, result: str, seconds: float) -> None:
        """What every reconcile of Reloader v2's counts: the event received, its result."""
        m, resource_type = self.metrics, rtype.value.lower()
        m.events_received.labels(event_type="reconcile", resource_type=resource_type).inc()
        m.reconcile.labels(result=result).inc()
        m.reconcile_duration.labels(result=result).observe(seconds)

    def synced(self) -> None:
        self.metrics.ready.set(1)

    def change_detected(self, change: Change, *, synthesized: bool) -> None:
        self.sink.stats.changes += 1
        log_change("change detected", change, missed_while_not_watching=synthesized)

    def log_change(self, message: str, change: Change, **extra: object) -> None:
        """An info line about a change (`reporting.log_change`: a Secret's hash at debug)."""
        log_change(message, change, **extra)


class QueueReports:
    """The work queue and the workers that take from it (and the event loop they run on)."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.metrics = sink.metrics

    def coalesced(self) -> None:
        self.metrics.coalesced.inc()

    def queued(self, depth: int) -> None:
        self.metrics.queue_adds.inc()
        self.metrics.queue_depth.set(depth)

    def dequeued(self, waited: float | None, depth: int) -> None:
        if waited is not None:
            self.metrics.queue_latency.observe(waited)
        self.metrics.queue_depth.set(depth)

    def reconciled(self, result: str, seconds: float) -> None:
        """A work item was reconciled (under v2, Reloader's reconcile is a change's:
        `fanned_out`)."""
        self.metrics.reconciles.labels(result=result).inc()
        if self.sink.v2:
            return
        self.metrics.reconcile.labels(result=result).inc()
        self.metrics.reconcile_duration.labels(result=result).observe(seconds)

    def handler_error(self) -> None:
        """A reconcile crashed. Not counted here: its `retrying` follows, and counts the
        failed attempt."""

    def retrying(self) -> None:
        """A failed attempt (a transient error, a crash, a lost lease) is tried again."""
        self.sink.stats.retries += 1
        if not self.sink.v2:  # v2 counts an error only when the write is given up
            self.metrics.errors.labels(type="handler_error").inc()
        self.metrics.retries.inc()
        self.metrics.deferred.labels(reason="retry_backoff").inc()

    def loop_lag(self, seconds: float, worst: float) -> None:
        self.metrics.event_loop_lag(seconds, worst)


class WebhookReports:
    """Webhook mode: each change is one notification, its handler in v1's terms (a reconcile
    of the queue's, a change processed or dropped)."""

    def __init__(self, sink: Sink, changes: ChangeReports, queue: QueueReports) -> None:
        self.sink = sink
        self.metrics = sink.metrics
        self.changes = changes
        self.queue = queue

    def webhook_sent(self, change: Change, seconds: float) -> None:
        self.sink.stats.webhooks += 1
        self.metrics.side_channel.labels(channel="webhook", result="success").inc()
        self._v2_send(change, seconds, success=True)
        self.queue.reconciled("success", seconds)
        self.changes.processed(change, "success")
        log.info("webhook sent instead of reloading", extra={"resource": str(change)})

    def webhook_retrying(self, change: Change, error: str, seconds: float) -> None:
        """An attempt failed after `seconds` (since the send or the last failure); another
        follows."""
        self.sink.stats.retries += 1
        if not self._v2_send(change, seconds, success=False, again=True):
            self.metrics.errors.labels(type="handler_error").inc()
        self.metrics.retries.inc()
        log.warning("webhook failed, will retry", extra={"resource": str(change), "error": error})

    def webhook_failed(self, change: Change, seconds: float) -> None:
        """Every attempt failed: the change is dropped, as v1 drops it after its retries."""
        self.metrics.side_channel.labels(channel="webhook", result="error").inc()
        if not self._v2_send(change, seconds, success=False, again=False):
            self.metrics.errors.labels(type="handler_error").inc()
        self.queue.reconciled("error", seconds)
        self.changes.processed(change, "dropped")

    def webhook_dropped(self, change: Change) -> None:
        """The queue was full: the oldest waiting notification is never sent."""
        self.changes.processed(change, "dropped")

    def _v2_send(
        self, change: Change, seconds: float, *, success: bool, again: bool = False
    ) -> bool:
        """Under v2, a webhook send as Reloader v2 counts it (whether it did): the reconcile
        of its change, a reload executed or not, an action of kind `webhook`, a failure a
        `webhook_send` error (`again`: another attempt follows; v2 retries without end)."""
        if not self.sink.v2:
            return False
        m = self.metrics
        m.reload_done(kind="webhook", namespace=change.namespace, success=success, seconds=None)
        m.action_latency.labels(workload_kind="webhook").observe(seconds)
        if not success:
            m.errors.labels(type="webhook_send").inc()
        result = "success" if success else "error"
        self.changes.fanned_out(change, seconds, matched=1, result=result, again=again)
        return True
