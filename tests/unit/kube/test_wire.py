"""The API client's HTTP/1.1 wire against a scripted socket server: what it sends, how it reads
sized, chunked and gzip bodies, when it keeps a connection and when it gives up on one."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator, Callable

import pytest

from kube_reloader.kube import wire

Answer = Callable[[bytes], bytes | None]  # the request's head -> the raw answer (None: hang up)


class Scripted:
    """A socket server answering each request with `answer(head)`; counts its connections
    and keeps every request head it read."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.connections = 0
        self.heads: list[bytes] = []
        self.hang_up = False  # close each connection after its first answer
        self.server: asyncio.Server | None = None

    async def start(self) -> wire.Target:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return wire.Target(https=False, host="127.0.0.1", port=port)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = [
                    ln for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length:")
                ]
                if length:
                    await reader.readexactly(int(length[0].split(b":")[1]))
                self.heads.append(head)
                raw = self.answer(head)
                if raw is None:
                    break
                writer.write(raw)
                await writer.drain()
                if self.hang_up:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()


@pytest.fixture
async def serve() -> AsyncIterator[
    Callable[[Answer], asyncio.Future[tuple[Scripted, wire.Target]]]
]:
    started: list[Scripted] = []

    async def start(answer: Answer) -> tuple[Scripted, wire.Target]:
        s = Scripted(answer)
        started.append(s)
        return s, await s.start()

    yield start  # type: ignore[misc]
    for s in started:
        await s.stop()


def sized(body: bytes, *extra: str) -> bytes:
    head = ["HTTP/1.1 200 OK", f"Content-Length: {len(body)}", *extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


async def get(pool: wire.Pool, target: wire.Target, path: str = "/x") -> tuple[int, bytes]:
    head = wire.request_head("GET", path, "test", {"Accept": "application/json"}, None)
    resp = await pool.send(target, head, None, head_within=5, deadline=None)
    try:
        return resp.status, await resp.read()
    finally:
        resp.release()


async def held(pool: wire.Pool, target: wire.Target, path: str) -> wire.Response:
    """An answer not yet read: its connection stays in use until it is released."""
    return await pool.send(
        target, wire.request_head("GET", path, "t", {}, None), None, head_within=5
    )


async def test_requests_in_turn_share_one_kept_alive_connection(serve) -> None:  # type: ignore[no-untyped-def]
    server, target = await serve(lambda head: sized(b'{"ok":1}'))
    pool = wire.Pool(4)
    got = [await get(pool, target) for _ in range(5)]
    assert got == [(200, b'{"ok":1}')] * 5
    assert server.connections == 1
    assert server.heads[0].startswith(b"GET /x HTTP/1.1\r\nHost: test\r\n")
    pool.close()


async def test_pools_that_share_take_over_each_others_idle_connection(serve) -> None:  # type: ignore[no-untyped-def]
    server, target = await serve(lambda head: sized(b"{}"))
    lists, watches = wire.Pool(4), wire.Pool(0)
    lists.shares(watches)
    assert await get(lists, target) == (200, b"{}")  # the LIST, then its watch on its connection
    assert await get(watches, target) == (200, b"{}")
    assert server.connections == 1
    assert await get(lists, target) == (200, b"{}")  # and back
    assert server.connections == 1
    # two at once: the second finds nothing idle and connects
    first, second = await held(lists, target, "/a"), await held(watches, target, "/b")
    assert server.connections == 2
    for resp in (first, second):
        await resp.read()
        resp.release()
    watches.close()  # closes what it holds, not what the other pool holds
    assert await get(lists, target) == (200, b"{}")
    assert server.connections == 2
    lists.close()


async def test_a_pool_uses_its_own_idle_connection_before_its_partners(serve) -> None:  # type: ignore[no-untyped-def]
    server, target = await serve(lambda head: sized(b"{}"))
    mine, other = wire.Pool(4), wire.Pool(0)
    mine.shares(other)
    a, b = await held(mine, target, "/a"), await held(other, target, "/b")
    for resp in (a, b):
        await resp.read()
        resp.release()
    assert server.connections == 2
    own = a.conn
    again = await held(mine, target, "/c")
    assert again.conn is own
    await again.read()
    again.release()
    mine.close()
    other.close()


async def test_a_connection_the_server_closes_is_not_reused(serve) -> None:  # type: ignore[no-untyped-def]
    server, target = await serve(lambda head: sized(b"{}", "Connection: close"))
    pool = wire.Pool(4)
    for _ in range(3):
        assert await get(pool, target) == (200, b"{}")
    assert server.connections == 3
    pool.close()


async def test_chunked_and_gzip_bodies_are_read_whole_and_inflated(serve) -> None:  # type: ignore[no-untyped-def]
    packed = gzip.compress(b'{"items":[' + b",".join([b"1"] * 5000) + b"]}")
    halves = (packed[:100], packed[100:])
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in halves) + b"0\r\n\r\n"
    raw = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Encoding: gzip\r\n\r\n" + chunked
    )
    _, target = await serve(lambda head: raw)
    pool = wire.Pool(1)
    status, body = await get(pool, target)
    assert (status, body[:10], body.count(b"1")) == (200, b'{"items":[', 5000)
    pool.close()


async def test_a_body_cut_short_is_a_wire_error_and_the_connection_is_dropped(serve) -> None:  # type: ignore[no-untyped-def]
    server, target = await serve(lambda head: b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
    server.hang_up = True  # after those 3 of 10 bytes
    pool = wire.Pool(1)
    with pytest.raises(wire.WireError, match="connection closed"):
        await asyncio.wait_for(get(pool, target), 5)
    assert not pool._open, "the broken connection is gone"
    assert not any(pool._idle.values())
    server.hang_up = False
    server.answer = lambda head: sized(b"{}")
    assert await get(pool, target) == (200, b"{}"), "the next request gets a new connection"
    pool.close()


async def test_an_answer_that_never_comes_times_out_and_frees_its_slot(serve) -> None:  # type: ignore[no-untyped-def]
    _, target = await serve(lambda head: b"")  # reads the request, answers nothing
    pool = wire.Pool(1)
    head = wire.request_head("GET", "/x", "test", {}, None)
    with pytest.raises(TimeoutError):
        await pool.send(target, head, None, head_within=0.2)
    with pytest.raises(TimeoutError):  # the one slot was given back: a second try gets that far
        await pool.send(target, head, None, head_within=0.2)
    pool.close()


def test_a_header_value_with_a_line_break_is_refused() -> None:
    with pytest.raises(wire.WireError, match="line break"):
        wire.request_head("GET", "/", "h", {"Authorization": "Bearer a\r\nX-Evil: 1"}, None)


def test_a_write_carries_its_length_and_a_read_none() -> None:
    post = wire.request_head("POST", "/p", "h", {}, b"{}")
    assert post.endswith(b"Content-Length: 2\r\n\r\n")
    assert b"Content-Length" not in wire.request_head("GET", "/", "h", {}, None)


@pytest.mark.parametrize(
    ("url", "where"),
    [
        ("https://10.0.0.1", ("10.0.0.1", 443, True)),
        ("http://api.example:8080/prefix", ("api.example", 8080, False)),
        ("https://[::1]:6443", ("::1", 6443, True)),
    ],
)
def test_a_servers_host_port_and_scheme_are_read_from_its_url(
    url: str, where: tuple[str, int, bool]
) -> None:
    assert wire.Target.of(url) == where


async def test_a_connection_idle_longer_than_the_keepalive_is_not_reused(serve) -> None:  # type: ignore[no-untyped-def]
    server, target = await serve(lambda head: sized(b"{}"))
    pool = wire.Pool(2)
    assert await get(pool, target) == (200, b"{}")
    for conn in pool._idle[target]:  # as if it had idled past the keep-alive
        conn.idle_since -= wire.KEEPALIVE + 1
    assert await get(pool, target) == (200, b"{}")
    assert server.connections == 2, "the stale connection was closed, a new one opened"
    assert await get(pool, target) == (200, b"{}")
    assert server.connections == 2, "the fresh one is reused"
    pool.close()


async def test_an_informational_answer_is_skipped_for_the_real_one(serve) -> None:  # type: ignore[no-untyped-def]
    server, target = await serve(lambda head: b"HTTP/1.1 100 Continue\r\n\r\n" + sized(b'{"a":1}'))
    pool = wire.Pool(1)
    assert await get(pool, target) == (200, b'{"a":1}')
    assert await get(pool, target) == (200, b'{"a":1}'), "the connection is still in step"
    assert server.connections == 1
    pool.close()


async def test_a_request_whose_time_runs_out_waiting_for_a_connection_is_never_sent(serve) -> None:  # type: ignore[no-untyped-def]
    server, target = await serve(lambda head: sized(b"{}"))
    pool = wire.Pool(1)
    head = wire.request_head("GET", "/x", "test", {}, None)
    held = await pool.send(target, head, None, head_within=5)  # the one slot, not released
    loop = asyncio.get_running_loop()
    with pytest.raises(TimeoutError):
        await pool.send(target, head, None, head_within=5, deadline=loop.time() + 0.2)
    assert len(server.heads) == 1, "the second request was never written"
    held.release()
    assert await get(pool, target) == (200, b"{}"), "and its slot was not lost"
    pool.close()


def test_a_header_value_that_is_not_latin_1_is_a_wire_error() -> None:
    with pytest.raises(wire.WireError, match="latin-1"):
        wire.request_head("GET", "/", "h", {"Authorization": "Bearer \ufefftoken"}, None)


async def test_a_streamed_body_that_stops_coming_times_out_after_its_read_timeout(serve) -> None:  # type: ignore[no-untyped-def]
    stalled = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"
    _, target = await serve(lambda head: stalled)  # then nothing, the connection kept open
    pool = wire.Pool(1)
    head = wire.request_head("GET", "/watch", "test", {}, None)
    resp = await pool.send(target, head, None, head_within=5, read_timeout=0.2)
    chunks = resp.chunks()
    assert await anext(chunks) == b"hello"
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(anext(chunks), 10)
    assert 0.2 - 0.01 <= loop.time() - started < 5, "the read timeout, not the test's bound"
    resp.release()
    pool.close()
