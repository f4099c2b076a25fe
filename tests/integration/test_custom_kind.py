"""Adding a workload kind is one registry entry: a test-only CRD with a pod template at
spec.template, installed by this test and registered from this test alone, is watched,
indexed and reloaded like the built-in kinds."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from kube_reloader.core import hashing
from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client
from kube_reloader.kube.resources import Resource
from kube_reloader.runtime import writeseam
from kube_reloader.runtime.kinds import BUILTIN, KindSpec
from kube_reloader.runtime.options import Options
from tests import builders
from tests.harness import AUTO, running, update_cm
from tests.waiting import eventually

# serial: installs a CRD
pytestmark = [pytest.mark.cluster, pytest.mark.serial]

GROUP = "kube-reloader.test"
APPS = Resource(GROUP, "v1", "reloadtestapps", "ReloadTestApp")
CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"reloadtestapps.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {
            "plural": "reloadtestapps",
            "singular": "reloadtestapp",
            "kind": "ReloadTestApp",
        },
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}
#: the whole of "supporting a new kind": one entry (its strategy already exists)
SPEC = KindSpec("ReloadTestApp", APPS, writeseam.fixed(writeseam.CUSTOM_RESOURCE_PATCH))


async def install_crd(client: Client, crd: dict[str, Any], resource: Resource) -> None:
    """Create `crd` (once) and wait until `resource` is served."""
    with contextlib.suppress(errors.AlreadyExists):
        await client.create(resources.CUSTOMRESOURCEDEFINITIONS, crd)

    async def served() -> bool:
        try:
            await client.list(resource, limit=1)
        except errors.NotFound:
            return False
        return True

    await eventually(served, what=f"{resource} to be served")


async def install(client: Client) -> None:
    await install_crd(client, CRD, APPS)


async def test_a_kind_registered_by_a_test_alone_is_reloaded_when_its_configmap_changes(
    client: Client, namespace: str
) -> None:
    await install(client)
    await client.create(resources.CONFIGMAPS, builders.configmap("c", namespace, {"a": "1"}))
    await client.create(APPS, {
        "apiVersion": f"{GROUP}/v1", "kind": "ReloadTestApp",
        "metadata": {"name": "app", "namespace": namespace, "annotations": AUTO},
        "spec": {"template": {"spec": {"containers": [
            {"name": "main", "image": "x", "env": [{"name": "KEEP", "value": "1"}],
             "envFrom": [{"configMapRef": {"name": "c"}}]}]}}},
    }, namespace=namespace)  # fmt: skip
    kinds = BUILTIN.with_kind(SPEC)
    watched = (*Options().workload_kinds, SPEC.kind)
    async with running(client, namespace, kinds=kinds, workload_kinds=watched) as controller:

        async def indexed() -> bool:
            return any(k.kind == "ReloadTestApp" for k in controller.index.workloads)

        await eventually(indexed, what="the custom workload to be indexed")
        await update_cm(client, namespace, "c", {"a": "2"})

        async def env() -> dict[str, str] | None:
            obj = await client.get(APPS, "app", namespace=namespace)
            found = obj["spec"]["template"]["spec"]["containers"][0].get("env") or []
            values = {e["name"]: e.get("value", "") for e in found}
            return values if "STAKATER_C_CONFIGMAP" in values else None

        values = await eventually(env, what="the custom workload to be reloaded")
        assert controller.stats.reloads == 1
    assert values == {"KEEP": "1", "STAKATER_C_CONFIGMAP": hashing.configmap_hash({"a": "2"})}


async def test_a_custom_kind_nobody_registered_is_not_watched(
    client: Client, namespace: str
) -> None:
    await install(client)
    async with running(client, namespace) as controller:
        assert "reloadtestapps" not in {r.resource.plural for r in controller.all_reflectors()}
