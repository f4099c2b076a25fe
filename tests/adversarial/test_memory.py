"""Case 7: a tenant cannot grow the controller's memory without bound.

Before the bounded webhook queue, webhook mode started one task per change: 20,000 changes
against an endpoint that never answers cost +215 MiB. Now one sender drains a queue of at
most 1,000 notifications and drops the oldest (counted)."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kube_reloader.kube import resources
from kube_reloader.kube.client import Client, PatchType
from tests.adversarial.tenant import Canary, controller, free_port
from tests.harness import auto_deployment_on_configmap

# serial: adversarial: bounds on the event loop's lag and on other namespaces' reloads
pytestmark = [pytest.mark.cluster, pytest.mark.serial]

CHANGES = 20_000
PATCHERS = 16


@contextlib.asynccontextmanager
async def hanging_endpoint() -> AsyncIterator[int]:
    """An HTTP endpoint that accepts every connection and never answers."""
    held: list[asyncio.StreamWriter] = []

    async def hold(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    port = free_port()
    server = await asyncio.start_server(hold, "127.0.0.1", port)
    try:
        yield port
    finally:
        server.close()
        for w in held:
            w.close()


def received(metrics: str) -> int:
    total = 0.0
    for line in metrics.splitlines():
        if (
            line.startswith("reloader_events_received_total{")
            and 'resource_type="configmaps"' in line
        ):
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


async def test_twenty_thousand_changes_against_a_hanging_webhook_grow_rss_by_less_than_20_mib(
    client: Client, kubeconfig_path: Path, tenant: str, canary: Canary
) -> None:
    await auto_deployment_on_configmap(client, tenant, name="hot", configmap="hot", data={"v": "0"})
    counter = iter(range(1, CHANGES + 1))

    async def patcher() -> None:
        for i in counter:
            await client.patch(
                resources.CONFIGMAPS, "hot", {"data": {"v": str(i)}}, namespace=tenant,
                patch_type=PatchType.MERGE,
            )  # fmt: skip

    async with (
        hanging_endpoint() as port,
        controller(
            kubeconfig_path, [tenant], f"--webhook-url=http://127.0.0.1:{port}/hook"
        ) as proc,
    ):
        baseline = proc.rss_kib()
        started = time.monotonic()
        await asyncio.gather(*(patcher() for _ in range(PATCHERS)))
        while received((await proc.probe("/metrics")).body) < CHANGES:
            assert time.monotonic() - started < 300, "the controller did not see every change"
            await asyncio.sleep(0.5)
        grown_mib = (proc.rss_kib() - baseline) / 1024
        print(f"RSS {baseline / 1024:.1f} MiB -> +{grown_mib:.1f} MiB over {CHANGES} changes")
        live = await proc.probe("/live")
        log = proc.log()
    assert live.status == 200
    assert grown_mib < 20, f"RSS grew {grown_mib:.1f} MiB over {CHANGES} changes"
    dropped = re.findall(r'"dropped": (\d+)', log)
    assert dropped, "the full queue must drop (and report) the oldest notifications"
