"""Case 2: objects that used to raise inside a background task stop nothing.

Before supervision, an `OverflowError` from a paused Deployment with
`paused-at: 9999-12-31T23:59:59Z` and `pause-period: 1h` killed the Deployment consumer
(present at start: never ready, nothing reloaded anywhere; created later: new Deployments
were never indexed), and a 200,000-bracket `kube-reloader.io/reloaded-hashes` annotation
(`--reload-strategy=annotations`) raised `RecursionError` and stopped every ConfigMap-triggered
reload, while `/live` and `/readyz` stayed green."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kube_reloader.core.annotations import RELOADED_HASHES
from kube_reloader.kube import resources
from kube_reloader.kube.client import Client, PatchType
from tests import builders
from tests.adversarial.tenant import Canary, controller
from tests.harness import AUTO, app

# serial: adversarial: bounds on the event loop's lag and on other namespaces' reloads
pytestmark = [pytest.mark.cluster, pytest.mark.serial]

PAUSE = {
    "deployment.reloader.stakater.com/pause-period": "1h",
    "deployment.reloader.stakater.com/paused-at": "9999-12-31T23:59:59Z",
    **AUTO,
}


async def overflowing_pause(client: Client, ns: str, name: str) -> None:
    await client.create(resources.CONFIGMAPS, builders.configmap(name, ns, {"x": "1"}))
    body = builders.auto_deployment(name, ns, configmaps=(name,), annotations=PAUSE)
    body["spec"]["paused"] = True
    await client.create(resources.DEPLOYMENTS, body)


async def test_a_pause_stamp_from_year_9999_present_at_start_does_not_keep_the_controller_unready(
    client: Client, kubeconfig_path: Path, tenant: str, canary: Canary
) -> None:
    await overflowing_pause(client, tenant, "forever")
    async with controller(kubeconfig_path, [tenant, canary.namespace], client=client) as proc:
        seconds = await canary.reloads(within=15)
        assert (await proc.probe("/readyz")).status == 200
        assert (await proc.probe("/live")).status == 200
        # a stamp in the future is not a pause of ours: the Deployment is not kept paused
        for _ in range(100):
            obj = await client.get(resources.DEPLOYMENTS, "forever", namespace=tenant)
            if not obj["spec"].get("paused"):
                break
            await asyncio.sleep(0.1)
        assert "task crashed" not in proc.log()
    print(f"canary reloaded {seconds:.2f}s after its change")
    assert not obj["spec"].get("paused")


async def test_a_pause_stamp_from_year_9999_created_later_does_not_stop_indexing_new_workloads(
    client: Client, kubeconfig_path: Path, tenant: str, canary: Canary
) -> None:
    async with controller(kubeconfig_path, [tenant, canary.namespace], client=client) as proc:
        await overflowing_pause(client, tenant, "forever")
        await asyncio.sleep(0.5)
        await canary.create("late")  # a Deployment created after the hostile one
        await asyncio.sleep(0.5)
        seconds = await canary.reloads("late", within=15)
        assert (await proc.probe("/readyz")).status == 200
        assert "task crashed" not in proc.log()
    print(f"canary reloaded {seconds:.2f}s after its change")


async def test_a_bracket_bomb_in_reloaded_hashes_does_not_stop_configmap_reloads(
    client: Client, kubeconfig_path: Path, tenant: str, canary: Canary
) -> None:
    bomb = "[" * 100_000 + "]" * 100_000
    await client.create(resources.CONFIGMAPS, builders.configmap("bombed", tenant, {"x": "1"}))
    await client.create(
        resources.DEPLOYMENTS,
        builders.deployment(
            "bombed", tenant, annotations=AUTO,
            template=app(env_from_configmaps=("bombed",), labels={"app": "bombed"},
                         template_annotations={RELOADED_HASHES: bomb}),
        ),
    )  # fmt: skip
    async with controller(
        kubeconfig_path, [tenant, canary.namespace], "--reload-strategy=annotations", client=client
    ) as proc:
        await client.patch(
            resources.CONFIGMAPS, "bombed", {"data": {"x": "2"}}, namespace=tenant,
            patch_type=PatchType.MERGE,
        )  # fmt: skip
        await asyncio.sleep(0.3)
        seconds = await canary.reloads(within=15)
        # the canary in annotations mode: its pod template records the new content
        tmpl = (await client.get(resources.DEPLOYMENTS, "canary", namespace=canary.namespace))[
            "spec"
        ]["template"]["metadata"].get("annotations", {})
        assert (await proc.probe("/readyz")).status == 200
        assert "task crashed" not in proc.log()
    print(f"canary reloaded {seconds:.2f}s after its change")
    assert "reloader.stakater.com/last-reloaded-from" in tmpl
