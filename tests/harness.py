"""Helpers for tests that run the controller in-process against the dev cluster."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

import msgspec

from kube_reloader.core import planning
from kube_reloader.core.matching import MatchConfig
from kube_reloader.core.scoping import Scope
from kube_reloader.core.strategies import Compat, Strategy
from kube_reloader.kube import config, credentials, errors, resources
from kube_reloader.kube.client import Client, PatchType
from kube_reloader.kube.resources import Resource
from kube_reloader.runtime.controller import Controller
from kube_reloader.runtime.options import Options
from tests import builders
from tests.waiting import alongside

AUTO = builders.AUTO
KIND_RESOURCE = {
    "Deployment": resources.DEPLOYMENTS,
    "StatefulSet": resources.STATEFULSETS,
    "DaemonSet": resources.DAEMONSETS,
    "Job": resources.JOBS,
    "CronJob": resources.CRONJOBS,
    "Rollout": resources.ROLLOUTS,
    "DeploymentConfig": resources.DEPLOYMENTCONFIGS,
}
BUILDERS: dict[str, Callable[..., dict[str, Any]]] = {
    "Deployment": builders.deployment,
    "StatefulSet": builders.statefulset,
    "DaemonSet": builders.daemonset,
}


@contextlib.asynccontextmanager
async def running(client: Client, namespace: str, **overrides: Any) -> AsyncIterator[Controller]:
    """Run the controller scoped to `namespace` until the block ends."""
    strategy = overrides.pop("strategy", Strategy.ENV_VARS)
    match = overrides.pop("match", MatchConfig())
    compat = overrides.pop("compat", Compat.V1)
    scope = overrides.pop("scope", Scope.OBJECT)
    plan = planning.Config(match=match, strategy=strategy, compat=compat, scope=scope)
    opts = replace(
        Options(plan=plan, namespaces=(namespace,), field_manager=compat.field_manager),
        **overrides,
    )
    controller = Controller(client, opts)
    stop = asyncio.Event()
    task = asyncio.create_task(controller.run(stop))
    await asyncio.wait_for(controller.ready.wait(), 30)
    try:
        yield controller
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


async def env_of(
    client: Client, kind: str, namespace: str, name: str, container: int = 0
) -> dict[str, str]:
    obj = await client.get(KIND_RESOURCE[kind], name, namespace=namespace)
    env = obj["spec"]["template"]["spec"]["containers"][container].get("env") or []
    return {e["name"]: e.get("value", "") for e in env}


async def template_annotations(
    client: Client, kind: str, namespace: str, name: str
) -> dict[str, str]:
    obj = await client.get(KIND_RESOURCE[kind], name, namespace=namespace)
    return obj["spec"]["template"]["metadata"].get("annotations") or {}


async def update_cm(client: Client, namespace: str, name: str, data: dict[str, str]) -> None:
    await client.patch(
        resources.CONFIGMAPS, name, {"data": data}, namespace=namespace, patch_type=PatchType.MERGE
    )


def app(*, env_from_configmaps: tuple[str, ...] = (), env_from_secrets: tuple[str, ...] = (),
        volume_mounts: tuple[str, ...] = (), volumes: list[dict[str, Any]] | None = None,
        containers: list[dict[str, Any]] | None = None, init: list[dict[str, Any]] | None = None,
        labels: dict[str, str], template_annotations: dict[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    tmpl = builders.pod_template(
        labels,
        containers=containers
        or [builders.container("app", env_from_configmaps=env_from_configmaps,
                               env_from_secrets=env_from_secrets, volume_mounts=volume_mounts)],
        volumes=volumes,
        annotations=template_annotations,
    )  # fmt: skip
    if init:
        tmpl["spec"]["initContainers"] = init
    return tmpl


async def auto_deployment_on_configmap(
    client: Client, namespace: str, *, name: str = "w", configmap: str = "c",
    data: dict[str, str] | None = None, replicas: int = 1, **meta: Any,
) -> None:  # fmt: skip
    """The common fixture: ConfigMap `configmap` (`data`, by default {"a": "1"}), then
    Deployment `name` (reloader auto) reading it through envFrom (`builders.auto_deployment`,
    which takes `meta`: `annotations` in place of the auto annotation, `labels`)."""
    data = {"a": "1"} if data is None else data
    await client.create(resources.CONFIGMAPS, builders.configmap(configmap, namespace, data))
    await client.create(
        resources.DEPLOYMENTS,
        builders.auto_deployment(
            name, namespace, configmaps=(configmap,), replicas=replicas, **meta
        ),
    )


async def generation(client: Client, namespace: str, name: str) -> int:
    """`metadata.generation` of Deployment `name`: how many spec changes it has seen."""
    obj = await client.get(resources.DEPLOYMENTS, name, namespace=namespace)
    return int(obj["metadata"]["generation"])


async def service_account_token(
    client: Client, namespace: str, sa: str, *, expiration_seconds: int = 3600
) -> str:
    """A bearer token for ServiceAccount `sa`, from the TokenRequest API."""
    body = msgspec.json.encode(
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": expiration_seconds},
        }
    )
    data = await client.request(
        "POST",
        resources.SERVICEACCOUNTS.path(namespace, sa, "token"),
        body=body,
        content_type="application/json",
    )
    return str(msgspec.json.decode(data)["status"]["token"])


def bearer_connection(base: config.ConnectionConfig, token: str) -> config.ConnectionConfig:
    """A connection to `base`'s server, trusting `base`'s CA, that authenticates with `token`
    (and nothing else of `base`)."""
    return config.ConnectionConfig(
        server=base.server,
        ca_pem=base.ca_pem,
        credentials=credentials.StaticCredentials(credentials.AuthState(token=token)),
    )


async def find_event(
    client: Client, namespace: str, predicate: Callable[[dict[str, Any]], bool]
) -> dict[str, Any] | None:
    """The first Event in `namespace` for which `predicate` holds, or None."""
    for e in (await client.list(resources.EVENTS, namespace=namespace)).items:
        if predicate(e):
            return e
    return None


@contextlib.asynccontextmanager
async def reverting_operator(
    client: Client, resource: Resource, namespace: str, name: str
) -> AsyncIterator[list[int]]:
    """A small operator that owns workload `name`'s pod template: each change to it is
    reverted as soon as a watch shows it (a conflicting revert waits for the next version).
    Yields the generations it reverted."""
    current = await client.get(resource, name, namespace=namespace)
    original = current["spec"]["template"]
    reverted: list[int] = []

    async def reconcile() -> None:
        version = current["metadata"]["resourceVersion"]
        while True:  # a watch ends after its timeout: go on from the last version seen
            async for ev in client.watch(resource, namespace=namespace, allow_bookmarks=False,
                                         field_selector=f"metadata.name={name}",
                                         resource_version=version):  # fmt: skip
                obj = ev.object
                version = obj["metadata"]["resourceVersion"]
                if ev.type != "MODIFIED" or obj["spec"]["template"] == original:
                    continue
                obj["spec"]["template"] = original
                with contextlib.suppress(errors.Conflict):
                    await client.update(resource, obj, namespace=namespace)
                    reverted.append(obj["metadata"]["generation"])

    async with alongside(reconcile()):
        yield reverted
