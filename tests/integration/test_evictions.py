"""The Eviction API as pod-level reloads will use it, on the real control plane: kwok pods
become Ready, the pod projection reads them as a rotation needs, a PodDisruptionBudget's
refusal comes back at once as a 429 (never turned into a delete), and the UID precondition
keeps an eviction from ever reaching a replacement of the same name."""

from __future__ import annotations

import time

import pytest

from kube_reloader.core import evicting
from kube_reloader.kube import errors, pods, resources
from kube_reloader.kube.client import Client
from kube_reloader.kube.resources import Resource
from kube_reloader.runtime import podviews
from tests import builders
from tests.waiting import eventually

pytestmark = [pytest.mark.cluster, pytest.mark.rollout]
PDBS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")


async def ready_pods(client: Client, namespace: str, app: str, n: int) -> list[pods.PodObject]:
    async def probe() -> list[pods.PodObject] | None:
        listed = await client.list(resources.PODS, namespace=namespace,
                                   label_selector=f"app={app}", type=pods.PodObject)  # fmt: skip
        views = [podviews.view(p) for p in listed.items]
        live = [
            p for p, v in zip(listed.items, views, strict=True) if v.ready and not v.terminating
        ]
        return live if len(live) == n else None

    return await eventually(probe, what=f"{n} Ready pods of {app}", timeout=60)


async def test_real_pods_project_to_what_a_rotation_reads(client: Client, namespace: str) -> None:
    started = time.time()
    await client.create(resources.DEPLOYMENTS, builders.deployment("web", namespace, replicas=2))
    listed = await ready_pods(client, namespace, "web", 2)
    deployment = await client.get(resources.DEPLOYMENTS, "web", namespace=namespace)
    replicaset = (await client.list(resources.REPLICASETS, namespace=namespace)).items[0]
    for p in listed:
        view = podviews.view(p)
        assert view.uid
        assert view.name.startswith("web-")
        assert started - 2 <= view.created <= time.time() + 1
        assert view.ready
        assert view.ready_since is not None
        assert view.ready_since >= view.created
        assert pods.controlled_by(p, replicaset["metadata"]["uid"])
        assert not pods.controlled_by(p, deployment["metadata"]["uid"])
    assert evicting.targets([podviews.view(p) for p in listed], time.time()) == {
        p.metadata.uid for p in listed
    }


async def test_an_eviction_refused_by_a_disruption_budget_is_a_429_and_the_pod_stays(
    client: Client, namespace: str
) -> None:
    await client.create(resources.DEPLOYMENTS, builders.deployment("db", namespace, replicas=2))
    await client.create(PDBS, {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "db", "namespace": namespace},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "db"}}},
    })  # fmt: skip
    listed = await ready_pods(client, namespace, "db", 2)

    async def budget_observed() -> bool:
        pdb = await client.get(PDBS, "db", namespace=namespace)
        return pdb.get("status", {}).get("currentHealthy") == 2

    await eventually(budget_observed, what="the disruption controller's status")
    first = listed[0].metadata
    began = time.monotonic()
    with pytest.raises(errors.TooManyRequests):
        await client.evict(resources.PODS, first.name, namespace=namespace, uid=first.uid)
    assert time.monotonic() - began < 5, "refused at once, not retried inside the client"
    still = await client.get(resources.PODS, first.name, namespace=namespace)
    assert "deletionTimestamp" not in still["metadata"]


async def test_an_eviction_reaches_only_the_pod_with_that_uid(
    client: Client, namespace: str
) -> None:
    await client.create(resources.DEPLOYMENTS, builders.deployment("api", namespace, replicas=1))
    (only,) = await ready_pods(client, namespace, "api", 1)
    meta = only.metadata
    with pytest.raises(errors.Conflict):  # a replacement of the same name is never evicted
        await client.evict(resources.PODS, meta.name, namespace=namespace, uid="not-" + meta.uid)
    await client.evict(resources.PODS, meta.name, namespace=namespace, uid=meta.uid)

    async def replaced() -> bool:
        listed = await client.list(resources.PODS, namespace=namespace, label_selector="app=api",
                                   type=pods.PodObject)  # fmt: skip
        live = [podviews.view(p) for p in listed.items if p.metadata.uid != meta.uid]
        return any(v.ready and v.created >= podviews.view(only).created for v in live)

    await eventually(replaced, what="the ReplicaSet's replacement, Ready", timeout=60)
