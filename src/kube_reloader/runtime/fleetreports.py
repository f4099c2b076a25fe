"""Fleet-safe rotations reported over the one sink (`reporting.Sink`): a reload held by the
scheduler (`ReloadDeferred`, or `ReloadHalted` behind the circuit breaker) and released, and
the circuit breaker opened or reset (`runtime/breaker.py`). A hold shares its memory of the
last reason with `reloadreports`' deferrals (`reporting.Holds`)."""

from __future__ import annotations

import logging

from kube_reloader.core import planning
from kube_reloader.core.objects import ObjectKey
from kube_reloader.runtime.reporting import Sink, log


class FleetReports:
    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.metrics = sink.metrics

    def held(self, workload: planning.Workload, hold: str, text: str, *, first: bool) -> None:
        """A reload waits (ReloadHalted when the circuit breaker holds it); one log line and
        one Event per hold (`first`), however often the workload is woken and held again."""
        self.metrics.deferred.labels(reason=hold).inc()
        # a deferral that follows is news again (bounded)
        self.sink.holds.new(workload.key, hold)
        if first:  # the scheduler's own memory: it forgets a hold as soon as it ends
            log.info("reload held", extra={"workload": str(workload.key), "reason": hold})
            warn = hold == "halted"
            event_type, reason = (
                ("Warning", "ReloadHalted") if warn else ("Normal", "ReloadDeferred")
            )
            self.sink.event(workload, event_type, reason, text, "reloader")

    def released(self, key: ObjectKey) -> None:
        """`key` was written (or has nothing to wait for): its next hold is news again."""
        self.sink.holds.release(key)

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
            self.sink.event(resource, "Warning", "ReloadHalted", text, "reloader")
            self.sink.notify(text)
