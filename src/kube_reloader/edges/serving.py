"""The HTTP endpoints: `/metrics` and `/live` as Reloader v1 serves them, plus `/readyz`;
with `--compat=v2` (or `--health-addr`) Reloader v2's health listener (`/healthz`, `/readyz`);
and, only with `--enable-pprof`, Python diagnostics (asyncio tasks, tracemalloc top
allocations) on a separate listener bound to loopback unless told otherwise.

The listener is reachable by every tenant's pods, and it shares the process's file
descriptors with the controller's own API connections, so no client may hold more than a
bounded share of them (issue 13): each connection must finish its request headers within a
few seconds and keep them small, idle keep-alive is short, and the number of connections is
capped. At the cap, the oldest connection still sending its headers (or idling after a
response) makes way for the newcomer; if there is none, the newcomer is closed at once.
A TLS listener (`tlsserving`) counts a connection the same way, from its first byte. The
answers are `plainhttp`'s; only the admission webhook's listener runs on aiohttp."""

from __future__ import annotations

import asyncio
import io
import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, cast

import msgspec

from kube_reloader.edges.plainhttp import Answering, Handler, Reply, Routes, split_addr, then
from kube_reloader.metrics import Recorder
from kube_reloader.promtext import CONTENT_TYPE

if TYPE_CHECKING:  # the admission webhook's listener only: imported in that mode
    from aiohttp import web

log = logging.getLogger(__name__)


@dataclass(eq=False, repr=False)  # state, not a value: compared by identity
class Health:
    """What the probes report; the runtime updates it."""

    synced: bool = False
    ha: bool = False
    leader: bool = False
    #: v1: `/live` fails once this replica has lost the lease it held
    lost_lease: bool = False
    #: background tasks that keep crashing: `/readyz` fails while there are any
    failing: Callable[[], list[str]] = field(default=list)
    #: background tasks that crashed so often the process cannot do its job: `/live` fails
    dead: Callable[[], list[str]] = field(default=list)


def metrics_handler(recorder: Recorder) -> Handler:
    def metrics(_: Mapping[str, str]) -> asyncio.Future[Reply]:
        return then(recorder.exposition_soon(), lambda body: Reply(200, body, CONTENT_TYPE))

    return metrics


def build_app(recorder: Recorder, health: Health) -> Routes:
    def live(_: Mapping[str, str]) -> Reply:
        if health.lost_lease:
            return Reply.text("", 500)
        dead = health.dead()
        if dead:
            return Reply.text(f"tasks keep crashing: {', '.join(dead)}", 500)
        return Reply.text("alive")

    def readyz(_: Mapping[str, str]) -> Reply:
        role = ("leader" if health.leader else "standby") if health.ha else "single"
        if not health.synced:
            return Reply.text(f"caches not synced ({role})", 503)
        failing = health.failing()
        if failing:
            return Reply.text(f"tasks failing: {', '.join(failing)} ({role})", 503)
        return Reply.text(f"ok ({role})")

    return {
        "/metrics": metrics_handler(recorder),
        "/live": live,
        "/readyz": readyz,
        "/healthz": live,
    }


def build_health_app(health: Health) -> Routes:
    """Reloader v2's health listener (`--health-addr`, controller-runtime's probes):
    `/healthz` means what `/live` means, `/readyz` what `/readyz` means on the metrics
    listener. Bodies as controller-runtime's: `ok` (with `?verbose`, the check list), and on
    failure 500 with the check named and the reason withheld (the port is public)."""

    def answer(query: Mapping[str, str], check: str, healthy: bool) -> Reply:
        headers = (("X-Content-Type-Options", "nosniff"),)
        if healthy and "verbose" not in query:
            return Reply.text("ok", headers=headers)
        line = f"[+]{check} ok" if healthy else f"[-]{check} failed: reason withheld"
        verdict = "passed" if healthy else "failed"
        return Reply.text(f"{line}\nhealthz check {verdict}\n", 200 if healthy else 500, headers)

    def healthz(query: Mapping[str, str]) -> Reply:
        return answer(query, "healthz", not health.lost_lease and not health.dead())

    def readyz(query: Mapping[str, str]) -> Reply:
        return answer(query, "readyz", health.synced and not health.failing())

    return {"/healthz": healthz, "/readyz": readyz}


def build_debug_app(recorder: Recorder) -> Routes:
    import tracemalloc  # only with --enable-pprof: not on every start

    if not tracemalloc.is_tracing():
        tracemalloc.start(10)

    def tasks(_: Mapping[str, str]) -> Reply:
        out = io.StringIO()
        for task in sorted(asyncio.all_tasks(), key=lambda t: t.get_name()):
            out.write(f"--- {task.get_name()} {'done' if task.done() else 'pending'}\n")
            task.print_stack(limit=8, file=out)
        return Reply.text(out.getvalue())

    def memory(query: Mapping[str, str]) -> Reply:
        top = query.get("top", "30")
        limit = int(top) if top.isdigit() else 30
        snapshot = tracemalloc.take_snapshot()
        stats = snapshot.statistics("lineno")[:limit]
        current, peak = tracemalloc.get_traced_memory()
        lines = [f"traced: current {current / 2**20:.1f} MiB, peak {peak / 2**20:.1f} MiB"]
        lines += [str(s) for s in stats]
        return Reply.text("\n".join(lines) + "\n")

    return {"/debug/tasks": tasks, "/debug/memory": memory, "/metrics": metrics_handler(recorder)}


#: bytes of one request or header line, whatever a listener's request bytes (its bodies) are
MAX_HEADER_LINE = 8192


class Limits(msgspec.Struct, frozen=True):
    """What one client may cost the process. Kubelet probes and Prometheus send a small
    request at once and read the answer, so these bounds never touch them."""

    #: open connections at most; one descriptor each
    max_connections: int = 128
    #: open connections from one client address: its oldest makes way for its next one
    max_per_client: int = 16
    #: seconds from a request's first byte (or the connection's start) to the end of its headers
    header_timeout: float = 5.0
    #: seconds an idle keep-alive connection stays open between requests
    keepalive_timeout: float = 15.0
    #: bytes of request line and headers (a body counts as the next request's bytes)
    max_request_bytes: int = 8192
    #: at the cap, a connection idle this long after its last request may make way
    idle_grace: float = 1.0


class Edge:
    """The connections of one listener, and the ones it dropped (counts, for logs and tests)."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.open: set[_Guard] = set()
        self.sending: OrderedDict[_Guard, float] = OrderedDict()  # headers not finished yet
        self.idle: OrderedDict[_Guard, float] = OrderedDict()  # headers done, since when
        #: open connections per client address, oldest first
        self.peers: dict[str, OrderedDict[_Guard, None]] = {}
        self.shed = 0  # closed to make way for a newer connection
        self.timed_out = 0  # headers (or a TLS handshake) not finished in time, or too large
        self.refused = 0  # TLS handshakes that failed, or client certificates not accepted
        self._logged_at = -1e9

    def admit(self, guard: _Guard, peer: str, now: float) -> None:
        """Take `guard` in, making way when a cap is reached: a client at its own cap loses its
        oldest connection; at the global cap the oldest half-sent request goes first, then the
        oldest idle connection, then the oldest connection of the client holding the most.
        A newcomer is never refused, so a probe always gets through a flood."""
        mine = self.peers.setdefault(peer, OrderedDict())
        victim: _Guard | None = None
        if len(mine) >= self.limits.max_per_client:
            victim = next(iter(mine))
        elif len(self.open) >= self.limits.max_connections:
            victim = next(iter(self.sending), None)
            if victim is None:
                oldest = next(iter(self.idle.items()), None)
                if oldest is not None and now - oldest[1] >= self.limits.idle_grace:
                    victim = oldest[0]
            if victim is None:
                heaviest = max(self.peers.values(), key=lambda conns: len(conns))
                victim = next(iter(heaviest), None)
        if victim is not None:
            self.shed += 1
            victim.drop()
            self._report(now)
        self.open.add(guard)
        mine[guard] = None

    def timed_out_one(self, now: float) -> None:
        self.timed_out += 1
        self._report(now)

    def refused_one(self, now: float) -> None:
        self.refused += 1
        self._report(now)

    def forget(self, guard: _Guard) -> None:
        self.open.discard(guard)
        self.sending.pop(guard, None)
        self.idle.pop(guard, None)
        mine = self.peers.get(guard.peer)
        if mine is not None:
            mine.pop(guard, None)
            if not mine:
                del self.peers[guard.peer]

    def _report(self, now: float) -> None:
        if now - self._logged_at >= 10:
            self._logged_at = now
            log.warning(
                "http connections dropped",
                extra={
                    "shed": self.shed,
                    "timed_out": self.timed_out,
                    "refused": self.refused,
                    "open": len(self.open),
                    "max_connections": self.limits.max_connections,
                },
            )


class _Guard(asyncio.Protocol):
    """One connection: watches where each request's headers end, then hands the bytes to the
    answering protocol (`plainhttp`'s, or aiohttp's), which has no header timeout or cap."""

    def __init__(self, edge: Edge, make_inner: Callable[[], asyncio.Protocol]) -> None:
        self.edge = edge
        self.make_inner = make_inner
        self.inner: asyncio.Protocol | None = None
        self.early: list[bytes] = []  # bytes that came before `inner` (see `tlsserving`)
        self.transport: asyncio.Transport | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.count = 0  # bytes of the current request's headers so far
        self.tail = b""  # their last three bytes: an end of headers may straddle two reads
        self.peer = ""
        self.loop = asyncio.get_running_loop()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses
        self.transport = transport
        peername = transport.get_extra_info("peername")
        self.peer = str(peername[0]) if isinstance(peername, tuple) and peername else ""
        self.edge.admit(self, self.peer, self.loop.time())
        self._start_request()
        self._begin(transport)

    def _begin(self, transport: asyncio.Transport) -> None:
        """Counted and timed from here on: hand the connection to the answering protocol."""
        self.inner = self.make_inner()
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        if not self._scan(data):
            self.edge.timed_out_one(self.loop.time())
            self.drop()
        elif self.inner is None:
            self.early.append(data)
        else:
            self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.inner is not None else None

    def pause_writing(self) -> None:
        if self.inner is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.inner is not None:
            self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_timer()
        self.edge.forget(self)
        if self.inner is not None:
            self.inner.connection_lost(exc)

    def drop(self) -> None:
        self.edge.forget(self)
        self._stop_timer()
        if self.transport is not None:
            self.transport.abort()

    def _scan(self, data: bytes) -> bool:
        """Follow request heads through `data`; False if one grows past the size limit."""
        buf = self.tail + data
        pos, counted = 0, len(self.tail)
        limit = self.edge.limits.max_request_bytes
        while True:
            if self not in self.edge.sending:
                if pos >= len(buf):
                    return True
                self._start_request()
            end = buf.find(b"\r\n\r\n", pos)
            if end < 0:
                self.count += len(buf) - max(pos, counted)
                self.tail = buf[-3:]
                return self.count <= limit
            self.count += end + 4 - max(pos, counted)
            if self.count > limit:
                return False
            pos = end + 4
            self.tail = b""  # a found end never counts again in the next read
            self._stop_timer()
            self.edge.sending.pop(self, None)
            self.edge.idle[self] = self.loop.time()

    def _start_request(self) -> None:
        self.count, self.tail = 0, b""
        self.edge.idle.pop(self, None)
        self.edge.sending[self] = self.loop.time()
        self._stop_timer()
        self.timer = self.loop.call_later(self.edge.limits.header_timeout, self._expire)

    def _expire(self) -> None:
        self.timer = None
        self.edge.timed_out_one(self.loop.time())
        self.drop()

    def _stop_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


class Server:
    """Serve `routes` (or, for the admission webhook, an aiohttp application) on one
    address until stopped, behind the `Limits`."""

    def __init__(
        self,
        app: Routes | web.Application,
        addr: str,
        *,
        default_host: str = "0.0.0.0",  # noqa: S104
        limits: Limits | None = None,
    ) -> None:
        self.app = app
        self.host, self.port = split_addr(addr, default_host=default_host)
        self.edge = Edge(limits or Limits())
        self._runner: web.AppRunner | None = None
        self._listener: asyncio.Server | None = None

    async def start(self) -> None:
        limits = self.edge.limits
        handlers: Callable[[], asyncio.Protocol]
        if isinstance(self.app, dict):  # an aiohttp application is a mapping, not a dict
            handlers = partial(Answering, self.app, limits.keepalive_timeout)
        else:
            handlers = await self._aiohttp(self.app)  # the admission webhook's application
        loop = asyncio.get_running_loop()
        self._listener = await loop.create_server(
            lambda: self._guard(handlers), self.host, self.port, reuse_address=True
        )
        if self.port == 0 and self._listener.sockets:
            self.port = self._listener.sockets[0].getsockname()[1]
        log.info("serving", extra={"address": f"{self.host}:{self.port}"})

    async def _aiohttp(self, app: web.Application) -> Callable[[], asyncio.Protocol]:
        from aiohttp import web  # the admission webhook's mode only

        limits = self.edge.limits
        self._runner = web.AppRunner(
            app,
            access_log=None,
            keepalive_timeout=limits.keepalive_timeout,
            max_line_size=min(limits.max_request_bytes, MAX_HEADER_LINE),
            max_field_size=min(limits.max_request_bytes, MAX_HEADER_LINE),
            lingering_time=limits.header_timeout,
        )
        await self._runner.setup()
        assert self._runner.server is not None
        return self._runner.server

    def _guard(self, handlers: Callable[[], asyncio.Protocol]) -> _Guard:
        return _Guard(self.edge, handlers)

    async def stop(self) -> None:
        if self._listener is not None:
            self._listener.close()
        if self._runner is not None:
            await self._runner.cleanup()
        for guard in list(self.edge.open):
            guard.drop()
        if self._listener is not None:
            await self._listener.wait_closed()
