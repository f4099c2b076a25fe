"""The start-up catch-up on time alone: a workload annotated for reload after its ConfigMap
last changed rolls only when some pod of it started before that change (real control plane;
the ReplicaSet controller and kwok create the pods)."""

from __future__ import annotations

import asyncio
import time

import pytest

from kube_reloader.core import evicting
from kube_reloader.kube import pods, resources
from kube_reloader.kube.client import Client
from kube_reloader.runtime import freshness, podviews
from tests import builders
from tests.harness import env_of, generation, running, update_cm
from tests.waiting import clock_past, eventually, next_second

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]


async def live(client: Client, namespace: str) -> list[evicting.Pod]:
    listed = await client.list(resources.PODS, namespace=namespace, label_selector="app=w",
                               type=pods.PodObject)  # fmt: skip
    return [v for v in map(podviews.view, listed.items) if not v.terminating]


async def two_ready(client: Client, namespace: str) -> list[evicting.Pod]:
    async def probe() -> list[evicting.Pod] | None:
        found = await live(client, namespace)
        return found if len(found) == 2 and all(p.ready for p in found) else None

    return await eventually(probe, what="2 Ready pods", timeout=60)


async def annotated_after_the_change(client: Client, namespace: str, *, new_pods: bool) -> int:
    """A Deployment (2 pods) on ConfigMap `c`, not annotated for reload; `c` changes; with
    `new_pods` its pods are then deleted (the ReplicaSet re-creates them on the new content);
    then `kubectl annotate` adds `auto` (its metadata, not its template). Its generation."""
    await client.create(resources.CONFIGMAPS, builders.configmap("c", namespace, {"v": "1"}))
    await client.create(resources.DEPLOYMENTS, builders.auto_deployment(
        "w", namespace, configmaps=("c",), replicas=2, annotations={}))  # fmt: skip
    await two_ready(client, namespace)
    await next_second()  # managedFields and creation times have whole seconds
    await update_cm(client, namespace, "c", {"v": "2"})
    if new_pods:  # re-created well after the change
        await clock_past(int(time.time()) + freshness.MARGIN + 1)
        for p in await live(client, namespace):
            await client.delete(resources.PODS, p.name, namespace=namespace)
        await two_ready(client, namespace)
    patch = {"metadata": {"annotations": {"reloader.stakater.com/auto": "true"}}}
    await client.patch(resources.DEPLOYMENTS, "w", patch, namespace=namespace,
                       field_manager="kubectl-annotate")  # fmt: skip
    return await generation(client, namespace, "w")


async def test_a_workload_whose_pods_all_started_after_the_change_rolls_nothing_at_start(
    client: Client, namespace: str
) -> None:
    before = await annotated_after_the_change(client, namespace, new_pods=True)
    async with running(client, namespace) as ctl:
        await asyncio.sleep(3.0)
        assert ctl.stats.patches == 0
    assert await generation(client, namespace, "w") == before
    assert "STAKATER_C_CONFIGMAP" not in await env_of(client, "Deployment", namespace, "w")


async def test_a_workload_whose_pods_predate_the_change_rolls_once_at_start(
    client: Client, namespace: str
) -> None:
    before = await annotated_after_the_change(client, namespace, new_pods=False)
    async with running(client, namespace) as ctl:

        async def rolled() -> bool:
            return await generation(client, namespace, "w") == before + 1

        await eventually(rolled, what="the catch-up to roll it", timeout=30)
        await asyncio.sleep(1.5)
        assert ctl.stats.patches == 1
    assert await generation(client, namespace, "w") == before + 1
