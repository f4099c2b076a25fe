"""Did the rollout a reload started finish? Pure reading of a workload's status.

After a reload the controller follows the workload until its new pods are all updated and
available (complete), the controller reports the progress deadline exceeded (failed), or a
deadline of our own passes first (stuck). "Logs say updated but pods never restarted"
becomes an Event and a metric instead of a silent mystery.
"""

from __future__ import annotations

from enum import StrEnum

from kube_reloader.core.kindtraits import traits
from kube_reloader.core.records import record

DEFAULT_DEADLINE_SECONDS = 600.0


class RolloutState(StrEnum):
    PROGRESSING = "progressing"
    COMPLETE = "complete"
    FAILED = "failed"
    STUCK = "stuck"


@record
class Status:
    """The status fields that matter, whatever the kind (absent ones are 0 / empty)."""

    generation: int = 0
    observed_generation: int = 0
    replicas: int = 0  # desired: spec.replicas, or desiredNumberScheduled for DaemonSets
    updated: int = 0
    available: int = 0
    #: pods still running the old template (status.replicas - updatedReplicas): a surge
    #: rollout whose new pods are not Ready keeps the old ones available
    outdated: int = 0
    current_revision: str = ""  # StatefulSets
    update_revision: str = ""
    progress_deadline_exceeded: bool = False
    progress_deadline_seconds: float | None = None


def state(kind: str, written_generation: int, s: Status) -> RolloutState:
    if s.observed_generation < written_generation:
        return RolloutState.PROGRESSING
    if s.progress_deadline_exceeded:
        return RolloutState.FAILED
    done = s.updated >= s.replicas and s.available >= s.replicas and s.outdated <= 0
    if traits(kind).revisions and s.update_revision and s.current_revision != s.update_revision:
        done = done and s.replicas == 0
    return RolloutState.COMPLETE if done else RolloutState.PROGRESSING


def rolling(kind: str, s: Status | None) -> bool:
    """Whether the workload's current spec is still rolling out (no status: it is not)."""
    return s is not None and state(kind, s.generation, s) is RolloutState.PROGRESSING


#: kube-controller-manager reports a missed progress deadline a little after it passes
GRACE_SECONDS = 30.0


#: the longest anything shared may be held for one workload's rollout (a rollout slot, a
#: rotation slot), whatever progressDeadlineSeconds its tenant writes: the default deadline
#: and its grace
MAX_HOLD_SECONDS = DEFAULT_DEADLINE_SECONDS + GRACE_SECONDS


def held_deadline(s: Status | None) -> float:
    """`deadline`, capped at `MAX_HOLD_SECONDS`: for what holds a shared slot meanwhile."""
    return min(deadline(s), MAX_HOLD_SECONDS)


def deadline(s: Status | None) -> float:
    """When to call a rollout stuck if the workload's controller has not said it failed
    (without a status to read: the default, with no grace)."""
    if s is None:
        return DEFAULT_DEADLINE_SECONDS
    return (s.progress_deadline_seconds or DEFAULT_DEADLINE_SECONDS) + GRACE_SECONDS
