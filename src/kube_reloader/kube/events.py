"""Kubernetes Events (core/v1) about workloads: `Reloaded`, `ReloadFail` and warnings.

Events are best effort: failing to record one is logged by the caller, never fatal.
"""

from __future__ import annotations

import datetime as dt
import secrets

from kube_reloader.kube import resources
from kube_reloader.kube.client import Client


async def record(
    client: Client,
    *,
    kind: str,
    api_version: str,
    namespace: str,
    name: str,
    uid: str,
    event_type: str,
    reason: str,
    message: str,
    component: str,
) -> None:
    """Create one Event whose involvedObject is the workload (v1's recorder semantics)."""
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{name}.{secrets.token_hex(8)}",
            "namespace": namespace,
        },
        "involvedObject": {
            "kind": kind,
            "apiVersion": api_version,
            "namespace": namespace,
            "name": name,
            "uid": uid,
        },
        "type": event_type,
        "reason": reason,
        "message": message[:1024],
        "source": {"component": component},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
        "reportingComponent": component,
    }
    await client.create(resources.EVENTS, body, namespace=namespace)
