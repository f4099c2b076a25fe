"""kube-reloader as users run it: our image (built without Docker) installed by our Helm chart
on the real node, two replicas, in-cluster service-account credentials, the chart's RBAC, a
read-only root filesystem, non-root, probes, metrics; the leader killed and the standby
taking over."""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kube_reloader.devcluster.building import Builder
from kube_reloader.devcluster.node import LABELS, TAINT, RealNode
from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client
from tests.node.nodeharness import Images, app_container, get_in_node, on_real_node, ready
from tests.waiting import eventually

pytestmark = [pytest.mark.cluster, pytest.mark.rollout]
CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "kube-reloader"
LEASE = "stakater-reloader-lock"
RESOURCEQUOTAS = resources.Resource("", "v1", "resourcequotas", "ResourceQuota")


@contextlib.contextmanager
def installed(kubeconfig: Path, release: str, namespace: str, images: Images) -> Iterator[None]:
    repository, tag = images.controller.rsplit(":", 1)
    values = {
        "image": {"repository": repository, "tag": tag, "pullPolicy": "Never"},
        "reloader": {
            "enableHA": True,
            "deployment": {
                "replicas": 2,
                "nodeSelector": {"type": LABELS["type"]},
                "tolerations": [{"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}],
            },
        },
    }
    helm = str(Builder().ensure().path("helm"))
    values_file = kubeconfig.parent / f"values-{release}.yaml"
    values_file.write_text(yaml.safe_dump(values))
    base = [helm, "--kubeconfig", str(kubeconfig), "--namespace", namespace]
    subprocess.run([*base, "install", release, str(CHART), "-f", str(values_file)], check=True,
                   capture_output=True, timeout=120)  # fmt: skip
    try:
        yield
    finally:
        subprocess.run([*base, "uninstall", release, "--wait", "--timeout", "60s"],
                       capture_output=True, timeout=120, check=False)  # fmt: skip


async def controller_pods(client: Client, namespace: str) -> list[dict[str, Any]]:
    listed = await client.list(resources.PODS, namespace=namespace)
    return [p for p in listed.items if p["metadata"]["name"].startswith("kr-")
            and not p["metadata"].get("deletionTimestamp")]  # fmt: skip


async def holder(client: Client, namespace: str) -> str | None:
    try:
        lease = await client.get(resources.LEASES, LEASE, namespace=namespace)
    except errors.NotFound:
        return None
    return (lease.get("spec") or {}).get("holderIdentity") or None


async def replicasets(client: Client, namespace: str) -> set[str]:
    listed = await client.list(resources.REPLICASETS, namespace=namespace)
    return {rs["metadata"]["name"] for rs in listed.items}


@pytest.fixture
async def apps(client: Client) -> AsyncIterator[str]:
    """A second namespace, for the workload (the controller's has a pod quota)."""
    name = f"apps-{secrets.token_hex(4)}"
    await client.create(resources.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                               "metadata": {"name": name}})  # fmt: skip
    yield name
    with contextlib.suppress(errors.NotFound):
        await client.delete(resources.NAMESPACES, name)


async def test_the_charts_controller_pods_reload_a_deployment_and_the_standby_takes_over(
    client: Client, namespace: str, apps: str, images: Images, kubeconfig_path: Path,
    real_node: RealNode,
) -> None:  # fmt: skip
    with installed(kubeconfig_path, "kr", namespace, images):

        async def two_ready() -> list[dict[str, Any]] | None:
            pods = await controller_pods(client, namespace)
            return pods if len(pods) == 2 and all(ready(p) for p in pods) else None

        pods = await eventually(two_ready, timeout=120, interval=0.5,
                                what="two Ready controller pods")  # fmt: skip
        for p in pods:  # as the chart asks: non-root, read-only root filesystem
            c = p["spec"]["containers"][0]
            assert c["securityContext"]["readOnlyRootFilesystem"] is True
            assert p["spec"]["securityContext"]["runAsUser"] == 65534
        leader = await eventually(lambda: holder(client, namespace), timeout=60, what="a leader")

        # no replacement pod may start once the leader is gone (a quota of one pod, set
        # while two run: the standby alone fills it), so the standby must take over
        await client.create(RESOURCEQUOTAS, {
            "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "no-new-pods"},
            "spec": {"hard": {"pods": "1"}}}, namespace=namespace)  # fmt: skip
        await client.create(resources.CONFIGMAPS, {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "greeting"},
            "data": {"text": "hello"}}, namespace=apps)  # fmt: skip
        await client.create(resources.DEPLOYMENTS, {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "annotations": {"reloader.stakater.com/auto": "true"}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": on_real_node({"containers": [app_container(
                                      "/etc/hostname",
                                      envFrom=[{"configMapRef": {"name": "greeting"}}])]})}},
        }, namespace=apps)  # fmt: skip
        first = await eventually(lambda: _sets(client, apps, 1), timeout=60,
                                 what="the first ReplicaSet")  # fmt: skip
        await client.patch(resources.CONFIGMAPS, "greeting", {"data": {"text": "bonjour"}},
                           namespace=apps)  # fmt: skip
        second = await eventually(lambda: _sets(client, apps, 2), timeout=60,
                                  what="the reload's ReplicaSet")  # fmt: skip
        assert first < second

        ip = next(p["status"]["podIP"] for p in pods if p["metadata"]["name"] == leader)
        metrics = get_in_node(real_node.netns_path, f"http://{ip}:9090/metrics").decode()
        assert 'reloader_reload_executed_total{success="true"} 1.0' in metrics

        await client.delete(resources.PODS, leader, namespace=namespace)  # SIGTERM, handover

        async def new_leader() -> str | None:
            now = await holder(client, namespace)
            return now if now and now != leader else None

        successor = await eventually(new_leader, timeout=60, interval=0.25,
                                     what="the standby taking the lease")  # fmt: skip
        assert successor in {p["metadata"]["name"] for p in pods} - {leader}
        await client.patch(resources.CONFIGMAPS, "greeting", {"data": {"text": "hallo"}},
                           namespace=apps)  # fmt: skip
        third = await eventually(lambda: _sets(client, apps, 3), timeout=60,
                                 what="the next reload after the handover")  # fmt: skip
        await asyncio.sleep(8.0)  # applied once: no fourth ReplicaSet
        assert await _sets(client, apps, 3) == third
        deployment = await client.get(resources.DEPLOYMENTS, "web", namespace=apps)
        env = deployment["spec"]["template"]["spec"]["containers"][0].get("env") or []
        assert any(e["name"] == "STAKATER_GREETING_CONFIGMAP" for e in env), json.dumps(env)


async def _sets(client: Client, namespace: str, n: int) -> set[str] | None:
    found = {s for s in await replicasets(client, namespace) if s.startswith("web-")}
    return found if len(found) == n else None
