"""The HTTP endpoints: `/metrics` and `/live` as Reloader v1 serves them, plus `/readyz`;
and, only with `--enable-pprof`, Python diagnostics (asyncio tasks, tracemalloc top
allocations) on a separate listener bound to loopback unless told otherwise.
"""

from __future__ import annotations

import asyncio
import io
import logging
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from kube_reloader.metrics import CONTENT_TYPE, Recorder

log = logging.getLogger(__name__)


@dataclass
class Health:
    """What the probes report; the runtime updates it."""

    synced: bool = False
    ha: bool = False
    leader: bool = False
    #: v1: `/live` fails once this replica has lost the lease it held
    lost_lease: bool = False


def split_addr(addr: str, *, default_host: str = "0.0.0.0") -> tuple[str, int]:  # noqa: S104
    """`:9090`, `127.0.0.1:9090` or `[::1]:9090` -> (host, port)."""
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"{addr!r} is not host:port")
    host = host.strip("[]") or default_host
    return host, int(port)


def build_app(recorder: Recorder, health: Health) -> web.Application:
    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=recorder.exposition(), headers={"Content-Type": CONTENT_TYPE})

    async def live(_: web.Request) -> web.Response:
        if health.lost_lease:
            return web.Response(status=500)
        return web.Response(text="alive")

    async def readyz(_: web.Request) -> web.Response:
        role = ("leader" if health.leader else "standby") if health.ha else "single"
        if not health.synced:
            return web.Response(status=503, text=f"caches not synced ({role})")
        return web.Response(text=f"ok ({role})")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/live", live)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/healthz", live)
    return app


def build_debug_app(recorder: Recorder) -> web.Application:
    if not tracemalloc.is_tracing():
        tracemalloc.start(10)

    async def tasks(_: web.Request) -> web.Response:
        out = io.StringIO()
        for task in sorted(asyncio.all_tasks(), key=lambda t: t.get_name()):
            out.write(f"--- {task.get_name()} {'done' if task.done() else 'pending'}\n")
            task.print_stack(limit=8, file=out)
        return web.Response(text=out.getvalue())

    async def memory(request: web.Request) -> web.Response:
        limit = int(request.query.get("top", "30"))
        snapshot = tracemalloc.take_snapshot()
        stats = snapshot.statistics("lineno")[:limit]
        current, peak = tracemalloc.get_traced_memory()
        lines = [f"traced: current {current / 2**20:.1f} MiB, peak {peak / 2**20:.1f} MiB"]
        lines += [str(s) for s in stats]
        return web.Response(text="\n".join(lines) + "\n")

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=recorder.exposition(), headers={"Content-Type": CONTENT_TYPE})

    app = web.Application()
    app.router.add_get("/debug/tasks", tasks)
    app.router.add_get("/debug/memory", memory)
    app.router.add_get("/metrics", metrics)
    return app


class Server:
    """Run one aiohttp application on one address until stopped."""

    def __init__(self, app: web.Application, addr: str, *, default_host: str = "0.0.0.0") -> None:  # noqa: S104
        self.app = app
        self.host, self.port = split_addr(addr, default_host=default_host)
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        if self.port == 0:
            server = site._server  # the only way to learn an ephemeral port
            sockets = getattr(server, "sockets", None) or []
            if sockets:
                self.port = sockets[0].getsockname()[1]
        log.info("serving", extra={"address": f"{self.host}:{self.port}"})

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


Updater = Callable[[], None]
