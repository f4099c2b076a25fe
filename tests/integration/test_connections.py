"""Many watched namespaces: watch streams hold connections of their own and never starve
the reads, writes and lease renewals that share the client (issue 13).

Each watched namespace costs 7 watches (ConfigMaps, Secrets and 5 workload kinds), each
holding an HTTP/1.1 connection for minutes: 20 namespaces are 140 watches, more than the
100 connections of the ordinary request pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
import time
from collections.abc import AsyncIterator

import pytest

from kube_reloader.core import planning
from kube_reloader.core.strategies import Strategy
from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client
from kube_reloader.runtime.controller import Controller
from kube_reloader.runtime.options import Options
from tests.harness import auto_deployment_on_configmap, env_of, update_cm
from tests.waiting import eventually

pytestmark = pytest.mark.cluster

NAMESPACES = 20
WATCHES_PER_NAMESPACE = (
    7  # ConfigMaps, Secrets, Deployments, CronJobs, Jobs, DaemonSets, StatefulSets
)
NAMESPACED_WATCH = re.compile(
    r'^apiserver_longrunning_requests\{(?=[^}]*scope="namespace")(?=[^}]*verb="WATCH")[^}]*\} (\S+)$',
    re.MULTILINE,
)


@pytest.fixture
async def namespaces(client: Client) -> AsyncIterator[list[str]]:
    """`NAMESPACES` fresh namespaces, deleted afterwards."""
    prefix = f"t-{secrets.token_hex(3)}"
    names = [f"{prefix}-{i:02d}" for i in range(NAMESPACES)]
    await asyncio.gather(
        *(
            client.create(
                resources.NAMESPACES,
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
            )
            for name in names
        )
    )
    yield names
    for name in names:
        with contextlib.suppress(errors.NotFound):
            await client.delete(resources.NAMESPACES, name)


async def open_namespaced_watches(client: Client) -> int:
    """How many namespace-scoped WATCH requests the API server is serving right now."""
    text = (await client.request("GET", "/metrics")).decode()
    return int(sum(float(v) for v in NAMESPACED_WATCH.findall(text)))


async def test_twenty_watched_namespaces_become_ready_reload_and_leave_requests_prompt(
    client: Client, namespaces: list[str]
) -> None:
    last = namespaces[-1]
    await auto_deployment_on_configmap(client, last)
    baseline = await open_namespaced_watches(client)
    opts = Options(plan=planning.Config(strategy=Strategy.ENV_VARS), namespaces=tuple(namespaces))
    controller = Controller(client, opts)
    stop = asyncio.Event()
    started = time.monotonic()
    task = asyncio.create_task(controller.run(stop))
    try:
        await asyncio.wait_for(controller.ready.wait(), 60)
        ready_after = time.monotonic() - started
        expected = baseline + NAMESPACES * WATCHES_PER_NAMESPACE

        async def all_watching() -> bool:
            return await open_namespaced_watches(client) >= expected

        await eventually(all_watching, timeout=30, what=f"{expected} open namespaced watches")
        t0 = time.monotonic()
        got = await asyncio.wait_for(client.get(resources.NAMESPACES, last), 10)
        get_seconds = time.monotonic() - t0
        assert got["metadata"]["name"] == last
        assert get_seconds < 2, f"a GET beside 140 open watches took {get_seconds:.2f}s"

        await update_cm(client, last, "c", {"a": "2"})

        async def reloaded() -> bool:
            return "STAKATER_C_CONFIGMAP" in await env_of(client, "Deployment", last, "w")

        await eventually(reloaded, what=f"the Deployment in {last} to be reloaded")
        print(
            f"ready after {ready_after:.2f}s; GET beside the watches: {get_seconds * 1000:.0f} ms"
        )
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
