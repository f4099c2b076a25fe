"""The state of a cluster that `DevCluster.up` is about to start: the versions it runs, a
free port for each component (some pinned by the caller), and what it starts (every
component or only etcd and kube-apiserver, how many kwok nodes, the real node, the audit log).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

from kube_reloader.devcluster.ports import free_port, reserve
from kube_reloader.devcluster.state import State
from kube_reloader.devcluster.versions import Versions

#: the components that listen on a port of their own
PORTS = (
    "etcd",
    "etcd-peer",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
)


def new_state(
    versions: Versions,
    kubeconfig: Path,
    *,
    nodes: int,
    minimal: bool,
    ports: Mapping[str, int] | None,
    audit: bool,
    real_node: bool,
) -> State:
    """A new cluster's state, started now; `minimal` starts no nodes and no real node."""
    pinned = dict(ports or {})
    for port in pinned.values():
        reserve(port)  # not also another component's
    chosen = {name: pinned.get(name) or free_port() for name in PORTS} | pinned
    return State(
        versions={
            "kubernetes": versions.kubernetes,
            "etcd": versions.etcd,
            "kwok": versions.kwok,
        },
        ports=chosen,
        kubeconfig=str(kubeconfig),
        nodes=0 if minimal else nodes,
        minimal=minimal,
        audit=audit,
        real_node=real_node and not minimal,
        started_at=time.time(),
    )
