"""Issue 13 end to end: a flood of half-sent requests on the metrics/health listener must not
take the file descriptors the controller needs for its own API calls.

The process's soft open-files limit is set, for the test, to what it already uses plus the
flood's own client ends plus the server's connection cap plus a small margin. An unguarded
listener holds one descriptor per flood connection as well, runs the process out of them,
and the controller's requests fail with "Too many open files", as they did in production
at the default limit of 1024.
"""

from __future__ import annotations

import asyncio
import os
import resource
import time

import pytest

from kube_reloader import limits
from kube_reloader.edges.serving import Health, Server, build_app
from kube_reloader.kube.client import Client
from kube_reloader.metrics import Recorder
from tests.harness import auto_deployment_on_configmap, env_of, running, update_cm
from tests.waiting import eventually

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]

FLOOD = 2000
MARGIN = 256  # descriptors for the controller's watches and requests, and for pytest
PARTIAL = b"GET /live HTTP/1.1\r\nHost: x\r\n"


async def get_live(port: int) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    try:
        return await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()


async def test_two_thousand_half_sent_requests_stop_neither_reloads_nor_live(
    client: Client, namespace: str
) -> None:
    limits.raise_open_files_limit()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    server = Server(build_app(Recorder(), Health()), "127.0.0.1:0")
    cap = server.edge.limits.max_connections
    budget = len(os.listdir("/proc/self/fd")) + FLOOD + cap + MARGIN
    if budget > soft:
        pytest.skip(f"needs {budget} open files, the hard limit is {hard}")
    await server.start()
    await auto_deployment_on_configmap(client, namespace)
    flood: list[asyncio.StreamWriter] = []
    failed: list[str] = []
    resource.setrlimit(resource.RLIMIT_NOFILE, (budget, hard))
    try:
        async with running(client, namespace):
            for _ in range(FLOOD):
                try:
                    _, writer = await asyncio.open_connection("127.0.0.1", server.port)
                except OSError as exc:
                    failed.append(str(exc))
                    continue
                writer.write(PARTIAL)
                flood.append(writer)
            assert not failed, f"{len(failed)} connects failed: {failed[0]}"
            assert len(server.edge.open) <= cap
            assert server.edge.shed >= FLOOD - cap

            started = time.monotonic()
            await update_cm(client, namespace, "c", {"a": "2"})

            async def reloaded() -> bool:
                env = await env_of(client, "Deployment", namespace, "w")
                return "STAKATER_C_CONFIGMAP" in env

            await eventually(reloaded, what="the reload during the flood")
            print(f"reloaded {time.monotonic() - started:.2f}s after the change, "
                  f"{len(flood)} half-sent connections held by the client")  # fmt: skip
            assert (await get_live(server.port)).endswith(b"\r\n\r\nalive")
    finally:
        for writer in flood:
            writer.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        await server.stop()
