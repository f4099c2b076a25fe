"""Side-by-side benchmark: kube-reloader vs Stakater Reloader v1 on one local control plane.

Both controllers run, one after the other, as local processes against the same dev cluster
(etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok: reloads cause real
rollouts), through the same scenarios (Reloader's load test S1-S13, portable version, plus
M1 memory at scale, M2 coalescing, M3 SIGKILL restart) with the same seed. Everything is
measured from outside, identically for both:

* reload latency: update accepted -> the workload's pod template carries the new hash, seen by
  this harness's own watch (p50/p95/p99/max);
* correctness: final state per workload, (update, workload) pairs applied, rollouts beyond the
  distinct changes (duplicates), rollouts on untouched workloads (spurious);
* API load: the API server's audit log (requests by verb and resource, all user agents but the
  harness's and the control plane's own);
* CPU seconds and RSS (peak/average) from /proc.

Flags are Reloader-equivalent for both (env-vars strategy, all namespaces, JSON logs; for
kube-reloader coalescing and rate limits off), except M2 which runs kube-reloader's defaults.

    python bench/compare.py [--scenarios S1,S2] [--quick] [--seed 7]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from kube_reloader.core import hashing
from kube_reloader.devcluster.building import Builder
from kube_reloader.devcluster.cluster import DevCluster
from kube_reloader.devcluster.versions import RELOADER
from kube_reloader.kube import config, errors, resources
from kube_reloader.kube.client import Client, PatchType

HARNESS_UA = "kube-reloader-bench"
CONTROL_PLANE_UAS = (
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
    "kube-apiserver",
    HARNESS_UA,
    "kube-reloader-dev-cluster",
)
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


def simple(
    prefix: str, n_cm: int, n_ns: int = 1
) -> Callable[[Client, str, argparse.Namespace], Awaitable[Plan]]:
    async def setup(client: Client, run: str, args: argparse.Namespace) -> Plan:
        nss = [f"{run}-{i}" for i in range(n_ns)]
        await namespaces(client, nss)
        plan = Plan(nss)
        objs = []
        for ns in nss:
            for i in range(n_cm):
                objs.append(cm(f"{prefix}-cm-{i}", ns, {"key": "initial"}))
                objs.append(
                    workload(
                        "Deployment",
                        f"{prefix}-deploy-{i}",
                        ns,
                        env_from(("CONFIGMAP", f"{prefix}-cm-{i}")),
                    )
                )
                plan.affects[("CONFIGMAP", ns, f"{prefix}-cm-{i}")] = [
                    ("Deployment", ns, f"{prefix}-deploy-{i}")
                ]
                plan.workloads.append(("Deployment", ns, f"{prefix}-deploy-{i}"))
        await create_all(client, objs)
        return plan

    return setup


async def fanout_setup(
    client: Client,
    run: str,
    args: argparse.Namespace,
    kinds: tuple[tuple[str, int], ...] = (("Deployment", 50),),
) -> Plan:
    ns = f"{run}-0"
    await namespaces(client, [ns])
    plan = Plan([ns])
    objs = [cm("shared-cm", ns, {"config": "initial"})]
    for kind, count in kinds:
        for i in range(count):
            name = f"{kind.lower()}-{i}"
            objs.append(workload(kind, name, ns, env_from(("CONFIGMAP", "shared-cm"))))
            plan.workloads.append((kind, ns, name))
    plan.affects[("CONFIGMAP", ns, "shared-cm")] = list(plan.workloads)
    await create_all(client, objs)
    return plan


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
    )  # (t, resource, hash)
    attempted: int = 0
    process: Controller | None = None

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
        self.updates.append((t, (rtype, ns, name), h))

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


def random_cm_driver(every: float) -> Callable[[Run], Awaitable[None]]:
    async def drive(run: Run) -> None:
        keys = [k for k in run.plan.affects if k[0] == "CONFIGMAP"]

        async def step(n: int) -> None:
            rtype, ns, name = run.rng.choice(keys)
            await run.update(rtype, ns, name, {"key": f"value-{n}-{run.rng.random()}"})

        await run.loop(every, step)

    return drive


async def fanout_drive(run: Run) -> None:
    async def step(n: int) -> None:
        ((rtype, ns, name),) = run.plan.affects
        await run.update(rtype, ns, name, {"config": f"update-{n}"})

    await run.loop(5.0, step)


async def noop_drive(run: Run) -> None:
    keys = list(run.plan.affects)

    async def step(n: int) -> None:
        _, ns, name = run.rng.choice(keys)
        run.attempted += 1
        with contextlib.suppress(errors.KubeError):
            await run.client.patch(resources.CONFIGMAPS, name, {"metadata": {"annotations": {"noop-counter": str(n)}}},
                                   namespace=ns, patch_type=PatchType.MERGE)  # fmt: skip

    await run.loop(0.1, step)


async def api_pressure_drive(run: Run) -> None:
    keys = list(run.plan.affects)

    async def worker(g: int) -> None:
        async def step(n: int) -> None:
            rtype, ns, name = run.rng.choice(keys)
            await run.update(rtype, ns, name, {"key": f"g{g}-update-{n}"})

        await run.loop(0.1, step)

    await asyncio.gather(*(worker(g) for g in range(10)))


async def restart_drive(run: Run, sig: int = signal.SIGTERM) -> None:
    async def restarter() -> None:
        await asyncio.sleep(min(20.0, run.duration / 3))
        assert run.process is not None
        progress(
            f"  {'SIGKILL' if sig == signal.SIGKILL else 'SIGTERM'} + restart of {run.controller}"
        )
        run.process.restart(sig)

    await asyncio.gather(random_cm_driver(0.2)(run), restarter())


async def secrets_setup(client: Client, run: str, args: argparse.Namespace) -> Plan:
    ns = f"{run}-0"
    await namespaces(client, [ns])
    plan = Plan([ns])
    objs: list[dict[str, Any]] = []
    for i in range(5):
        objs += [
            secret(f"mixed-secret-{i}", ns, {"password": f"initial-{i}"}),
            cm(f"mixed-cm-{i}", ns, {"config": f"initial-{i}"}),
        ]
        plan.affects[("SECRET", ns, f"mixed-secret-{i}")] = []
        plan.affects[("CONFIGMAP", ns, f"mixed-cm-{i}")] = []
    defs = [(f"secret-only-{i}", [("SECRET", f"mixed-secret-{i}")]) for i in range(5)]
    defs += [(f"cm-only-{i}", [("CONFIGMAP", f"mixed-cm-{i}")]) for i in range(3)]
    defs += [
        (f"mixed-{i}", [("CONFIGMAP", f"mixed-cm-{i}"), ("SECRET", f"mixed-secret-{i}")])
        for i in range(2)
    ]
    for name, refs in defs:
        objs.append(workload("Deployment", name, ns, env_from(*refs)))
        plan.workloads.append(("Deployment", ns, name))
        for t, r in refs:
            plan.affects[(t, ns, r)].append(("Deployment", ns, name))
    await create_all(client, objs)
    return plan


async def secrets_drive(run: Run) -> None:
    async def step(n: int) -> None:
        ns = run.plan.namespaces[0]
        i = run.rng.randrange(5)
        if n % 2 == 0:
            await run.update("SECRET", ns, f"mixed-secret-{i}", {"password": f"updated-{i}-{n}"})
        else:
            await run.update("CONFIGMAP", ns, f"mixed-cm-{i}", {"config": f"updated-{i}-{n}"})

    await run.loop(0.5, step)


async def large_setup(client: Client, run: str, args: argparse.Namespace) -> Plan:
    ns = f"{run}-0"
    await namespaces(client, [ns])
    plan = Plan([ns])
    blob = ("abcdefghijklmnopqrstuvwxyz" * 4000)[:102400]
    objs = []
    for i in range(10):
        objs.append(cm(f"large-cm-{i}", ns, {"large-key-1": blob, "large-key-2": blob}))
        objs.append(
            workload(
                "Deployment", f"large-deploy-{i}", ns, env_from(("CONFIGMAP", f"large-cm-{i}"))
            )
        )
        plan.affects[("CONFIGMAP", ns, f"large-cm-{i}")] = [("Deployment", ns, f"large-deploy-{i}")]
        plan.workloads.append(("Deployment", ns, f"large-deploy-{i}"))
    await create_all(client, objs)
    return plan


async def large_drive(run: Run) -> None:
    blob = ("abcdefghijklmnopqrstuvwxyz" * 4000)[:102400]

    async def step(n: int) -> None:
        i = run.rng.randrange(10)
        await run.update(
            "CONFIGMAP",
            run.plan.namespaces[0],
            f"large-cm-{i}",
            {"large-key-1": blob[:-10] + f"-{n}"},
        )

    await run.loop(2.0, step)


async def complex_setup(client: Client, run: str, args: argparse.Namespace) -> Plan:
    ns = f"{run}-0"
    await namespaces(client, [ns])
    plan = Plan([ns])
    objs = []
    for i in range(5):
        objs.append(
            cm(
                f"complex-cm-{i}",
                ns,
                {"key1": f"value1-{i}", "key2": f"value2-{i}", "config": f"config-{i}"},
            )
        )
    for i in range(5):
        nxt = (i + 1) % 5
        spec = {
            "initContainers": [{"name": "init", "image": "busybox", "envFrom": [{"configMapRef": {"name": f"complex-cm-{i}"}}]}],
            "containers": [
                {"name": "main", "image": "x", "env": [
                    {"name": "CONFIG_KEY1", "valueFrom": {"configMapKeyRef": {"name": f"complex-cm-{i}", "key": "key1"}}},
                    {"name": "CONFIG_KEY2", "valueFrom": {"configMapKeyRef": {"name": f"complex-cm-{i}", "key": "key2"}}}]},
                {"name": "sidecar", "image": "x", "volumeMounts": [{"name": "config-volume", "mountPath": "/etc/config"},
                                                                   {"name": "projected-volume", "mountPath": "/etc/projected"}]},
            ],
            "volumes": [
                {"name": "config-volume", "configMap": {"name": f"complex-cm-{i}"}},
                {"name": "projected-volume", "projected": {"sources": [
                    {"configMap": {"name": f"complex-cm-{i}", "items": [{"key": "key1", "path": "primary-key1"}]}},
                    {"configMap": {"name": f"complex-cm-{nxt}", "items": [{"key": "key1", "path": "secondary-key1"}]}}]}},
            ],
        }  # fmt: skip
        objs.append(workload("Deployment", f"complex-deploy-{i}", ns, spec))
        plan.workloads.append(("Deployment", ns, f"complex-deploy-{i}"))
    for i in range(5):
        prev = (i - 1) % 5
        plan.affects[("CONFIGMAP", ns, f"complex-cm-{i}")] = [
            ("Deployment", ns, f"complex-deploy-{i}"),
            ("Deployment", ns, f"complex-deploy-{prev}"),
        ]
    await create_all(client, objs)
    return plan


async def complex_drive(run: Run) -> None:
    async def step(n: int) -> None:
        i = run.rng.randrange(5)
        await run.update("CONFIGMAP", run.plan.namespaces[0], f"complex-cm-{i}",
                         {"key1": f"updated-value1-{i}-{n}", "config": f"updated-config-{i}-{n}"})  # fmt: skip

    await run.loop(2.0, step)


async def pause_setup(client: Client, run: str, args: argparse.Namespace) -> Plan:
    ns = f"{run}-0"
    await namespaces(client, [ns])
    plan = Plan([ns])
    objs = []
    anns = {
        "reloader.stakater.com/auto": "true",
        "deployment.reloader.stakater.com/pause-period": "15s",
    }
    for i in range(10):
        objs.append(cm(f"pause-cm-{i}", ns, {"key": "initial"}))
        objs.append(
            workload(
                "Deployment",
                f"pause-deploy-{i}",
                ns,
                env_from(("CONFIGMAP", f"pause-cm-{i}")),
                anns,
            )
        )
        plan.affects[("CONFIGMAP", ns, f"pause-cm-{i}")] = [("Deployment", ns, f"pause-deploy-{i}")]
        plan.workloads.append(("Deployment", ns, f"pause-deploy-{i}"))
    await create_all(client, objs)
    return plan


async def coalesce_setup(client: Client, run: str, args: argparse.Namespace) -> Plan:
    ns = f"{run}-0"
    await namespaces(client, [ns])
    plan = Plan([ns])
    refs = [("CONFIGMAP", f"part-{i}") for i in range(5)]
    objs = [cm(n, ns, {"key": "initial"}) for _, n in refs]
    objs.append(workload("Deployment", "app", ns, env_from(*refs)))
    plan.workloads.append(("Deployment", ns, "app"))
    for _, n in refs:
        plan.affects[("CONFIGMAP", ns, n)] = [("Deployment", ns, "app")]
    await create_all(client, objs)
    return plan


async def coalesce_drive(run: Run) -> None:
    rounds = 3 if run.args.quick else 6
    for r in range(rounds):
        await asyncio.gather(
            *(
                run.update("CONFIGMAP", run.plan.namespaces[0], f"part-{i}", {"key": f"round-{r}"})
                for i in range(5)
            )
        )
        await asyncio.sleep(8.0)  # > every rate limit: each round stands alone


async def scale_setup(client: Client, run: str, args: argparse.Namespace) -> Plan:
    n_secret, n_cm, n_deploy = (1000, 500, 200) if args.quick else (10000, 5000, 2000)
    nss = [f"{run}-{i}" for i in range(10)]
    await namespaces(client, nss)
    plan = Plan(nss)
    blob = "s" * 8192
    objs: list[dict[str, Any]] = []
    for i in range(n_secret):
        objs.append(secret(f"secret-{i}", nss[i % 10], {"blob": blob[:-8] + f"{i:08d}"}))
    for i in range(n_cm):
        objs.append(cm(f"cm-{i}", nss[i % 10], {"key": f"v{i}"}))
    for i in range(n_deploy):  # counts are multiples of 10: index i % n lands in namespace i % 10
        ns = nss[i % 10]
        target = f"cm-{i % n_cm}"
        d = workload(
            "Deployment",
            f"deploy-{i}",
            ns,
            env_from(("CONFIGMAP", target), ("SECRET", f"secret-{i % n_secret}")),
        )
        d["spec"]["replicas"] = 0
        objs.append(d)
        plan.workloads.append(("Deployment", ns, f"deploy-{i}"))
        plan.affects.setdefault(("CONFIGMAP", ns, target), []).append(
            ("Deployment", ns, f"deploy-{i}")
        )
    progress(f"  creating {len(objs)} objects (M1 / time to first reload)")
    await create_all(client, objs, limit=48)
    plan.probe = (nss[0], "cm-0")
    return plan


async def scale_drive(run: Run) -> None:
    keys = list(run.plan.affects)[:50]

    async def step(n: int) -> None:
        rtype, ns, name = keys[n % len(keys)]
        await run.update(rtype, ns, name, {"key": f"m1-{n}"})

    await run.loop(0.5, step, duration=min(run.duration, 20))


SCENARIOS = [
    Scenario("S1", "Burst: 10 CM, 1 update / 100 ms", simple("burst", 10), random_cm_driver(0.1)),
    Scenario("S2", "Fan-out: 1 CM, 50 Deployments", fanout_setup, fanout_drive),
    Scenario("S3", "High cardinality: 11 ns x 20", simple("hc", 20, 11), random_cm_driver(0.2)),
    Scenario("S4", "No-op (metadata-only) updates", simple("noop", 10), noop_drive, expect_reloads=False),
    Scenario("S6", "Controller restart (SIGTERM) mid-run", simple("restart", 20), restart_drive),
    Scenario("S7", "API pressure: 10 updaters on 50 CM", simple("api", 50), api_pressure_drive),
    Scenario("S8", "Large objects: 2 x 100 KiB", large_setup, large_drive),
    Scenario("S9", "Multiple kinds: 5 Deploy, 3 STS, 2 DS", lambda c, r, a: fanout_setup(c, r, a, (("Deployment", 5), ("StatefulSet", 3), ("DaemonSet", 2))), fanout_drive),
    Scenario("S10", "Secrets and mixed", secrets_setup, secrets_drive),
    Scenario("S11", "Annotations strategy", simple("annot", 10), random_cm_driver(0.5),
             ("--reload-strategy=annotations",), ("--reload-strategy=annotations",)),
    Scenario("S12", "Pause period 15s", pause_setup, random_cm_driver(2.0)),
    Scenario("S13", "Complex references", complex_setup, complex_drive),
    Scenario("M1", "Scale: 10k Secrets 8 KiB + 5k CM + 2k Deploy", scale_setup, scale_drive),
    Scenario("M2", "Coalescing: 5 CM of one workload within 100 ms", coalesce_setup, coalesce_drive),
    Scenario("M3", "SIGKILL mid-burst, restart", simple("kill", 20), lambda r: restart_drive(r, signal.SIGKILL)),
]  # fmt: skip
S5_NOTE = "S5 (workload churn) is not reproduced: it has no expected values and measures nothing a user sees."


# --------------------------------------------------------------------------- controllers


class Controller:
    """One controller process, with /proc sampling of CPU and RSS."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.name, self.argv, self.env, self.log = name, argv, env, log
        self.samples: list[tuple[float, float, int]] = []  # (t, cpu seconds, rss bytes)
        self.cpu_before_restart = 0.0
        self.peak = 0  # highest VmHWM of the controller's processes (bytes)
        self.started = time.monotonic()
        self.proc = self._start()
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _start(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            self.argv, env=self.env, stdout=self.log.open("a"), stderr=subprocess.STDOUT
        )

    def _read(self) -> tuple[float, int] | None:
        try:
            stat = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            rss = int(Path(f"/proc/{self.proc.pid}/statm").read_text().split()[1]) * os.sysconf(
                "SC_PAGE_SIZE"
            )
            # The kernel's high-water mark: a peak shorter than the sampling interval counts.
            status = Path(f"/proc/{self.proc.pid}/status").read_text()
            hwm = int(status.split("VmHWM:", 1)[1].split()[0]) * 1024
        except (OSError, IndexError, ValueError):
            return None
        self.peak = max(self.peak, hwm)
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(stat[11]) + int(stat[12])) / ticks, rss

    def _sample(self) -> None:
        while not self._stop.wait(0.5):
            got = self._read()
            if got is not None:
                self.samples.append(
                    (time.monotonic() - self.started, self.cpu_before_restart + got[0], got[1])
                )

    def restart(self, sig: int) -> None:
        last = self._read()
        self.cpu_before_restart += last[0] if last else 0.0
        self.proc.send_signal(sig)
        self.proc.wait(timeout=30)
        self.proc = self._start()

    def stop(self) -> None:
        self._stop.set()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def controller_argv(name: str, bins: Path, scenario: Scenario) -> list[str]:
    if name == "kube-reloader":
        same = (
            []
            if scenario.id == "M2"
            else ["--reload-coalesce-window=0", "--reload-min-interval=0", "--reload-rate=0"]
        )
        return [
            sys.executable,
            "-m",
            "kube_reloader",
            "--log-format=json",
            "--metrics-addr=127.0.0.1:0",
            *same,
            *scenario.kube_reloader_args,
        ]
    return [str(bins / "reloader"), "--log-format=json", *scenario.reloader_args]


# --------------------------------------------------------------------------- observation


@dataclass
class Observation:
    t: float
    workload: tuple[str, str, str]
    generation: int
    carried: dict[tuple[str, str], str]  # (type, name) -> hash carried (env var or annotation)
    paused: bool


async def watch_workloads(
    client: Client, nss: set[str], out: list[Observation], ready: asyncio.Event
) -> None:
    async def one(kind: str) -> None:
        res = KINDS[kind]
        listed = await client.list(res)
        rv = listed.resource_version
        for obj in listed.items:  # the baseline generation of every workload
            ns = obj["metadata"].get("namespace", "")
            if ns in nss:
                out.append(Observation(time.monotonic(), (kind, ns, obj["metadata"]["name"]),
                                       int(obj["metadata"].get("generation", 0)), carried_hashes(obj),
                                       bool(obj["spec"].get("paused"))))  # fmt: skip
        first = True
        while True:
            try:
                async for ev in client.watch(res, resource_version=rv, timeout_seconds=600):
                    if first:
                        first = False
                    if ev.type == "BOOKMARK":
                        rv = str(ev.object)
                        continue
                    obj = ev.object
                    rv = obj["metadata"]["resourceVersion"]
                    ns = obj["metadata"].get("namespace", "")
                    if ns not in nss or ev.type == "DELETED":
                        continue
                    out.append(Observation(time.monotonic(), (kind, ns, obj["metadata"]["name"]), int(obj["metadata"].get("generation", 0)),
                                           carried_hashes(obj), bool(obj["spec"].get("paused"))))  # fmt: skip
            except errors.Gone:
                listed = await client.list(res)
                rv = listed.resource_version

    tasks = [asyncio.create_task(one(k)) for k in KINDS]
    ready.set()
    try:
        await asyncio.gather(*tasks)
    finally:
        for t in tasks:
            t.cancel()


def carried_hashes(obj: dict[str, Any]) -> dict[tuple[str, str], str]:
    """What the pod template carries, by resource: env vars STAKATER_* and last-reloaded-from."""
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
            out[(str(doc.get("type")), str(doc.get("name")))] = str(doc.get("hash"))
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


# --------------------------------------------------------------------------- analysis


def analyse(run: Run, obs: list[Observation], ctrl: Controller, api: dict[str, int], api_total: int,
            first_reload_s: float | None) -> dict[str, Any]:  # fmt: skip
    from kube_reloader.core.objects import ResourceType
    from kube_reloader.core.strategies import env_var_name

    def carried(o: Observation, res: tuple[str, str, str]) -> str | None:
        rtype, _, name = res
        env = o.carried.get(("ENV", env_var_name(name, ResourceType(rtype))))
        return env if env is not None else o.carried.get((rtype, name))

    by_workload: dict[tuple[str, str, str], list[Observation]] = defaultdict(list)
    for o in obs:
        by_workload[o.workload].append(o)
    latencies: list[float] = []
    applied = superseded = missed = 0
    last_update: dict[tuple[str, str, str], tuple[float, str]] = {}
    for t, res, h in run.updates:
        last_update[res] = (t, h)
    for t, res, h in run.updates:
        for w in run.plan.affects.get(res, []):
            seen = next(
                (o.t for o in by_workload[w] if o.t >= t - 0.005 and carried(o, res) == h), None
            )
            if seen is not None:
                latencies.append((seen - t) * 1000)
                applied += 1
            elif last_update[res][1] != h:
                superseded += 1
            else:
                missed += 1
    # rollouts vs distinct changes, per workload
    duplicates = spurious = rollouts = pauses = 0
    suspects: dict[str, list[tuple[float, int, bool, list[str]]]] = {}
    touched = {w for _, res, _ in run.updates for w in run.plan.affects.get(res, [])}
    for w in run.plan.workloads:
        trace = by_workload[w]
        if not trace:
            continue
        pairs = list(itertools.pairwise(trace))
        pauses += sum(1 for a, b in pairs if b.paused and not a.paused)
        # Pausing or resuming a Deployment (pause-period) changes its spec, so its generation,
        # but not its pod template: not a rollout.
        pausing = sum(
            1
            for a, b in pairs
            if b.generation > a.generation and b.carried == a.carried and b.paused != a.paused
        )
        gens = [o.generation for o in trace]
        bumps = max(0, max(gens) - min(gens) - pausing)
        rollouts += bumps
        distinct = len({tuple(sorted(o.carried.items())) for o in trace}) - 1
        extra = bumps if w not in touched else max(0, bumps - distinct)
        if w not in touched:
            spurious += extra
        else:
            duplicates += extra
        if extra:  # what the harness saw of this workload, to tell why (t from the run's start)
            suspects["/".join(w)] = [
                (round(o.t - ctrl.started, 3), o.generation, o.paused, sorted(o.carried.values()))
                for o in trace
            ]
    cpu = ctrl.samples[-1][1] if ctrl.samples else 0.0
    rss = [s[2] for s in ctrl.samples]
    n = len(run.updates)
    return {
        "scenario": run.scenario.id, "controller": run.controller, "updates": n, "attempted": run.attempted,
        "nominal_rate": None, "achieved_rate": round(n / run.duration, 2) if run.duration else None,
        "latency_ms": _summary(latencies), "latency_samples": [round(x, 2) for x in latencies],
        "applied": applied, "superseded": superseded, "missed": missed,
        "rollouts": rollouts, "duplicates": duplicates, "spurious": spurious, "pause_cycles": pauses,
        "api_requests": api_total, "api_by_verb_resource": api, "api_per_update": round(api_total / n, 2) if n else None,
        "cpu_seconds": round(cpu, 2), "rss_peak_mib": round(max(ctrl.peak, *rss) / 2**20, 1) if rss else None,
        "rss_avg_mib": round(statistics.mean(rss) / 2**20, 1) if rss else None,
        "rss_samples": [(round(t, 1), round(r / 2**20, 1)) for t, _, r in ctrl.samples],
        "first_reload_s": first_reload_s, "duplicate_or_spurious_traces": suspects,
    }  # fmt: skip


def _summary(xs: list[float]) -> dict[str, float | None]:
    if not xs:
        return {"p50": None, "p95": None, "p99": None, "max": None}
    s = sorted(xs)

    def q(p: float) -> float:
        return round(s[min(len(s) - 1, round(p * (len(s) - 1)))], 1)

    return {"p50": q(0.5), "p95": q(0.95), "p99": q(0.99), "max": round(s[-1], 1)}


# --------------------------------------------------------------------------- driving


async def run_one(scenario: Scenario, controller: str, kubeconfig: Path, audit: Path, bins: Path,
                  args: argparse.Namespace, out_dir: Path, index: int) -> dict[str, Any]:  # fmt: skip
    cfg = config.load_kubeconfig([kubeconfig])
    run_id = f"{scenario.id.lower()}-{'kr' if controller == 'kube-reloader' else 'st'}-{args.run}"
    async with Client(cfg, user_agent=HARNESS_UA, max_connections=64) as client:
        plan = await scenario.setup(client, run_id, args)
        await asyncio.sleep(
            1.0 if args.quick else 3.0
        )  # let kube-controller-manager and kwok settle the new pods
        obs: list[Observation] = []
        watching = asyncio.Event()
        watcher = asyncio.create_task(watch_workloads(client, set(plan.namespaces), obs, watching))
        await watching.wait()
        offset = audit.stat().st_size
        env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
        env.pop("KUBERNETES_NAMESPACE", None)
        log = out_dir / "logs" / f"{scenario.id}-{controller}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        ctrl = Controller(controller, controller_argv(controller, bins, scenario), env, log)
        run = Run(
            scenario,
            controller,
            client,
            plan,
            random.Random(args.seed + index),
            args.duration,
            args,
            process=ctrl,
        )
        first_reload = None
        try:
            if plan.probe is not None:
                first_reload = await probe_first_reload(run, ctrl, obs)
            elif controller == "kube-reloader":
                deadline = time.monotonic() + 60
                while "caches synced" not in log.read_text() and time.monotonic() < deadline:  # noqa: ASYNC110
                    await asyncio.sleep(0.1)
            else:
                await asyncio.sleep(3.0)
            if plan.probe is None or scenario.id == "M1":
                await scenario.drive(run)
            await asyncio.sleep(5.0 if not args.quick else 3.0)  # let the last reloads land
        finally:
            ctrl.stop()
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await watcher
        api, total = audit_counts(audit, offset)
        result = analyse(run, obs, ctrl, api, total, first_reload)
        await clear_out(client, plan.namespaces)
    (out_dir / "raw" / f"{scenario.id}-{controller}.json").write_text(json.dumps(result, indent=2))
    return result


# Everything a controller under test LISTs or WATCHes, plus the pods the rollouts made.
CLEARED = (resources.DEPLOYMENTS, resources.STATEFULSETS, resources.DAEMONSETS, resources.CRONJOBS,
           resources.JOBS, resources.REPLICASETS, resources.CONFIGMAPS, resources.SECRETS, resources.PODS)  # fmt: skip


async def clear_out(client: Client, names: list[str], timeout: float = 900.0) -> None:
    """Delete a finished run's namespaces and, now, every object in them the controllers watch.

    The next controller must start on a clean cluster: otherwise its initial LIST and its
    level-based start see the previous run's objects (stale workloads, thousands of Secrets
    being garbage-collected), which skews its latency, CPU and RSS. The namespace controller
    waits 5 s before it starts emptying a namespace, then discovers its content; instead, the
    namespace is marked for deletion (so nothing new can be created in it, such as the
    kube-root-ca.crt ConfigMap) and each collection is deleted at once, pods with no grace
    period. The empty namespaces then go in the background, while the next run sets up.
    """
    body = msgspec.json.encode(
        {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "propagationPolicy": "Background",
            "gracePeriodSeconds": 0,
        }
    )
    t0 = time.monotonic()
    for ns in names:
        with contextlib.suppress(errors.KubeError):
            await client.delete(resources.NAMESPACES, ns)
    left = [(ns, res) for ns in names for res in CLEARED]
    while left and time.monotonic() - t0 < timeout:
        still = []
        for ns, res in left:
            # A DELETE of 10,000 Secrets may outlast the client's timeout: check, and repeat.
            with contextlib.suppress(errors.KubeError):
                await client.request(
                    "DELETE", res.path(ns), body=body, content_type="application/json"
                )
            try:
                page = await client.request("GET", res.path(ns), params={"limit": "1"})
            except errors.NotFound:
                continue
            if msgspec.json.decode(page).get("items"):
                still.append((ns, res))
        left = still
        if left:
            await asyncio.sleep(0.5)
    if left:
        progress(f"  warning: objects left after {timeout:.0f} s: {left[:5]}")
    else:
        progress(f"  cleaned up in {time.monotonic() - t0:.1f} s")


async def probe_first_reload(run: Run, ctrl: Controller, obs: list[Observation]) -> float | None:
    """Update the probe ConfigMap until a reload is seen: start -> first reload possible."""
    assert run.plan.probe is not None
    ns, name = run.plan.probe
    res = ("CONFIGMAP", ns, name)
    targets = set(run.plan.affects.get(res, []))
    n = 0
    while time.monotonic() - ctrl.started < 600:
        await run.update("CONFIGMAP", ns, name, {"key": f"probe-{n}"})
        n += 1
        h = run.updates[-1][2] if run.updates else ""
        await asyncio.sleep(0.25)
        from kube_reloader.core.objects import ResourceType
        from kube_reloader.core.strategies import env_var_name

        var = ("ENV", env_var_name(name, ResourceType.CONFIGMAP))
        hit = next((o for o in obs if o.workload in targets and o.carried.get(var) == h), None)
        if hit is not None:
            run.updates.clear()
            return round(hit.t - ctrl.started, 2)
    return None


# --------------------------------------------------------------------------- report


ROWS = [
    ("updates", "updates made"), ("latency_ms.p50", "latency p50 (ms)"), ("latency_ms.p95", "latency p95 (ms)"),
    ("latency_ms.p99", "latency p99 (ms)"), ("latency_ms.max", "latency max (ms)"), ("applied", "(update, workload) applied"),
    ("missed", "missed (final state not reached)"), ("superseded", "superseded before applied"), ("rollouts", "rollouts"),
    ("duplicates", "duplicate rollouts"), ("spurious", "spurious rollouts"), ("api_requests", "API requests"),
    ("api_per_update", "API requests per update"), ("cpu_seconds", "CPU seconds"), ("rss_peak_mib", "RSS peak (MiB)"),
    ("rss_avg_mib", "RSS average (MiB)"), ("first_reload_s", "start to first reload (s)"), ("pause_cycles", "pause cycles"),
]  # fmt: skip


def _get(d: dict[str, Any], path: str) -> Any:
    for p in path.split("."):
        d = d.get(p) if isinstance(d, dict) else None  # type: ignore[assignment]
    return d


def report(results: dict[str, dict[str, dict[str, Any]]], meta: dict[str, Any]) -> str:
    lines = [f"# kube-reloader vs Stakater Reloader v{meta['reloader_version']}", "",
             f"{meta['date']} — {meta['machine']} — {'quick' if meta['quick'] else 'full'} run, seed {meta['seed']}, "
             f"{meta['duration']} s per scenario. Ratio = kube-reloader / Reloader (lower is better for latency, "
             "requests, CPU and memory).", "", S5_NOTE, ""]  # fmt: skip
    for sid, by_ctrl in results.items():
        title = next(s.title for s in SCENARIOS if s.id == sid)
        lines += [
            f"## {sid} — {title}",
            "",
            "| measure | kube-reloader | Reloader | ratio |",
            "|---|---|---|---|",
        ]
        kr, st = by_ctrl.get("kube-reloader", {}), by_ctrl.get("reloader", {})
        for key, label in ROWS:
            a, b = _get(kr, key), _get(st, key)
            if a is None and b is None:
                continue
            ratio = (
                f"{a / b:.2f}"
                if isinstance(a, int | float) and isinstance(b, int | float) and b
                else "—"
            )
            lines.append(
                f"| {label} | {a if a is not None else '—'} | {b if b is not None else '—'} | {ratio} |"
            )
        top = sorted((kr.get("api_by_verb_resource") or {}).items(), key=lambda kv: -kv[1])[:4]
        top_b = sorted((st.get("api_by_verb_resource") or {}).items(), key=lambda kv: -kv[1])[:4]
        lines += ["", f"API calls — kube-reloader: {', '.join(f'{k} {v}' for k, v in top) or 'none'}; "
                      f"Reloader: {', '.join(f'{k} {v}' for k, v in top_b) or 'none'}", ""]  # fmt: skip
    return "\n".join(lines) + "\n"


def plots(results: dict[str, dict[str, dict[str, Any]]], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    ids = list(results)
    cols = 4
    rows = (len(ids) + cols - 1) // cols
    for what, fname in (("latency", "latency_cdf.png"), ("rss", "rss.png")):
        fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows), squeeze=False)
        for ax, sid in zip(axes.flat, ids, strict=False):
            for ctrl, style in (("kube-reloader", "-"), ("reloader", "--")):
                r = results[sid].get(ctrl)
                if not r:
                    continue
                if what == "latency":
                    xs = sorted(r["latency_samples"])
                    if xs:
                        ax.plot(xs, [(i + 1) / len(xs) for i in range(len(xs))], style, label=ctrl)
                    ax.set_xscale("log")
                    ax.set_xlabel("ms")
                else:
                    pts = r["rss_samples"]
                    if pts:
                        ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=ctrl)
                    ax.set_xlabel("s")
                    ax.set_ylabel("MiB")
            ax.set_title(sid)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7)
        for ax in list(axes.flat)[len(ids) :]:
            ax.axis("off")
        fig.suptitle("Reload latency CDF" if what == "latency" else "RSS over time")
        fig.tight_layout()
        fig.savefig(out / fname, dpi=90)
        plt.close(fig)
        made.append(fname)
    return made


async def main_async(args: argparse.Namespace) -> int:
    selected = [s for s in SCENARIOS if not args.scenarios or s.id in args.scenarios]
    if not selected:
        print(
            f"no such scenario; choose from {', '.join(s.id for s in SCENARIOS)}", file=sys.stderr
        )
        return 2
    builder = Builder(extra=("reloader",), report=lambda line: progress(line))
    bins = builder.ensure().bin
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = Path(args.results) / stamp
    (out / "raw").mkdir(parents=True, exist_ok=True)
    args.run = stamp[-6:].lower()
    state = Path(tempfile.mkdtemp(prefix="kube-reloader-compare-"))
    cluster = DevCluster(state, report=lambda line: None)
    results: dict[str, dict[str, dict[str, Any]]] = {}
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "quick": args.quick, "seed": args.seed,
            "duration": args.duration, "reloader_version": RELOADER,
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"}  # fmt: skip
    # SIGTERM (timeout, CI) cancels the run like Ctrl-C, so the cluster below is stopped.
    main_task = asyncio.current_task()
    assert main_task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main_task.cancel)
    try:
        progress("starting the dev cluster (with an audit log)")
        await asyncio.to_thread(cluster.up, nodes=2, audit=True)
        audit = state / "audit.log"
        total = len(selected) * 2
        done = 0
        started = time.monotonic()
        for i, scenario in enumerate(selected):
            results[scenario.id] = {}
            for controller in ("kube-reloader", "reloader"):
                eta = ""
                if done:
                    eta = f", ETA {((time.monotonic() - started) / done) * (total - done) / 60:.1f} min"
                progress(f"{scenario.id} {scenario.title} — {controller} ({done + 1}/{total}{eta})")
                results[scenario.id][controller] = await run_one(
                    scenario, controller, cluster.kubeconfig, audit, bins, args, out, i
                )
                r = results[scenario.id][controller]
                progress(f"  p50 {r['latency_ms']['p50']} ms, p99 {r['latency_ms']['p99']} ms, missed {r['missed']}, "
                         f"dup {r['duplicates']}, api {r['api_requests']}, rss {r['rss_peak_mib']} MiB")  # fmt: skip
                done += 1
    finally:
        cluster.down()
    (out / "results.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    (out / "report.md").write_text(report(results, meta))
    try:
        made = plots(results, out)
        progress(f"plots: {', '.join(made)}")
    except ImportError:
        progress("matplotlib is not installed: no plots (pip install -e '.[bench]')")
    progress(f"report: {out / 'report.md'}")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--scenarios",
        type=lambda s: [x.strip().upper() for x in s.split(",") if x.strip()],
        default=[],
    )
    p.add_argument(
        "--quick", action="store_true", help="short durations and fewer objects (< 10 min)"
    )
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--duration", type=float, default=None)
    p.add_argument("--results", default=str(Path(__file__).parent / "results"))
    args = p.parse_args()
    if args.duration is None:
        args.duration = 10.0 if args.quick else 55.0
    try:
        return asyncio.run(main_async(args))
    except (asyncio.CancelledError, KeyboardInterrupt):
        progress("interrupted: the dev cluster was stopped")
        return 143


if __name__ == "__main__":
    sys.exit(main())
