"""Small typed projections that watch and list answers are decoded into.

msgspec ignores every field a projection does not declare, so decoding into one of these
costs a fraction of a full object and retains only what is named here. Callers declare
their own projections by subclassing `Object` (or any Struct with a `metadata: ObjectMeta`).
"""

from __future__ import annotations

import datetime as dt
import functools
import sys
import types
import typing
from typing import Any, TypeVar

import msgspec

T = TypeVar("T")


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


# --------------------------------------------------------------------------- workloads
# Only the pod-template fields that reference ConfigMaps/Secrets/SPCs are declared; msgspec
# skips everything else while decoding.


class KeyToPath(msgspec.Struct, frozen=True):
    key: str = ""


class NameRef(msgspec.Struct, frozen=True):
    """A reference by name; `key` (a keyRef's) and `items` (a volume source's) say which
    keys it reads (key-level reloads)."""

    name: str = ""
    key: str = ""
    items: tuple[KeyToPath, ...] = ()


class SecretVolumeRef(msgspec.Struct, frozen=True):
    secretName: str = ""
    items: tuple[KeyToPath, ...] = ()


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


class PodSpec(msgspec.Struct, frozen=True, dict=True):
    containers: tuple[Container, ...] = ()
    initContainers: tuple[Container, ...] = ()
    #: kept as plain JSON until read: an Argo Rollout's CRD leaves `volumes` untyped
    #: (x-kubernetes-preserve-unknown-fields), so any JSON can be stored there
    volumes_json: Any = msgspec.field(default=None, name="volumes")

    @functools.cached_property
    def volumes(self) -> tuple[Volume, ...]:
        return lenient(self.volumes_json, tuple[Volume, ...], ())


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
    """Rollout progress across Deployments, StatefulSets and DaemonSets.

    Other kinds write other types into the same names: an Argo Rollout's
    `observedGeneration` is a string (the generation in decimal, a hash in old releases).
    `Workload.status` converts leniently: a decimal string becomes the number, anything
    else of an unexpected type becomes the field's default."""

    observedGeneration: int = 0
    replicas: int = 0
    updatedReplicas: int = 0
    availableReplicas: int = 0
    currentRevision: str = ""
    updateRevision: str = ""
    desiredNumberScheduled: int = 0
    updatedNumberScheduled: int = 0
    numberAvailable: int = 0
    active: int = 0  # Jobs
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


class Workload(msgspec.Struct, frozen=True, dict=True):
    """A workload with `spec.template`: Deployment, StatefulSet, DaemonSet, Job, Rollout,
    DeploymentConfig. Metadata and the pod template's references only.

    `status` is kept as plain JSON until read, then converted leniently: each kind's
    status has its own schema (Argo's `observedGeneration` is a string), and one object
    whose status does not fit must not fail the LIST or WATCH it arrives in."""

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: WorkloadSpec = msgspec.field(default_factory=WorkloadSpec)
    status_json: Any = msgspec.field(default=None, name="status")

    @functools.cached_property
    def status(self) -> WorkloadStatus:
        return lenient(self.status_json, WorkloadStatus, WorkloadStatus())


class SpecObject(msgspec.Struct, frozen=True):
    """A custom resource whose pod template is somewhere under `spec` (`--workload-kind`):
    its spec kept as plain JSON until the template is taken out of it."""

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: Any = None


def workload_at(obj: SpecObject, path: tuple[str, ...]) -> Workload:
    """`obj` as a `Workload` whose template is the one at `path` (`("spec", ...)`); a path
    that leads nowhere, or to something that is not a pod template, gives no template."""
    node: Any = obj.spec
    for segment in path[1:]:
        node = node.get(segment) if isinstance(node, dict) else None
    template = lenient(node, PodTemplateSpec | None, None) if isinstance(node, dict) else None
    return Workload(metadata=obj.metadata, spec=WorkloadSpec(template=template))


# --------------------------------------------------------------------------- lenient decoding


def lenient(value: Any, tp: type[T] | Any, default: T) -> T:
    """`value` (plain JSON data) converted to `tp`, never failing.

    Strings holding numbers or booleans convert to them (`strict=False`). Where a part
    does not fit, only that part is dropped: a Struct field of an unexpected type takes
    its default, a list or map item that does not fit is left out, and a `value` that does
    not fit at all gives `default`."""
    if value is None:
        return default
    try:
        return typing.cast(T, msgspec.convert(value, tp, strict=False))
    except msgspec.ValidationError:
        pass
    repaired = _repair(value, tp)
    if repaired is _MISSING:
        return default
    try:
        return typing.cast(T, msgspec.convert(repaired, tp, strict=False))
    except msgspec.ValidationError:  # pragma: no cover - _repair keeps only what converts
        return default


_MISSING: Any = object()


def _fits(value: Any, tp: Any) -> bool:
    try:
        msgspec.convert(value, tp, strict=False)
    except msgspec.ValidationError:
        return False
    return True


def _repair(value: Any, tp: Any) -> Any:
    """The parts of `value` that convert to `tp` (`_MISSING` if none can)."""
    if _fits(value, tp):
        return value
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        for arg in args:
            fixed = _repair(value, arg)
            if fixed is not _MISSING:
                return fixed
        return _MISSING
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct) and isinstance(value, dict):
        out = {}
        for f in msgspec.structs.fields(tp):
            if f.encode_name in value:
                fixed = _repair(value[f.encode_name], f.type)
                if fixed is not _MISSING:
                    out[f.encode_name] = fixed
        return out
    if origin in (tuple, list) and isinstance(value, list):
        item = args[0] if args else Any
        return [x for x in (_repair(v, item) for v in value) if x is not _MISSING]
    if origin is dict and isinstance(value, dict) and len(args) == 2:
        return {
            k: x
            for k, x in ((k, _repair(v, args[1])) for k, v in value.items())
            if x is not _MISSING
        }
    return _MISSING


def epoch(text: str | None) -> float | None:
    """Epoch seconds of an API timestamp (RFC 3339; no zone: UTC); None when absent, too
    long or not a time."""
    if not text or len(text) > 64:
        return None
    return _parse_time(text)


@functools.lru_cache(maxsize=1024)
def _parse_time(text: str) -> float | None:
    """`epoch` of a present, short text. The same few stamps come with every event of an
    object (its managedFields, its creation): the last thousand parsed are remembered."""
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=dt.UTC)).timestamp()


def last_write(meta: ObjectMeta, *fields: bytes) -> float | None:
    """Epoch seconds of the latest write that touched any of `fields` (e.g. b'"f:data"'),
    from managedFields; the creation time when no entry says (None if unknown)."""
    return last_write_by(meta, *fields)[0]


def last_write_by(meta: ObjectMeta, *fields: bytes) -> tuple[float | None, str]:
    """`last_write`, and the field manager of the latest write that touched any of `fields`
    by its recorded time ("" if none did), in one pass over managedFields."""
    latest: float | None = None
    latest_text, writer = "", ""
    for entry in meta.managedFields:
        if entry.subresource:
            continue
        raw = bytes(entry.fieldsV1)
        if not any(f in raw for f in fields):
            continue
        if entry.time >= latest_text:
            latest_text, writer = entry.time, entry.manager
        t = epoch(entry.time)
        if t is not None and (latest is None or t > latest):
            latest = t
    when = latest if latest is not None else epoch(meta.creationTimestamp)
    return when, sys.intern(writer)
