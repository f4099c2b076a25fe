"""`kube-reloader explain` against live workloads, one per annotation mode, and the controller's
one-time warning about shadowed pod-template annotations."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kube_reloader.core import hashing
from kube_reloader.kube import resources
from kube_reloader.kube.client import Client
from tests import builders
from tests.harness import AUTO, app, auto_deployment_on_configmap, running, update_cm
from tests.waiting import eventually

pytestmark = pytest.mark.cluster


def explain(kubeconfig: Path, *args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "kube_reloader", "explain", *args, "--format", "json"],
        env={**os.environ, "KUBECONFIG": str(kubeconfig)}, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]


MODES = {
    "auto": ({**AUTO}, {}, {}, True, "auto"),
    "named": ({"configmap.reloader.stakater.com/reload": "c"}, {}, {}, False, "named"),
    "search": ({"reloader.stakater.com/search": "true"}, {}, {"reloader.stakater.com/match": "true"}, True, "search"),
    "pod template fallback": ({}, {**AUTO}, {}, True, "auto"),
    "none": ({}, {}, {}, True, "no_match"),
}  # fmt: skip


@pytest.mark.parametrize("mode", list(MODES))
async def test_explain_a_live_workload_in_each_annotation_mode(
    client: Client, namespace: str, kubeconfig_path: Path, mode: str
) -> None:
    wa, pa, ra, referenced, _ = MODES[mode]
    await client.create(
        resources.CONFIGMAPS, builders.configmap("c", namespace, {"a": "1"}, annotations=ra)
    )
    tmpl = app(
        env_from_configmaps=("c",) if referenced else (),
        labels={"app": "w"},
        template_annotations=pa,
    )
    await client.create(
        resources.DEPLOYMENTS,
        builders.deployment("w", namespace, replicas=0, template=tmpl, annotations=wa),
    )
    doc = await asyncio.to_thread(
        explain, kubeconfig_path, "deploy/w", "-n", namespace, "--change", "configmap/c"
    )
    v = doc["verdicts"][0]
    assert v["current_hash"] == hashing.configmap_hash({"a": "1"})
    assert v["reload"] is (mode != "none")
    expected_source = {"pod template fallback": "pod template (fallback)", "none": "none"}.get(
        mode, "workload metadata"
    )
    assert doc["annotations"][0]["read_from"] == expected_source
    if mode != "none":
        assert v["outcome"] == "reload"
        assert v["target_container"] == "app"
        assert v["stale"] is False, "never reloaded: no hash carried, not stale"


async def test_explain_reports_a_stale_workload_after_a_change_it_missed(
    client: Client, namespace: str, kubeconfig_path: Path
) -> None:
    await auto_deployment_on_configmap(client, namespace, replicas=0)
    async with running(client, namespace):
        await update_cm(client, namespace, "c", {"a": "2"})

        async def reloaded() -> bool:
            doc = await asyncio.to_thread(explain, kubeconfig_path, "deployment/w", "-n", namespace)
            return bool(doc["verdicts"][0]["carried_hash"])

        await eventually(reloaded, what="the reload")
    await update_cm(client, namespace, "c", {"a": "3"})  # nobody watching
    doc = await asyncio.to_thread(explain, kubeconfig_path, "deployment/w", "-n", namespace)
    v = doc["verdicts"][0]
    assert v["stale"] is True
    assert v["carried_hash"] == hashing.configmap_hash({"a": "2"})
    assert v["current_hash"] == hashing.configmap_hash({"a": "3"})


async def test_shadowed_pod_template_annotations_get_one_warning_event(
    client: Client, namespace: str
) -> None:
    await client.create(resources.CONFIGMAPS, builders.configmap("c", namespace, {"a": "1"}))
    tmpl = app(
        env_from_configmaps=("c",),
        labels={"app": "w"},
        template_annotations={"configmap.reloader.stakater.com/reload": "c"},
    )
    await client.create(resources.DEPLOYMENTS, builders.deployment("w", namespace, replicas=0, template=tmpl,
                        annotations={"reloader.stakater.com/search": "true"}))  # fmt: skip
    async with running(client, namespace):
        for v in ("2", "3"):
            await update_cm(client, namespace, "c", {"a": v})
            await asyncio.sleep(0.5)

        async def warned() -> list[dict[str, Any]] | None:
            found = [e for e in (await client.list(resources.EVENTS, namespace=namespace)).items
                     if e["type"] == "Warning" and "never used" in e["message"]]  # fmt: skip
            return found or None

        found = await eventually(warned, what="the shadowed-annotation warning")
        await asyncio.sleep(0.5)
    assert len(found) == 1
    assert "configmap.reloader.stakater.com/reload='c'" in found[0]["message"]
