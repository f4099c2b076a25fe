"""API discovery against a wire-level fake API server: a resource is served when its group
version lists its plural; a group version that is not served is a plain no; every other
failure is the client's error class."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from kube_reloader.kube import config, credentials, errors, resources
from kube_reloader.kube.client import Client
from kube_reloader.kube.discovery import group_version_path, served
from kube_reloader.kube.resources import Resource
from kube_reloader.kube.transport import RetryPolicy

FAST = RetryPolicy(attempts=2, base_delay=0.001, max_delay=0.002)
Answer = Callable[[], web.StreamResponse]
ARGO = "/apis/argoproj.io/v1alpha1"


def status(code: int, reason: str) -> web.Response:
    body = {"kind": "Status", "code": code, "reason": reason, "message": "msg"}
    return web.json_response(body, status=code)


def resource_list(group_version: str, *plurals: str) -> Answer:
    body = {
        "kind": "APIResourceList",
        "groupVersion": group_version,
        "resources": [
            {"name": p, "namespaced": True, "kind": "X", "verbs": ["get"]} for p in plurals
        ],
    }
    return lambda: web.json_response(body)


class FakeAPI:
    """Answers GETs by path; an unknown path is a 404 Status, as the API server answers."""

    def __init__(self, answers: dict[str, Answer]) -> None:
        self.answers = answers
        self.paths: list[str] = []

    async def __call__(self, request: web.Request) -> web.StreamResponse:
        self.paths.append(request.path)
        answer = self.answers.get(request.path)
        return answer() if answer is not None else status(404, "NotFound")


@pytest.fixture
async def api() -> AsyncIterator[Callable[[dict[str, Answer]], Any]]:
    async with contextlib.AsyncExitStack() as stack:

        async def start(answers: dict[str, Answer]) -> tuple[Client, FakeAPI]:
            fake = FakeAPI(answers)

            async def route(request: web.Request) -> web.StreamResponse:
                return await fake(request)

            app = web.Application()
            app.router.add_route("GET", "/{tail:.*}", route)
            server = await stack.enter_async_context(TestServer(app, host="127.0.0.1"))
            creds = credentials.StaticCredentials(credentials.AuthState(token="t"))
            url = f"http://127.0.0.1:{server.port}"
            conn = config.ConnectionConfig(server=url, credentials=creds)
            client = await stack.enter_async_context(Client(conn, retry=FAST))
            return client, fake

        yield start


async def test_a_resource_listed_in_its_group_version_is_served(api: Any) -> None:
    client, fake = await api(
        {ARGO: resource_list("argoproj.io/v1alpha1", "rollouts", "rollouts/status")}
    )
    assert await served(client, resources.ROLLOUTS) is True
    assert fake.paths == [ARGO]


async def test_a_group_version_served_without_the_plural_is_not_served(api: Any) -> None:
    client, _ = await api(
        {ARGO: resource_list("argoproj.io/v1alpha1", "analysisruns", "rollouts/status")}
    )
    assert await served(client, resources.ROLLOUTS) is False


async def test_a_group_version_the_server_does_not_know_is_not_served(api: Any) -> None:
    client, fake = await api({})
    assert await served(client, resources.DEPLOYMENTCONFIGS) is False
    assert fake.paths == ["/apis/apps.openshift.io/v1"]


async def test_an_empty_or_null_resource_list_serves_nothing(api: Any) -> None:
    client, _ = await api({
        "/apis/a.example/v1": lambda: web.json_response({"kind": "APIResourceList", "resources": None}),
        "/apis/b.example/v1": lambda: web.json_response({"kind": "APIResourceList"}),
    })  # fmt: skip
    assert await served(client, Resource("a.example", "v1", "things", "Thing")) is False
    assert await served(client, Resource("b.example", "v1", "things", "Thing")) is False


async def test_a_core_group_resource_is_looked_up_under_api_v1(api: Any) -> None:
    client, fake = await api({"/api/v1": resource_list("v1", "configmaps", "secrets")})
    assert await served(client, resources.CONFIGMAPS) is True
    assert await served(client, resources.PODS) is False
    assert fake.paths == ["/api/v1", "/api/v1"]


def test_the_discovery_path_of_each_group_version() -> None:
    assert group_version_path(resources.SECRETS) == "/api/v1"
    assert group_version_path(resources.DEPLOYMENTS) == "/apis/apps/v1"
    assert (
        group_version_path(resources.SECRETPROVIDERCLASSPODSTATUSES)
        == "/apis/secrets-store.csi.x-k8s.io/v1"
    )


@pytest.mark.parametrize(
    ("code", "reason", "error"),
    [(403, "Forbidden", errors.Forbidden), (503, "ServiceUnavailable", errors.ServerError)],
)
async def test_other_failures_raise_the_clients_error_class(
    api: Any, code: int, reason: str, error: type[errors.KubeError]
) -> None:
    client, _ = await api({ARGO: lambda: status(code, reason)})
    with pytest.raises(error):
        await served(client, resources.ROLLOUTS)


async def test_an_answer_that_is_not_a_discovery_document_is_a_kube_error(api: Any) -> None:
    client, _ = await api({ARGO: lambda: web.json_response(["not", "a", "list"])})
    with pytest.raises(errors.KubeError, match="not an APIResourceList"):
        await served(client, resources.ROLLOUTS)
