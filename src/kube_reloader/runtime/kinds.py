"""The one registry of workload kinds: per kind, its API resource, the projection its watch
events decode into, how it is reloaded (a `writeseam.Strategy`), how its rollout state is
read; what the rules know of it (evictable, caught up at start, pausable, ...) is its
`core.kindtraits` entry.

Adding a kind is one `KindSpec` (plus, at most, one strategy). A registry is a value: a test
can register a kind of its own (`BUILTIN.with_kind(...)`) and pass it in `Options.kinds`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import msgspec

from kube_reloader.core import planning, rollouts
from kube_reloader.core.customkinds import CustomKind
from kube_reloader.core.kindtraits import KindTraits, traits
from kube_reloader.core.objects import WorkloadKind
from kube_reloader.kube import projections as p
from kube_reloader.kube import resources
from kube_reloader.kube.resources import Resource
from kube_reloader.runtime import writeseam
from kube_reloader.runtime.writeseam import Strategy


class KindSpec(msgspec.Struct, frozen=True):
    kind: str
    resource: Resource
    #: how a workload of this kind is reloaded
    strategy: Callable[[planning.Workload], Strategy]
    #: the projection its watch events decode into (`p.CronJob` reads spec.jobTemplate)
    projection: type[Any] = p.Workload
    #: reads the rollout state from the object; None: its rollouts are not followed
    status: Callable[[p.Workload], rollouts.Status | None] | None = None
    #: watched only once API discovery finds it served; never holds up readiness
    discovered: bool = False
    #: turns the decoded object into a `p.Workload` (a template found elsewhere than at
    #: spec.template); None: the projection is one already
    adapt: Callable[[Any], p.Workload] | None = None

    @property
    def traits(self) -> KindTraits:
        """What the rules know of the kind (`core.kindtraits`): a built-in kind's, else the
        custom kinds'."""
        return traits(self.kind)

    @property
    def catch_up(self) -> bool:
        """The start-up catch-up reloads what it missed (not Jobs and CronJobs)."""
        return self.traits.catch_up

    @property
    def pausable(self) -> bool:
        """It honours the pause-period annotation (Deployments)."""
        return self.traits.pausable

    @property
    def evictable(self) -> bool:
        """Its pods can be replaced (`kube-reloader.io/strategy: evict`)."""
        return self.traits.evictable

    def workload(self, obj: Any) -> Any:
        """The decoded object as the cache reads it."""
        return obj if self.adapt is None else self.adapt(obj)


def _exceeded(obj: p.Workload) -> bool:
    return any(
        c.type == "Progressing" and c.status == "False" and c.reason == "ProgressDeadlineExceeded"
        for c in obj.status.conditions
    )


def replica_status(obj: p.Workload) -> rollouts.Status:
    """Deployments and StatefulSets."""
    st = obj.status
    return rollouts.Status(
        generation=obj.metadata.generation,
        observed_generation=st.observedGeneration,
        replicas=obj.spec.replicas if obj.spec.replicas is not None else 1,
        updated=st.updatedReplicas,
        available=st.availableReplicas,
        outdated=st.replicas - st.updatedReplicas,
        current_revision=st.currentRevision,
        update_revision=st.updateRevision,
        progress_deadline_exceeded=_exceeded(obj),
        progress_deadline_seconds=(
            float(obj.spec.progressDeadlineSeconds) if obj.spec.progressDeadlineSeconds else None
        ),
    )


def daemonset_status(obj: p.Workload) -> rollouts.Status:
    st = obj.status
    return rollouts.Status(
        generation=obj.metadata.generation,
        observed_generation=st.observedGeneration,
        replicas=st.desiredNumberScheduled,
        updated=st.updatedNumberScheduled,
        available=st.numberAvailable,
    )


class Kinds:
    """A registry: kind name -> `KindSpec`."""

    def __init__(self, specs: list[KindSpec]) -> None:
        self._specs = {s.kind: s for s in specs}

    def __getitem__(self, kind: str) -> KindSpec:
        return self._specs[kind]

    def __contains__(self, kind: object) -> bool:
        return kind in self._specs

    def __iter__(self) -> Iterator[KindSpec]:
        return iter(self._specs.values())

    def get(self, kind: str) -> KindSpec | None:
        return self._specs.get(kind)

    def with_kind(self, spec: KindSpec) -> Kinds:
        return Kinds([*self._specs.values(), spec])


def _builtin(kind: WorkloadKind, strategy: Strategy, **kw: Any) -> KindSpec:
    return KindSpec(kind, resources.WORKLOAD_RESOURCES[kind], writeseam.fixed(strategy), **kw)


def custom(kind: str, ck: CustomKind) -> KindSpec:
    """A `--workload-kind` custom resource named `kind` by API discovery: written by JSON
    (merge) patches at its template's path, its pods replaceable."""
    resource = Resource(ck.group, ck.version, ck.plural, kind)
    path = ck.path
    if path == ("spec", "template"):
        return KindSpec(kind, resource, writeseam.fixed(writeseam.CUSTOM_RESOURCE_PATCH))
    return KindSpec(
        kind,
        resource,
        writeseam.fixed(writeseam.CustomResourcePatch(path)),
        projection=p.SpecObject,
        adapt=lambda obj: p.workload_at(obj, path),
    )


BUILTIN = Kinds(
    [
        _builtin(
            WorkloadKind.DEPLOYMENT,
            writeseam.TEMPLATE_PATCH,
            status=replica_status,
        ),
        _builtin(
            WorkloadKind.DAEMONSET,
            writeseam.TEMPLATE_PATCH,
            status=daemonset_status,
        ),
        _builtin(
            WorkloadKind.STATEFULSET,
            writeseam.TEMPLATE_PATCH,
            status=replica_status,
        ),
        _builtin(WorkloadKind.CRONJOB, writeseam.CRONJOB_TRIGGER, projection=p.CronJob),
        _builtin(WorkloadKind.JOB, writeseam.JOB_RECREATE),
        KindSpec(
            WorkloadKind.ROLLOUT,
            resources.WORKLOAD_RESOURCES[WorkloadKind.ROLLOUT],
            writeseam.rollout,
            status=replica_status,
            discovered=True,
        ),
        _builtin(WorkloadKind.DEPLOYMENTCONFIG, writeseam.CUSTOM_RESOURCE_PATCH, discovered=True),
    ]
)
