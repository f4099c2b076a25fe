"""The API server's way to the TLS scenarios' webhook, and a prober of admissions.

The API server runs on the host and calls the webhook at `https://127.0.0.1:<port>`; there is
no kube-proxy on the dev cluster. `Relay` sends each connection to one ready pod in the node's
network namespace (another if it refuses), as a Service would route. `admitting` creates a
pod with dryRun every 0.2 s in the namespace the webhook guards, so each one is a webhook call.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from kube_reloader.devcluster import relay
from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client
from tests.node.tlsharness import CONNECT_TIMEOUT, Targets
from tests.waiting import alongside, eventually


# -- the API server's way to the webhook ---------------------------------------------------
class Relay:
    """Listens on the host's 127.0.0.1 (a free port) and sends each connection, byte for
    byte, to one ready pod in the node's network namespace (another if one refuses), as a
    Service routes: the API server's way to the webhook. The devcluster relay's pieces, the
    other way round."""

    def __init__(self, netns: str, targets: Targets) -> None:
        self.netns, self.targets = netns, targets
        self.port = 0
        #: connections accepted (the API server's webhook calls), and upstreams that refused
        self.accepted = 0
        self.refused = 0
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self._handlers: set[asyncio.Task[Any]] = set()

    async def _dial(self) -> socket.socket | None:
        loop = asyncio.get_running_loop()
        for address in self.targets.pick():
            sock = relay.socket_in(self.netns)
            try:
                await asyncio.wait_for(loop.sock_connect(sock, address), CONNECT_TIMEOUT)
                return sock
            except (OSError, TimeoutError):
                sock.close()
                self.refused += 1
        return None

    async def _handle(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        self.accepted += 1
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        sides = [w]
        try:
            if (upstream := await self._dial()) is not None:
                ur, uw = await asyncio.open_connection(sock=upstream)
                sides.append(uw)
                self._open.update(sides)
                await asyncio.gather(relay.pipe(r, uw), relay.pipe(ur, w))
        finally:
            for side in sides:
                side.close()
                self._open.discard(side)
            self._handlers.discard(task)

    async def __aenter__(self) -> Relay:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for side in list(self._open):  # ends every pipe still open
            side.close()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()


@dataclass
class Admissions:
    """Pods created with dryRun in `namespace` every 0.2 s (each one goes through the
    webhook): how many were admitted, the refusals that name the webhook (its call failed),
    and other API errors (kept apart: a busy API server is not the webhook failing)."""

    ok: int = 0
    failures: list[tuple[float, str]] = field(default_factory=list)
    errors: list[tuple[float, str]] = field(default_factory=list)


#: the admission probe's pace: one dry-run pod creation this often (the load the scenario puts
#: on the webhook, not a wait for anything)
ADMIT_EVERY = 0.2
PROBE_POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "probe-"},
             "spec": {"containers": [{"name": "c", "image": "example.invalid/none"}]}}  # fmt: skip


async def admit_once(client: Client, namespace: str, seen: Admissions) -> None:
    try:
        await client.create(resources.PODS, PROBE_POD, namespace=namespace, dry_run=True)
        seen.ok += 1
    except (errors.KubeError, OSError, TimeoutError) as exc:
        text = str(exc)[:300]
        (seen.failures if "webhook" in text.lower() else seen.errors).append((time.time(), text))


async def webhook_in_path(client: Client, namespace: str, path: Relay) -> None:
    """Evidence that the API server calls the webhook: a dry-run pod creation reached the
    relay (the API server loads a new webhook configuration a moment after it is written)."""

    async def called() -> bool:
        await admit_once(client, namespace, Admissions())
        return path.accepted > 0

    await eventually(called, timeout=30, interval=0.5, what="the API server calling the webhook")


@contextlib.asynccontextmanager
async def admitting(client: Client, namespace: str) -> AsyncIterator[Admissions]:
    """Admissions at the scenario's pace (one every ADMIT_EVERY s) until the block ends; the
    last one in flight then completes (never cancelled half-way)."""
    seen = Admissions()
    done = asyncio.Event()

    async def loop() -> None:
        while not done.is_set():
            await admit_once(client, namespace, seen)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), ADMIT_EVERY)

    async with alongside(loop()) as task:
        try:
            yield seen
        finally:
            done.set()
            await task
