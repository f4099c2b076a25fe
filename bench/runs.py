"""The benchmark harness's shared vocabulary: its user agent, the workload kinds, progress
lines, the objects it creates (ConfigMaps, Secrets, workloads), what a scenario is (Scenario,
the Plan its setup returns) and one Run of it (updates made, driving loops)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kube_reloader.core import hashing
from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client, PatchType

if TYPE_CHECKING:
    from .controllers import Controller


HARNESS_UA = "kube-reloader-bench"
#: seconds of updates per scenario in a full-length run (`--duration` changes it; quick: 10)
FULL_DURATION = 55.0
KINDS = {
    "Deployment": resources.DEPLOYMENTS,
    "StatefulSet": resources.STATEFULSETS,
    "DaemonSet": resources.DAEMONSETS,
}
T0 = time.monotonic()


def progress(msg: str) -> None:
    print(f"[{time.monotonic() - T0:7.1f}s] {msg}", flush=True)


# --------------------------------------------------------------------------- objects


def cm(name: str, ns: str, data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns},
        "data": data,
    }


def secret(name: str, ns: str, data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": ns},
        "stringData": data,
    }


def workload(
    kind: str, name: str, ns: str, spec: dict[str, Any], annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    labels = {"app": name}
    body: dict[str, Any] = {"selector": {"matchLabels": labels},
                            "template": {"metadata": {"labels": labels}, "spec": spec}}  # fmt: skip
    if kind != "DaemonSet":
        body["replicas"] = 1
    if kind == "StatefulSet":
        body["serviceName"] = name
    return {"apiVersion": "apps/v1", "kind": kind,
            "metadata": {"name": name, "namespace": ns, "annotations": annotations or {"reloader.stakater.com/auto": "true"}},
            "spec": body}  # fmt: skip


def env_from(*refs: tuple[str, str]) -> dict[str, Any]:
    return {"containers": [{"name": "app", "image": "registry.local/app:1",
                            "envFrom": [{"configMapRef" if t == "CONFIGMAP" else "secretRef": {"name": n}} for t, n in refs]}]}  # fmt: skip


# --------------------------------------------------------------------------- scenarios


@dataclass
class Plan:
    """What a scenario created: which workloads each resource affects."""

    namespaces: list[str]
    affects: dict[tuple[str, str, str], list[tuple[str, str, str]]] = field(
        default_factory=dict
    )  # (type, ns, name) -> workloads
    workloads: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, ns, name)
    probe: tuple[str, str] | None = None  # (ns, configmap) for the time-to-first-reload probe


@dataclass
class Scenario:
    id: str
    title: str
    setup: Callable[[Client, str, argparse.Namespace], Awaitable[Plan]]
    drive: Callable[[Run], Awaitable[None]]
    kube_reloader_args: tuple[str, ...] = ()
    reloader_args: tuple[str, ...] = ()
    expect_reloads: bool = True


async def create_all(client: Client, objs: list[dict[str, Any]], limit: int = 32) -> None:
    sem = asyncio.Semaphore(limit)
    res = {
        "ConfigMap": resources.CONFIGMAPS,
        "Secret": resources.SECRETS,
        "Namespace": resources.NAMESPACES,
        **KINDS,
    }

    async def one(o: dict[str, Any]) -> None:
        async with sem:
            with contextlib.suppress(errors.AlreadyExists):
                await client.create(res[o["kind"]], o)

    await asyncio.gather(*(one(o) for o in objs))


async def namespaces(client: Client, names: list[str]) -> None:
    await create_all(
        client, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in names]
    )


@dataclass
class Run:
    """One scenario x one controller."""

    scenario: Scenario
    controller: str
    client: Client
    plan: Plan
    rng: random.Random
    duration: float
    args: argparse.Namespace
    updates: list[tuple[float, tuple[str, str, str], str]] = field(
        default_factory=list
    )  # (t, resource, hash), in the order the responses were read
    #: per resource, the update the API server committed last: (resourceVersion, t, hash).
    #: Two concurrent patches of one object can be answered in either order, so the last
    #: response read is not always the final content.
    committed: dict[tuple[str, str, str], tuple[int, float, str]] = field(default_factory=dict)
    attempted: int = 0
    process: Controller | None = None

    def final(self) -> dict[tuple[str, str, str], tuple[float, str]]:
        """Each updated resource's final state: (time its update was accepted, hash)."""
        return {res: (t, h) for res, (_, t, h) in self.committed.items()}

    def clear_updates(self) -> None:
        self.updates.clear()
        self.committed.clear()

    async def update(self, rtype: str, ns: str, name: str, data: dict[str, str]) -> None:
        self.attempted += 1
        res = resources.CONFIGMAPS if rtype == "CONFIGMAP" else resources.SECRETS
        body = {"data": data} if rtype == "CONFIGMAP" else {"stringData": data}
        try:
            obj = await self.client.patch(res, name, body, namespace=ns, patch_type=PatchType.MERGE)
        except errors.KubeError:
            return
        t = time.monotonic()
        if rtype == "CONFIGMAP":
            h = hashing.configmap_hash(obj.get("data") or {})
        else:
            import base64

            h = hashing.secret_hash(
                {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
            )
        res = (rtype, ns, name)
        self.updates.append((t, res, h))
        try:
            version = int(obj["metadata"]["resourceVersion"])
        except (KeyError, TypeError, ValueError):  # not etcd's integers: the order read stands
            version = self.committed.get(res, (0, 0.0, ""))[0] + 1
        if version >= self.committed.get(res, (-1, 0.0, ""))[0]:
            self.committed[res] = (version, t, h)

    async def loop(
        self, every: float, step: Callable[[int], Awaitable[None]], duration: float | None = None
    ) -> None:
        end = time.monotonic() + (duration or self.duration)
        n = 0
        while time.monotonic() < end:
            started = time.monotonic()
            await step(n)
            n += 1
            await asyncio.sleep(max(0.0, every - (time.monotonic() - started)))
