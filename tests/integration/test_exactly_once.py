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


# ------------------------------------------------------------------ restarts


def _deployment(
    name: str, namespace: str, cm: str, env: list[dict[str, str]] | None = None, **meta: Any
) -> dict[str, Any]:
    tmpl = app(env_from_configmaps=(cm,), labels={"app": name})
    if env:
        tmpl["spec"]["containers"][0]["env"] = env
    return builders.deployment(name, namespace, replicas=0, template=tmpl, annotations=AUTO, **meta)


async def test_starting_with_100_up_to_date_workloads_writes_nothing(
    client: Client, namespace: str
) -> None:
    sem = asyncio.Semaphore(16)

    async def make(i: int) -> None:
        async with sem:
            await client.create(
                resources.CONFIGMAPS, builders.configmap(f"c{i}", namespace, {"v": str(i)})
            )
            env = None
            if i % 2 == 0:  # half were reloaded before and carry the current hash
                env = [
                    {
                        "name": f"STAKATER_C{i}_CONFIGMAP",
                        "value": hashing.configmap_hash({"v": str(i)}),
                    }
                ]
            await client.create(
                resources.DEPLOYMENTS, _deployment(f"w{i}", namespace, f"c{i}", env)
            )

    await asyncio.gather(*(make(i) for i in range(100)))
    async with running(client, namespace) as ctl:
        await asyncio.sleep(1.5)
        assert ctl.stats.patches == 0
        assert ctl.stats.reloads == 0
        assert len(ctl.index) == 100


@pytest.mark.parametrize("strategy", ["env-vars", "annotations"])
async def test_changes_made_while_the_controller_was_down_are_applied_once(
    client: Client, namespace: str, strategy: str
) -> None:
    from kube_reloader.core.strategies import Strategy

    strat = Strategy(strategy)
    await client.create(resources.CONFIGMAPS, builders.configmap("seen", namespace, {"v": "1"}))
    await client.create(resources.CONFIGMAPS, builders.configmap("quiet", namespace, {"v": "1"}))
    await client.create(resources.DEPLOYMENTS, _deployment("reloaded-before", namespace, "seen"))
    await client.create(resources.DEPLOYMENTS, _deployment("never-reloaded", namespace, "quiet"))
    await client.create(
        resources.CONFIGMAPS, builders.configmap("untouched", namespace, {"v": "1"})
    )
    await client.create(resources.DEPLOYMENTS, _deployment("current", namespace, "untouched"))
    async with running(client, namespace, strategy=strat):
        await update_cm(client, namespace, "seen", {"v": "2"})

        async def first() -> bool:
            d = await client.get(resources.DEPLOYMENTS, "reloaded-before", namespace=namespace)
            return int(d["metadata"]["generation"]) == 2

        await eventually(first, what="the first reload")
    # nobody is watching now
    await asyncio.sleep(1.1)  # managedFields times have one-second resolution
    await update_cm(client, namespace, "seen", {"v": "3"})
    await update_cm(client, namespace, "quiet", {"v": "3"})
    gens = {
        n: await generation(client, namespace, n)
        for n in ("reloaded-before", "never-reloaded", "current")
    }
    async with running(client, namespace, strategy=strat) as ctl:

        async def caught_up() -> bool:
            return all([
                await generation(client, namespace, "reloaded-before") == gens["reloaded-before"] + 1,
                await generation(client, namespace, "never-reloaded") == gens["never-reloaded"] + 1,
            ])  # fmt: skip

        await eventually(caught_up, what="both missed changes applied")
        await asyncio.sleep(1.0)
        assert ctl.stats.reloads == 2
    after = {n: await generation(client, namespace, n) for n in gens}
    assert after == {"reloaded-before": gens["reloaded-before"] + 1, "never-reloaded": gens["never-reloaded"] + 1,
                     "current": gens["current"]}  # fmt: skip


async def test_reconcile_on_start_false_keeps_reloaders_behaviour(
    client: Client, namespace: str
) -> None:
    await client.create(resources.CONFIGMAPS, builders.configmap("c", namespace, {"v": "1"}))
    await client.create(resources.DEPLOYMENTS, _deployment("w", namespace, "c"))
    await asyncio.sleep(1.1)
    await update_cm(client, namespace, "c", {"v": "2"})  # before any controller runs
    async with running(client, namespace, reconcile_on_start=False) as ctl:
        await asyncio.sleep(1.0)
        assert ctl.stats.patches == 0
    async with running(client, namespace) as ctl:

        async def applied() -> bool:
            return "STAKATER_C_CONFIGMAP" in await env_of(client, "Deployment", namespace, "w")

        await eventually(applied, what="the level-based start to apply it")
