"""Real rollouts: kube-controller-manager, kube-scheduler and kwok make Deployments run."""

from __future__ import annotations

from typing import Any

import pytest

from kube_reloader.kube import resources
from kube_reloader.kube.client import Client
from tests import builders
from tests.waiting import eventually, observed

pytestmark = [pytest.mark.cluster, pytest.mark.rollout]


async def _running_pods(client: Client, namespace: str, app: str) -> list[dict[str, Any]]:
    pods = await client.list(resources.PODS, namespace=namespace, label_selector=f"app={app}")
    return [
        p
        for p in pods.items
        if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    ]


async def test_a_deployment_creates_a_replicaset_and_running_pods_on_a_kwok_node(
    client: Client, namespace: str
) -> None:
    await client.create(resources.DEPLOYMENTS, builders.deployment("web", namespace, replicas=2))

    async def available() -> bool:
        d = await client.get(resources.DEPLOYMENTS, "web", namespace=namespace)
        return bool(d.get("status", {}).get("availableReplicas") == 2)

    await eventually(available, what="2 available replicas")
    pods = await _running_pods(client, namespace, "web")
    assert len(pods) == 2
    assert {p["spec"]["nodeName"] for p in pods} == {"kwok-node-0"}
    assert all(p["status"].get("podIP") for p in pods)
    rs = await client.list(resources.REPLICASETS, namespace=namespace)
    assert len(rs.items) == 1


async def test_a_pod_template_change_rolls_every_pod_to_a_new_replicaset(
    client: Client, namespace: str
) -> None:
    await client.create(resources.DEPLOYMENTS, builders.deployment("roll", namespace, replicas=2))

    async def settled() -> dict[str, Any] | None:
        d = await client.get(resources.DEPLOYMENTS, "roll", namespace=namespace)
        s = d.get("status", {})
        done = (
            observed(d)
            and s.get("updatedReplicas") == 2
            and s.get("availableReplicas") == 2
            and s.get("replicas") == 2
        )
        return d if done else None

    await eventually(settled, what="the first rollout")
    before = {p["metadata"]["name"] for p in await _running_pods(client, namespace, "roll")}

    patched = await client.patch(
        resources.DEPLOYMENTS,
        "roll",
        {"spec": {"template": {"spec": {"containers": [{"name": "app", "env": [{"name": "STAKATER_X_CONFIGMAP", "value": "abc"}]}]}}}},
        namespace=namespace,
        field_manager="Reloader",
    )  # fmt: skip
    assert patched["metadata"]["generation"] == 2
    await eventually(settled, what="the second rollout", timeout=60)

    async def old_pods_gone() -> list[dict[str, Any]] | None:
        pods = await _running_pods(client, namespace, "roll")
        names = {p["metadata"]["name"] for p in pods}
        return pods if len(pods) == 2 and not (names & before) else None

    pods = await eventually(old_pods_gone, what="old pods replaced", timeout=60)
    for pod in pods:
        env = pod["spec"]["containers"][0]["env"]
        assert env == [{"name": "STAKATER_X_CONFIGMAP", "value": "abc"}]
    rs = (await client.list(resources.REPLICASETS, namespace=namespace)).items
    replicas = sorted(r["spec"]["replicas"] for r in rs)
    assert replicas == [0, 2]


async def test_statefulset_and_daemonset_pods_become_running(
    client: Client, namespace: str
) -> None:
    await client.create(resources.STATEFULSETS, builders.statefulset("db", namespace, replicas=2))
    await client.create(resources.DAEMONSETS, builders.daemonset("agent", namespace))

    async def ready() -> bool:
        sts = await client.get(resources.STATEFULSETS, "db", namespace=namespace)
        ds = await client.get(resources.DAEMONSETS, "agent", namespace=namespace)
        ds_status = ds.get("status", {})
        # one DaemonSet pod per node: however many kwok nodes the cluster has (1 alone, 4
        # shared by the parallel tier)
        return bool(
            sts.get("status", {}).get("readyReplicas") == 2
            and ds_status.get("desiredNumberScheduled", 0) > 0
            and ds_status.get("numberReady") == ds_status.get("desiredNumberScheduled")
        )

    await eventually(
        ready, what="StatefulSet 2 ready and DaemonSet ready on every node", timeout=60
    )
    assert len(await _running_pods(client, namespace, "db")) == 2
    ds = await client.get(resources.DAEMONSETS, "agent", namespace=namespace)
    assert len(await _running_pods(client, namespace, "agent")) == ds["status"]["numberReady"]
