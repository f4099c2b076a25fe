"""What the staleness audit reads: when each live pod of a namespace started, by the workload
that owns it, and the validity of a TLS Secret's certificate.

Pods are read by a paged LIST of one namespace, decoded into a projection of a few fields
(owner, labels, phase, start times) and reduced page by page to (workload, start time):
no pod cache, and never more than one page of pods alive. A Secret is read by one LIST by
name (`fieldSelector=metadata.name=`: the chart grants list and watch on Secrets, not get);
only its `tls.crt` is decoded, reduced to its certificate's validity and dropped at once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping

import msgspec

from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client
from kube_reloader.kube.paging import DEFAULT_PAGE_BYTES
from kube_reloader.kube.projections import ObjectMeta, OwnerReference, epoch, last_write

_BYTES = msgspec.json.Decoder(bytes)
_CONTENT_FIELDS = (b'"f:data"', b'"f:binaryData"', b'"f:stringData"')
#: the label a Deployment's (an Argo Rollout's) ReplicaSets put on their pods
_HASH_LABELS = (("pod-template-hash", "Deployment"), ("rollouts-pod-template-hash", "Rollout"))


class _Meta(msgspec.Struct, frozen=True):
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    ownerReferences: tuple[OwnerReference, ...] = ()
    deletionTimestamp: str | None = None


class _Running(msgspec.Struct, frozen=True):
    startedAt: str | None = None


class _State(msgspec.Struct, frozen=True):
    running: _Running | None = None


class _ContainerStatus(msgspec.Struct, frozen=True):
    state: _State = msgspec.field(default_factory=_State)


class _Status(msgspec.Struct, frozen=True):
    phase: str = ""
    startTime: str | None = None
    containerStatuses: tuple[_ContainerStatus, ...] = ()


class PodStart(msgspec.Struct, frozen=True):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    status: _Status = msgspec.field(default_factory=_Status)


def owner_of(pod: PodStart) -> tuple[str, str] | None:
    """(kind, name) of the workload whose pod this is: a Deployment's or Rollout's through
    its ReplicaSet (`<name>-<pod-template-hash>`), a StatefulSet's or DaemonSet's directly."""
    owner = next((o for o in pod.metadata.ownerReferences if o.controller), None)
    if owner is None:
        return None
    if owner.kind in ("StatefulSet", "DaemonSet"):
        return owner.kind, owner.name
    if owner.kind == "ReplicaSet":
        for label, kind in _HASH_LABELS:
            value = pod.metadata.labels.get(label, "")
            if value and owner.name.endswith(f"-{value}"):
                return kind, owner.name[: -len(value) - 1]
    return None


def start_of(pod: PodStart) -> float | None:
    """When the pod's content was last read: the start of its oldest running container (env
    values are resolved when a container starts), else (no container status reported) the
    pod's start; None for a pod that runs nothing (not Running, terminating, or no container
    running: a crashlooping one reads current content at each restart)."""
    if pod.status.phase != "Running" or pod.metadata.deletionTimestamp is not None:
        return None
    statuses = pod.status.containerStatuses
    if not statuses:
        return epoch(pod.status.startTime)
    starts = [
        t
        for c in statuses
        if c.state.running is not None and (t := epoch(c.state.running.startedAt)) is not None
    ]
    return min(starts) if starts else None


async def pod_starts(client: Client, namespace: str) -> dict[tuple[str, str], list[float]]:
    """The start times of the live pods of `namespace`, by (kind, name) of their workload."""
    out: dict[tuple[str, str], list[float]] = defaultdict(list)

    def reduce(pod: PodStart) -> None:
        owner, start = owner_of(pod), start_of(pod)
        if owner is not None and start is not None:
            out[owner].append(start)

    await client.list_reduced(
        resources.PODS,
        namespace=namespace,
        type=PodStart,
        reduce=reduce,
        page_bytes=DEFAULT_PAGE_BYTES,
    )
    return dict(out)


class ConfigMeta(msgspec.Struct, frozen=True):
    """A ConfigMap or Secret without its content: enough to tell when the content changed."""

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    type: str = ""


def changed_at(meta: ObjectMeta) -> float | None:
    """Epoch seconds of the last write to a ConfigMap's or Secret's content."""
    return last_write(meta, *_CONTENT_FIELDS)


class _TlsSecret(msgspec.Struct, frozen=True):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    type: str = ""
    data: dict[str, msgspec.Raw] | None = None


class SecretCertificate(msgspec.Struct, frozen=True):
    """A Secret's `tls.crt`, read only when the Secret is a TLS one."""

    resource_version: str
    tls: bool
    #: the certificate's bytes (public data; the caller reduces them and drops them)
    pem: bytes | None = None
    #: why a TLS Secret's certificate could not be read
    error: str | None = None


async def certificate(
    client: Client, namespace: str, name: str, is_tls: Callable[[str, Mapping[str, str]], bool]
) -> SecretCertificate:
    """Whether Secret `name` is a TLS Secret (`is_tls` of its type and annotations) and, if
    so, its `tls.crt` (nothing else of the data is decoded)."""
    listed = await client.list(
        resources.SECRETS,
        namespace=namespace,
        field_selector=f"metadata.name={name}",
        type=_TlsSecret,
    )
    if not listed.items:
        raise errors.NotFound(404, f"Secret {namespace}/{name} not found")
    secret = listed.items[0]
    meta = secret.metadata
    if not is_tls(secret.type, meta.annotations):
        return SecretCertificate(meta.resourceVersion, False)
    raw = (secret.data or {}).get("tls.crt")
    if raw is None:
        return SecretCertificate(meta.resourceVersion, True, error="no tls.crt key")
    try:
        return SecretCertificate(meta.resourceVersion, True, pem=_BYTES.decode(raw))
    except (msgspec.DecodeError, msgspec.ValidationError):
        return SecretCertificate(meta.resourceVersion, True, error="tls.crt is not base64")
