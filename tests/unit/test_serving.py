"""The HTTP edge under hostile clients (issue 13): a real listener on 127.0.0.1, raw sockets.

Half-sent requests are closed at the header timeout, oversized ones at once; a client at
its own cap loses its oldest connection; over the global cap the oldest connection still
sending its headers makes way, else the oldest idle one, else the heaviest client's oldest;
and complete requests get exactly the bytes plain aiohttp gives them. Then what the probes,
`/metrics` and the diagnostics listener answer, and how listen addresses are read.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from kube_reloader import limits
from kube_reloader.metrics import CONTENT_TYPE, Recorder
from kube_reloader.serving import (
    Health,
    Limits,
    Server,
    build_app,
    build_debug_app,
    build_health_app,
    split_addr,
)

pytestmark = pytest.mark.timeout(60)

PARTIAL = b"GET /live HTTP/1.1\r\nHost: x\r\n"


class FixedRecorder:
    """`/metrics` with a constant body, so that two servers can be compared byte for byte."""

    def exposition(self) -> bytes:
        return b"# HELP up fixed\nup 1.0\n"


@pytest.fixture
async def serve(request: pytest.FixtureRequest) -> AsyncIterator[Server]:
    server = Server(build_app(FixedRecorder(), Health()), "127.0.0.1:0", limits=request.param)  # type: ignore[arg-type]
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def with_limits(**kw: float) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("serve", [Limits(**kw)], indirect=True, ids=[""])  # type: ignore[arg-type]


async def connect(server: Server) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", server.port)


async def seconds_until_closed(reader: asyncio.StreamReader, limit: float = 10) -> float:
    start = time.monotonic()
    assert await asyncio.wait_for(reader.read(), limit) == b""
    return time.monotonic() - start


async def fetch(port: int, path: str) -> bytes:
    """The whole response to a one-shot GET, with its Date header (the one varying byte) cut."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    raw = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return b"".join(ln for ln in raw.splitlines(keepends=True) if not ln.startswith(b"Date: "))


async def read_response(reader: asyncio.StreamReader) -> bytes:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    length = next(
        int(ln.split(b":")[1])
        for ln in head.split(b"\r\n")
        if ln.lower().startswith(b"content-length:")
    )
    return await asyncio.wait_for(reader.readexactly(length), 10)  # fmt: skip


@with_limits(header_timeout=0.5)
async def test_a_half_sent_request_is_closed_at_the_header_timeout(serve: Server) -> None:
    reader, writer = await connect(serve)
    writer.write(PARTIAL)
    assert 0.4 < await seconds_until_closed(reader) < 2
    assert serve.edge.timed_out == 1
    assert not serve.edge.open


@with_limits(header_timeout=0.6)
async def test_trickling_header_bytes_does_not_extend_the_deadline(serve: Server) -> None:
    reader, writer = await connect(serve)

    async def trickle() -> None:
        for byte in PARTIAL:
            writer.write(bytes([byte]))
            await asyncio.sleep(0.05)

    task = asyncio.create_task(trickle())
    try:
        assert await seconds_until_closed(reader) < 1.5
    finally:
        task.cancel()


@with_limits(header_timeout=30, max_request_bytes=1024)
async def test_headers_past_the_size_limit_close_the_connection_at_once(serve: Server) -> None:
    reader, writer = await connect(serve)
    writer.write(PARTIAL + b"X-Pad: " + b"a" * 1000 + b"\r\n")
    assert await seconds_until_closed(reader) < 1
    assert serve.edge.timed_out == 1


@with_limits(header_timeout=30, keepalive_timeout=0.5)
async def test_an_idle_keep_alive_connection_is_closed_after_the_keepalive_timeout(
    serve: Server,
) -> None:
    reader, writer = await connect(serve)
    writer.write(PARTIAL + b"\r\n")
    assert await read_response(reader) == b"alive"
    assert await seconds_until_closed(reader) < 2


@with_limits(header_timeout=1)
async def test_pipelined_requests_and_a_header_end_split_across_reads_are_served(
    serve: Server,
) -> None:
    reader, writer = await connect(serve)
    writer.write(PARTIAL + b"\r\n" + b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r")
    await asyncio.sleep(0.2)
    writer.write(b"\n")
    assert await read_response(reader) == b"alive"
    assert await read_response(reader) == b"caches not synced (single)"
    await asyncio.sleep(1.2)  # past the header timeout: both heads were seen to end
    writer.write(PARTIAL + b"\r\n")
    assert await read_response(reader) == b"alive"
    assert serve.edge.timed_out == 0
    writer.close()


@with_limits(max_connections=8, header_timeout=30)
async def test_over_the_cap_the_oldest_half_sent_connections_make_way_and_live_answers(
    serve: Server,
) -> None:
    conns = []
    for _ in range(12):
        conns.append(await connect(serve))
        conns[-1][1].write(PARTIAL)
        await asyncio.sleep(0.01)
    for reader, _ in conns[:4]:
        assert await seconds_until_closed(reader, limit=2) < 2, "closed at once, not at 30 s"
    assert serve.edge.shed == 4
    assert len(serve.edge.open) == 8
    assert (await fetch(serve.port, "/live")).endswith(b"\r\n\r\nalive")
    assert serve.edge.shed == 5, "the /live connection took the place of the oldest one left"
    assert await seconds_until_closed(conns[4][0], limit=2) < 2
    assert len(serve.edge.open) == 7, "the seven newest half-sent ones are still open"
    for _, writer in conns:
        writer.close()


@with_limits(max_connections=4, idle_grace=30)
async def test_over_the_cap_with_every_connection_busy_the_heaviest_clients_oldest_makes_way(
    serve: Server,
) -> None:
    conns = [await connect(serve) for _ in range(4)]
    for reader, writer in conns:
        writer.write(PARTIAL + b"\r\n")
        assert await read_response(reader) == b"alive"  # now idle, within its grace
    assert (await fetch(serve.port, "/live")).endswith(b"\r\n\r\nalive")
    assert await seconds_until_closed(conns[0][0], limit=2) < 2, "the oldest made way"
    assert serve.edge.shed == 1
    for _, writer in conns:
        writer.close()


async def poll_live(source: str, port: int, stop: asyncio.Event) -> None:
    """A client that keeps one connection busy with a complete request every 0.1 s."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
    try:
        while not stop.is_set():
            writer.write(PARTIAL + b"\r\n")
            await read_response(reader)
            await asyncio.sleep(0.1)
    except (ConnectionError, asyncio.IncompleteReadError):
        return  # made way for a newer connection
    finally:
        writer.close()


@with_limits(max_connections=8, idle_grace=30)
async def test_clients_polling_over_keep_alive_at_the_cap_cannot_lock_a_probe_out(
    serve: Server,
) -> None:
    stop = asyncio.Event()
    pollers = [
        asyncio.create_task(poll_live(f"127.0.0.{i}", serve.port, stop)) for i in range(2, 10)
    ]
    await asyncio.sleep(0.5)
    answers = [await fetch(serve.port, "/live") for _ in range(10)]
    stop.set()
    await asyncio.gather(*pollers)
    assert all(a.endswith(b"\r\n\r\nalive") for a in answers)


@with_limits(max_connections=100, max_per_client=3, idle_grace=30)
async def test_one_client_at_its_own_cap_loses_its_oldest_connection_not_others(
    serve: Server,
) -> None:
    other = await asyncio.open_connection("127.0.0.1", serve.port, local_addr=("127.0.0.2", 0))
    mine = [await connect(serve) for _ in range(4)]
    assert await seconds_until_closed(mine[0][0], limit=2) < 2
    assert serve.edge.shed == 1
    assert len(serve.edge.peers["127.0.0.2"]) == 1, "another client's connection is untouched"
    for _, writer in [other, *mine]:
        writer.close()


@with_limits()
@pytest.mark.parametrize("path", ["/live", "/healthz", "/readyz", "/metrics", "/nothing"])
async def test_complete_requests_get_the_bytes_plain_aiohttp_gives(
    serve: Server, path: str
) -> None:
    plain = TestServer(build_app(FixedRecorder(), Health()), host="127.0.0.1")  # type: ignore[arg-type]
    await plain.start_server()
    try:
        assert plain.port is not None
        assert await fetch(serve.port, path) == await fetch(plain.port, path)
    finally:
        await plain.close()


def test_the_open_files_soft_limit_is_raised_to_the_hard_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard < 512:
        pytest.skip(f"hard limit {hard}: nothing to raise to")
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    try:
        assert limits.raise_open_files_limit() == hard
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


# ---------------------------------------------------------------------- what the probes say


@contextlib.asynccontextmanager
async def probing(
    health: Health, *, v2: bool = False
) -> AsyncIterator[Callable[[str], Awaitable[tuple[int, str]]]]:
    """A listener for `health` (the metrics listener, or with `v2` Reloader v2's health
    listener); yields GET path -> (status, body)."""
    app = build_health_app(health) if v2 else build_app(FixedRecorder(), health)  # type: ignore[arg-type]
    server = Server(app, "127.0.0.1:0")
    await server.start()
    try:
        async with aiohttp.ClientSession() as session:

            async def get(path: str) -> tuple[int, str]:
                async with session.get(f"http://127.0.0.1:{server.port}{path}") as resp:
                    return resp.status, await resp.text()

            yield get
    finally:
        await server.stop()


@pytest.mark.parametrize(
    ("ha", "leader", "role"),
    [(False, False, "single"), (True, False, "standby"), (True, True, "leader")],
)
async def test_readyz_waits_for_the_sync_and_names_the_replicas_role(
    ha: bool, leader: bool, role: str
) -> None:
    health = Health(ha=ha, leader=leader)
    async with probing(health) as get:
        assert await get("/readyz") == (503, f"caches not synced ({role})")
        health.synced = True
        assert await get("/readyz") == (200, f"ok ({role})")


async def test_tasks_that_keep_crashing_turn_readyz_red_and_live_red_only_when_dead() -> None:
    failing: list[str] = []
    dead: list[str] = []
    health = Health(synced=True, failing=lambda: failing, dead=lambda: dead)
    async with probing(health) as get:
        failing[:] = ["worker@0", "watch/configmaps"]
        assert await get("/readyz") == (503, "tasks failing: worker@0, watch/configmaps (single)")
        assert await get("/live") == (200, "alive")
        dead[:] = ["worker@0"]
        assert await get("/live") == (500, "tasks keep crashing: worker@0")
        assert await get("/healthz") == (500, "tasks keep crashing: worker@0")


async def test_a_lost_lease_turns_live_red_as_reloader_v1_does() -> None:
    health = Health(synced=True, ha=True, leader=True)
    async with probing(health) as get:
        assert await get("/live") == (200, "alive")
        health.leader, health.lost_lease = False, True
        assert (await get("/live"))[0] == 500
        assert (await get("/healthz"))[0] == 500


OK_HEALTHZ = (200, "ok")
FAILED = {
    "/healthz": (500, "[-]healthz failed: reason withheld\nhealthz check failed\n"),
    "/readyz": (500, "[-]readyz failed: reason withheld\nhealthz check failed\n"),
}


@pytest.mark.parametrize(("health", "path", "answer"), [
    (Health(), "/healthz", OK_HEALTHZ),
    (Health(synced=True, ha=True, leader=False), "/healthz", OK_HEALTHZ),
    (Health(lost_lease=True), "/healthz", FAILED["/healthz"]),
    (Health(dead=lambda: ["worker@0"]), "/healthz", FAILED["/healthz"]),
    (Health(failing=lambda: ["worker@0"]), "/healthz", OK_HEALTHZ),
    (Health(synced=True), "/readyz", OK_HEALTHZ),
    (Health(synced=True, ha=True, leader=False), "/readyz", OK_HEALTHZ),
    (Health(synced=False), "/readyz", FAILED["/readyz"]),
    (Health(synced=True, failing=lambda: ["watch/configmaps"]), "/readyz", FAILED["/readyz"]),
    (Health(synced=True), "/healthz?verbose", (200, "[+]healthz ok\nhealthz check passed\n")),
    (Health(synced=True), "/readyz?verbose", (200, "[+]readyz ok\nhealthz check passed\n")),
    (Health(synced=True), "/metrics", (404, "404: Not Found")),
    (Health(synced=True), "/live", (404, "404: Not Found")),
])  # fmt: skip
async def test_the_v2_health_listener_answers_as_controller_runtimes_probes_with_our_meaning(
    health: Health, path: str, answer: tuple[int, str]
) -> None:
    async with probing(health, v2=True) as get:
        assert await get(path) == answer


async def test_the_v2_health_listener_follows_the_health_as_it_changes() -> None:
    health = Health()
    async with probing(health, v2=True) as get:
        assert await get("/readyz") == FAILED["/readyz"]
        health.synced = True
        assert await get("/readyz") == OK_HEALTHZ
        health.lost_lease = True
        assert await get("/healthz") == FAILED["/healthz"]


async def test_metrics_are_the_recorders_exposition_in_prometheus_text_format() -> None:
    recorder = Recorder()
    recorder.leader.set(1)
    server = Server(build_app(recorder, Health()), "127.0.0.1:0")
    await server.start()
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{server.port}/metrics") as resp,
        ):
            assert resp.status == 200
            assert resp.headers["Content-Type"] == CONTENT_TYPE
            assert "kube_reloader_leader 1.0" in (await resp.text()).splitlines()
    finally:
        await server.stop()


@pytest.mark.parametrize(
    ("addr", "expected"),
    [
        (":9090", ("0.0.0.0", 9090)),  # noqa: S104
        ("127.0.0.1:6060", ("127.0.0.1", 6060)),
        ("[::1]:9090", ("::1", 9090)),
        ("localhost:0", ("localhost", 0)),
    ],
)
def test_listen_addresses_are_host_and_port_with_all_interfaces_by_default(
    addr: str, expected: tuple[str, int]
) -> None:
    assert split_addr(addr) == expected


def test_the_default_host_of_an_address_without_one_can_be_loopback() -> None:
    assert split_addr(":6060", default_host="127.0.0.1") == ("127.0.0.1", 6060)


@pytest.mark.parametrize("addr", ["9090", "host:", "host:http", ""])
def test_an_address_without_a_numeric_port_is_refused(addr: str) -> None:
    with pytest.raises(ValueError, match="is not host:port"):
        split_addr(addr)


@pytest.fixture
def untraced() -> Iterator[None]:
    """The diagnostics app starts tracemalloc, which slows every later test: stop it after."""
    tracing = tracemalloc.is_tracing()
    yield
    if not tracing:
        tracemalloc.stop()


@pytest.mark.usefixtures("untraced")
async def test_the_diagnostics_listener_lists_tasks_and_top_allocations() -> None:
    server = Server(build_debug_app(FixedRecorder()), "127.0.0.1:0")  # type: ignore[arg-type]
    await server.start()
    marker = asyncio.create_task(asyncio.Event().wait(), name="diagnostics-marker")
    try:
        async with aiohttp.ClientSession() as session:
            base = f"http://127.0.0.1:{server.port}"
            async with session.get(f"{base}/debug/tasks") as resp:
                tasks = await resp.text()
            async with session.get(f"{base}/debug/memory?top=3") as resp:
                memory = (await resp.text()).splitlines()
            async with session.get(f"{base}/metrics") as resp:
                metrics = await resp.read()
        assert "--- diagnostics-marker pending" in tasks
        assert memory[0].startswith("traced: current ")
        assert len(memory) <= 4
        assert metrics == FixedRecorder().exposition()
    finally:
        marker.cancel()
        await server.stop()
