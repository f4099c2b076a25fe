"""Case 1: regular expressions a tenant writes cannot stall reloads for anyone else.

Before RE2, `(a*){20}b` against a ConfigMap named with 40 `a` ran for 15-20 s or more in
Python's engine while holding the event loop: `/live` timed out for 60 s and a canary in
another namespace whose ConfigMap changed 0.5 s later never reloaded; present at start, the
catch-up stalled before ready (liveness restarts, crash loop)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kube_reloader.core.regexes import MAX_LIST_CHARS
from kube_reloader.kube import resources
from kube_reloader.kube.client import Client, PatchType
from tests import builders
from tests.adversarial.tenant import Canary, controller, events_for
from tests.harness import app

# serial: adversarial: bounds on the event loop's lag and on other namespaces' reloads
pytestmark = [pytest.mark.cluster, pytest.mark.serial]

EVIL = "(a*){20}b,(a?){30}a{30}b,(.*){12}b,.*.*.*.*.*.*.*.*b"
NAME_40_A = "a" * 40


async def hostile_workload(client: Client, ns: str, name: str, reload_list: str) -> None:
    await client.create(
        resources.DEPLOYMENTS,
        builders.deployment(
            name, ns, annotations={"configmap.reloader.stakater.com/reload": reload_list},
            template=app(env_from_configmaps=(NAME_40_A,), labels={"app": name}),
        ),
    )  # fmt: skip


async def test_backtracking_patterns_present_at_start_neither_stall_readiness_nor_the_canary(
    client: Client, kubeconfig_path: Path, tenant: str, canary: Canary
) -> None:
    await client.create(resources.CONFIGMAPS, builders.configmap(NAME_40_A, tenant, {"x": "1"}))
    await client.create(resources.CONFIGMAPS, builders.configmap("a" * 100, tenant, {"x": "1"}))
    await hostile_workload(client, tenant, "evil", EVIL)
    async with controller(kubeconfig_path, [tenant, canary.namespace], client=client) as proc:
        for name in (NAME_40_A, "a" * 100):
            await client.patch(
                resources.CONFIGMAPS, name, {"data": {"x": "2"}}, namespace=tenant,
                patch_type=PatchType.MERGE,
            )  # fmt: skip
        await asyncio.sleep(0.5)
        live = await proc.probe("/live", timeout=5)
        seconds = await canary.reloads(within=15)
        ready = await proc.probe("/readyz", timeout=5)
    assert live.status == 200
    print(f"/live answered in {live.seconds:.3f}s")
    assert ready.status == 200
    print(f"canary reloaded {seconds:.2f}s after its change")


async def test_a_list_over_the_entry_cap_costs_its_workload_a_warning_and_nothing_else(
    client: Client, kubeconfig_path: Path, tenant: str, canary: Canary
) -> None:
    huge = ",".join(f"x{i}" for i in range(30_000))
    await client.create(resources.CONFIGMAPS, builders.configmap(NAME_40_A, tenant, {"x": "1"}))
    await hostile_workload(client, tenant, "huge-list", huge)
    async with controller(kubeconfig_path, [tenant, canary.namespace], client=client) as proc:
        await client.patch(
            resources.CONFIGMAPS, NAME_40_A, {"data": {"x": "2"}}, namespace=tenant,
            patch_type=PatchType.MERGE,
        )  # fmt: skip
        seconds = await canary.reloads(within=15)
        for _ in range(100):
            warnings = [
                e for e in await events_for(client, tenant, "huge-list") if e["type"] == "Warning"
            ]
            if warnings:
                break
            await asyncio.sleep(0.1)
        assert (await proc.probe("/readyz")).status == 200
    print(f"canary reloaded {seconds:.2f}s after its change")
    assert any(
        f"more than the {MAX_LIST_CHARS:,} kube-reloader accepts" in e["message"] for e in warnings
    ), warnings
