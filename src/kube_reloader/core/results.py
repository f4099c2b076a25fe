"""What a reconcile of one work item leaves to be done with it: the value a reconcile returns
(as controller-runtime's `Result`), applied in one place by the reconciler, which asks the
coalescer for the timers.

`Done`        nothing left: written, already applied, refused for good, or nothing to do
`Hold`        the scheduler holds it: its changes wait, looked at again when what it waits
              for happens, or after `after` seconds by time alone
`Defer`       the rate limits defer it: its changes wait `after` seconds
`Retry`       a transient error, a crash or a lost lease: its changes wait a backoff
`Requeue`     a conflict: re-planned at once, keeping its turn for a slot
`Drop`        the workload is gone: its changes, and any waiting, are forgotten
"""

from __future__ import annotations

from kube_reloader.core.records import record


@record
class Done:
    """Nothing is left of the item. `cleared`: the workload's consecutive failures end; False
    when nothing was tried (no changes, the workload gone before the write or under it, only
    CSI changes for a rotation), which leaves them as they were."""

    cleared: bool = True


@record
class Hold:
    """Held by the scheduler (`reason`: a `core.scheduling.Hold`); `after`: seconds until it
    is looked at again by time alone, None when only an event ends the hold."""

    reason: str
    after: float | None = None


@record
class Defer:
    """Deferred by the rate limits (`reason`: which) for `after` seconds."""

    reason: str
    after: float


@record
class Retry:
    """Tried and not written for a reason that may pass: kept, retried after a backoff that
    doubles per consecutive failure."""


@record
class Requeue:
    """The workload changed under the write: kept and re-planned at once."""


@record
class Drop:
    """The workload is gone (found so after a conflict): its changes are forgotten."""


Result = Done | Hold | Defer | Retry | Requeue | Drop
