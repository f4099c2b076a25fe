"""One domain reporter of each kind, all over one sink: what the controller builds once and
hands out, each room getting only the domains it reports in (see `reporting`)."""

from __future__ import annotations

import msgspec

from kube_reloader.runtime.auditreports import AuditReports
from kube_reloader.runtime.counting import ChangeReports, QueueReports, WebhookReports
from kube_reloader.runtime.fleetreports import FleetReports
from kube_reloader.runtime.reloadreports import ReloadReports
from kube_reloader.runtime.reporting import ProblemReports, Sink
from kube_reloader.runtime.rolloutreports import RolloutReports


class Reports(msgspec.Struct, frozen=True):
    sink: Sink
    problems: ProblemReports
    changes: ChangeReports
    queue: QueueReports
    webhooks: WebhookReports
    reloads: ReloadReports
    rollouts: RolloutReports
    fleet: FleetReports
    #: the staleness audit's series and StaleCertificate Events
    audit: AuditReports

    @classmethod
    def over(cls, sink: Sink) -> Reports:
        changes, queue = ChangeReports(sink), QueueReports(sink)
        return cls(
            sink=sink,
            problems=ProblemReports(sink),
            changes=changes,
            queue=queue,
            webhooks=WebhookReports(sink, changes, queue),
            reloads=ReloadReports(sink, changes),
            rollouts=RolloutReports(sink),
            fleet=FleetReports(sink),
            audit=AuditReports(sink.metrics, sink.fence, sink.event),
        )
