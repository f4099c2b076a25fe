"""The client's HTTP edge (auth retry, throttling, server errors, broken connections)
against a wire-level fake API server. Everything else is tested against the real one."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from kube_reloader.kube import config, credentials, errors, resources, transport
from kube_reloader.kube.client import Client, PatchType
from kube_reloader.kube.transport import RetryPolicy

FAST = RetryPolicy(attempts=4, base_delay=0.001, max_delay=0.002)


def status(code: int, reason: str, message: str = "msg") -> web.Response:
    body = {"kind": "Status", "code": code, "reason": reason, "message": message}
    return web.json_response(body, status=code)


class Scripted:
    """Answers requests from a script; records what it saw."""

    def __init__(self, *answers: Callable[[web.Request], web.StreamResponse]) -> None:
        self.answers = list(answers)
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []

    async def __call__(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.requests.append((request.method, request.path_qs, dict(request.headers), body))
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return answer(request)


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Scripted], Any]]:
    servers: list[TestServer] = []

    async def start(handler: Scripted) -> str:
        async def route(request: web.Request) -> web.StreamResponse:
            return await handler(request)

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", route)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        servers.append(server)
        return f"http://127.0.0.1:{server.port}"

    yield start
    for s in servers:
        await s.close()


class RotatingToken:
    def __init__(self) -> None:
        self.tokens = ["old", "new"]
        self.invalidations = 0

    async def current(self) -> credentials.AuthState:
        return credentials.AuthState(token=self.tokens[0])

    async def invalidate(self) -> bool:
        self.invalidations += 1
        if len(self.tokens) > 1:
            self.tokens.pop(0)
            return True
        return False


def client_for(url: str, creds: Any = None) -> Client:
    creds = creds or credentials.StaticCredentials(credentials.AuthState(token="t"))
    return Client(config.ConnectionConfig(server=url, credentials=creds), retry=FAST)


async def test_a_401_refreshes_credentials_and_retries_once(serve: Any) -> None:
    ok = web.json_response({"metadata": {"name": "cm"}})
    fake = Scripted(lambda r: status(401, "Unauthorized"), lambda r: ok)
    creds = RotatingToken()
    async with client_for(await serve(fake), creds) as c:
        got = await c.get(resources.CONFIGMAPS, "cm", namespace="ns")
    assert got == {"metadata": {"name": "cm"}}
    assert [r[2]["Authorization"] for r in fake.requests] == ["Bearer old", "Bearer new"]
    assert creds.invalidations == 1


async def test_a_second_401_is_raised_as_unauthorized(serve: Any) -> None:
    fake = Scripted(lambda r: status(401, "Unauthorized", "token expired"))
    async with client_for(await serve(fake), RotatingToken()) as c:
        with pytest.raises(errors.Unauthorized, match="token expired"):
            await c.get(resources.CONFIGMAPS, "cm", namespace="ns")
    assert len(fake.requests) == 2


async def test_429_is_retried_for_writes_too(serve: Any) -> None:
    fake = Scripted(
        lambda r: status(429, "TooManyRequests"),
        lambda r: web.json_response({"metadata": {"name": "d"}}),
    )
    async with client_for(await serve(fake)) as c:
        await c.patch(
            resources.DEPLOYMENTS, "d", {"spec": {}}, namespace="ns", field_manager="Reloader"
        )
    assert [r[0] for r in fake.requests] == ["PATCH", "PATCH"]
    assert "fieldManager=Reloader" in fake.requests[0][1]
    assert fake.requests[0][2]["Content-Type"] == PatchType.STRATEGIC.value


async def test_5xx_is_retried_for_reads_but_not_for_writes(serve: Any) -> None:
    fake = Scripted(lambda r: status(503, "ServiceUnavailable"))
    async with client_for(await serve(fake)) as c:
        with pytest.raises(errors.ServerError):
            await c.get(resources.CONFIGMAPS, "cm", namespace="ns")
        reads = len(fake.requests)
        with pytest.raises(errors.ServerError):
            await c.patch(resources.DEPLOYMENTS, "d", {}, namespace="ns")
    assert reads == FAST.attempts
    assert len(fake.requests) - reads == 1


async def test_an_unreachable_server_is_connection_failed(serve: Any) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    async with client_for(f"http://127.0.0.1:{port}") as c:
        with pytest.raises(errors.ConnectionFailed, match=f"cannot reach http://127.0.0.1:{port}"):
            await c.get(resources.CONFIGMAPS, "cm", namespace="ns")


async def test_watch_splits_events_across_chunks_and_raises_an_error_event(serve: Any) -> None:
    events = [
        {"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": "5"}}},
        {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}},
        {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}},
    ]  # fmt: skip
    payload = b"".join(json.dumps(e).encode() + b"\n" for e in events)

    async def stream(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        await resp.prepare(request)
        for i in range(0, len(payload), 7):  # arbitrary chunk boundaries
            await resp.write(payload[i : i + 7])
        await resp.write_eof()
        return resp

    class Handler(Scripted):
        async def __call__(self, request: web.Request) -> web.StreamResponse:
            self.requests.append((request.method, request.path_qs, dict(request.headers), b""))
            return await stream(request)

    fake = Handler(lambda r: web.Response())
    seen: list[tuple[str, Any]] = []

    async def consume(c: Client) -> None:
        async for ev in c.watch(resources.CONFIGMAPS, resource_version="3"):
            seen.append((ev.type, ev.object))

    async with client_for(await serve(fake)) as c:
        with pytest.raises(errors.Gone, match="too old"):
            await consume(c)
    assert seen == [
        ("ADDED", {"metadata": {"name": "a", "resourceVersion": "5"}}),
        ("BOOKMARK", "9"),
    ]
    query = fake.requests[0][1]
    assert "watch=true" in query
    assert "allowWatchBookmarks=true" in query
    assert "resourceVersion=3" in query


async def test_list_follows_continue_tokens(serve: Any) -> None:
    pages = [
        {"metadata": {"resourceVersion": "10", "continue": "tok"}, "items": [{"n": 1}]},
        {"metadata": {"resourceVersion": "10"}, "items": [{"n": 2}]},
    ]
    fake = Scripted(lambda r: web.json_response(pages[0]), lambda r: web.json_response(pages[1]))
    async with client_for(await serve(fake)) as c:
        result = await c.list(resources.CONFIGMAPS, limit=1)
    assert result.items == [{"n": 1}, {"n": 2}]
    assert result.resource_version == "10"
    assert "continue=tok" in fake.requests[1][1]


async def test_an_expired_continue_token_restarts_the_list_once(serve: Any) -> None:
    fake = Scripted(
        lambda r: web.json_response({"metadata": {"resourceVersion": "1", "continue": "t"}, "items": [{"n": 1}]}),
        lambda r: status(410, "Expired", "continue token expired"),
        lambda r: web.json_response({"metadata": {"resourceVersion": "2"}, "items": [{"n": 1}, {"n": 2}]}),
    )  # fmt: skip
    async with client_for(await serve(fake)) as c:
        result = await c.list(resources.CONFIGMAPS)
    assert result.items == [{"n": 1}, {"n": 2}]
    assert result.resource_version == "2"


async def test_requests_go_through_the_configured_proxy_with_its_credentials(serve: Any) -> None:
    fake = Scripted(lambda r: web.json_response({"metadata": {"name": "cm"}}))
    proxy = (await serve(fake)).replace("http://", "http://proxy%20user:p%40ss@")
    cfg = config.ConnectionConfig(
        server="http://kube.invalid:6443",  # never resolved: only the proxy is dialled
        credentials=credentials.StaticCredentials(credentials.AuthState(token="t")),
        proxy=proxy,
    )
    async with Client(cfg, retry=FAST) as c:
        got = await c.get(resources.CONFIGMAPS, "cm", namespace="ns")
    assert got == {"metadata": {"name": "cm"}}
    headers = fake.requests[0][2]
    assert headers["Host"] == "kube.invalid:6443"
    assert (
        headers["Proxy-Authorization"] == "Basic " + base64.b64encode(b"proxy user:p@ss").decode()
    )
    assert headers["Authorization"] == "Bearer t"


async def test_open_watches_never_take_the_connections_of_ordinary_requests(serve: Any) -> None:
    streaming = asyncio.Event()

    async def endless(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        await resp.prepare(request)
        await resp.write(b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"1"}}}\n')
        streaming.set()
        await asyncio.sleep(3600)
        return resp

    class Handler(Scripted):
        async def __call__(self, request: web.Request) -> web.StreamResponse:
            if request.query.get("watch"):
                return await endless(request)
            return await super().__call__(request)

    fake = Handler(lambda r: web.json_response({"metadata": {"name": "cm"}}))
    cfg = config.ConnectionConfig(
        server=await serve(fake), credentials=credentials.StaticCredentials(credentials.AuthState())
    )
    async with Client(cfg, retry=FAST, max_connections=1) as c:

        async def watch() -> None:
            async for _ in c.watch(resources.CONFIGMAPS, namespace="ns"):
                pass

        watches = [asyncio.create_task(watch()) for _ in range(3)]
        await asyncio.wait_for(streaming.wait(), 5)
        got = await asyncio.wait_for(c.get(resources.CONFIGMAPS, "cm", namespace="ns"), 5)
        assert got == {"metadata": {"name": "cm"}}
        pools = (c.pool, c.stream_pool)
        for task in watches:
            task.cancel()
        await asyncio.gather(*watches, return_exceptions=True)
    assert all(p.closed for p in pools), "closing the client closes both pools"


async def test_a_watch_event_whose_object_does_not_fit_its_type_is_skipped_not_retried(
    serve: Any,
) -> None:
    from kube_reloader.kube.projections import Object

    events = [
        {"type": "ADDED", "object": {"metadata": {"name": "odd", "namespace": "n",
                                                  "resourceVersion": "6", "uid": 42}}},
        {"type": "ADDED", "object": {"metadata": {"name": "ok", "namespace": "n",
                                                  "resourceVersion": "7"}}},
    ]  # fmt: skip
    payload = b"".join(json.dumps(e).encode() + b"\n" for e in events)
    fake = Scripted(lambda r: web.Response(body=payload, content_type="application/json"))
    seen: list[tuple[str, Any]] = []
    async with client_for(await serve(fake)) as c:
        async for ev in c.watch(resources.CONFIGMAPS, resource_version="5", type=Object):
            seen.append((ev.type, ev.object if ev.type == "BOOKMARK" else ev.object.metadata.name))
    assert seen == [("BOOKMARK", "6"), ("ADDED", "ok")], "skipped, and the resume point moved"


# ---------------------------------------------------------------------- request metrics


class Requests:
    """A `RequestObserver` that records what it is told, on a clock that moves by 0.25 s
    per reading."""

    def __init__(self) -> None:
        self.attempts: list[tuple[str, str, str]] = []
        self.done: list[tuple[str, str, float]] = []
        self.readings = 0

    def api_request(self, method: str, code: str, host: str) -> None:
        self.attempts.append((method, code, host))

    def api_request_done(self, verb: str, host: str, seconds: float) -> None:
        self.done.append((verb, host, seconds))

    def monotonic(self) -> float:
        self.readings += 1
        return self.readings * 0.25


def observed_client(url: str, seen: Requests) -> Client:
    creds = credentials.StaticCredentials(credentials.AuthState(token="t"))
    return Client(config.ConnectionConfig(server=url, credentials=creds), retry=FAST,
                  observer=seen, monotonic=seen.monotonic)  # fmt: skip


@pytest.mark.parametrize(
    ("answers", "attempts"),
    [
        ([lambda r: web.json_response({})], [("PATCH", "200")]),
        ([lambda r: status(429, "TooManyRequests"), lambda r: web.json_response({})],
         [("PATCH", "429"), ("PATCH", "200")]),
        ([lambda r: status(422, "Invalid")], [("PATCH", "422")]),
    ],
)  # fmt: skip
async def test_every_attempt_is_counted_with_its_code_and_the_request_timed_once(
    serve: Any, answers: list[Callable[[web.Request], web.StreamResponse]],
    attempts: list[tuple[str, str]],
) -> None:  # fmt: skip
    url = await serve(Scripted(*answers))
    host = url.removeprefix("http://")
    seen = Requests()
    async with observed_client(url, seen) as c:
        with contextlib.suppress(errors.Invalid):
            await c.patch(resources.DEPLOYMENTS, "d", {"spec": {}}, namespace="ns")
    assert seen.attempts == [(method, code, host) for method, code in attempts]
    assert seen.done == [("PATCH", host, 0.25)], "one duration, its retries included"


async def test_an_attempt_that_gets_no_answer_is_counted_as_client_gos_error_code() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    seen = Requests()
    async with observed_client(f"http://127.0.0.1:{port}", seen) as c:
        with pytest.raises(errors.ConnectionFailed):
            await c.get(resources.CONFIGMAPS, "cm", namespace="ns")
    assert seen.attempts == [("GET", "<error>", f"127.0.0.1:{port}")] * FAST.attempts
    assert [(verb, host) for verb, host, _s in seen.done] == [("GET", f"127.0.0.1:{port}")]


async def test_a_watch_counts_its_attempt_but_is_not_timed(serve: Any) -> None:
    url = await serve(Scripted(lambda r: web.Response(body=b"")))
    seen = Requests()
    async with observed_client(url, seen) as c:
        async for _ in c.watch(resources.CONFIGMAPS, namespace="ns"):
            pass
    assert seen.attempts == [("GET", "200", url.removeprefix("http://"))]
    assert seen.done == []


@pytest.mark.parametrize(
    ("server", "host"),
    [
        ("https://10.96.0.1:443", "10.96.0.1:443"),
        ("https://kubernetes.default.svc", "kubernetes.default.svc"),
        ("https://user:pw@api.example.com:6443/prefix", "api.example.com:6443"),
        ("https://[fd00::1]:6443", "[fd00::1]:6443"),
    ],
)
def test_the_host_label_is_the_servers_host_and_port_as_go_reads_it(server: str, host: str) -> None:
    assert transport.host_of(server) == host
