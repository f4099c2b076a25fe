"""`kube-reloader impact` against a live namespace: its workloads, every kind listed (Argo
Rollouts skipped when not served), one change of a ConfigMap previewed."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kube_reloader.kube import resources
from kube_reloader.kube.client import Client, PatchType
from tests import builders
from tests.harness import AUTO, app

pytestmark = [pytest.mark.cluster]
NEVER = "0 0 31 2 * 1m"  # February 31st: a window that never opens


def impact(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kube_reloader", "impact", *args],
        env={**os.environ, "KUBECONFIG": str(kubeconfig)}, capture_output=True, text=True,
        check=False,
    )  # fmt: skip


async def three_deployments(client: Client, namespace: str) -> None:
    """ConfigMap c, and three Deployments reading it: web, api (a window that never opens),
    worker (after web)."""
    await client.create(resources.CONFIGMAPS, builders.configmap("c", namespace, {"a": "1"}))
    for name, extra in (
        ("web", {}),
        ("api", {"kube-reloader.io/reload-window": NEVER}),
        ("worker", {"kube-reloader.io/reload-after": "deployment/web"}),
    ):
        tmpl = app(env_from_configmaps=("c",), labels={"app": name})
        await client.create(resources.DEPLOYMENTS, builders.deployment(
            name, namespace, replicas=0, template=tmpl, annotations={**AUTO, **extra}))  # fmt: skip


async def test_impact_previews_a_configmap_change_for_every_deployment_of_the_namespace(
    client: Client, namespace: str, kubeconfig_path: Path
) -> None:
    await three_deployments(client, namespace)
    out = await asyncio.to_thread(
        impact, kubeconfig_path, "configmap/c", "-n", namespace, "--format", "json"
    )
    assert out.returncode == 0, out.stderr
    doc: dict[str, Any] = json.loads(out.stdout)
    assert doc["resource"] == {"kind": "ConfigMap", "namespace": namespace, "name": "c"}
    rows = {r["workload"]["name"]: r for r in doc["rows"]}
    assert sorted(rows) == ["api", "web", "worker"]
    assert {r["workload"]["kind"] for r in doc["rows"]} == {"Deployment"}
    assert {n: r["strategy"] for n, r in rows.items()} == dict.fromkeys(rows, "env-vars")
    web, api, worker = rows["web"]["verdict"], rows["api"]["verdict"], rows["worker"]["verdict"]
    assert web["write"] is True
    assert (api["write"], api["hold"], api["until"]) == (False, "window", None)
    assert rows["api"]["window"] == f"{NEVER} (workload)"
    assert (worker["write"], worker["hold"]) == (False, "order")
    assert rows["worker"]["after"] == ["Deployment/web"]
    assert doc["summary"] == {"now": 1, "held": {"order": 1, "window": 1}, "not_reloaded": 0}


async def test_impact_reads_kind_namespace_name_and_says_it_in_text(
    client: Client, namespace: str, kubeconfig_path: Path
) -> None:
    await three_deployments(client, namespace)
    await client.patch(resources.NAMESPACES, namespace,
                       {"metadata": {"annotations": {"kube-reloader.io/freeze": "true"}}},
                       patch_type=PatchType.MERGE)  # fmt: skip
    out = await asyncio.to_thread(impact, kubeconfig_path, f"cm/{namespace}/c")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith(f"ConfigMap {namespace}/c: one content change (hash ")
    assert sum("held: frozen" in line for line in lines) == 3, out.stdout
    assert lines[-1] == "summary: 0 reload now, 3 held (frozen 3), 0 not reloaded"


async def test_impact_of_a_missing_configmap_is_one_line_and_exit_1(
    namespace: str, kubeconfig_path: Path
) -> None:
    out = await asyncio.to_thread(impact, kubeconfig_path, "configmap/nope", "-n", namespace)
    assert out.returncode == 1
    assert out.stderr == f"error: ConfigMap {namespace}/nope not found\n"
