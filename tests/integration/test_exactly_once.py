"""Exactly-once reloads under bursts, flapping configs, restarts and API faults."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kube_reloader.core import hashing
from kube_reloader.kube import resources
from kube_reloader.kube.client import Client
from tests import builders
from tests.harness import AUTO, app, env_of, running, update_cm
from tests.waiting import eventually

pytestmark = pytest.mark.cluster


async def generation(client: Client, namespace: str, name: str) -> int:
    return int(
        (await client.get(resources.DEPLOYMENTS, name, namespace=namespace))["metadata"][
            "generation"
        ]
    )


async def test_five_configmaps_changed_within_100ms_give_exactly_one_rollout(
    client: Client, namespace: str
) -> None:
    names = [f"c{i}" for i in range(5)]
    for n in names:
        await client.create(resources.CONFIGMAPS, builders.configmap(n, namespace, {"v": "0"}))
    await client.create(
        resources.DEPLOYMENTS,
        builders.deployment(
            "w",
            namespace,
            replicas=0,
            template=app(env_from_configmaps=tuple(names), labels={"app": "w"}),
            annotations=AUTO,
        ),
    )
    before = await generation(client, namespace, "w")
    async with running(client, namespace) as ctl:
        await asyncio.gather(*(update_cm(client, namespace, n, {"v": "1"}) for n in names))
        want = {
            f"STAKATER_{n.upper()}_CONFIGMAP": hashing.configmap_hash({"v": "1"}) for n in names
        }

        async def all_set() -> bool:
            env = await env_of(client, "Deployment", namespace, "w")
            return all(env.get(k) == v for k, v in want.items())

        await eventually(all_set, what="all five hashes")
        await asyncio.sleep(0.5)
        assert ctl.stats.patches == 1
    assert await generation(client, namespace, "w") == before + 1


async def test_a_config_flapping_50_times_in_10s_rolls_a_bounded_number_of_times_and_ends_current(
    client: Client, namespace: str
) -> None:
    await client.create(resources.CONFIGMAPS, builders.configmap("cert", namespace, {"v": "0"}))
    await client.create(
        resources.DEPLOYMENTS,
        builders.deployment(
            "w",
            namespace,
            replicas=0,
            template=app(env_from_configmaps=("cert",), labels={"app": "w"}),
            annotations=AUTO,
        ),
    )
    before = await generation(client, namespace, "w")
    async with running(client, namespace, min_interval=3.0) as ctl:
        for i in range(1, 51):
            await update_cm(client, namespace, "cert", {"v": str(i)})
            await asyncio.sleep(0.2)
        want = hashing.configmap_hash({"v": "50"})

        async def final() -> bool:
            return (await env_of(client, "Deployment", namespace, "w")).get(
                "STAKATER_CERT_CONFIGMAP"
            ) == want

        await eventually(final, what="the last content applied", timeout=20)
        rollouts = await generation(client, namespace, "w") - before
        # 10 s of flapping with at most one reload per 3 s: 4, plus the final one
        assert 1 <= rollouts <= 5, rollouts
        deferred = ctl.metrics.exposition().decode()
        assert 'kube_reloader_deferred_total{reason="min_interval"}' in deferred

        async def event() -> dict[str, Any] | None:
            for e in (await client.list(resources.EVENTS, namespace=namespace)).items:
                if e["reason"] == "ReloadDeferred":
                    return e
            return None

        e = await eventually(event, what="a ReloadDeferred event")
        assert "at most one reload every 3s per workload" in e["message"]
