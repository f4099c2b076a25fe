"""Driving one scenario x one controller on the cluster: set up, watch, start the controller,
probe the first reload, drive the updates, analyse, then clear the cluster for the next run."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import time
from pathlib import Path
from typing import Any

import msgspec

from kube_reloader.kube import config, errors, resources
from kube_reloader.kube.client import Client

from .analysis import analyse, convergence
from .baseline import CURRENT, RELOADER_V1, RELOADER_V2, file_safe, is_kube_reloader
from .controllers import Controller, controller_argv
from .observation import Observation, audit_counts, watch_workloads
from .runs import HARNESS_UA, Run, Scenario, progress


async def run_one(scenario: Scenario, controller: str, kubeconfig: Path, audit: Path, bins: Path,
                  args: argparse.Namespace, out_dir: Path, index: int, repeat: int) -> dict[str, Any]:  # fmt: skip
    """One scenario x one controller x one repeat (the seed depends on the scenario's index
    only, so every controller and every repeat gets the same updates)."""
    cfg = config.load_kubeconfig([kubeconfig])
    tag = TAGS.get(controller, "kb")  # kb: kube-reloader@<baseline>
    run_id = f"{scenario.id.lower()}-{tag}{repeat}-{args.run}"
    name = f"{scenario.id}-{file_safe(controller)}-r{repeat + 1}"
    async with Client(cfg, user_agent=HARNESS_UA, max_connections=64) as client:
        plan = await scenario.setup(client, run_id, args)
        await asyncio.sleep(
            1.0 if args.quick else 3.0
        )  # let kube-controller-manager and kwok settle the new pods
        obs: list[Observation] = []
        events: list[float] = []
        watching = asyncio.Event()
        watcher = asyncio.create_task(
            watch_workloads(client, set(plan.namespaces), obs, watching, events)
        )
        ready = asyncio.create_task(watching.wait())
        await asyncio.wait({watcher, ready}, return_when=asyncio.FIRST_COMPLETED)
        if watcher.done():  # it failed before its watches started
            ready.cancel()
            watcher.result()
        offset = audit.stat().st_size
        env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
        if args.baseline is not None and controller == args.baseline.name:
            env = args.baseline.env(env)
        log = out_dir / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        profile = None
        if args.profile and is_kube_reloader(controller) and repeat == 0:
            stem = f"{scenario.id}-{file_safe(controller)}"
            profile = out_dir / "profiles" / f"{stem}.{args.profile}"
            profile.parent.mkdir(parents=True, exist_ok=True)
        argv, env = controller_argv(controller, bins, scenario, env)
        if controller == CURRENT:
            argv += args.current_args
        elif is_kube_reloader(controller):  # the baseline
            argv += args.baseline_args
        ctrl = Controller(controller, argv, env, log, profile, args.profile_rate)
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
            elif is_kube_reloader(controller):
                deadline = time.monotonic() + 60
                while "caches synced" not in log.read_text() and time.monotonic() < deadline:  # noqa: ASYNC110
                    await asyncio.sleep(0.1)
            else:
                await asyncio.sleep(3.0)
            ctrl.mark_driving()
            if plan.probe is None or scenario.id == "M1":
                await scenario.drive(run)
            await converge(run, obs, args.converge_timeout)
            await asyncio.sleep(args.tail)  # rollouts after the final state count as duplicates
        finally:
            ctrl.stop()
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await watcher
        api, total = audit_counts(audit, offset)
        result = analyse(run, obs, ctrl, api, total, first_reload, events)
        result["repeat"] = repeat + 1
        await clear_out(client, plan.namespaces)
    (out_dir / "raw" / f"{name}.json").write_text(json.dumps(result, indent=2))
    return result


TAGS = {CURRENT: "kr", RELOADER_V1: "v1", RELOADER_V2: "v2"}


async def converge(run: Run, obs: list[Observation], timeout: float) -> None:
    """Wait until every workload carries its final state, or `timeout` seconds after the
    last update; the analysis then reads how long it took (or how many never got there)."""
    last = max((t for t, _, _ in run.updates), default=time.monotonic())
    while time.monotonic() - last < timeout:
        pending, _ = convergence(run, obs)
        if not pending:
            return
        await asyncio.sleep(0.25)
    progress(
        f"  not converged {timeout:.0f} s after the last update: {convergence(run, obs)[0]} pairs"
    )


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
            run.clear_updates()
            return round(hit.t - ctrl.started, 2)
    return None
