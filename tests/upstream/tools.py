"""What upstream's end-to-end suites need beside the real-node cluster, built here like the
other tools: `kubectl` from the Go module proxy, the workloads' image `busybox:1.36` from
Debian's busybox package, and the peers' binaries in images of their own."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from kube_reloader.devcluster import images as oci
from kube_reloader.devcluster.building import build_kubernetes_commands
from kube_reloader.devcluster.gobuild import BuildError, GoBuilder, Reporter, _stderr
from kube_reloader.devcluster.peers import LISTEN_ENV
from kube_reloader.devcluster.versions import Versions, cache_root

#: the name upstream's suites give their workloads' image (`utils.DefaultImage`)
BUSYBOX_IMAGE = "docker.io/library/busybox:1.36"
#: the Debian package it is made from (a static busybox: no libraries needed in the image)
BUSYBOX_PACKAGE = "busybox-static"
#: where the peers' images are imported (`RELOADER_IMAGE` of a control run)
PEER_IMAGE = "kube-reloader.local/{peer}:upstream-e2e"


class KubectlBuilder(GoBuilder):
    """`k8s.io/kubernetes/cmd/kubectl` at the control plane's version, from the same wrapper
    module the control plane is built from."""

    cold_note = "first use only; a cold build takes a few minutes on 2 cores"

    def __init__(self, versions: Versions | None = None, *, report: Reporter = _stderr) -> None:
        self.versions = versions or Versions()
        super().__init__(cache_root() / f"upstream-k8s-v{self.versions.kubernetes}", report=report)

    def ensure(self) -> Path:
        self.build_missing()
        return self.bin

    def _components(self) -> dict[str, list[Path]]:
        return {"kubectl": [self.bin / "kubectl"]}

    def _stamp_text(self, component: str) -> str:
        return f"kubectl v{self.versions.kubernetes}"

    def _build_kubectl(self) -> None:
        out = ["-o", str(self.bin / "kubectl")]
        module = "kube-reloader.local/kubectlbin"
        build_kubernetes_commands(self, "kubectl", module, self.versions, ("kubectl",), out)


def busybox_archive(work: Path) -> Path:
    """`busybox:1.36` as an OCI archive: Debian's static busybox with a link per applet in
    `/bin` (the suites run `sh -c ...`). Debian bookworm packages busybox 1.35; the suites use
    only `sh -c` with `echo` and `sleep`, which are the same in both."""
    root = work / "busybox-root"
    if root.exists():
        shutil.rmtree(root)
    (root / "bin").mkdir(parents=True)
    (root / "tmp").mkdir()
    (root / "tmp").chmod(0o1777)
    debs = work / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    deb = _download(BUSYBOX_PACKAGE, debs)
    unpacked = work / "busybox-deb"
    shutil.rmtree(unpacked, ignore_errors=True)
    _run(["dpkg-deb", "-x", str(deb), str(unpacked)])
    shutil.copy2(unpacked / "bin" / "busybox", root / "bin" / "busybox")
    applets = _run([str(root / "bin" / "busybox"), "--list"]).split()
    for applet in applets:
        if applet != "busybox" and "/" not in applet:
            os.symlink("busybox", root / "bin" / applet)
    layer = oci.directory_layer(work / "busybox.layer", root)
    out = work / "busybox.tar"
    config = oci.ImageConfig(entrypoint=(), cmd=("sh",))
    oci.oci_archive(out, BUSYBOX_IMAGE, [layer], config)
    layer.unlink()
    return out


def peer_archive(work: Path, peer: str, binary: Path) -> tuple[str, Path]:
    """A peer's static binary as `/manager` (the path its own Dockerfile gives it), run as
    an unprivileged user, as an OCI archive; returns the image reference and the archive.

    Our build of v1 listens on `$KUBE_RELOADER_PEER_LISTEN`, else on loopback only (the
    side-by-side tests run it on the host); in its image the variable gives back upstream's
    address, every interface, so that the kubelet's probes reach it."""
    ref = PEER_IMAGE.format(peer=peer)
    layer = oci.files_layer(work / f"{peer}.layer", [oci.File("manager", binary)])
    out = work / f"{peer}.tar"
    env = (*oci.ImageConfig(entrypoint=()).env, f"{LISTEN_ENV}=:9090")
    config = oci.ImageConfig(entrypoint=("/manager",), env=env, user="65532:65532")
    oci.oci_archive(out, ref, [layer], config)
    layer.unlink()
    return ref, out


def _download(package: str, into: Path) -> Path:
    """The package's .deb from the mirror apt is configured with (no installation)."""
    for old in into.glob(f"{package}_*.deb"):
        return old
    _run(["apt-get", "download", package], cwd=into)
    found = sorted(into.glob(f"{package}_*.deb"))
    if not found:
        raise BuildError(f"apt-get download {package}: no .deb in {into}")
    return found[-1]


def _run(argv: list[str], cwd: Path | None = None) -> str:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise BuildError(f"{' '.join(argv[:3])}: exit {done.returncode}: {' | '.join(tail)}")
    return done.stdout
