"""Pods as a pod-level reload sees them: a projection that keeps only what a rotation reads
(identity, owners, creation and deletion, readiness, labels, container starts), and which
workload owns a pod. `runtime.podviews` turns it into the core's values.

A pod object is a few kilobytes; this projection decodes none of its spec, so 20,000 pods
cost the controller little more than their names and UIDs.
"""

from __future__ import annotations

import msgspec

from kube_reloader.kube.projections import OwnerReference, epoch


class PodMeta(msgspec.Struct, frozen=True):
    name: str = ""
    annotations: dict[str, str] = msgspec.field(default_factory=dict)
    namespace: str = ""
    uid: str = ""
    resourceVersion: str = ""
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    ownerReferences: tuple[OwnerReference, ...] = ()
    creationTimestamp: str | None = None
    deletionTimestamp: str | None = None


class PodCondition(msgspec.Struct, frozen=True):
    type: str = ""
    status: str = ""
    lastTransitionTime: str | None = None


class Started(msgspec.Struct, frozen=True):
    startedAt: str | None = None


class ContainerState(msgspec.Struct, frozen=True):
    running: Started | None = None
    terminated: Started | None = None


class ContainerStatus(msgspec.Struct, frozen=True):
    name: str = ""
    state: ContainerState = msgspec.field(default_factory=ContainerState)
    lastState: ContainerState = msgspec.field(default_factory=ContainerState)
    restartCount: int = 0

    def last_start(self) -> float | None:
        """When it last started: running now, or (crash-looping) its last run."""
        for s in (self.state.running, self.state.terminated, self.lastState.terminated):
            if s is not None and s.startedAt:
                return epoch(s.startedAt)
        return None


class PodStatus(msgspec.Struct, frozen=True):
    conditions: tuple[PodCondition, ...] = ()
    phase: str = ""
    containerStatuses: tuple[ContainerStatus, ...] = ()


class PodObject(msgspec.Struct, frozen=True):
    metadata: PodMeta = msgspec.field(default_factory=PodMeta)
    status: PodStatus = msgspec.field(default_factory=PodStatus)


def controlled_by(pod: PodObject, uid: str) -> bool:
    """Whether `pod`'s controller (its managing owner reference) is the object `uid`."""
    return any(o.uid == uid and o.controller for o in pod.metadata.ownerReferences)


#: kinds whose pods `owned` finds without a `pod-selector` annotation
OWNED_KINDS = frozenset({"Deployment", "StatefulSet", "DaemonSet", "Rollout"})


def owned(pod: PodObject, kind: str, name: str, uid: str, selector: str | None) -> bool:
    """Whether a listed pod belongs to workload `kind`/`name` (`uid`). With `pod-selector`,
    any pod it selects that a controller re-creates (never a bare pod, never a Job's);
    otherwise a Deployment's or an Argo Rollout's pods belong to its ReplicaSets
    (`<name>-<pod-template-hash>`), a StatefulSet's and a DaemonSet's to the workload."""
    controller = next((o for o in pod.metadata.ownerReferences if o.controller), None)
    if controller is None:
        return False
    if selector is not None:
        return controller.kind not in ("Job", "")
    label = {"Deployment": "pod-template-hash", "Rollout": "rollouts-pod-template-hash"}.get(kind)
    if label is not None:
        template_hash = pod.metadata.labels.get(label, "")
        return (
            controller.kind == "ReplicaSet"
            and bool(template_hash)
            and controller.name == f"{name}-{template_hash}"
        )
    return controller.uid == uid
