"""What the staleness audit reports (`runtime.auditing`): the stale series, and one Warning
`StaleCertificate` per workload still running a rotated certificate. Both are caps shared by
namespaces, cut by `core.fairness.water_fill`: a namespace with thousands of stale pairs keeps
its part, and every other namespace keeps all of its own up to the same level."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence

import msgspec

from kube_reloader.core import fairness, planning
from kube_reloader.core.objects import ObjectKey
from kube_reloader.metrics import Recorder
from kube_reloader.runtime.clock import Pacer
from kube_reloader.runtime.fencing import Fence

log = logging.getLogger("kube_reloader.runtime.controller")

#: StaleCertificate Events remembered (one per stale TLS pair of the current audit round),
#: shared among namespaces
MAX_STALE_CERTIFICATES = 10_000

#: stale series added or removed between two chances for other tasks to run
CHUNK = 500

#: queue one Event (workload, type, reason, message, component); False when it was dropped
EventFn = Callable[[planning.Workload, str, str, str, str], bool]


class StaleCertificate(msgspec.Struct, frozen=True):
    """A workload whose pods predate the rotation of TLS Secret `secret` at `changed_at`."""

    workload: planning.Workload
    secret: str
    changed_at: float
    text: str

    @property
    def marker(self) -> tuple[ObjectKey, str, float]:
        return (self.workload.key, self.secret, self.changed_at)


class AuditReports:
    def __init__(self, metrics: Recorder, fence: Fence, event: EventFn) -> None:
        self.metrics = metrics
        self.fence = fence
        self.event = event
        #: (workload, Secret, rotation time) of the StaleCertificate Events recorded
        self._stale_certs: set[tuple[ObjectKey, str, float]] = set()
        self._stale_left_out: dict[str, int] = {}

    async def stale(self, series: set[tuple[str, str, str, str]], pacer: Pacer) -> None:
        """The staleness audit's finding: (namespace, kind, name, resource) pairs (at most
        `metrics.MAX_STALE_SERIES` exported, cut fairly; one warning when the count left out
        changes). Up to 10,000 series are added or removed `CHUNK` at a time, letting other
        tasks run in between."""
        update = self.metrics.stale_update(series)
        for i in range(0, max(len(update.remove), len(update.add)), CHUNK):
            self.metrics.apply_stale(update.remove[i : i + CHUNK], update.add[i : i + CHUNK])
            await pacer.step()
        left_out = update.left_out
        if left_out and left_out != self._stale_left_out:
            total = sum(left_out.values())
            log.warning(
                "staleness audit: too many stale pairs to export them all",
                extra={
                    "stale": len(series),
                    "exported": len(series) - total,
                    "left_out": total,
                    "namespaces_cut": len(left_out),
                },
            )
        self._stale_left_out = left_out

    def stale_certificates(self, found: Sequence[StaleCertificate]) -> None:
        """One audit round's stale TLS pairs: pods predate a TLS Secret's rotation and no
        rule reloads them. One Warning Event per (workload, Secret, rotation time), recorded
        by the leader. Its memory is its own (other warnings' never evict it) and holds only
        what is stale in this round, at most `MAX_STALE_CERTIFICATES`, cut fairly among
        namespaces; a pair past its namespace's part, or whose Event the queue dropped, is
        not remembered, so a later round records it."""
        if not self.fence.may_write():
            return
        current = {c.marker for c in found}
        self._stale_certs &= current  # rotated again or no longer stale: forgotten
        new = [c for c in found if c.marker not in self._stale_certs]
        room = max(0, MAX_STALE_CERTIFICATES - len(self._stale_certs))
        parts = fairness.water_fill(Counter(c.workload.namespace for c in new), room)
        by_ns: Counter[str] = Counter()
        for c in sorted(new, key=lambda c: c.marker):
            ns = c.workload.namespace
            if by_ns[ns] >= parts.get(ns, 0):
                continue
            if not self.event(c.workload, "Warning", "StaleCertificate", c.text, "reloader"):
                continue
            by_ns[ns] += 1
            self._stale_certs.add(c.marker)
            log.warning(
                "pods run a rotated certificate",
                extra={"workload": str(c.workload.key), "problem": c.text},
            )
