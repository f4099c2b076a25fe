"""The API server's way to the TLS scenarios' webhook, and a prober of admissions.

The API server runs on the host and calls the webhook at `https://127.0.0.1:<port>`; there is
no kube-proxy on the dev cluster. `Relay` sends each connection to one ready pod in the node's
network namespace (another if it refuses), as a Service would route. `admitting` creates a
pod with dryRun every 0.2 s in the namespace the webhook guards, so each one is a webhook call.
"""

from __future__ import annotations

import asyncio
import contextlib
import selectors
import socket
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client
from tests.node.nodeharness import _enter
from tests.node.tlsharness import CONNECT_TIMEOUT, Targets
from tests.waiting import eventually


# -- the API server's way to the webhook ---------------------------------------------------
class Relay:
    """Listens on the host's 127.0.0.1 (a free port) and sends each connection, byte for
    byte, to one ready pod in the node's network namespace (another if it refuses)."""

    def __init__(self, netns: str, targets: Targets) -> None:
        self.netns, self.targets = netns, targets
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        #: connections accepted (the API server's webhook calls), and upstreams that refused
        self.accepted = 0
        self.refused = 0
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        _enter(self.netns)
        upstream = None
        for address in self.targets.pick():
            try:
                upstream = socket.create_connection(address, timeout=CONNECT_TIMEOUT)
                break
            except OSError:
                self.refused += 1
        if upstream is None:
            conn.close()
            return
        _pump(conn, upstream)

    def __enter__(self) -> Relay:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
        self.listener.close()
        self._thread.join(10)


def _pump(a: socket.socket, b: socket.socket) -> None:
    sel = selectors.DefaultSelector()
    for s in (a, b):
        s.settimeout(None)
        sel.register(s, selectors.EVENT_READ)
    peer = {a: b, b: a}
    try:
        while True:
            for key, _ in sel.select(timeout=60):
                data = key.fileobj.recv(65536)  # type: ignore[union-attr]
                if not data:
                    return
                peer[key.fileobj].sendall(data)  # type: ignore[index]
    except OSError:
        return
    finally:
        sel.close()
        a.close()
        b.close()


@dataclass
class Admissions:
    """Pods created with dryRun in `namespace` every 0.2 s (each one goes through the
    webhook): how many were admitted, the refusals that name the webhook (its call failed),
    and other API errors (kept apart: a busy API server is not the webhook failing)."""

    ok: int = 0
    failures: list[tuple[float, str]] = field(default_factory=list)
    errors: list[tuple[float, str]] = field(default_factory=list)


PROBE_POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "probe-"},
             "spec": {"containers": [{"name": "c", "image": "example.invalid/none"}]}}  # fmt: skip


async def admit_once(client: Client, namespace: str, seen: Admissions) -> None:
    try:
        await client.create(resources.PODS, PROBE_POD, namespace=namespace, dry_run=True)
        seen.ok += 1
    except (errors.KubeError, OSError, TimeoutError) as exc:
        text = str(exc)[:300]
        (seen.failures if "webhook" in text.lower() else seen.errors).append((time.time(), text))


async def webhook_in_path(client: Client, namespace: str, relay: Relay) -> None:
    """Evidence that the API server calls the webhook: a dry-run pod creation reached the
    relay (the API server loads a new webhook configuration a moment after it is written)."""

    async def called() -> bool:
        await admit_once(client, namespace, Admissions())
        return relay.accepted > 0

    await eventually(called, timeout=30, interval=0.5, what="the API server calling the webhook")


@contextlib.asynccontextmanager
async def admitting(client: Client, namespace: str) -> AsyncIterator[Admissions]:
    seen = Admissions()

    async def loop() -> None:
        while True:
            await admit_once(client, namespace, seen)
            await asyncio.sleep(0.2)

    task = asyncio.create_task(loop())
    try:
        yield seen
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
