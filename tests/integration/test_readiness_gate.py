"""The dev cluster's readiness gate: a pod annotated `never-ready-if-env: V` never becomes
Ready while one of its containers has an env value V (kwok's `pod-ready` stage, see
devcluster/stages.py), so a bad value stalls a real rollout and kube-controller-manager
reports it stuck at the Deployment's progress deadline."""

from __future__ import annotations

from typing import Any

import pytest

from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client
from tests import builders
from tests.waiting import eventually, observed

pytestmark = [pytest.mark.cluster, pytest.mark.rollout]

NAME = "gated"
STALE_CLUSTER = (
    "a pod with FOO=bad became Ready: this cluster's kwok has no readiness gate "
    "(a dev cluster started before devcluster/stages.py existed? restart it)"
)


def _gated_deployment(namespace: str) -> dict[str, Any]:
    app = {**builders.container("app"), "env": [{"name": "FOO", "value": "good"}]}
    d = builders.deployment(
        NAME, namespace, replicas=2, template=builders.pod_template({"app": NAME}, containers=[app])
    )
    d["spec"]["progressDeadlineSeconds"] = 5
    return builders.never_ready_if_env(d, "bad")


def _foo(value: str) -> dict[str, Any]:
    env = [{"name": "FOO", "value": value}]
    return {"spec": {"template": {"spec": {"containers": [{"name": "app", "env": env}]}}}}


def _ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _foo_of(pod: dict[str, Any]) -> str | None:
    env = pod["spec"]["containers"][0].get("env") or []
    return next((e.get("value") for e in env if e["name"] == "FOO"), None)


def _progressing(d: dict[str, Any]) -> dict[str, Any]:
    conditions = d.get("status", {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Progressing"), {})


async def _pods(client: Client, namespace: str) -> list[dict[str, Any]]:
    pods = await client.list(resources.PODS, namespace=namespace, label_selector=f"app={NAME}")
    return [p for p in pods.items if not p["metadata"].get("deletionTimestamp")]


async def _available(client: Client, namespace: str) -> set[str]:
    """Create the gated Deployment (FOO=good), wait until both pods are available and
    return their names."""
    await client.create(resources.DEPLOYMENTS, _gated_deployment(namespace))

    async def settled() -> set[str] | None:
        d = await client.get(resources.DEPLOYMENTS, NAME, namespace=namespace)
        s = d.get("status", {})
        if not (observed(d) and s.get("availableReplicas") == 2 and s.get("updatedReplicas") == 2):
            return None
        pods = await _pods(client, namespace)
        return {p["metadata"]["name"] for p in pods} if len(pods) == 2 else None

    return await eventually(settled, what="2 available replicas with FOO=good", timeout=60)


async def _stuck(client: Client, namespace: str) -> list[dict[str, Any]]:
    """Patch FOO to the gate value, wait for ProgressDeadlineExceeded and return the new
    (never Ready) pods."""
    patched = await client.patch(resources.DEPLOYMENTS, NAME, _foo("bad"), namespace=namespace)
    assert patched["metadata"]["generation"] == 2

    async def deadline_exceeded() -> dict[str, Any] | None:
        if any(_ready(p) for p in await _pods(client, namespace) if _foo_of(p) == "bad"):
            raise AssertionError(STALE_CLUSTER)
        d = await client.get(resources.DEPLOYMENTS, NAME, namespace=namespace)
        done = _progressing(d).get("reason") == "ProgressDeadlineExceeded"
        return d if observed(d) and done else None

    # kube-controller-manager says the deadline passed when its Deployment workers get to it:
    # under the parallel tier's load that can be long after the 5 s deadline
    d = await eventually(
        deadline_exceeded, what="Progressing=False ProgressDeadlineExceeded", timeout=120
    )
    assert _progressing(d)["status"] == "False"
    status_writers = {
        m["manager"] for m in d["metadata"].get("managedFields", [])
        if m.get("subresource") == "status"
    }  # fmt: skip
    assert status_writers == {"kube-controller-manager"}
    new = [p for p in await _pods(client, namespace) if _foo_of(p) == "bad"]
    assert new
    return new


async def test_a_gated_deployment_without_the_gate_value_in_its_env_becomes_available(
    client: Client, namespace: str
) -> None:
    names = await _available(client, namespace)
    pods = await _pods(client, namespace)
    assert {p["metadata"]["name"] for p in pods} == names
    assert all(_ready(p) and p["status"]["phase"] == "Running" for p in pods)
    assert all(
        p["metadata"]["annotations"]["test.kube-reloader.io/never-ready-if-env"] == "bad"
        for p in pods
    )


async def test_a_rollout_to_the_gate_value_exceeds_its_progress_deadline_and_keeps_the_old_pods(
    client: Client, namespace: str
) -> None:
    old = await _available(client, namespace)
    new = await _stuck(client, namespace)

    # maxSurge 25% of 2 rounds up to 1 new pod, maxUnavailable 25% rounds down to 0
    assert len(new) == 1
    pods = await _pods(client, namespace)
    assert {p["metadata"]["name"] for p in pods if _foo_of(p) == "good"} == old
    for pod in pods:
        if _foo_of(pod) == "good":
            assert _ready(pod)
            assert pod["status"]["phase"] == "Running"
        else:
            assert not _ready(pod)
            assert pod["status"].get("phase") == "Pending"
            assert pod["spec"].get("nodeName") == "kwok-node-0"
    d = await client.get(resources.DEPLOYMENTS, NAME, namespace=namespace)
    assert d["status"]["availableReplicas"] == 2
    assert d["status"].get("unavailableReplicas") == 1

    # a gated pod is still deleted normally (kwok's pod-delete stage), and its replacement
    # is just as stuck
    gone = new[0]["metadata"]["name"]
    await client.delete(resources.PODS, gone, namespace=namespace)

    async def deleted() -> bool:
        try:
            await client.get(resources.PODS, gone, namespace=namespace)
        except errors.NotFound:
            return True
        return False

    await eventually(deleted, what=f"gated pod {gone} deleted")

    async def replaced() -> list[dict[str, Any]] | None:
        pods = [p for p in await _pods(client, namespace) if _foo_of(p) == "bad"]
        return pods if pods and pods[0]["spec"].get("nodeName") else None

    replacement = await eventually(replaced, what="a replacement for the deleted gated pod")
    assert not any(_ready(p) for p in replacement)


async def test_putting_the_good_value_back_completes_the_stuck_rollout(
    client: Client, namespace: str
) -> None:
    old = await _available(client, namespace)
    new = await _stuck(client, namespace)
    patched = await client.patch(resources.DEPLOYMENTS, NAME, _foo("good"), namespace=namespace)
    assert patched["metadata"]["generation"] == 3

    async def complete() -> dict[str, Any] | None:
        d = await client.get(resources.DEPLOYMENTS, NAME, namespace=namespace)
        s = d.get("status", {})
        done = (
            observed(d)
            and s.get("replicas") == 2
            and s.get("updatedReplicas") == 2
            and s.get("availableReplicas") == 2
            and _progressing(d).get("reason") == "NewReplicaSetAvailable"
        )
        return d if done else None

    d = await eventually(complete, what="the rollout back to FOO=good completing", timeout=60)
    assert _progressing(d)["status"] == "True"

    async def gated_pods_gone() -> list[dict[str, Any]] | None:
        listed = await client.list(
            resources.PODS, namespace=namespace, label_selector=f"app={NAME}"
        )
        return listed.items if all(_foo_of(p) == "good" for p in listed.items) else None

    pods = await eventually(
        gated_pods_gone, what=f"the gated pod {new[0]['metadata']['name']} gone"
    )
    # the template is the first one again: the Deployment went back to the old ReplicaSet
    assert {p["metadata"]["name"] for p in pods} == old
    assert all(_ready(p) for p in pods)
