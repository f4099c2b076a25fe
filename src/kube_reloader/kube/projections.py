"""Small typed projections that watch and list answers are decoded into.

msgspec ignores every field a projection does not declare, so decoding into one of these
costs a fraction of a full object and retains only what is named here. Callers declare
their own projections by subclassing `Object` (or any Struct with a `metadata: ObjectMeta`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import msgspec

_BYTES = msgspec.json.Decoder(bytes)


class OwnerReference(msgspec.Struct, frozen=True, omit_defaults=True):
    apiVersion: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool = False


class ManagedFieldsEntry(msgspec.Struct, frozen=True, omit_defaults=True):
    """Who last wrote which fields, and when: `fieldsV1` is kept raw (a substring test tells
    whether the entry covers `f:data` or `f:template`), so it costs no parsing."""

    manager: str = ""
    operation: str = ""
    time: str = ""
    subresource: str = ""
    fieldsV1: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b""))


class ObjectMeta(msgspec.Struct, frozen=True, omit_defaults=True):
    """The metadata fields a controller needs; everything else is skipped while decoding."""

    name: str = ""
    namespace: str = ""
    uid: str = ""
    resourceVersion: str = ""
    generation: int = 0
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    annotations: dict[str, str] = msgspec.field(default_factory=dict)
    ownerReferences: tuple[OwnerReference, ...] = ()
    deletionTimestamp: str | None = None
    creationTimestamp: str | None = None
    managedFields: tuple[ManagedFieldsEntry, ...] = ()


class Object(msgspec.Struct, frozen=True, omit_defaults=True):
    """The smallest projection: metadata only."""

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)


# --------------------------------------------------------------------------- configs


class ConfigMapContent(msgspec.Struct, frozen=True):
    """A ConfigMap as decoded for hashing; reduced to a hash right after decoding."""

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    data: dict[str, str] | None = None
    binaryData: dict[str, bytes] | None = None


class SecretContent(msgspec.Struct, frozen=True):
    """A Secret as decoded for hashing.

    Values stay raw JSON (views of the answer, no copy) until `values()` decodes them one
    at a time: a page of 500 Secrets of 8 KiB never becomes 500 live 8 KiB objects.
    """

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    data: dict[str, msgspec.Raw] | None = None
    type: str = ""

    def values(self) -> Iterator[tuple[str, bytes]]:
        """Each `(key, decoded bytes)` of `data`; raises msgspec.DecodeError on bad base64."""
        for key, raw in (self.data or {}).items():
            yield key, _BYTES.decode(raw)


# --------------------------------------------------------------------------- workloads
# Only the pod-template fields that reference ConfigMaps/Secrets/SPCs are declared; msgspec
# skips everything else while decoding.


class NameRef(msgspec.Struct, frozen=True):
    name: str = ""


class SecretVolumeRef(msgspec.Struct, frozen=True):
    secretName: str = ""


class EnvVarSource(msgspec.Struct, frozen=True):
    configMapKeyRef: NameRef | None = None
    secretKeyRef: NameRef | None = None


class EnvVar(msgspec.Struct, frozen=True):
    name: str = ""
    value: str | None = None
    valueFrom: EnvVarSource | None = None


class EnvFromSource(msgspec.Struct, frozen=True):
    configMapRef: NameRef | None = None
    secretRef: NameRef | None = None


class Container(msgspec.Struct, frozen=True):
    name: str = ""
    env: tuple[EnvVar, ...] = ()
    envFrom: tuple[EnvFromSource, ...] = ()
    volumeMounts: tuple[NameRef, ...] = ()


class ProjectedSource(msgspec.Struct, frozen=True):
    configMap: NameRef | None = None
    secret: NameRef | None = None


class Projected(msgspec.Struct, frozen=True):
    sources: tuple[ProjectedSource, ...] = ()


class Csi(msgspec.Struct, frozen=True):
    driver: str = ""
    volumeAttributes: dict[str, str] = msgspec.field(default_factory=dict)


class Volume(msgspec.Struct, frozen=True):
    name: str = ""
    configMap: NameRef | None = None
    secret: SecretVolumeRef | None = None
    projected: Projected | None = None
    csi: Csi | None = None


class PodSpec(msgspec.Struct, frozen=True):
    containers: tuple[Container, ...] = ()
    initContainers: tuple[Container, ...] = ()
    volumes: tuple[Volume, ...] = ()


class TemplateMeta(msgspec.Struct, frozen=True):
    annotations: dict[str, str] = msgspec.field(default_factory=dict)


class PodTemplateSpec(msgspec.Struct, frozen=True):
    metadata: TemplateMeta = msgspec.field(default_factory=TemplateMeta)
    spec: PodSpec = msgspec.field(default_factory=PodSpec)


class WorkloadRef(msgspec.Struct, frozen=True):
    apiVersion: str = ""
    kind: str = ""
    name: str = ""


class Condition(msgspec.Struct, frozen=True):
    type: str = ""
    status: str = ""
    reason: str = ""


class WorkloadStatus(msgspec.Struct, frozen=True):
    """Rollout progress across Deployments, StatefulSets and DaemonSets."""

    observedGeneration: int = 0
    replicas: int = 0
    updatedReplicas: int = 0
    availableReplicas: int = 0
    currentRevision: str = ""
    updateRevision: str = ""
    desiredNumberScheduled: int = 0
    updatedNumberScheduled: int = 0
    numberAvailable: int = 0
    conditions: tuple[Condition, ...] = ()


class WorkloadSpec(msgspec.Struct, frozen=True):
    template: PodTemplateSpec | None = None
    replicas: int | None = None
    progressDeadlineSeconds: int | None = None
    paused: bool = False  # Deployments (spec.paused)
    suspend: bool = False  # CronJobs
    workloadRef: WorkloadRef | None = None  # Argo Rollouts that borrow a Deployment's template


class JobTemplateSpec(msgspec.Struct, frozen=True):
    spec: WorkloadSpec = msgspec.field(default_factory=WorkloadSpec)


class CronJobSpec(msgspec.Struct, frozen=True):
    suspend: bool = False
    jobTemplate: JobTemplateSpec = msgspec.field(default_factory=JobTemplateSpec)


class CronJob(msgspec.Struct, frozen=True):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: CronJobSpec = msgspec.field(default_factory=CronJobSpec)


class SecretObjectVersion(msgspec.Struct, frozen=True):
    id: str = ""
    version: str = ""


class SpcPodStatusStatus(msgspec.Struct, frozen=True):
    secretProviderClassName: str = ""
    objects: tuple[SecretObjectVersion, ...] | None = None


class SpcPodStatus(msgspec.Struct, frozen=True):
    """A SecretProviderClassPodStatus: which versions of which secrets a pod mounted."""

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    status: SpcPodStatusStatus = msgspec.field(default_factory=SpcPodStatusStatus)


class Workload(msgspec.Struct, frozen=True):
    """A workload with `spec.template`: Deployment, StatefulSet, DaemonSet, Job, Rollout,
    DeploymentConfig. Metadata and the pod template's references only."""

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: WorkloadSpec = msgspec.field(default_factory=WorkloadSpec)
    status: WorkloadStatus = msgspec.field(default_factory=WorkloadStatus)


def last_write(meta: ObjectMeta, *fields: bytes) -> float | None:
    """Epoch seconds of the latest write that touched any of `fields` (e.g. b'"f:data"'),
    from managedFields; the creation time when no entry says (None if unknown)."""

    def parse(text: str | None) -> float | None:
        if not text:
            return None
        try:
            return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None

    latest: float | None = None
    for entry in meta.managedFields:
        if entry.subresource:
            continue
        raw = bytes(entry.fieldsV1)
        if any(f in raw for f in fields):
            t = parse(entry.time)
            if t is not None and (latest is None or t > latest):
                latest = t
    return latest if latest is not None else parse(meta.creationTimestamp)
