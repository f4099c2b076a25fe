"""Pinned component versions and the cache directory they are built into."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

KUBERNETES = "1.36.3"
ETCD = "3.6.16"
KWOK = "0.8.0"
HELM = "3.22.0"
#: Stakater Reloader, built only for the side-by-side benchmark: the newest v1.4.x the Go
#: module proxy serves here (v1.4.20 and v1.4.21 are refused)
RELOADER = "1.4.19"
#: `go mod download`'s h1 hashes of that version (module zip, go.mod): the checksum database
#: reached through the proxy answers 404 for github.com/stakater/Reloader, so the build checks
#: the download against these instead (first recorded 2026-12 from the proxy)
RELOADER_SUMS = (
    "h1:7FAMofI7r9iY7IHZ8E3OSuGxEG7g9X8TuiM7ZK45RS8=",
    "h1:7DaB1XBJPUy5S3ovpr47BRWRety2PdlvvPRYUVYsjYg=",
)
#: the Argo Rollouts controller, built only for the Argo integration tests: the newest v1.10.x
#: whose go.mod accepts Go 1.26.8 (v1.10.2 asks for go >= 1.26.10)
ARGO_ROLLOUTS = "1.10.1"
#: cert-manager's controller and CRDs, built only for the cert-manager tests (certmanager.py)
CERT_MANAGER = "1.21.2"
#: the Secrets Store CSI driver, for the CSI cases on the real node (csi.py): the version both
#: Reloaders build against
SECRETS_STORE_CSI = "1.5.5"
#: Reloader's go.mod pins github.com/openshift/api at a pseudo-version the proxy refuses; the
#: nearest served one (two weeks older, API-compatible for the client Reloader builds) is used
OPENSHIFT_API_FALLBACK = "v0.0.0-20260318185450-1f2fa3f09f4e"
#: the real node's runtime (`dev-cluster up --real-node`, devcluster/nodebuild.py): Kubernetes
#: 1.36 supports containerd 2.x only (Debian bookworm has 1.6); runc and the CNI plugins are
#: the newest the Go module proxy served on 2026-12-02
CONTAINERD = "2.4.2"
RUNC = "1.5.3"
CNI_PLUGINS = "1.10.0"
#: the TLS scenarios' message server (tests/node/test_tls_cases.py)
NATS_SERVER = "2.15.3"
#: the Stakater Reloader peers built from the unmodified source trees of the shared peers
#: folder (`devcluster/peers.py`), for compatibility tests; the refs its README records
RELOADER_V1_REF = "v1.4.21"
RELOADER_V1_COMMIT = "392be733e05b8e52c94199263abfd0f7632faab1"
RELOADER_V2_REF = "v2"
RELOADER_V2_COMMIT = "7a94f29a7142646cf49f5d13c0a024ba5e429572"


@dataclass(frozen=True, slots=True)
class Versions:
    kubernetes: str = KUBERNETES
    etcd: str = ETCD
    kwok: str = KWOK
    helm: str = HELM

    @property
    def staging(self) -> str:
        """k8s.io/kubernetes v1.X.Y pairs with staging modules v0.X.Y."""
        return "0." + self.kubernetes.split(".", 1)[1]

    @property
    def minor(self) -> str:
        return self.kubernetes.split(".")[1]

    @property
    def slug(self) -> str:
        return f"k8s-v{self.kubernetes}_etcd-v{self.etcd}_kwok-v{self.kwok}"


def cache_root(env: dict[str, str] | None = None) -> Path:
    env = dict(os.environ) if env is None else env
    if env.get("KUBE_RELOADER_CACHE_DIR"):
        return Path(env["KUBE_RELOADER_CACHE_DIR"])
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kube-reloader"


def cache_dir(versions: Versions | None = None, env: dict[str, str] | None = None) -> Path:
    """`${XDG_CACHE_HOME:-~/.cache}/kube-reloader/<versions>`; binaries go in its `bin/`."""
    return cache_root(env) / (versions or Versions()).slug
