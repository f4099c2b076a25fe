"""The control-plane components' command lines and the kwok node objects.

Pure functions: given the ports, binaries, PKI paths and directories they return the argv
each component is started with (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, kwok), the apiserver's audit flags and policy, the admin kubeconfig, plus
the Node that kwok manages and the readiness test for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kube_reloader.devcluster.building import Binaries
from kube_reloader.devcluster.pki import Pki

COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
SERVICE_CIDR = "10.0.0.0/24"
POD_CIDR = "10.244.0.0/16"
CONTEXT = "kube-reloader-dev"
CERT_CONTEXT = "kube-reloader-dev-cert"
AUDIT_POLICY = (
    "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\n"
    "rules:\n  - level: Metadata\n"
)


def etcd_argv(bins: Binaries, ports: Mapping[str, int], data: Path) -> list[str]:
    p = ports
    return [
        str(bins.path("etcd")),
        "--name=dev",
        f"--data-dir={data}",
        f"--listen-client-urls=http://127.0.0.1:{p['etcd']}",
        f"--advertise-client-urls=http://127.0.0.1:{p['etcd']}",
        f"--listen-peer-urls=http://127.0.0.1:{p['etcd-peer']}",
        f"--initial-advertise-peer-urls=http://127.0.0.1:{p['etcd-peer']}",
        f"--initial-cluster=dev=http://127.0.0.1:{p['etcd-peer']}",
        "--listen-metrics-urls=",
        "--unsafe-no-fsync=true",
        "--quota-backend-bytes=8589934592",
        "--log-level=warn",
    ]


def apiserver_argv(
    bins: Binaries,
    ports: Mapping[str, int],
    k: Pki,
    state_dir: Path,
    extra: Sequence[str] = (),
    *,
    service_accounts: bool = False,
) -> list[str]:
    """`extra` is appended last (the audit flags when auditing is on). `service_accounts`
    keeps the ServiceAccount admission plugin, which mounts a token into every pod: a real
    node's pods authenticate with it. kwok's pods never run anything, and without the
    plugin a pod created before its namespace's `default` ServiceAccount is not refused."""
    p = ports
    return [
        str(bins.path("kube-apiserver")),
        f"--etcd-servers=http://127.0.0.1:{p['etcd']}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={p['kube-apiserver']}",
        f"--tls-cert-file={k.serving_crt}",
        f"--tls-private-key-file={k.serving_key}",
        f"--client-ca-file={k.ca_crt}",
        f"--token-auth-file={k.tokens_csv}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={k.sa_pub}",
        f"--service-account-signing-key-file={k.sa_key}",
        "--authorization-mode=RBAC",
        *(() if service_accounts else ("--disable-admission-plugins=ServiceAccount",)),
        "--endpoint-reconciler-type=none",
        "--allow-privileged=true",
        "--profiling=false",
        "--max-requests-inflight=1000",
        "--max-mutating-requests-inflight=500",
        f"--cert-dir={state_dir / 'apiserver-certs'}",
        # a client certificate for admission webhooks (a cluster made before it has none)
        *(
            [f"--admission-control-config-file={k.admission_config}"]
            if k.admission_config.exists()
            else []
        ),
        *extra,
    ]


def delegated_flags(kubeconfig: Path, state_dir: Path) -> list[str]:
    """Flags shared by kube-controller-manager and kube-scheduler."""
    kcfg = str(kubeconfig)
    return [
        f"--kubeconfig={kcfg}",
        f"--authentication-kubeconfig={kcfg}",
        f"--authorization-kubeconfig={kcfg}",
        "--leader-elect=false",
        "--bind-address=127.0.0.1",
        "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
        f"--cert-dir={state_dir / 'serving-certs'}",
    ]


def controller_manager_argv(
    bins: Binaries, ports: Mapping[str, int], k: Pki, delegated: Sequence[str]
) -> list[str]:
    p = ports
    return [
        str(bins.path("kube-controller-manager")),
        *delegated,
        f"--secure-port={p['kube-controller-manager']}",
        "--controllers=*",
        "--use-service-account-credentials=false",
        f"--service-account-private-key-file={k.sa_key}",
        f"--root-ca-file={k.ca_crt}",
        f"--cluster-cidr={POD_CIDR}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--kube-api-qps=500",
        "--kube-api-burst=1000",
        "--concurrent-deployment-syncs=10",
        "--concurrent-replicaset-syncs=10",
    ]


def scheduler_argv(bins: Binaries, ports: Mapping[str, int], delegated: Sequence[str]) -> list[str]:
    return [
        str(bins.path("kube-scheduler")),
        *delegated,
        f"--secure-port={ports['kube-scheduler']}",
    ]


def kwok_argv(
    bins: Binaries, ports: Mapping[str, int], kubeconfig: Path, stages: Path
) -> list[str]:
    return [
        str(bins.path("kwok")),
        f"--kubeconfig={kubeconfig}",
        # the kwok nodes only (kwok_node's annotation): a real node's pods really run
        "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
        f"--config={stages}",
        "--node-lease-duration-seconds=40",
        f"--cidr={POD_CIDR}",
        f"--server-address=127.0.0.1:{ports['kwok']}",
    ]


def audit_flags(policy: Path, log: Path) -> list[str]:
    """kube-apiserver flags writing every request's metadata to `log` as JSON."""
    return [
        f"--audit-policy-file={policy}",
        f"--audit-log-path={log}",
        "--audit-log-format=json",
        "--audit-log-mode=blocking",
        # 0 means "the library default" (100 MB), and a rotation mid-scenario would make
        # the benchmark's byte-offset accounting read nothing: never rotate.
        "--audit-log-maxsize=1048576",
    ]


def kubeconfig_doc(server: str, k: Pki) -> dict[str, Any]:
    """Two contexts on `server`: `CONTEXT` (admin token, current) and `CERT_CONTEXT`."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": CONTEXT,
                "cluster": {"server": server, "certificate-authority": str(k.ca_crt)},
            }
        ],
        "users": [
            {"name": "admin-token", "user": {"token": k.token()}},
            {
                "name": "admin-cert",
                "user": {
                    "client-certificate": str(k.admin_crt),
                    "client-key": str(k.admin_key),
                },
            },
        ],
        "contexts": [
            {"name": CONTEXT, "context": {"cluster": CONTEXT, "user": "admin-token"}},
            {"name": CERT_CONTEXT, "context": {"cluster": CONTEXT, "user": "admin-cert"}},
        ],
        "current-context": CONTEXT,
    }


def kwok_node(name: str) -> dict[str, Any]:
    # room for the parallel test tier: several modules, each with up to a few hundred pods
    capacity = {"cpu": "64", "memory": "512Gi", "pods": "1000"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
            },
        },
        "status": {"allocatable": capacity, "capacity": capacity},
    }


def node_ready(node: Mapping[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    taints = (node.get("spec") or {}).get("taints") or []
    blocked = any(t.get("effect") in ("NoSchedule", "NoExecute") for t in taints)
    return ready and not blocked
