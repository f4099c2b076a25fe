"""The HTTP edge under hostile clients (issue 13): a real listener on 127.0.0.1, raw sockets.

Half-sent requests are closed at the header timeout, oversized ones at once; a client at
its own cap loses its oldest connection; over the global cap the oldest connection still
sending its headers makes way, else the oldest idle one, else the heaviest client's oldest;
and complete requests get exactly the bytes plain aiohttp gives them.
"""

from __future__ import annotations

import asyncio
import resource
import time
from collections.abc import AsyncIterator

import pytest
from aiohttp.test_utils import TestServer

from kube_reloader import limits
from kube_reloader.serving import Health, Limits, Server, build_app

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
