"""Bringing the real node up and down as part of a dev cluster (`up --real-node`).

`start` runs after the control plane is ready: it checks the machine, builds what is missing
(`nodebuild`), lets the kubelet's group act as nodes (RBAC), creates the network namespace,
then starts the relay, containerd (the pause image imported) and the kubelet through the
cluster's own `spawn`, so `status` and `down` see them like any other component, and waits
until the Node is Ready. `stop` tears down what processes leave behind (`RealNode.teardown`).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from kube_reloader.devcluster.node import NODE_NAME, RELAY_PORT, RealNode
from kube_reloader.devcluster.nodebuild import NodeBuilder
from kube_reloader.devcluster.pki import Pki
from kube_reloader.devcluster.state import ClusterError
from kube_reloader.kube import config as kubeconfig
from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client

#: the processes of the real node, in start order
NODE_COMPONENTS = ("node-relay", "containerd", "kubelet")
NODE_BINDING = "kube-reloader-dev:nodes"
CLUSTERROLEBINDINGS = resources.Resource(
    "rbac.authorization.k8s.io",
    "v1",
    "clusterrolebindings",
    "ClusterRoleBinding",
    namespaced=False,
)


class Spawner(Protocol):
    def __call__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        netns: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None: ...


def start(
    state_dir: Path,
    pki: Pki,
    kubeconfig_path: Path,
    api_port: int,
    *,
    spawn: Spawner,
    check_alive: Callable[[], None],
    deadline: float,
    report: Callable[[str], None],
    builder: NodeBuilder | None = None,
) -> RealNode:
    RealNode.check_prerequisites()
    built = time.monotonic()
    builder = (builder or NodeBuilder(report=report)).ensure()
    deadline += time.monotonic() - built  # a first build (minutes) is not start-up time
    node = RealNode(state_dir, builder.binaries)
    node.teardown()  # a node left by a killed run of this cluster
    asyncio.run(_bind_nodes(kubeconfig_path))
    node.network_up()
    node.make_cgroups()
    node.write_config(pki)
    relay = [sys.executable, "-m", "kube_reloader.devcluster.relay"]
    relay += [node.netns_path, str(RELAY_PORT), str(api_port)]
    spawn("node-relay", relay)
    env = node.environment()
    spawn("containerd", node.containerd_argv(), netns=node.netns_path, env=env)
    node.wait_containerd(deadline, check_alive)
    node.import_image(node.pause_archive())
    spawn("kubelet", node.kubelet_argv(), netns=node.netns_path, env=env)
    t0 = time.monotonic()
    asyncio.run(_wait_node_ready(kubeconfig_path, deadline, check_alive, node))
    report(f"[dev-cluster] real node {NODE_NAME} Ready after {time.monotonic() - t0:.1f}s")
    return node


def stop(state_dir: Path) -> None:
    """Clean what the node's stopped processes left (shims, containers, mounts, cgroups,
    namespace, routes). Safe when nothing is left."""
    RealNode(state_dir, NodeBuilder().binaries).teardown()


async def _bind_nodes(path: Path) -> None:
    """Kubelets authenticate as `system:node:<name>` in `system:nodes`; with RBAC alone
    (no Node authorizer) that group needs the built-in `system:node` role."""
    binding: dict[str, Any] = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": NODE_BINDING},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "system:node",
        },
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}
        ],
    }
    async with Client(kubeconfig.load_kubeconfig([path]), user_agent="kube-reloader-dev") as c:
        with contextlib.suppress(errors.AlreadyExists):
            await c.create(CLUSTERROLEBINDINGS, binding)


async def _wait_node_ready(
    path: Path, deadline: float, check_alive: Callable[[], None], node: RealNode
) -> None:
    async with Client(kubeconfig.load_kubeconfig([path]), user_agent="kube-reloader-dev") as c:
        reason = "not registered"
        while True:
            check_alive()
            try:
                obj = await c.get(resources.NODES, NODE_NAME)
                conditions = (obj.get("status") or {}).get("conditions") or []
                ready = next((x for x in conditions if x.get("type") == "Ready"), None)
                if ready is not None and ready.get("status") == "True":
                    return
                reason = str((ready or {}).get("message") or "no Ready condition")
            except errors.NotFound:
                pass
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"dev-cluster: real node {NODE_NAME} not Ready in time ({reason[:200]}; "
                    f"logs: {node.dir.parent / 'logs'}/kubelet.log, containerd.log)"
                )
            await asyncio.sleep(0.5)
