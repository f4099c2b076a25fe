"""Fixtures shared by every test tier.

Integration tests run against a real local control plane (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, kwok) started once per test session by
`kube_reloader.devcluster`, or an already running one named by
`KUBE_RELOADER_TEST_KUBECONFIG` (handy while iterating: `kube-reloader dev-cluster up`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from kube_reloader.devcluster.cluster import DevCluster, temporary
from kube_reloader.kube import config, errors, resources
from kube_reloader.kube.client import Client
from tests.waiting import eventually, exists

#: the real-node tier (a kubelet and containerd on this machine, root only) runs with
#: `make test-node`, never with `make test`
collect_ignore = [] if os.environ.get("KUBE_RELOADER_NODE_TESTS") else ["node"]


@pytest.fixture(scope="session")
def kubeconfig_path() -> Iterator[Path]:
    """Path of an admin kubeconfig for a running dev cluster (started here if needed)."""
    given = os.environ.get("KUBE_RELOADER_TEST_KUBECONFIG")
    if given:
        yield Path(given)
        return
    with temporary("kube-reloader-test-cluster-", report=_say, nodes=1, build=True) as (_, s):
        print(f"dev cluster ready in {s.ready_seconds:.1f}s")
        yield Path(s.kubeconfig)


def _say(line: str) -> None:
    print(line, flush=True)


@pytest.fixture
def connection(kubeconfig_path: Path) -> config.ConnectionConfig:
    return config.load_kubeconfig([kubeconfig_path])


@pytest.fixture
async def client(connection: config.ConnectionConfig) -> AsyncIterator[Client]:
    async with Client(connection, user_agent="kube-reloader-tests") as c:
        yield c


@pytest.fixture
async def namespace(client: Client) -> AsyncIterator[str]:
    """A fresh namespace per test, deleted afterwards (kube-controller-manager empties it).
    It is yielded once kube-controller-manager has published `kube-root-ca.crt` into it: a
    controller started earlier would see that ConfigMap created (under load, seconds later),
    and count it as a change with `--reload-on-create`."""
    name = f"t-{secrets.token_hex(4)}"
    await client.create(
        resources.NAMESPACES,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
    )

    async def published() -> bool:
        return await exists(client, resources.CONFIGMAPS, "kube-root-ca.crt", name)

    await eventually(published, what=f"kube-root-ca.crt in {name}", timeout=60)
    yield name
    with contextlib.suppress(errors.NotFound):
        await client.delete(resources.NAMESPACES, name)


@pytest.fixture(scope="module")
def private_cluster() -> Iterator[DevCluster]:
    """A minimal cluster (etcd + kube-apiserver) of the module's own, free to restart/compact."""
    with temporary("kube-reloader-test-private-", minimal=True, build=True) as (cluster, _):
        yield cluster


@pytest.fixture
async def private_client(private_cluster: DevCluster) -> AsyncIterator[Client]:
    cfg = config.load_kubeconfig([private_cluster.kubeconfig])
    async with Client(cfg, user_agent="kube-reloader-tests") as c:
        yield c
