"""coordination.k8s.io/v1 Lease mechanics: read, create, and compare-and-swap update.

Timing and policy (when to acquire, renew, give up, and when a lease counts as expired) live in
`runtime.leadership`. Nothing here reads a clock: the times written into a Lease are given by
the caller, and the times read back are data about another machine's clock, never compared
with ours.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import msgspec

from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client


def micro_time(when: dt.datetime) -> str:
    """metav1.MicroTime: RFC 3339 with microseconds, UTC."""
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


class LeaseRecord(msgspec.Struct, frozen=True):
    """A Lease's spec as leader election reads and writes it (client-go's
    LeaderElectionRecord), plus the resourceVersion an update must match."""

    holder: str
    duration_seconds: int
    acquire_time: dt.datetime | None
    renew_time: dt.datetime | None
    transitions: int
    resource_version: str = ""

    @classmethod
    def from_object(cls, obj: dict[str, Any]) -> LeaseRecord:
        spec = obj.get("spec") or {}
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=parse_time(spec.get("acquireTime")),
            renew_time=parse_time(spec.get("renewTime")),
            transitions=int(spec.get("leaseTransitions") or 0),
            resource_version=str((obj.get("metadata") or {}).get("resourceVersion") or ""),
        )

    def same_record(self, other: LeaseRecord) -> bool:
        """True when both carry the same election record (resourceVersion aside)."""
        mine = msgspec.structs.replace(self, resource_version="")
        return mine == msgspec.structs.replace(other, resource_version="")


def to_object(record: LeaseRecord, *, namespace: str, name: str) -> dict[str, Any]:
    """The Lease object for `record`; its resourceVersion (if any) makes an update conditional."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if record.resource_version:
        meta["resourceVersion"] = record.resource_version
    spec: dict[str, Any] = {
        "holderIdentity": record.holder,
        "leaseDurationSeconds": record.duration_seconds,
        "leaseTransitions": record.transitions,
    }
    if record.renew_time is not None:
        spec["renewTime"] = micro_time(record.renew_time)
    if record.acquire_time is not None:
        spec["acquireTime"] = micro_time(record.acquire_time)
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}


class LeaseLock:
    """One Lease object, read and written through one client."""

    def __init__(self, client: Client, namespace: str, name: str) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name

    def __repr__(self) -> str:
        return f"LeaseLock({self.namespace}/{self.name})"

    async def get(self) -> LeaseRecord | None:
        """The current record, or None when the Lease does not exist."""
        try:
            obj = await self.client.get(resources.LEASES, self.name, namespace=self.namespace)
        except errors.NotFound:
            return None
        return LeaseRecord.from_object(obj)

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        """POST the Lease; AlreadyExists when another replica created it first."""
        obj = to_object(record, namespace=self.namespace, name=self.name)
        return LeaseRecord.from_object(await self.client.create(resources.LEASES, obj))

    async def update(self, record: LeaseRecord) -> LeaseRecord:
        """PUT with `record.resource_version`: a concurrent writer makes this raise Conflict."""
        obj = to_object(record, namespace=self.namespace, name=self.name)
        return LeaseRecord.from_object(await self.client.update(resources.LEASES, obj))
