"""In-place reloads on the real node: `restart-in-place` (the kubelet restarts every container
of a pod in place, KEP-5532) and `signal` (the agent sends SIGHUP once the mounted files are
new). The controller runs in-process; the pods, the agent and the application really run."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kube_reloader.core import inplace
from kube_reloader.devcluster.node import RealNode
from kube_reloader.kube import resources
from kube_reloader.kube.client import Client
from kube_reloader.runtime import inplacing
from kube_reloader.runtime.controller import Controller
from tests.harness import running
from tests.node.nodeharness import (
    PODINFO_VOLUME,
    Images,
    agent_sidecar,
    app_container,
    on_real_node,
    pods_of,
    polling,
    ready,
    restarts,
)
from tests.waiting import eventually, past_pod_starts

pytestmark = [pytest.mark.cluster, pytest.mark.rollout]


def configmap(name: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def deployment(name: str, strategy: str, spec: dict[str, Any], *, replicas: int = 3,
               annotations: dict[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "annotations": {
            "reloader.stakater.com/auto": "true", "kube-reloader.io/strategy": strategy,
            **(annotations or {})}},
        "spec": {
            "replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                         # no container holds an API credential, the agent included
                         "spec": on_real_node({"terminationGracePeriodSeconds": 5,
                                               "automountServiceAccountToken": False, **spec})},
        },
    }  # fmt: skip


def restart_spec(images: Images) -> dict[str, Any]:
    """The agent with its restart rule, and an application reading ConfigMap `settings`
    through its environment (read again when its container restarts)."""
    return {
        "initContainers": [agent_sidecar(images.controller, restart=True)],
        "containers": [app_container("/etc/hostname", envFrom=[
            {"configMapRef": {"name": "settings"}}])],
        "volumes": [PODINFO_VOLUME],
    }  # fmt: skip


async def all_ready(client: Client, namespace: str, app: str, n: int) -> list[dict[str, Any]]:
    async def probe() -> list[dict[str, Any]] | None:
        pods = await pods_of(client, namespace, app)
        return pods if len(pods) == n and all(ready(p) for p in pods) else None

    return await eventually(probe, timeout=120, interval=0.5, what=f"{n} Ready pods of {app}")


async def change_may_follow(ctl: Controller, client: Client, namespace: str, name: str) -> None:
    """Evidence that a change made now reaches every pod of Deployment `name`: the controller
    has indexed it, and the clock is past every pod's start (whole seconds) by the rotation's
    clock margin, so each pod reads as older than the change."""

    async def indexed() -> bool:
        return any(k.kind == "Deployment" and k.name == name for k in ctl.index.workloads)

    await eventually(indexed, what=f"Deployment {name} indexed")
    await eventually(lambda: past_pod_starts(client, [namespace], inplacing.CLOCK_MARGIN),
                     interval=0.2, what="the pods' start + in-place's clock margin")  # fmt: skip


async def replicasets(client: Client, namespace: str) -> list[str]:
    listed = await client.list(resources.REPLICASETS, namespace=namespace)
    return sorted(rs["metadata"]["name"] for rs in listed.items)


async def test_restart_in_place_restarts_each_pods_containers_once_one_pod_at_a_time(
    client: Client, namespace: str, images: Images
) -> None:
    await client.create(resources.CONFIGMAPS, configmap("settings", {"mode": "one"}),
                        namespace=namespace)  # fmt: skip
    spec = restart_spec(images)
    async with running(client, namespace) as ctl:
        # created after the controller started: nothing to catch up on, one change to follow
        await client.create(resources.DEPLOYMENTS, deployment("web", "restart-in-place", spec),
                            namespace=namespace)  # fmt: skip
        before = {p["metadata"]["uid"]: p for p in await all_ready(client, namespace, "web", 3)}
        sets = await replicasets(client, namespace)
        generation = (await client.get(resources.DEPLOYMENTS, "web", namespace=namespace))[
            "metadata"]["generation"]  # fmt: skip
        await change_may_follow(ctl, client, namespace, "web")
        await client.patch(resources.CONFIGMAPS, "settings", {"data": {"mode": "two"}},
                           namespace=namespace)  # fmt: skip
        most_down = 0
        deadline = time.monotonic() + 180
        while True:
            pods = await pods_of(client, namespace, "web")
            down = sum(1 for p in pods if not ready(p))
            most_down = max(most_down, down)
            done = len(pods) == 3 and all(ready(p) and restarts(p).get("app") == 1 for p in pods)
            if done:
                break
            seen = [(p["metadata"]["name"], ready(p), restarts(p)) for p in pods]
            assert time.monotonic() < deadline, f"not restarted once in time: {seen}"
            await asyncio.sleep(0.2)
        await asyncio.sleep(8.0)  # nothing restarts a second time
        after = await pods_of(client, namespace, "web")

    assert {p["metadata"]["uid"] for p in after} == set(before)
    for p in after:  # the agent runs with no service-account token
        for c in p["spec"]["initContainers"] + p["spec"]["containers"]:
            assert not any("serviceaccount" in m["mountPath"] for m in c.get("volumeMounts", []))
    for p in after:
        old = before[p["metadata"]["uid"]]
        assert p["status"]["podIP"] == old["status"]["podIP"]
        assert restarts(p)["app"] == 1
        assert p["metadata"]["annotations"][inplace.RESTART].endswith("-0")  # asked once
    assert most_down <= 1, f"{most_down} pods were restarting at once"
    assert await replicasets(client, namespace) == sets
    current = await client.get(resources.DEPLOYMENTS, "web", namespace=namespace)
    assert current["metadata"]["generation"] == generation


async def test_a_controller_restarted_mid_rotation_restarts_each_remaining_pod_once(
    client: Client, namespace: str, images: Images
) -> None:
    """Level-based: the second controller knows nothing of the first one's rotation; the
    pods' container start times tell it which are left."""
    await client.create(resources.CONFIGMAPS, configmap("settings", {"mode": "one"}),
                        namespace=namespace)  # fmt: skip
    spec = restart_spec(images)
    async with running(client, namespace) as ctl:
        await client.create(resources.DEPLOYMENTS, deployment("api", "restart-in-place", spec),
                            namespace=namespace)  # fmt: skip
        before = {p["metadata"]["uid"] for p in await all_ready(client, namespace, "api", 3)}
        await change_may_follow(ctl, client, namespace, "api")
        await client.patch(resources.CONFIGMAPS, "settings", {"data": {"mode": "two"}},
                           namespace=namespace)  # fmt: skip

        async def one_restarted() -> bool:
            pods = await pods_of(client, namespace, "api")
            return sum(restarts(p).get("app") == 1 for p in pods) >= 1

        await eventually(one_restarted, timeout=120, interval=0.2, what="a first restart")
    # the first controller is gone mid-way; a second one starts from the cluster alone
    at_stop = [restarts(p).get("app") for p in await pods_of(client, namespace, "api")]
    assert at_stop.count(1) < 3, "the first controller finished: nothing left to resume"
    async with running(client, namespace):

        async def all_once() -> list[dict[str, Any]] | None:
            pods = await pods_of(client, namespace, "api")
            done = len(pods) == 3 and all(ready(p) and restarts(p).get("app") == 1 for p in pods)
            return pods if done else None

        await eventually(all_once, timeout=240, interval=0.5, what="every pod restarted once")
        await asyncio.sleep(8.0)
        after = await pods_of(client, namespace, "api")
    assert {p["metadata"]["uid"] for p in after} == before
    assert [restarts(p)["app"] for p in after] == [1, 1, 1]


async def test_signal_reloads_every_replica_without_a_restart_or_a_failed_request(
    client: Client, namespace: str, images: Images, real_node: RealNode
) -> None:
    await client.create(resources.CONFIGMAPS, configmap("app-config", {"config.txt": "v1"}),
                        namespace=namespace)  # fmt: skip
    spec = {
        "shareProcessNamespace": True,
        "initContainers": [agent_sidecar(
            images.controller, restart=False, volumes={"config": "/etc/app"},
            process="sighup-app")],
        "containers": [app_container("/etc/app/config.txt", volumeMounts=[
            {"name": "config", "mountPath": "/etc/app"}])],
        "volumes": [PODINFO_VOLUME, {"name": "config", "configMap": {"name": "app-config"}}],
    }  # fmt: skip
    async with running(client, namespace):
        await client.create(
            resources.DEPLOYMENTS,
            deployment("svc", "signal", spec, annotations={inplace.SIGNAL: "SIGHUP"}),
            namespace=namespace,
        )
        pods = await all_ready(client, namespace, "svc", 3)
        urls = [f"http://{p['status']['podIP']}:8080/" for p in pods]
        sets = await replicasets(client, namespace)
        with polling(real_node.netns_path, urls) as poller:
            await eventually(lambda: _served(poller.last, urls, "v1"), timeout=20,
                             what="every replica serving v1")  # fmt: skip
            await client.patch(resources.CONFIGMAPS, "app-config",
                               {"data": {"config.txt": "v2"}}, namespace=namespace)  # fmt: skip
            await eventually(lambda: _served(poller.last, urls, "v2"), timeout=120,
                             interval=0.5, what="every replica serving v2")  # fmt: skip
            await asyncio.sleep(3.0)
        after = await pods_of(client, namespace, "svc")

    assert poller.failures == [], poller.failures[:5]
    assert poller.ok > 50
    assert {u: d["sighups"] for u, d in poller.last.items()} == dict.fromkeys(urls, 1)
    assert {p["metadata"]["uid"] for p in after} == {p["metadata"]["uid"] for p in pods}
    for p in after:
        assert set(restarts(p).values()) == {0}
    assert await replicasets(client, namespace) == sets


async def _served(last: dict[str, Any], urls: list[str], content: str) -> bool:
    return all((last.get(u) or {}).get("config") == content for u in urls)
