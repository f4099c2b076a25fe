"""Key-level reloads and `--reload-tls-secrets` on the real control plane.

One shared ConfigMap with keys `animal`, `animal2` and `other` (Reloader #786), read in every
way a pod template can read it. Changing `animal` must roll exactly the workloads that consume
it (whole-map readers, and everyone in object scope), and nothing that reads only `animal2`.
"""

from __future__ import annotations

from typing import Any

import pytest

from kube_reloader.core import scoping
from kube_reloader.core.matching import MatchConfig
from kube_reloader.kube import resources
from kube_reloader.kube.client import Client, PatchType
from tests import builders
from tests.harness import AUTO, env_of, generation, running, update_cm
from tests.waiting import eventually

pytestmark = pytest.mark.cluster

KEYS = {**AUTO, scoping.SCOPE_ANNOTATION: "keys"}
ENV = "STAKATER_SHARED_CONFIGMAP"


def key_ref(key: str) -> dict[str, Any]:
    return {
        "env": [{"name": "V", "valueFrom": {"configMapKeyRef": {"name": "shared", "key": key}}}]
    }


def mounted(path: str = "/etc/c", sub_path: str | None = None) -> dict[str, Any]:
    mount: dict[str, Any] = {"name": "v", "mountPath": path}
    if sub_path:
        mount["subPath"] = sub_path
    return {"volumeMounts": [mount]}


ITEMS = [{"key": "animal2", "path": "animal2"}]
#: name -> (annotations, container fields, volumes, reloads when `animal` changes)
MATRIX: dict[str, tuple[dict[str, str], dict[str, Any], list[dict[str, Any]], bool]] = {
    "keyref": (KEYS, key_ref("animal2"), [], False),
    "items": (KEYS, mounted(), [{"name": "v", "configMap": {"name": "shared", "items": ITEMS}}],
              False),
    "projected": (KEYS, mounted(), [{"name": "v", "projected": {"sources": [
        {"configMap": {"name": "shared", "items": ITEMS}}]}}], False),
    "envfrom": (KEYS, {"envFrom": [{"configMapRef": {"name": "shared"}}]}, [], True),
    "whole": (KEYS, mounted(), [{"name": "v", "configMap": {"name": "shared"}}], True),
    "subpath": (KEYS, mounted("/etc/c/animal2", "animal2"),
                [{"name": "v", "configMap": {"name": "shared"}}], True),
    "object-scope": (AUTO, key_ref("animal2"), [], True),
}  # fmt: skip


async def create_matrix(client: Client, namespace: str) -> None:
    data = {"animal": "cat", "animal2": "dog", "other": "x"}
    await client.create(resources.CONFIGMAPS, builders.configmap("shared", namespace, data))
    for name, (meta, fields, volumes, _) in MATRIX.items():
        container = {**builders.container("app"), **fields}
        tmpl = builders.pod_template({"app": name}, containers=[container], volumes=volumes)
        await client.create(
            resources.DEPLOYMENTS,
            builders.deployment(name, namespace, template=tmpl, annotations=meta),
        )


async def generations(client: Client, namespace: str) -> dict[str, int]:
    return {name: await generation(client, namespace, name) for name in MATRIX}


async def test_only_workloads_that_consume_a_changed_key_roll(
    client: Client, namespace: str
) -> None:
    await create_matrix(client, namespace)
    before = await generations(client, namespace)
    async with running(client, namespace):
        await update_cm(client, namespace, "shared", {"animal": "lion"})
        expected = {n: before[n] + (1 if rolls else 0) for n, (*_, rolls) in MATRIX.items()}

        async def rolled() -> dict[str, int] | None:
            now = await generations(client, namespace)
            done = all(now[n] >= expected[n] for n in MATRIX if MATRIX[n][3])
            return now if done else None

        after_animal = await eventually(rolled, what="the consumers of `animal` reloaded")
        # one change event planned every candidate; a wrong reload of a reader of animal2
        # alone would also show as one generation too many in the checks below
        assert after_animal == expected
        # whole-map readers in keys scope carry Reloader's own hash of the object
        whole = await env_of(client, "Deployment", namespace, "envfrom")
        objects = await env_of(client, "Deployment", namespace, "object-scope")
        assert whole[ENV] == objects[ENV]

        await update_cm(client, namespace, "shared", {"animal2": "wolf"})

        async def keyed_rolled() -> dict[str, int] | None:
            now = await generations(client, namespace)
            return now if all(now[n] == after_animal[n] + 1 for n in MATRIX) else None

        final = await eventually(keyed_rolled, what="every reader of `animal2` reloaded once")
        keyed = await env_of(client, "Deployment", namespace, "keyref")
        assert keyed[ENV] != whole[ENV]  # the hash of animal2 alone, not the object's

        await update_cm(client, namespace, "shared", {"other": "y"})

        async def whole_rolled() -> dict[str, int] | None:
            now = await generations(client, namespace)
            return now if now["envfrom"] == final["envfrom"] + 1 else None

        last = await eventually(whole_rolled, what="the whole-map readers reloaded")
        for name in ("keyref", "items", "projected"):
            assert last[name] == final[name], f"{name} rolled for a key it does not read"


async def test_reload_scope_keys_applies_to_workloads_without_the_annotation(
    client: Client, namespace: str
) -> None:
    data = {"animal": "cat", "animal2": "dog"}
    await client.create(resources.CONFIGMAPS, builders.configmap("shared", namespace, data))
    for name, key in (("reads-animal", "animal"), ("reads-animal2", "animal2")):
        container = {**builders.container("app"), **key_ref(key)}
        tmpl = builders.pod_template({"app": name}, containers=[container])
        await client.create(
            resources.DEPLOYMENTS,
            builders.deployment(name, namespace, template=tmpl, annotations=AUTO),
        )
    async with running(client, namespace, scope=scoping.Scope.KEYS):
        await update_cm(client, namespace, "shared", {"animal": "lion"})

        async def reloaded() -> bool:
            return ENV in await env_of(client, "Deployment", namespace, "reads-animal")

        await eventually(reloaded, what="the reader of animal reloaded")
        assert await generation(client, namespace, "reads-animal2") == 1


# ------------------------------------------------------------------- --reload-tls-secrets

TLS_ENV = "STAKATER_CERT_SECRET"


async def tls_fixture(client: Client, namespace: str) -> None:
    await client.create(
        resources.SECRETS,
        builders.secret("cert", namespace, {"tls.crt": "one", "tls.key": "k"},
                        type="kubernetes.io/tls"),
    )  # fmt: skip
    opt_outs = {
        "annotated": AUTO,
        "plain": {},
        "auto-false": {"reloader.stakater.com/auto": "false"},
        "ignore-tls": {"kube-reloader.io/ignore-tls": "true"},
    }
    for name, meta in opt_outs.items():
        container = {**builders.container("app"), **mounted()}
        tmpl = builders.pod_template(
            {"app": name}, containers=[container],
            volumes=[{"name": "v", "secret": {"secretName": "cert"}}],
        )  # fmt: skip
        await client.create(
            resources.DEPLOYMENTS,
            builders.deployment(name, namespace, template=tmpl, annotations=meta),
        )


async def rotate(client: Client, namespace: str, value: str) -> None:
    await client.patch(
        resources.SECRETS, "cert", {"stringData": {"tls.crt": value}}, namespace=namespace,
        patch_type=PatchType.MERGE,
    )  # fmt: skip


async def test_tls_secrets_reload_annotation_less_workloads_when_asked(
    client: Client, namespace: str
) -> None:
    await tls_fixture(client, namespace)
    async with running(client, namespace, match=MatchConfig(reload_tls_secrets=True)):
        await rotate(client, namespace, "two")

        async def reloaded() -> bool:
            return TLS_ENV in await env_of(client, "Deployment", namespace, "plain")

        await eventually(reloaded, what="the TLS Secret's consumer reloaded")
        assert await generation(client, namespace, "plain") == 2
        assert TLS_ENV in await env_of(client, "Deployment", namespace, "annotated")
        for name in ("auto-false", "ignore-tls"):
            assert await env_of(client, "Deployment", namespace, name) == {}, name
            assert await generation(client, namespace, name) == 1, name


async def test_tls_secrets_without_the_flag_reload_only_annotated_workloads(
    client: Client, namespace: str
) -> None:
    await tls_fixture(client, namespace)
    async with running(client, namespace):
        await rotate(client, namespace, "two")

        async def reloaded() -> bool:
            return TLS_ENV in await env_of(client, "Deployment", namespace, "annotated")

        # the same change event decided every consumer of the Secret
        await eventually(reloaded, what="the annotated consumer reloaded")
        for name in ("plain", "auto-false", "ignore-tls"):
            assert await generation(client, namespace, name) == 1, name
