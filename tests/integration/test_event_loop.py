"""`--event-loop`: the whole controller (the API client's wire and TLS, watches, the metrics
listener) on libuv's loop, the default where uvloop is installed, and on the standard
library's when asked for, against the real API server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from kube_reloader.core import hashing
from kube_reloader.kube import resources
from kube_reloader.kube.client import Client
from tests.exposition import total
from tests.harness import auto_deployment_on_configmap, update_cm
from tests.waiting import eventually, template_env

pytestmark = pytest.mark.cluster


def _lines(log: Path) -> list[dict[str, Any]]:
    """The log's JSON lines so far (a last line still being written is left out)."""
    lines = []
    for line in log.read_text().splitlines():
        if line.startswith("{"):
            with contextlib.suppress(json.JSONDecodeError):
                lines.append(json.loads(line))
    return lines


def _start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("w") as out:
        return subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)


def _scrape(address: str) -> str:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as answer:
        return str(answer.read().decode())


@pytest.mark.parametrize(
    ("flags", "loop"), [([], "uvloop"), (["--event-loop=asyncio"], "asyncio")],
    ids=["the default, uvloop", "asyncio by name"],
)  # fmt: skip
async def test_on_either_loop_the_controller_syncs_reloads_serves_metrics_and_stops_cleanly(
    client: Client,
    namespace: str,
    kubeconfig_path: Path,
    tmp_path: Path,
    flags: list[str],
    loop: str,
) -> None:
    await auto_deployment_on_configmap(client, namespace, data={"a": "1"}, replicas=0)
    log = tmp_path / "controller.log"
    argv = [sys.executable, "-m", "kube_reloader", *flags, f"--namespaces={namespace}",
            "--metrics-addr=127.0.0.1:0", "--log-format=json", "--reload-min-interval=0"]  # fmt: skip
    env = {**os.environ, "KUBECONFIG": str(kubeconfig_path)}
    proc = _start(argv, env, log)
    try:

        async def synced() -> bool:
            return any(line["msg"] == "caches synced" for line in _lines(log))

        await eventually(synced, what="caches synced", timeout=30)
        start = next(line for line in _lines(log) if line["msg"] == "starting kube-reloader")
        assert start["event_loop"] == loop
        await update_cm(client, namespace, "c", {"a": "2"})
        want = hashing.configmap_hash({"a": "2"})

        async def reloaded() -> bool:
            d = await client.get(resources.DEPLOYMENTS, "w", namespace=namespace)
            return template_env(d, "STAKATER_C_CONFIGMAP") == want

        await eventually(reloaded, what="the reload", timeout=30)
        address = next(line["address"] for line in _lines(log) if line["msg"] == "serving")

        async def counted() -> str | None:  # counted once the PATCH's answer has come back
            text = await asyncio.to_thread(_scrape, address)
            executed = total(text, "reloader_reload_executed_total", success="true")
            return text if executed >= 1 else None

        text = await eventually(counted, what="the reload counted", timeout=30)
        assert total(text, "reloader_reload_executed_total", success="true") == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
    assert code == 0
    lines = _lines(log)
    assert any(line["msg"] == "stopped" for line in lines)
    assert [line["msg"] for line in lines if line["level"] in ("error", "warning")] == []
