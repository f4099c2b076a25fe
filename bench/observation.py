"""What the harness observes from outside: its own watch of the workloads (the hash each pod
template carries) and the API server's audit log (requests by verb and resource)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client

from .runs import HARNESS_UA, KINDS

#: what the harness watches only to count events (with the workload kinds, what every
#: controller under test watches)
COUNTED = {"ConfigMap": resources.CONFIGMAPS, "Secret": resources.SECRETS}
CONTROL_PLANE_UAS = (
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
    "kube-apiserver",
    HARNESS_UA,
    "kube-reloader-dev-cluster",
)


@dataclass
class Observation:
    t: float
    workload: tuple[str, str, str]
    generation: int
    carried: dict[tuple[str, str], str]  # (type, name) -> hash carried (env var or annotation)
    paused: bool


async def watch_workloads(
    client: Client, nss: set[str], out: list[Observation], ready: asyncio.Event,
    events: list[float] | None = None,
) -> None:  # fmt: skip
    """Record every workload of `nss` (its listed state, then each change) in `out`; with
    `events`, also the time of every watch event of the kinds a controller under test
    watches (ConfigMaps, Secrets, the workload kinds; all namespaces): the denominator of
    CPU seconds per 1,000 watch events."""

    def seen(kind: str, obj: dict[str, Any]) -> None:
        ns = obj["metadata"].get("namespace", "")
        if ns in nss:
            out.append(Observation(time.monotonic(), (kind, ns, obj["metadata"]["name"]),
                                   int(obj["metadata"].get("generation", 0)), carried_hashes(obj),
                                   bool(obj["spec"].get("paused"))))  # fmt: skip

    async def one(kind: str) -> None:
        res = KINDS[kind] if kind in KINDS else COUNTED[kind]
        listed = await client.list(res)
        rv = listed.resource_version
        if kind in KINDS:
            for obj in listed.items:  # the baseline generation of every workload
                seen(kind, obj)
        listed_kinds.add(kind)
        if len(listed_kinds) == len(kinds):  # every watch starts from here on
            ready.set()
        while True:
            try:
                async for ev in client.watch(res, resource_version=rv, timeout_seconds=600):
                    if ev.type == "BOOKMARK":
                        rv = str(ev.object)
                        continue
                    obj = ev.object
                    rv = obj["metadata"]["resourceVersion"]
                    if events is not None:
                        events.append(time.monotonic())
                    if kind in KINDS and ev.type != "DELETED":
                        seen(kind, obj)
            except errors.Gone:
                listed = await client.list(res)
                rv = listed.resource_version

    kinds = [*KINDS, *(COUNTED if events is not None else ())]
    listed_kinds: set[str] = set()
    tasks = [asyncio.create_task(one(k)) for k in kinds]
    try:
        await asyncio.gather(*tasks)
    finally:
        for t in tasks:
            t.cancel()


def carried_hashes(obj: dict[str, Any]) -> dict[tuple[str, str], str]:
    """What the pod template carries, by resource: env vars STAKATER_* and last-reloaded-from
    (Reloader v1 and kube-reloader write `"type": "CONFIGMAP"`, v2 `"kind": "configmap"`)."""
    from kube_reloader.core.strategies import env_var_name  # noqa: F401 - documents the naming

    out: dict[tuple[str, str], str] = {}
    tmpl = obj["spec"].get("template") or {}
    for c in (tmpl.get("spec") or {}).get("containers") or []:
        for e in c.get("env") or []:
            name = e.get("name", "")
            if name.startswith("STAKATER_") and "value" in e:
                out[("ENV", name)] = e["value"]
    raw = ((tmpl.get("metadata") or {}).get("annotations") or {}).get(
        "reloader.stakater.com/last-reloaded-from"
    )
    if raw:
        with contextlib.suppress(ValueError):
            doc = json.loads(raw)
            doc = doc if isinstance(doc, dict) else {}
            kind, name, h = doc.get("type") or doc.get("kind"), doc.get("name"), doc.get("hash")
            if kind and name and h:
                out[(str(kind).upper(), str(name))] = str(h)
    return out


def audit_counts(path: Path, start: int) -> tuple[dict[str, int], int]:
    """Requests in the audit log after byte offset `start`, by 'VERB resource', excluding the
    harness and the control plane; returns (counts, total)."""
    counts: dict[str, int] = defaultdict(int)
    with path.open("rb") as fh:
        fh.seek(start)
        for line in fh:
            with contextlib.suppress(ValueError):
                ev = json.loads(line)
                ua = ev.get("userAgent", "")
                if any(ua.startswith(p) for p in CONTROL_PLANE_UAS) or "/" not in ev.get(
                    "requestURI", "/"
                ):
                    continue
                obj = ev.get("objectRef") or {}
                key = f"{ev.get('verb')} {obj.get('resource', ev.get('requestURI', '').split('?')[0])}"
                counts[key] += 1
    return dict(counts), sum(counts.values())
