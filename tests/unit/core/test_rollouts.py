"""Reading rollout state from workload status."""

from __future__ import annotations

import pytest

from kube_reloader.core.objects import WorkloadKind
from kube_reloader.core.rollouts import RolloutState, Status, deadline, state

D, S, DS = WorkloadKind.DEPLOYMENT, WorkloadKind.STATEFULSET, WorkloadKind.DAEMONSET


@pytest.mark.parametrize(
    ("kind", "written", "status", "expected"),
    [
        (D, 2, Status(observed_generation=1, replicas=2, updated=2, available=2), RolloutState.PROGRESSING),
        (D, 2, Status(observed_generation=2, replicas=2, updated=1, available=2), RolloutState.PROGRESSING),
        (D, 2, Status(observed_generation=2, replicas=2, updated=2, available=2), RolloutState.COMPLETE),
        (D, 2, Status(observed_generation=2, replicas=2, updated=1, available=1, progress_deadline_exceeded=True), RolloutState.FAILED),
        (S, 3, Status(observed_generation=3, replicas=2, updated=2, available=2, current_revision="a", update_revision="b"), RolloutState.PROGRESSING),
        (S, 3, Status(observed_generation=3, replicas=2, updated=2, available=2, current_revision="b", update_revision="b"), RolloutState.COMPLETE),
        (DS, 4, Status(observed_generation=4, replicas=3, updated=3, available=3), RolloutState.COMPLETE),
        (D, 2, Status(observed_generation=2, replicas=0), RolloutState.COMPLETE),
    ],
    ids=["not observed yet", "updating", "complete", "deadline exceeded", "sts old revision", "sts done", "daemonset", "scaled to zero"],
)  # fmt: skip
def test_rollout_state(
    kind: WorkloadKind, written: int, status: Status, expected: RolloutState
) -> None:
    assert state(kind, written, status) is expected


def test_our_deadline_leaves_the_workload_controller_time_to_report() -> None:
    assert deadline(Status(progress_deadline_seconds=60)) == 90
    assert deadline(Status()) == 630


def test_a_surge_rollout_whose_new_pod_is_not_ready_is_still_progressing() -> None:
    """maxUnavailable 0: the old pod stays available while the new one never gets Ready; the
    status then counts 1 updated, 1 available, 2 pods in all."""
    s = Status(generation=2, observed_generation=2, replicas=1, updated=1, available=1,
               outdated=1)  # fmt: skip
    assert state(WorkloadKind.DEPLOYMENT, 2, s) is RolloutState.PROGRESSING
    done = Status(generation=2, observed_generation=2, replicas=1, updated=1, available=1)
    assert state(WorkloadKind.DEPLOYMENT, 2, done) is RolloutState.COMPLETE
