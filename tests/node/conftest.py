"""The real-node tier (`make test-node`): a dev cluster with a kubelet, containerd and runc on
this machine (`dev-cluster up --real-node`), kube-reloader's own image and the test
application's image imported into its containerd. Root only; `make test` never collects it.

Set `KUBE_RELOADER_NODE_STATE` to reuse a running real-node cluster's state directory.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from kube_reloader.devcluster import certmanager
from kube_reloader.devcluster.certmanager import (
    CertManagerController,
)
from kube_reloader.devcluster.cluster import DevCluster
from kube_reloader.devcluster.node import RealNode
from kube_reloader.devcluster.nodebuild import NodeBuilder
from tests.node.nodeharness import Images, import_images
from tests.node.tlsharness import import_tls_images


@pytest.fixture(scope="session")
def node_cluster() -> Iterator[DevCluster]:
    given = os.environ.get("KUBE_RELOADER_NODE_STATE")
    if given:
        yield DevCluster(Path(given))
        return
    state_dir = Path(tempfile.mkdtemp(prefix="kr-node-"))
    cluster = DevCluster(state_dir, report=lambda line: print(line, flush=True))
    try:
        state = cluster.up(nodes=1, build=True, real_node=True, timeout=600)
        print(f"real-node cluster ready in {state.ready_seconds:.1f}s")
        yield cluster
    finally:
        cluster.down()


@pytest.fixture(scope="session")
def kubeconfig_path(node_cluster: DevCluster) -> Path:
    return node_cluster.kubeconfig


@pytest.fixture(scope="session")
def real_node(node_cluster: DevCluster) -> RealNode:
    return RealNode(node_cluster.state_dir, NodeBuilder().ensure().binaries)


@pytest.fixture(scope="session")
def images(real_node: RealNode) -> Images:
    return import_images(real_node)


@pytest.fixture(scope="session")
def tls_images(real_node: RealNode, images: Images) -> Images:
    """Ours, and the TLS scenarios' servers: NATS and the webhook that loads its certificate
    once."""
    import_tls_images(real_node)
    return images


@pytest.fixture(scope="session")
def cert_manager(kubeconfig_path: Path) -> Iterator[CertManagerController]:
    """cert-manager's CRDs installed and its controller running against the real-node cluster
    (built from the Go module proxy on first use, like the serial tier's)."""
    log = Path(tempfile.mkdtemp(prefix="kr-node-certmanager-")) / "controller.log"
    with certmanager.running(
        kubeconfig_path, log, report=lambda line: print(line, flush=True)
    ) as cm:
        yield cm
