"""The differential tier for Argo Rollouts (`test_differential`'s method): the real Argo
Rollouts controller on the dev cluster, the real Reloader (v2, v1.4.21) and kube-reloader in
the matching mode, all with `--is-Argo-Rollouts=true`, each alone on a namespace of its own.

Two Rollouts on ConfigMaps of their own, `auto`: one with the default rollout strategy (its
template records the change: a new revision), one with `rollout-strategy: restart` (v1 sets
`spec.restartAt` only; v2 also records the change in the template). Their ConfigMaps change,
then a sentinel Deployment's: once it has rolled and each controller shows nothing queued or
in a worker, each Rollout's writes (generation), `STAKATER_*` variables, `last-reloaded-from`
(without namespace and time) and whether `restartAt` is set must be the peer's.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from kube_reloader.devcluster.argo import RolloutsController
from kube_reloader.kube import resources
from kube_reloader.kube.client import Client
from tests.harness import update_cm
from tests.integration.test_argo import argo  # noqa: F401 (the module's fixture)
from tests.integration.test_differential import COMPAT, UNCOMPARED, namespaces
from tests.peers import binary, start_peer
from tests.sidebyside import kube_reloader, peer_outstanding, peer_started, until_done
from tests.waiting import eventually

# serial: Argo Rollouts' CRDs are cluster-wide and its controller runs for the module
pytestmark = [pytest.mark.cluster, pytest.mark.serial, pytest.mark.timeout(900)]

AUTO = {"reloader.stakater.com/auto": "true"}
RESTART = {**AUTO, "reloader.stakater.com/rollout-strategy": "restart"}
LAST_RELOADED_FROM = "reloader.stakater.com/last-reloaded-from"
ROLLOUTS = {"r-default": AUTO, "r-restart": RESTART}
STRATEGIES = ["env-vars", "annotations"]


def template(name: str, configmap: str) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": name}},
        "spec": {"containers": [{"name": "app", "image": "busybox:1.36",
                                 "envFrom": [{"configMapRef": {"name": configmap}}]}]},
    }  # fmt: skip


async def create(api: Client, namespace: str) -> None:
    """The ConfigMaps, the Rollouts and the sentinel Deployment (configs first)."""
    for name in [*ROLLOUTS, "sentinel"]:
        await api.create(resources.CONFIGMAPS, {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c-{name}"},
            "data": {"a": "1"},
        }, namespace=namespace)  # fmt: skip
    for name, marks in ROLLOUTS.items():
        await api.create(resources.ROLLOUTS, {
            "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
            "metadata": {"name": name, "annotations": marks},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "strategy": {"canary": {}}, "template": template(name, f"c-{name}")},
        }, namespace=namespace)  # fmt: skip
    await api.create(resources.DEPLOYMENTS, {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "sentinel", "annotations": AUTO},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "sentinel"}},
                 "template": template("sentinel", "c-sentinel")},
    }, namespace=namespace)  # fmt: skip


def outcome(obj: Mapping[str, Any], before: int) -> dict[str, Any]:
    tmpl = obj["spec"]["template"]
    env = sorted(
        (e["name"], e.get("value"))
        for c in tmpl["spec"]["containers"] for e in c.get("env") or []
        if e["name"].startswith("STAKATER_")
    )  # fmt: skip
    raw = (tmpl.get("metadata", {}).get("annotations") or {}).get(LAST_RELOADED_FROM)
    mark = None if raw is None else {
        k: v for k, v in json.loads(raw).items() if k not in UNCOMPARED
    }  # fmt: skip
    return {
        "written": int(obj["metadata"]["generation"]) - before,
        "env": env,
        "mark": mark,
        "restartAt": "restartAt" in obj["spec"],
    }


async def generations(api: Client, namespace: str) -> dict[str, int]:
    listed = await api.list(resources.ROLLOUTS, namespace=namespace)
    return {r["metadata"]["name"]: int(r["metadata"]["generation"]) for r in listed.items}


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("peer", ["reloader-v2", "reloader-v1"])
async def test_a_rollout_is_reloaded_as_the_real_peer_reloads_it(
    client: Client, kubeconfig_path: Path, tmp_path: Path, argo: RolloutsController,  # noqa: F811
    peer: str, strategy: str,
) -> None:  # fmt: skip
    binary(peer)
    api = client
    flags = ["--is-Argo-Rollouts=true", f"--reload-strategy={strategy}"]
    async with namespaces(api, 2) as (theirs_ns, ours_ns):
        spaces = (theirs_ns, ours_ns)
        await asyncio.gather(*(create(api, ns) for ns in spaces))
        with (
            start_peer(peer, kubeconfig_path, theirs_ns, tmp_path, flags=flags, ha=False) as them,
            kube_reloader("kube-reloader", kubeconfig_path, ours_ns, tmp_path,
                          [*flags, f"--compat={COMPAT[peer]}"]) as ours,
        ):  # fmt: skip
            await asyncio.gather(them.wait_ready(api, timeout=90), ours.wait_leading(timeout=60))
            await until_done(lambda: peer_started(them, api, theirs_ns), f"{peer} started")
            await until_done(ours.started, "kube-reloader started")
            before = {ns: await generations(api, ns) for ns in spaces}
            sentinel = {
                ns: int((await api.get(resources.DEPLOYMENTS, "sentinel", namespace=ns))
                        ["metadata"]["generation"]) for ns in spaces
            }  # fmt: skip
            for ns in spaces:
                for name in [*ROLLOUTS, "sentinel"]:  # the sentinel's last
                    await update_cm(api, ns, f"c-{name}", {"a": "2"})
            for ns in spaces:

                async def rolled(ns: str = ns) -> bool:
                    d = await api.get(resources.DEPLOYMENTS, "sentinel", namespace=ns)
                    return int(d["metadata"]["generation"]) > sentinel[ns]

                await eventually(rolled, timeout=30, what=f"the sentinel rolled in {ns}")
            await until_done(lambda: peer_outstanding(them), f"{peer} done")
            await until_done(ours.outstanding, "kube-reloader done")
            found = []
            for ns in spaces:
                listed = await api.list(resources.ROLLOUTS, namespace=ns)
                found.append({r["metadata"]["name"]: outcome(r, before[ns][r["metadata"]["name"]])
                              for r in listed.items})  # fmt: skip
    theirs, mine = found
    print(f"differential argo {peer} {strategy}: {theirs} | {mine}", flush=True)
    assert mine == theirs
    assert theirs["r-restart"]["restartAt"], "the peer restarted the restart-strategy Rollout"
