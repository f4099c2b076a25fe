"""`--compat=v2` on kinds written by JSON patch (a DeploymentConfig as the dev cluster serves
it, from its CRD): Reloader v2 writes the env var and last-reloaded-from together, so one
reload is one write and one revision — also when the template has no annotations yet."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from kube_reloader.core import hashing
from kube_reloader.core.objects import ObjectKey
from kube_reloader.core.strategies import Compat
from kube_reloader.kube import resources
from kube_reloader.kube.client import Client
from tests import builders
from tests.harness import env_of, running, update_cm
from tests.integration.test_kinds import ensure_crds
from tests.waiting import eventually

# serial: installs CRDs
pytestmark = [pytest.mark.cluster, pytest.mark.serial]

AUTO = {"reloader.stakater.com/auto": "true"}
LRF = "reloader.stakater.com/last-reloaded-from"


def deployment_config(namespace: str, template_metadata: dict[str, Any] | None) -> dict[str, Any]:
    template: dict[str, Any] = {"spec": {"containers": [
        {"name": "app", "image": "x", "envFrom": [{"configMapRef": {"name": "c"}}]}]}}  # fmt: skip
    if template_metadata is not None:
        template["metadata"] = template_metadata
    return {
        "apiVersion": "apps.openshift.io/v1", "kind": "DeploymentConfig",
        "metadata": {"name": "dc", "namespace": namespace, "annotations": AUTO},
        "spec": {"replicas": 0, "selector": {"app": "dc"}, "template": template},
    }  # fmt: skip


@pytest.mark.parametrize(
    "template_metadata",
    [None, {"labels": {"app": "dc"}}, {"labels": {"app": "dc"}, "annotations": {"team": "a"}}],
    ids=["no metadata", "labels only", "annotations already"],
)
async def test_a_v2_reload_of_a_deployment_config_is_one_write_keeping_its_labels(
    client: Client, namespace: str, template_metadata: dict[str, Any] | None
) -> None:
    await ensure_crds(client)
    await client.create(resources.CONFIGMAPS, builders.configmap("c", namespace, {"a": "1"}))
    created = await client.create(
        resources.DEPLOYMENTCONFIGS, deployment_config(namespace, template_metadata)
    )
    async with running(client, namespace, compat=Compat.V2) as ctl:
        key = ObjectKey("DeploymentConfig", namespace, "dc")

        async def watched() -> bool:  # a CRD just installed may reach discovery a poll later
            return key in ctl.index.workloads

        await eventually(watched, what="the DeploymentConfig watched", timeout=90)
        await update_cm(client, namespace, "c", {"a": "2"})
        want = hashing.configmap_hash({"a": "2"})

        async def done() -> bool:
            env = await env_of(client, "DeploymentConfig", namespace, "dc")
            return env.get("STAKATER_C_CONFIGMAP") == want

        await eventually(done, what="the DeploymentConfig reloaded")

        async def counted() -> bool:  # the write is seen on the API before it is counted here
            return ctl.stats.patches >= 1

        await eventually(counted, what="the write counted")
        await asyncio.sleep(0.5)
        assert ctl.stats.patches == 1
    dc = await client.get(resources.DEPLOYMENTCONFIGS, "dc", namespace=namespace)
    assert dc["metadata"]["generation"] == created["metadata"]["generation"] + 1, "one revision"
    meta = dc["spec"]["template"]["metadata"]
    assert json.loads(meta["annotations"][LRF])["hash"] == want
    assert meta.get("labels") == (template_metadata or {}).get("labels")
    assert meta["annotations"].get("team") == (template_metadata or {}).get("annotations", {}).get(
        "team"
    )
