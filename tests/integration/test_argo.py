"""Argo Rollouts with the real Argo Rollouts controller on the dev cluster.

The controller (built from the Go module proxy on first use, `devcluster.argo`) writes each
Rollout's `status` the way it does in production, e.g. `observedGeneration` as a string,
so these tests see the objects kube-reloader meets in real clusters, not hand-written ones.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kube_reloader.core import hashing
from kube_reloader.devcluster.argo import ArgoBuilder, RolloutsController, install_crds
from kube_reloader.kube import config, resources
from kube_reloader.kube.client import Client
from tests.harness import AUTO, app, auto_deployment_on_configmap, env_of, running, update_cm
from tests.waiting import eventually, observed

#: the first test also builds the controller when it is not cached yet (minutes, see argo.py)
# serial: installs Argo Rollouts' CRDs and runs its controller
pytestmark = [
    pytest.mark.cluster,
    pytest.mark.rollout,
    pytest.mark.timeout(1800),
    pytest.mark.serial,
]


@pytest.fixture(scope="module")
def argo(kubeconfig_path: Path) -> Iterator[RolloutsController]:
    """Argo's CRDs installed and its controller running against the dev cluster."""
    built = ArgoBuilder(controller=True, report=lambda line: print(line, flush=True)).ensure()

    async def install() -> None:
        async with Client(config.load_kubeconfig([kubeconfig_path])) as client:
            await install_crds(client, built.crds)

    asyncio.run(install())
    log = Path(tempfile.mkdtemp(prefix="kube-reloader-test-argo-")) / "rollouts-controller.log"
    with RolloutsController(built.binary, kubeconfig_path, log) as controller:
        yield controller


def rollout(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
        "metadata": {"name": name, "namespace": namespace, "annotations": AUTO},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "strategy": {"canary": {}},
            "template": app(env_from_configmaps=("c",), labels={"app": name}),
        },
    }  # fmt: skip


async def argo_observed(client: Client, namespace: str, name: str) -> dict[str, Any] | None:
    """The Rollout once Argo has written a status for its current generation (else None)."""
    r = await client.get(resources.ROLLOUTS, name, namespace=namespace)
    return r if observed(r, as_string=True) else None


async def test_a_rollout_with_argos_status_and_a_deployment_both_reload_on_a_configmap_change(
    argo: RolloutsController, client: Client, namespace: str
) -> None:
    await auto_deployment_on_configmap(client, namespace)
    await client.create(resources.ROLLOUTS, rollout("r", namespace))
    before = await eventually(
        lambda: argo_observed(client, namespace, "r"),
        what="Argo to write the Rollout's status",
        timeout=60,
    )
    assert isinstance(before["status"]["observedGeneration"], str)
    async with running(client, namespace, argo_rollouts=True):
        await update_cm(client, namespace, "c", {"a": "2"})
        want = hashing.configmap_hash({"a": "2"})

        async def reloaded(kind: str, name: str) -> bool:
            env = await env_of(client, kind, namespace, name)
            return env.get("STAKATER_C_CONFIGMAP") == want

        await eventually(lambda: reloaded("Rollout", "r"), what="the Rollout's reload")
        await eventually(lambda: reloaded("Deployment", "w"), what="the Deployment's reload")
    after = await eventually(
        lambda: argo_observed(client, namespace, "r"),
        what="Argo to observe the reloaded template",
        timeout=60,
    )
    assert after["metadata"]["generation"] > before["metadata"]["generation"]
    assert after["status"]["currentPodHash"] != before["status"]["currentPodHash"]
