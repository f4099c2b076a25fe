"""The scenarios: Reloader's load test S1-S13 (portable version) plus M1-M3, each a setup
(the objects it creates, the Plan of which workloads each resource affects) and a driver
(the updates it makes); SCENARIOS lists them in order."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable
from typing import Any

from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client, PatchType

from .runs import (
    Plan,
    Run,
    Scenario,
    cm,
    create_all,
    env_from,
    namespaces,
    progress,
    secret,
    workload,
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
