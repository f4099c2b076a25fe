"""`--workload-kind`: a custom resource with its pod template at a path of its own, named on
the command line of the real process — registered under the kind API discovery gives it,
written by one patch per change at that path, or reloaded through its pods with `evict`; a
kind that is not served stops the start with one line."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kube_reloader.core import hashing
from kube_reloader.kube import resources
from kube_reloader.kube.client import Client
from kube_reloader.kube.resources import Resource
from tests import builders
from tests.adversarial.tenant import controller
from tests.harness import update_cm
from tests.integration.test_custom_kind import install_crd
from tests.integration.test_pod_reloads import _replaced, evicted_total, ready
from tests.waiting import eventually

# serial: installs a CRD
pytestmark = [
    pytest.mark.cluster,
    pytest.mark.rollout,
    pytest.mark.timeout(240),
    pytest.mark.serial,
]
GROUP = "kube-reloader.test"
PODSETS = Resource(GROUP, "v1", "podsets", "PodSet")
FLAG = f"--workload-kind={GROUP}/v1/podsets:spec.pod.template"
CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": f"podsets.{GROUP}"},
    "spec": {"group": GROUP, "scope": "Namespaced",
             "names": {"plural": "podsets", "singular": "podset", "kind": "PodSet"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                 "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]},
}  # fmt: skip


async def install(client: Client) -> None:
    await install_crd(client, CRD, PODSETS)


def pod_set(
    namespace: str, name: str, configmap: str, annotations: dict[str, str]
) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1", "kind": "PodSet",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": {"pod": {"template": builders.pod_template(
            {"app": name}, containers=[builders.container(env_from_configmaps=(configmap,))])}},
    }  # fmt: skip


async def test_a_custom_kind_gets_one_patch_at_its_templates_path_per_change(
    client: Client, namespace: str, kubeconfig_path: Path
) -> None:
    await install(client)
    await client.create(
        resources.CONFIGMAPS, builders.configmap("ps-config", namespace, {"v": "0"})
    )
    await client.create(PODSETS, pod_set(namespace, "ps", "ps-config",
                                         {"reloader.stakater.com/auto": "true"}), namespace=namespace)  # fmt: skip

    async def carried(want: str) -> bool:
        obj = await client.get(PODSETS, "ps", namespace=namespace)
        env = obj["spec"]["pod"]["template"]["spec"]["containers"][0].get("env") or []
        return {e["name"]: e["value"] for e in env}.get("STAKATER_PS_CONFIG_CONFIGMAP") == want

    async with controller(kubeconfig_path, [namespace], FLAG, "--reload-min-interval=0") as proc:
        for n in (1, 2):
            await update_cm(client, namespace, "ps-config", {"v": str(n)})
            await eventually(lambda n=n: carried(hashing.configmap_hash({"v": str(n)})),
                             what=f"change {n} at spec.pod.template")  # fmt: skip
        await asyncio.sleep(2)
        assert "custom workload kind" in proc.log()
    obj = await client.get(PODSETS, "ps", namespace=namespace)
    assert obj["metadata"]["generation"] == 3, "one write per change"


async def test_a_custom_kind_with_evict_has_its_pods_replaced_and_is_never_written(
    client: Client, namespace: str, kubeconfig_path: Path
) -> None:
    await install(client)
    await client.create(
        resources.CONFIGMAPS, builders.configmap("pe-config", namespace, {"v": "0"})
    )
    owner = await client.create(PODSETS, pod_set(namespace, "pe", "pe-config", {
        "reloader.stakater.com/auto": "true", "kube-reloader.io/strategy": "evict",
        "kube-reloader.io/pod-selector": "app=pe"}), namespace=namespace)  # fmt: skip
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
          "metadata": {"name": "pe-pods", "namespace": namespace, "ownerReferences": [{
              "apiVersion": f"{GROUP}/v1", "kind": "PodSet", "name": "pe",
              "uid": owner["metadata"]["uid"], "controller": True}]},
          "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "pe"}},
                   "template": owner["spec"]["pod"]["template"]}}  # the operator's pods  # fmt: skip
    await client.create(resources.REPLICASETS, rs)
    before = {p.uid for p in await ready(client, namespace, "pe", 2)}
    async with controller(kubeconfig_path, [namespace], FLAG, "--reload-min-interval=0") as proc:
        await update_cm(client, namespace, "pe-config", {"v": "1"})
        await eventually(lambda: _replaced(client, namespace, "pe", 2, before),
                         what="the PodSet's pods replaced", timeout=90)  # fmt: skip
        await eventually(lambda: evicted_total(proc, 2), what="2 evictions counted")
    obj = await client.get(PODSETS, "pe", namespace=namespace)
    assert obj["metadata"]["generation"] == 1, "the custom resource was never written"


def test_a_workload_kind_that_is_not_served_stops_the_start_with_one_line(
    kubeconfig_path: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kube_reloader", f"--kubeconfig={kubeconfig_path}",
         "--metrics-addr=127.0.0.1:0", "--workload-kind=nothing.example.io/v1/things:spec.template"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert "--workload-kind is not served by the API server" in done.stdout + done.stderr
