"""What a dashboard, an alert or `kubectl get events` built for Reloader v1 sees, against the
real API server: client-go's request metrics, Events counted instead of repeated (and what
happens when RBAC grants no `patch` on Events), and a refused reload's Event in client-go's
words."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kube_reloader.core import planning
from kube_reloader.kube import config, errors, resources, transport
from kube_reloader.kube.client import Client
from kube_reloader.metrics import Recorder
from kube_reloader.runtime.clock import SystemClock
from kube_reloader.runtime.kinds import BUILTIN
from kube_reloader.runtime.reporting import KubeEvents
from tests.harness import (
    auto_deployment_on_configmap,
    bearer_connection,
    find_event,
    running,
    service_account_token,
    update_cm,
)
from tests.integration.test_chart import KINDS
from tests.waiting import eventually

pytestmark = pytest.mark.cluster


async def test_api_requests_are_counted_and_timed_as_client_go_counts_them(
    connection: config.ConnectionConfig, client: Client, namespace: str
) -> None:
    await auto_deployment_on_configmap(client, namespace)
    recorder = Recorder(by_namespace=False)
    host = transport.host_of(connection.server)
    sample = recorder.registry.get_sample_value
    async with (
        Client(connection, observer=recorder) as observed,
        running(observed, namespace),
    ):
        await update_cm(client, namespace, "c", {"a": "2"})

        async def patched() -> float | None:
            labels = {"code": "200", "method": "PATCH", "host": host}
            return sample("rest_client_requests_total", labels)

        await eventually(patched, what="the reload's PATCH counted")
    assert (sample("rest_client_requests_total", {"code": "200", "method": "GET", "host": host})
            or 0) >= 7, "every LIST and WATCH of the start"  # fmt: skip
    assert (sample("rest_client_request_duration_seconds_count",
                   {"verb": "PATCH", "host": host}) or 0) >= 1  # fmt: skip
    text = recorder.exposition().decode()
    assert f'rest_client_request_duration_seconds_bucket{{host="{host}",le="30.0",verb="GET"}}' in (
        text
    )


def web(namespace: str, uid: str) -> planning.Workload:
    return planning.workload_from_manifest({
        "kind": "Deployment", "metadata": {"name": "w", "namespace": namespace, "uid": uid},
        "spec": {"template": {"spec": {"containers": [{"name": "app"}]}}},
    })  # fmt: skip


async def events_about(client: Client, namespace: str) -> list[dict[str, Any]]:
    listed = await client.list(resources.EVENTS, namespace=namespace)
    return sorted(
        (e for e in listed.items if e["involvedObject"]["name"] == "w"),
        key=lambda e: e["metadata"]["name"],
    )


async def test_an_identical_event_is_counted_on_one_event_and_similar_ones_are_combined(
    client: Client, namespace: str
) -> None:
    recorder = KubeEvents(client, BUILTIN, SystemClock())
    workload = web(namespace, "uid-1")
    for _ in range(3):
        await recorder.send(workload, "Warning", "ReloadFail", "the same failure", "reloader")
    [counted] = await events_about(client, namespace)
    assert (counted["count"], counted["message"]) == (3, "the same failure")
    assert counted["lastTimestamp"] >= counted["firstTimestamp"]
    for i in range(10):  # the 10th distinct message within 10 minutes is combined
        await recorder.send(workload, "Warning", "ReloadFail", f"failure {i}", "reloader")
    got = sorted((e["message"], e["count"]) for e in await events_about(client, namespace))
    assert got == sorted([
        ("the same failure", 3), *((f"failure {i}", 1) for i in range(8)),
        # created at the 10th distinct message, counted from then on with the latest one
        ("(combined from similar events): failure 9", 2),
    ])  # fmt: skip


async def test_an_event_deleted_meanwhile_is_recorded_again_under_its_name(
    client: Client, namespace: str
) -> None:
    recorder = KubeEvents(client, BUILTIN, SystemClock())
    workload = web(namespace, "uid-1")
    await recorder.send(workload, "Normal", "Reloaded", "reloaded", "reloader-configmaps")
    [first] = await events_about(client, namespace)
    await client.delete(resources.EVENTS, first["metadata"]["name"], namespace=namespace)
    await recorder.send(workload, "Normal", "Reloaded", "reloaded", "reloader-configmaps")
    [again] = await events_about(client, namespace)
    assert again["metadata"]["name"] == first["metadata"]["name"]
    assert (again["count"], again["firstTimestamp"]) == (2, first["firstTimestamp"])


async def service_account(
    client: Client, connection: config.ConnectionConfig, namespace: str,
    rules: list[dict[str, Any]],
) -> tuple[config.ConnectionConfig, str]:  # fmt: skip
    """A connection as a new ServiceAccount of `namespace` granted `rules` there, and its
    user name."""
    name = f"sa-{secrets.token_hex(3)}"
    meta = {"name": name, "namespace": namespace}
    await client.create(resources.SERVICEACCOUNTS,
                        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta})  # fmt: skip
    rbac = "rbac.authorization.k8s.io"
    await client.create(KINDS["Role"], {"apiVersion": f"{rbac}/v1", "kind": "Role",
                                        "metadata": meta, "rules": rules})  # fmt: skip
    await client.create(KINDS["RoleBinding"], {
        "apiVersion": f"{rbac}/v1", "kind": "RoleBinding", "metadata": meta,
        "roleRef": {"apiGroup": rbac, "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
    })  # fmt: skip
    as_sa = bearer_connection(connection, await service_account_token(client, namespace, name))

    async def bound() -> bool:  # RBAC changes take a moment to reach the authorizer
        async with Client(as_sa) as probe:
            try:
                await probe.list(resources.EVENTS, namespace=namespace)
            except errors.Forbidden:
                return False
        return True

    await eventually(bound, what="the role binding to take effect")
    return as_sa, f"system:serviceaccount:{namespace}:{name}"


@pytest.fixture
async def create_events_only(
    client: Client, connection: config.ConnectionConfig, namespace: str
) -> AsyncIterator[Client]:
    rules = [{"apiGroups": [""], "resources": ["events"], "verbs": ["create", "list"]}]
    as_sa, _user = await service_account(client, connection, namespace, rules)
    async with Client(as_sa) as c:
        yield c


async def test_without_patch_on_events_a_repeated_event_is_created_again_as_before(
    client: Client, create_events_only: Client, namespace: str
) -> None:
    recorder = KubeEvents(create_events_only, BUILTIN, SystemClock())
    workload = web(namespace, "uid-1")
    for _ in range(3):
        await recorder.send(workload, "Normal", "Reloaded", "reloaded", "reloader-configmaps")
    assert recorder.patch_forbidden
    assert [e["count"] for e in await events_about(client, namespace)] == [1, 1, 1]


async def test_a_refused_reload_is_reported_in_the_words_of_client_gos_error(
    client: Client, connection: config.ConnectionConfig, namespace: str
) -> None:
    read_all = {"apiGroups": ["", "apps", "batch"], "verbs": ["get", "list", "watch"],
                "resources": ["configmaps", "secrets", "deployments", "statefulsets",
                              "daemonsets", "cronjobs", "jobs"]}  # fmt: skip
    events = {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "list"]}
    as_sa, sa = await service_account(client, connection, namespace, [read_all, events])
    await auto_deployment_on_configmap(client, namespace)
    async with Client(as_sa) as reader, running(reader, namespace):
        await update_cm(client, namespace, "c", {"a": "2"})

        async def failed() -> dict[str, Any] | None:
            return await find_event(client, namespace, lambda e: e["reason"] == "ReloadFail")

        event = await eventually(failed, what="the ReloadFail Event")
    assert event["message"] == (
        f"Update for 'w' of type 'Deployment' in namespace '{namespace}' failed with error "
        f'deployments.apps "w" is forbidden: User "{sa}" cannot patch resource "deployments" '
        f'in API group "apps" in the namespace "{namespace}"'
    )
    assert event["source"]["component"] == "reloader-configmaps"
