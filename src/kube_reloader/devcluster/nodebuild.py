"""Build what a real node needs, from the Go module proxy, into `<cache>/node-<versions>/bin`.

Only `dev-cluster up --real-node` (and `make test-node`) asks for these; `make test` never
does. Each is a separate component with its own stamp, so a version bump rebuilds only it:

* `kubelet`: `k8s.io/kubernetes/cmd/kubelet` at the control plane's version, from the same
  wrapper module the control plane is built from (`building.wrapper_go_mod`), static;
* `containerd`: containerd 2.x (`containerd`, `containerd-shim-runc-v2`, `ctr`). Kubernetes
  1.36 supports no containerd 1.x, and Debian bookworm packages 1.6; btrfs, devmapper and
  zfs snapshotters are left out (overlayfs is used), so it builds without cgo;
* `runc`: the OCI runtime, with seccomp (containerd confines every pod sandbox with its
  default profile). Its `nsexec` is C and seccomp is libseccomp's, so this one build uses
  cgo: gcc, pkg-config and Debian's `libseccomp-dev`;
* `cni`: the `bridge`, `host-local` and `loopback` plugins (pods get addresses on a bridge
  that exists only inside the node's own network namespace);
* `pause`: the pod sandbox process, `pause_main.go` beside this file;
* `sighup-app`: the test application of the `signal` strategy tests, `sighupapp_main.go`;
* `tls-once`: the TLS scenarios' webhook server, which reads its certificate once at start,
  `tlsonce_main.go`;
* `nats-server`: the real NATS server (`github.com/nats-io/nats-server/v2`), which reloads its
  TLS configuration on SIGHUP.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path
from typing import Self

from kube_reloader.devcluster.building import build_kubernetes_commands
from kube_reloader.devcluster.gobuild import BuildError, GoBuilder, Reporter, _stderr
from kube_reloader.devcluster.versions import (
    CNI_PLUGINS,
    CONTAINERD,
    NATS_SERVER,
    RUNC,
    Versions,
    cache_root,
)

__all__ = ["NodeBinaries", "NodeBuilder"]

CONTAINERD_COMMANDS = ("containerd", "containerd-shim-runc-v2", "ctr")
CNI_COMMANDS = {
    "bridge": "plugins/main/bridge",
    "loopback": "plugins/main/loopback",
    "host-local": "plugins/ipam/host-local",
}
#: Go programs shipped as source beside this module, built as static binaries
LOCAL_PROGRAMS = {
    "pause": "pause_main.go",
    "sighup-app": "sighupapp_main.go",
    "tls-once": "tlsonce_main.go",
}


class NodeBinaries:
    """Where the node's programs are."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root / "bin"
        self.cni = root / "cni"

    def path(self, name: str) -> Path:
        return self.bin / name


class NodeBuilder(GoBuilder):
    cold_note = "first use only; a cold build takes about 10 minutes on 2 cores"

    def __init__(
        self,
        versions: Versions | None = None,
        *,
        root: Path | None = None,
        report: Reporter = _stderr,
        go: str = "go",
    ) -> None:
        self.versions = versions or Versions()
        root = root or cache_root() / f"node-k8s-v{self.versions.kubernetes}"
        super().__init__(root, report=report, go=go)
        self.binaries = NodeBinaries(root)

    def ensure(self) -> Self:
        self.build_missing()
        return self

    def _components(self) -> dict[str, list[Path]]:
        b = self.binaries
        return {
            "kubelet": [b.path("kubelet")],
            "containerd": [b.path(c) for c in CONTAINERD_COMMANDS],
            "runc": [b.path("runc")],
            "cni": [b.cni / c for c in CNI_COMMANDS],
            "nats-server": [b.path("nats-server")],
            **{name: [b.path(name)] for name in LOCAL_PROGRAMS},
        }

    def _stamp_text(self, component: str) -> str:
        if component in LOCAL_PROGRAMS:
            source = Path(__file__).with_name(LOCAL_PROGRAMS[component]).read_text()
            return f"{component} {_digest(source)}"
        return {
            "kubelet": f"kubelet v{self.versions.kubernetes}",
            "containerd": f"containerd v{CONTAINERD} no_btrfs,no_devmapper,no_zfs",
            "runc": f"runc v{RUNC} cgo seccomp",
            "cni": f"cni-plugins v{CNI_PLUGINS}",
            "nats-server": f"nats-server v{NATS_SERVER}",
        }[component]

    def _build_kubelet(self) -> None:
        module = "kube-reloader.local/kubeletbin"
        out = ["-o", str(self.binaries.path("kubelet"))]
        build_kubernetes_commands(self, "kubelet", module, self.versions, ("kubelet",), out)

    def _build_containerd(self) -> None:
        module = "github.com/containerd/containerd/v2"
        work = self._workdir("containerd", "kube-reloader.local/containerdbin")
        run = self._runner("containerd", work)
        run("resolving modules", [self.go, "get", f"{module}@v{CONTAINERD}"])
        for command in CONTAINERD_COMMANDS:
            out = ["-o", str(self.binaries.path(command)), "-tags=no_btrfs,no_devmapper,no_zfs"]
            ldflags = f"-s -w -X {module}/version.Version=v{CONTAINERD}"
            self._compile(run, "containerd", [f"{module}/cmd/{command}"], out, ldflags=ldflags)

    def _build_runc(self) -> None:
        module = "github.com/opencontainers/runc"
        work = self._workdir("runc", "kube-reloader.local/runcbin")
        if (
            shutil.which("pkg-config") is None
            or subprocess.run(["pkg-config", "--exists", "libseccomp"], check=False).returncode != 0
        ):
            raise BuildError(
                "building runc needs libseccomp's headers: apt-get install -y libseccomp-dev "
                "pkg-config"
            )
        run = self._runner("runc", work, env={"CGO_ENABLED": "1"})
        run("resolving modules", [self.go, "get", f"{module}@v{RUNC}"])
        out = ["-o", str(self.binaries.path("runc")), "-tags=seccomp"]
        ldflags = f"-s -w -X main.version={RUNC}"
        self._compile(run, "runc", [module], out, ldflags=ldflags, env={"CGO_ENABLED": "1"})

    def _build_cni(self) -> None:
        module = "github.com/containernetworking/plugins"
        work = self._workdir("cni", "kube-reloader.local/cnibin")
        run = self._runner("cni", work)
        run("resolving modules", [self.go, "get", f"{module}@v{CNI_PLUGINS}"])
        self.binaries.cni.mkdir(parents=True, exist_ok=True)
        for name, rel in CNI_COMMANDS.items():
            out = ["-o", str(self.binaries.cni / name)]
            self._compile(run, "cni", [f"{module}/{rel}"], out, ldflags="-s -w")

    def _build_local(self, name: str) -> None:
        work = self._workdir(name, f"kube-reloader.local/{name}")
        shutil.copyfile(Path(__file__).with_name(LOCAL_PROGRAMS[name]), work / "main.go")
        run = self._runner(name, work)
        self._compile(run, name, ["."], ["-o", str(self.binaries.path(name))], ldflags="-s -w")

    def _build_nats_server(self) -> None:
        module = "github.com/nats-io/nats-server/v2"
        work = self._workdir("nats-server", "kube-reloader.local/natsbin")
        run = self._runner("nats-server", work)
        run("resolving modules", [self.go, "get", f"{module}@v{NATS_SERVER}"])
        out = ["-o", str(self.binaries.path("nats-server"))]
        self._compile(run, "nats-server", [module], out, ldflags="-s -w")

    def _build_pause(self) -> None:
        self._build_local("pause")

    def _build_sighup_app(self) -> None:
        self._build_local("sighup-app")

    def _build_tls_once(self) -> None:
        self._build_local("tls-once")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]
