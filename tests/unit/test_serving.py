"""The HTTP edge under hostile clients (issue 13): a real listener on 127.0.0.1, raw sockets.

Half-sent requests are closed at the header timeout, oversized ones at once; a client at
its own cap loses its oldest connection; over the global cap the oldest connection still
sending its headers makes way, else the oldest idle one, else the heaviest client's oldest;
and complete requests get exactly the bytes the bare answering protocol gives them. Then what the probes,
`/metrics` and the diagnostics listener answer, and how listen addresses are read.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import re
import resource
import socket
import ssl
import threading
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kube_reloader import limits
from kube_reloader.core.fairness import share
from kube_reloader.edges import admitserving
from kube_reloader.edges.plainhttp import Answering, http_date
from kube_reloader.edges.serving import (
    Health,
    Limits,
    Server,
    build_app,
    build_debug_app,
    build_health_app,
    split_addr,
)
from kube_reloader.edges.tlsserving import (
    TlsServer,
    allow_names,
    names_of,
    require_client_certificates,
)
from kube_reloader.kube import admissioncerts as pki
from kube_reloader.metrics import Recorder
from kube_reloader.promtext import CONTENT_TYPE

pytestmark = pytest.mark.timeout(60)

PARTIAL = b"GET /live HTTP/1.1\r\nHost: x\r\n"


class FixedRecorder:
    """`/metrics` with a constant body, so that two servers can be compared byte for byte."""

    def exposition(self) -> bytes:
        return b"# HELP up fixed\nup 1.0\n"

    def exposition_soon(self) -> asyncio.Future[bytes]:
        done = asyncio.get_running_loop().create_future()
        done.set_result(self.exposition())
        return done


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
async def test_complete_requests_get_the_bytes_the_bare_protocol_gives(
    serve: Server, path: str
) -> None:
    routes = build_app(FixedRecorder(), Health())  # type: ignore[arg-type]
    loop = asyncio.get_running_loop()
    bare = await loop.create_server(lambda: Answering(routes, 15.0), "127.0.0.1", 0)
    try:
        port = bare.sockets[0].getsockname()[1]
        assert await fetch(serve.port, path) == await fetch(port, path)
    finally:
        bare.close()


@with_limits()
@pytest.mark.parametrize(
    ("request_line", "status_line", "has_body"),
    [
        (b"GET /live HTTP/1.1", b"HTTP/1.1 200 OK", True),
        (b"HEAD /live HTTP/1.1", b"HTTP/1.1 200 OK", False),
        (b"POST /live HTTP/1.1", b"HTTP/1.1 405 Method Not Allowed", True),
        (b"GET /nothing HTTP/1.1", b"HTTP/1.1 404 Not Found", True),
        (b"GET /live?x=1&x=2 HTTP/1.1", b"HTTP/1.1 200 OK", True),
        (b"BREW /live HTCPCP/1.0", b"HTTP/1.1 400 Bad Request", True),
    ],
)
async def test_each_request_gets_its_status_and_a_head_gets_no_body(
    serve: Server, request_line: bytes, status_line: bytes, has_body: bool
) -> None:
    reader, writer = await connect(serve)
    writer.write(request_line + b"\r\nHost: x\r\nConnection: close\r\n\r\n")
    raw = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0] == status_line
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    assert length > 0
    assert len(body) == (length if has_body else 0)


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


# ------------------------------------------------------- TLS counted from the first byte


def client_cert(ca: pki.Ca, name: str) -> tuple[bytes, bytes]:
    """A client certificate (clientAuth) for `name`, signed by `ca`."""
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )  # fmt: skip
    return cert.public_bytes(serialization.Encoding.PEM), pem


@dataclass
class Tls:
    server: TlsServer
    ca: pki.Ca  # the server's
    clients: pki.Ca  # the client certificates'

    def client(self, name: str | None = None, ca: pki.Ca | None = None) -> ssl.SSLContext:
        """A client context trusting the server, presenting a certificate for `name`."""
        ctx = ssl.create_default_context(cadata=self.ca.cert_pem.decode())
        if name is not None:
            cert, key = client_cert(ca or self.clients, name)
            pki.load(ctx, cert, key)
        return ctx


def spawn(name: str, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
    return asyncio.get_running_loop().create_task(coro, name=name)


@contextlib.asynccontextmanager
async def tls_serving(
    tmp_path: Path, limits: Limits | None = None, *, client_ca: bool = False,
    names: tuple[str, ...] = (),
) -> AsyncIterator[Tls]:  # fmt: skip
    ca, clients = pki.new_ca(time.time(), 3600), pki.new_ca(time.time(), 3600)
    context = pki.server_context()
    pki.load(context, *pki.serving_cert(ca, ["127.0.0.1"], time.time(), 3600))
    if client_ca:
        bundle = tmp_path / "clients.crt"
        bundle.write_bytes(clients.cert_pem)
        require_client_certificates(context, str(bundle))
    check = allow_names(names) if names else None
    app = build_app(FixedRecorder(), Health())  # type: ignore[arg-type]
    server = TlsServer(app, "127.0.0.1:0", context, spawn, limits=limits, check=check)
    await server.start()
    try:
        yield Tls(server, ca, clients)
    finally:
        await server.stop()


async def tls_get(port: int, ctx: ssl.SSLContext, path: str = "/live") -> bytes:
    """The body of a one-shot GET over TLS; b"" when the server refused the connection."""
    try:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=ctx, server_hostname="127.0.0.1"
        )
        writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        raw = await asyncio.wait_for(reader.read(), 10)
        writer.close()
    except (ssl.SSLError, ConnectionError):
        return b""
    return raw.partition(b"\r\n\r\n")[2]


async def until(condition: Callable[[], bool], what: str, limit: float = 5.0) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {limit}s"
        await asyncio.sleep(0.01)


async def test_a_tls_listener_serves_a_client_through_the_guard(tmp_path: Path) -> None:
    async with tls_serving(tmp_path) as tls:
        assert await tls_get(tls.server.port, tls.client()) == b"alive"
        assert tls.server.edge.refused == 0


async def test_bare_tcp_connects_count_from_the_first_byte_and_the_newest_make_the_oldest_go(
    tmp_path: Path,
) -> None:
    limits = Limits(max_connections=4, max_per_client=4, header_timeout=30)
    async with tls_serving(tmp_path, limits) as tls:
        edge, conns = tls.server.edge, []
        for i in range(12):  # a TCP connect, never a byte: before, never counted nor timed
            conns.append(await asyncio.open_connection("127.0.0.1", tls.server.port))
            await until(lambda i=i: edge.shed + len(edge.open) == i + 1, "accepted connect")
            assert len(edge.open) <= 4
        for reader, _ in conns[:8]:
            assert await seconds_until_closed(reader, limit=2) < 2, "closed at once, not at 30 s"
        assert edge.shed == 8
        assert await tls_get(tls.server.port, tls.client()) == b"alive"
        for _, writer in conns:
            writer.close()


async def test_a_handshake_that_never_comes_is_closed_at_the_header_timeout(
    tmp_path: Path,
) -> None:
    async with tls_serving(tmp_path, Limits(header_timeout=0.5)) as tls:
        reader, writer = await asyncio.open_connection("127.0.0.1", tls.server.port)
        writer.write(b"\x16\x03\x01")  # the first bytes of a ClientHello, then nothing
        assert 0.4 < await seconds_until_closed(reader) < 2
        assert tls.server.edge.timed_out == 1
        assert not tls.server.edge.open
        writer.close()


async def test_with_a_client_ca_a_caller_without_a_certificate_is_refused_at_the_handshake(
    tmp_path: Path,
) -> None:
    async with tls_serving(tmp_path, client_ca=True) as tls:
        assert await tls_get(tls.server.port, tls.client()) == b""
        await until(lambda: tls.server.edge.refused == 1, "refused handshake")
        assert not tls.server.edge.open
        assert await tls_get(tls.server.port, tls.client("apiserver")) == b"alive"


async def test_with_a_client_ca_a_certificate_from_another_ca_is_refused(tmp_path: Path) -> None:
    other = pki.new_ca(time.time(), 3600)
    async with tls_serving(tmp_path, client_ca=True) as tls:
        assert await tls_get(tls.server.port, tls.client("apiserver", other)) == b""
        await until(lambda: tls.server.edge.refused == 1, "refused handshake")


async def test_with_allowed_names_a_certificate_naming_another_client_is_refused(
    tmp_path: Path,
) -> None:
    async with tls_serving(tmp_path, client_ca=True, names=("kube-apiserver",)) as tls:
        assert await tls_get(tls.server.port, tls.client("tenant")) == b""
        await until(lambda: tls.server.edge.refused == 1, "refused certificate")
        assert await tls_get(tls.server.port, tls.client("kube-apiserver")) == b"alive"


def test_a_certificates_names_are_its_common_name_and_dns_names_and_nothing_else() -> None:
    cert = {
        "subject": ((("organizationName", "system:masters"),), (("commonName", "api"),)),
        "subjectAltName": (("DNS", "api.example"), ("IP Address", "10.0.0.1")),
    }
    assert names_of(cert) == {"api", "api.example"}
    assert names_of(None) == set()
    assert names_of({"subject": "junk", "subjectAltName": ()}) == set()


# --------------------------------------------- the admission edge: reading and answering

BUSY = b'{"response":{"uid":"","allowed":true}}'


class Answers:
    """`parse` (the body's length) and `respond` of an admission app; `gate` holds answers."""

    def __init__(self) -> None:
        self.parsed: list[int] = []
        self.gate = asyncio.Event()
        self.gate.set()

    def parse(self, body: bytes) -> int:
        self.parsed.append(len(body))
        return len(body)

    async def respond(self, n: int) -> bytes:
        await self.gate.wait()
        return f'{{"response":{{"uid":"u","allowed":true,"n":{n}}}}}'.encode()


@contextlib.asynccontextmanager
async def admitting_edge() -> AsyncIterator[tuple[Server, Answers, admitserving.Gates]]:
    answers, gates = Answers(), admitserving.Gates()
    app = admitserving.build_admission_app(answers.parse, answers.respond, 1024, BUSY, gates)
    server = Server(app, "127.0.0.1:0", limits=Limits(max_request_bytes=2048))
    await server.start()
    try:
        yield server, answers, gates
    finally:
        await server.stop()


async def review_post(
    port: int, body: bytes, *, source: str = "127.0.0.1", query: str = "", length: int = -1
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """POST a review; `length` announces more than `body` (a sender that stalls)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
    announced = len(body) if length < 0 else length
    writer.write(f"POST {admitserving.PATH}{query} HTTP/1.1\r\nHost: x\r\nContent-Type: "
                 f"application/json\r\nContent-Length: {announced}\r\n\r\n".encode() + body)  # fmt: skip
    await writer.drain()
    return reader, writer


async def answer_of(reader: asyncio.StreamReader, limit: float = 10) -> tuple[int, bytes]:
    raw = await asyncio.wait_for(reader.read(), limit)
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


async def test_a_body_that_stops_arriving_is_dropped_after_the_body_timeout_and_frees_its_slot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(admitserving, "BODY_TIMEOUT", 0.5)
    async with admitting_edge() as (server, answers, gates):
        reader, writer = await review_post(server.port, b"ab", length=100)
        assert 0.4 < await seconds_until_closed(reader) < 2, "dropped, not left to linger"
        assert gates.dropped == 1
        assert gates.reading.ledger.total == 0
        assert answers.parsed == []
        writer.close()


async def test_slow_senders_from_one_address_cannot_hold_every_reading_slot_while_another_reads(
) -> None:  # fmt: skip
    async with admitting_edge() as (server, _, gates):
        slow = [
            await review_post(server.port, b"ab", source="127.0.0.2", length=100)
            for _ in range(admitserving.MAX_BODIES)
        ]
        ledger = gates.reading.ledger
        await until(lambda: ledger.total + ledger.waiting == len(slow), "slow senders in line")
        assert ledger.held["127.0.0.2"] == share(admitserving.MAX_BODIES, 0) < len(slow)
        started = time.monotonic()
        reader, writer = await review_post(server.port, b"x" * 10)  # the API server
        assert await answer_of(reader) == (200, b'{"response":{"uid":"u","allowed":true,"n":10}}')
        assert time.monotonic() - started < 1, "read at once, not after the slow ones"
        assert gates.unread == 0
        for _, w in [*slow, (reader, writer)]:
            w.close()


async def test_two_slow_senders_cannot_hold_both_of_two_reading_slots(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(admitserving, "MAX_BODIES", 2)  # the cap that was held before
    async with admitting_edge() as (server, _, gates):
        slow = [await review_post(server.port, b"ab", source="127.0.0.2", length=100)
                for _ in range(2)]  # fmt: skip
        ledger = gates.reading.ledger
        await until(lambda: ledger.total == 1 and ledger.waiting == 1, "one read, one waiting")
        reader, writer = await review_post(server.port, b"x" * 10)
        assert (await answer_of(reader, limit=2))[0] == 200
        assert gates.unread == 0
        for _, w in [*slow, (reader, writer)]:
            w.close()


async def test_reviews_beyond_the_ones_being_answered_wait_for_their_turn_and_are_answered(
) -> None:  # fmt: skip
    async with admitting_edge() as (server, answers, gates):
        answers.gate.clear()  # lookups that have not come back
        alone = share(admitserving.MAX_ANSWERING, 0)  # one address's part
        held = [await review_post(server.port, b"z" * 5, query="?timeout=10s")
                for _ in range(alone)]  # fmt: skip
        await until(lambda: len(answers.parsed) == alone, "answering")
        other, other_writer = await review_post(server.port, b"o" * 3, source="127.0.0.2")
        await until(lambda: len(answers.parsed) == alone + 1, "another address answered at once")
        waiting, waiting_writer = await review_post(server.port, b"w" * 7, query="?timeout=10s")
        await until(lambda: gates.answering.ledger.waiting == 1, "the next review in line")
        answers.gate.set()
        assert (await answer_of(waiting))[1].endswith(b'"n":7}}'), "waited, then answered"
        for reader, _ in held:
            assert (await answer_of(reader))[1].endswith(b'"n":5}}')
        assert (await answer_of(other))[1].endswith(b'"n":3}}')
        assert gates.unread == 0
        for _, w in [*held, (other, other_writer), (waiting, waiting_writer)]:
            w.close()


@pytest.mark.parametrize(("timeout", "waits"), [("1s", 0.5), ("2s", 1.5), ("junk", 4.0)])
async def test_a_review_waits_for_its_turn_no_longer_than_the_api_servers_timeout_allows(
    timeout: str, waits: float
) -> None:
    async with admitting_edge() as (server, answers, gates):
        answers.gate.clear()
        held = [await review_post(server.port, b"z" * 5)
                for _ in range(share(admitserving.MAX_ANSWERING, 0))]  # fmt: skip
        await until(lambda: len(answers.parsed) == len(held), "answering")
        started = time.monotonic()
        reader, writer = await review_post(server.port, b"w" * 7, query=f"?timeout={timeout}")
        assert await answer_of(reader) == (200, BUSY)
        assert waits - 0.1 < time.monotonic() - started < waits + 1
        assert gates.unread == 1
        assert gates.answering.ledger.waiting == 0, "it left the line"
        answers.gate.set()
        for r, w in [*held, (reader, writer)]:
            w.close()
            del r


async def test_a_large_review_is_parsed_in_a_worker_thread_a_small_one_on_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(admitserving, "PARSE_ON_LOOP", 100)
    threads: list[bool] = []

    class Where(Answers):
        def parse(self, body: bytes) -> int:
            threads.append(threading.current_thread() is threading.main_thread())
            return super().parse(body)

    answers, gates = Where(), admitserving.Gates()
    app = admitserving.build_admission_app(answers.parse, answers.respond, 1024, BUSY, gates)
    server = Server(app, "127.0.0.1:0", limits=Limits(max_request_bytes=2048))
    await server.start()
    try:
        for size in (50, 500):
            reader, writer = await review_post(server.port, b"x" * size)
            status, _ = await answer_of(reader)
            writer.close()
            assert status == 200
    finally:
        await server.stop()
    assert threads == [True, False], "50 bytes on the loop, 500 in a thread"


@with_limits(keepalive_timeout=1.0)
async def test_a_client_that_pipelines_and_never_reads_holds_one_buffer_then_is_closed(
    serve: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked: asyncio.Queue[Answering] = asyncio.Queue()  # the connection that stopped reading
    let_go = asyncio.Event()
    pause, forget = Answering.pause_writing, serve.edge.forget

    def pausing(self: Answering) -> None:
        pause(self)
        blocked.put_nowait(self)

    def forgetting(guard: Any) -> None:
        forget(guard)
        let_go.set()

    monkeypatch.setattr(Answering, "pause_writing", pausing)
    monkeypatch.setattr(serve.edge, "forget", forgetting)
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting: it sticks
    raw.setblocking(False)
    await asyncio.get_running_loop().sock_connect(raw, ("127.0.0.1", serve.port))
    reader, writer = await asyncio.open_connection(sock=raw)
    flood = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 20_000
    writer.write(flood)  # 20,000 requests at once, and not one answer read
    inner = await asyncio.wait_for(blocked.get(), 10)  # the answers filled the buffers
    assert inner.blocked, "the unread answers stopped the reading of requests"
    assert inner.pending, "requests wait, unanswered, instead of answers piling up"
    await asyncio.wait_for(let_go.wait(), 10)  # blocked past the keep-alive timeout
    assert not serve.edge.open, "a client that reads nothing is not kept forever"
    got = b""
    with contextlib.suppress(ConnectionError):  # cut off after the keep-alive timeout
        while chunk := await asyncio.wait_for(reader.read(65536), 10):
            got += chunk
    assert 0 < got.count(b"HTTP/1.1 200 OK") < 20_000
    writer.close()


@with_limits(keepalive_timeout=0.5)
async def test_a_request_whose_announced_body_never_comes_is_closed_like_an_idle_one(
    serve: Server,
) -> None:
    reader, writer = await connect(serve)
    writer.write(b"GET /live HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n")  # and no body
    assert await seconds_until_closed(reader) < 5
    writer.close()


@with_limits()
async def test_garbage_after_a_request_gets_its_400_after_that_requests_answer(
    serve: Server,
) -> None:
    reader, writer = await connect(serve)
    writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n\x00\x01 not http\r\n\r\n")
    raw = await asyncio.wait_for(reader.read(), 10)  # then the server closes
    statuses = re.findall(rb"HTTP/1\.1 \d{3} [^\r]*", raw)
    assert statuses == [b"HTTP/1.1 200 OK", b"HTTP/1.1 400 Bad Request"]
    writer.close()


@pytest.mark.parametrize(
    "second",
    [0, 784111777, 951782400, 1796601600, 2**31 + 5, 253402300799],  # 1970, RFC, leap day, ...
)
def test_the_date_header_is_the_imf_fixdate_the_mail_package_writes(second: int) -> None:
    import email.utils

    assert http_date(second) == email.utils.formatdate(second, usegmt=True)
