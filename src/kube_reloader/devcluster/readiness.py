"""When a freshly started cluster is usable at the API level.

Creates the kwok nodes, then waits for the `default` ServiceAccount (made by
kube-controller-manager) and for every node to be Ready and untainted.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from pathlib import Path

from kube_reloader.devcluster.components import kwok_node, node_ready
from kube_reloader.devcluster.state import ClusterError
from kube_reloader.kube import config as kubeconfig
from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client


async def wait_api_ready(
    kubeconfig_path: Path,
    node_count: int,
    deadline: float,
    check_alive: Callable[[], None],
    logs: Path,
) -> None:
    """Create the kwok nodes; wait for the default SA and every node Ready, untainted.

    `check_alive` raises if a component died; `logs` is named in the timeout error.
    """
    cfg = kubeconfig.load_kubeconfig([kubeconfig_path])
    async with Client(cfg, user_agent="kube-reloader-dev-cluster") as client:
        for i in range(node_count):
            with contextlib.suppress(errors.AlreadyExists):
                await client.create(resources.NODES, kwok_node(f"kwok-node-{i}"))
        while True:
            check_alive()
            sa_ok = True
            try:
                await client.get(resources.SERVICEACCOUNTS, "default", namespace="default")
            except errors.NotFound:
                sa_ok = False
            nodes = (await client.list(resources.NODES)).items
            ready = [n for n in nodes if node_ready(n)]
            if sa_ok and len(ready) >= node_count:
                return
            if time.monotonic() > deadline:
                what = (
                    "the default ServiceAccount was not created"
                    if not sa_ok
                    else f"{len(ready)}/{node_count} nodes Ready and untainted"
                )
                raise ClusterError(
                    f"dev-cluster: not ready in time: {what} "
                    f"(logs: {logs}/kube-controller-manager.log, {logs}/kwok.log)"
                )
            await asyncio.sleep(0.25)
