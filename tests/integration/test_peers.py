"""The Stakater Reloader peers (`tests/peers.py`) reload a Deployment on the dev cluster.

Each peer runs with `--enable-ha` (so it first takes its Lease) and one reload strategy;
a ConfigMap change must leave the peer's mark on the Deployment's pod template: the
`last-reloaded-from` annotation (annotations strategy) or the `STAKATER_<NAME>_CONFIGMAP`
env var (env-vars strategy). What the peer wrote is printed for comparison with
kube-reloader's own writes (`pytest -s`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kube_reloader.core import hashing
from kube_reloader.kube import resources
from kube_reloader.kube.client import Client
from tests.harness import auto_deployment_on_configmap, update_cm
from tests.peers import PeerProcess, lease_holder, start_peer
from tests.waiting import eventually, template_env

#: the first test builds the peer when it is not cached yet (minutes, devcluster/peers.py)
pytestmark = [pytest.mark.cluster, pytest.mark.timeout(1200)]
LAST_RELOADED_FROM = "reloader.stakater.com/last-reloaded-from"
ENV_VAR = "STAKATER_C_CONFIGMAP"
STRATEGIES = ["annotations", "env-vars"]
#: whether the env-vars strategy also writes LAST_RELOADED_FROM (v2 writes it with both)
ANNOTATES_WITH_ENV_VARS = {"reloader-v1": False, "reloader-v2": True}


def mark(obj: dict[str, Any], strategy: str) -> str | None:
    """The peer's mark on a Deployment's template under `strategy`, or None."""
    if strategy == "annotations":
        return (obj["spec"]["template"]["metadata"].get("annotations") or {}).get(
            LAST_RELOADED_FROM
        )
    return template_env(obj, ENV_VAR)


async def reload_once(
    client: Client, namespace: str, peer: PeerProcess, strategy: str
) -> dict[str, Any]:
    """Deployment `w` on ConfigMap `c`, the peer ready, one change: the reloaded Deployment."""
    await auto_deployment_on_configmap(client, namespace, data={"a": "1"})
    await peer.wait_ready(client)
    holder = await lease_holder(client, namespace, str(peer.lease))
    assert peer.holds(holder), holder
    print(f"{peer.name}: Lease {namespace}/{peer.lease} held by {holder!r}")
    before = await client.get(resources.DEPLOYMENTS, "w", namespace=namespace)
    assert mark(before, strategy) is None
    await update_cm(client, namespace, "c", {"a": "2"})

    async def marked() -> dict[str, Any] | None:
        d = await client.get(resources.DEPLOYMENTS, "w", namespace=namespace)
        return d if mark(d, strategy) else None

    reloaded = await eventually(marked, timeout=30, what=f"{peer.name}'s {strategy} mark")
    managers = [(f["manager"], f["operation"]) for f in reloaded["metadata"]["managedFields"]]
    print(f"{peer.name} {strategy}: mark {mark(reloaded, strategy)!r}; managers {managers}")
    return reloaded


def check_mark(reloaded: dict[str, Any], strategy: str, component: str) -> None:
    value = mark(reloaded, strategy)
    assert value
    annotations = reloaded["spec"]["template"]["metadata"].get("annotations") or {}
    want = hashing.configmap_hash({"a": "2"})  # both peers hash as v1 does (and we do)
    if strategy == "annotations":
        source = json.loads(value)
        assert (source["name"], source["hash"]) == ("c", want), value
        assert template_env(reloaded, ENV_VAR) is None
    else:
        assert value == want
        assert (LAST_RELOADED_FROM in annotations) == ANNOTATES_WITH_ENV_VARS[component]


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_reloader_v1_with_ha_marks_the_deployment_whose_configmap_changed(
    client: Client, namespace: str, kubeconfig_path: Path, tmp_path: Path, strategy: str
) -> None:
    flags = [f"--reload-strategy={strategy}"]
    with start_peer("reloader-v1", kubeconfig_path, namespace, tmp_path, flags=flags) as peer:
        reloaded = await reload_once(client, namespace, peer, strategy)
    check_mark(reloaded, strategy, "reloader-v1")


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_reloader_v2_with_ha_marks_the_deployment_whose_configmap_changed(
    client: Client, namespace: str, kubeconfig_path: Path, tmp_path: Path, strategy: str
) -> None:
    flags = [f"--reload-strategy={strategy}"]
    with start_peer("reloader-v2", kubeconfig_path, namespace, tmp_path, flags=flags) as peer:
        reloaded = await reload_once(client, namespace, peer, strategy)
    check_mark(reloaded, strategy, "reloader-v2")
