"""coordination.k8s.io/v1 Lease mechanics: read, create, and compare-and-swap update.

Timing and policy (when to acquire, renew, give up) live in `runtime.leadership`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from kube_reloader.kube import resources
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


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    holder: str
    duration_seconds: int
    acquire_time: dt.datetime | None
    renew_time: dt.datetime | None
    transitions: int
    resource_version: str

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

    def expired(self, now: dt.datetime) -> bool:
        if not self.holder or self.renew_time is None:
            return True
        return self.renew_time + dt.timedelta(seconds=self.duration_seconds) < now


async def get(client: Client, namespace: str, name: str) -> LeaseRecord:
    return LeaseRecord.from_object(await client.get(resources.LEASES, name, namespace=namespace))


def body(
    *, namespace: str, name: str, holder: str, duration: int, acquire: dt.datetime | None,
    renew: dt.datetime, transitions: int, resource_version: str = "",
) -> dict[str, Any]:  # fmt: skip
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if resource_version:
        meta["resourceVersion"] = resource_version
    spec: dict[str, Any] = {
        "holderIdentity": holder,
        "leaseDurationSeconds": duration,
        "renewTime": micro_time(renew),
        "leaseTransitions": transitions,
    }
    if acquire is not None:
        spec["acquireTime"] = micro_time(acquire)
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}


async def create(client: Client, lease: dict[str, Any]) -> LeaseRecord:
    return LeaseRecord.from_object(await client.create(resources.LEASES, lease))


async def update(client: Client, lease: dict[str, Any]) -> LeaseRecord:
    """PUT with the read resourceVersion: a concurrent writer makes this raise Conflict."""
    return LeaseRecord.from_object(await client.update(resources.LEASES, lease))
