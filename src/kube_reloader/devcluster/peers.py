"""Stakater Reloader peers built from local source trees, for compatibility tests.

The shared peers folder holds unmodified source trees of Reloader v1.4.21 (main package at
the repository root) and of its v2 branch (`./cmd/reloader`); `versions` records their
upstream refs. They are optional components of `building.Builder`, requested like the
benchmark's "reloader": `Builder(extra=("reloader-v1", "reloader-v2"))`, and land in
`<cache>/bin/reloader-v1` and `<cache>/bin/reloader-v2`.

The folder is `$KUBE_RELOADER_PEERS`, else `<repo>/../shared/peers`, else
`/work/shared/peers`. Each tree is copied into `<cache>/src/<component>` and built there
(the shared tree is never written), as the main module with `GOFLAGS=-mod=mod`; when the
pinned `github.com/openshift/api` is not served by the module proxy it is replaced by
`versions.OPENSHIFT_API_FALLBACK`. A stamp holds the ref and a digest of the tree's
contents, so a second `ensure()` only hashes about 2 MiB of source.

One change is made to the v1 copy: its one HTTP server (`/metrics`, `/live`) listens on a
hard-coded `:9090` on every interface. The address is read from `$LISTEN_ENV` instead
(default `127.0.0.1:9090`), so nothing it serves leaves loopback and several can run side
by side. v2 takes `--metrics-addr` and `--health-addr` and is built unchanged.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kube_reloader.devcluster.gobuild import BuildError, GoBuilder, Run
from kube_reloader.devcluster.versions import (
    OPENSHIFT_API_FALLBACK,
    RELOADER_V1_COMMIT,
    RELOADER_V1_REF,
    RELOADER_V2_COMMIT,
    RELOADER_V2_REF,
)

__all__ = ["LISTEN_ENV", "PEERS", "PEERS_ENV", "Peer", "PeerBuilds", "peers_root"]

#: names the folder holding the peers' source trees
PEERS_ENV = "KUBE_RELOADER_PEERS"
#: the listen address of a patched v1 peer's HTTP server (metrics and liveness)
LISTEN_ENV = "KUBE_RELOADER_PEER_LISTEN"
FALLBACK_ROOT = Path("/work/shared/peers")
MODULE = "github.com/stakater/Reloader"


@dataclass(frozen=True, slots=True)
class Patch:
    """Replace `old` (which must occur exactly once) by `new` in file `path` of the copy."""

    path: str
    old: str
    new: str
    why: str


@dataclass(frozen=True, slots=True)
class Peer:
    component: str
    folder: str
    ref: str
    commit: str
    #: the main package, relative to the tree's root
    package: str
    #: the Go package whose `Version` and `Commit` variables the linker sets
    version_pkg: str
    patches: tuple[Patch, ...] = ()

    @property
    def version(self) -> str:
        return self.ref if self.ref.startswith("v1.") else f"{self.ref}-{self.commit[:12]}"


V1_LISTEN = Patch(
    "internal/pkg/cmd/reloader.go",
    "http.ListenAndServe(constants.DefaultHttpListenAddr, nil)",
    "http.ListenAndServe(func() string {"
    f' if a := os.Getenv("{LISTEN_ENV}"); a != "" {{ return a }};'
    ' return "127.0.0.1" + constants.DefaultHttpListenAddr }(), nil)',
    f"its HTTP server listens on ${LISTEN_ENV} (default 127.0.0.1:9090)",
)

PEERS: dict[str, Peer] = {
    p.component: p
    for p in (
        Peer(
            "reloader-v1",
            f"reloader-{RELOADER_V1_REF}",
            RELOADER_V1_REF,
            RELOADER_V1_COMMIT,
            ".",
            f"{MODULE}/pkg/common",
            (V1_LISTEN,),
        ),
        Peer(
            "reloader-v2",
            "reloader-v2",
            RELOADER_V2_REF,
            RELOADER_V2_COMMIT,
            "./cmd/reloader",
            f"{MODULE}/pkg/metadata",
        ),
    )
}


def peers_root(env: Mapping[str, str] | None = None) -> Path:
    """The folder holding the peers' source trees (it may not exist)."""
    env = os.environ if env is None else env
    if env.get(PEERS_ENV):
        return Path(env[PEERS_ENV])
    beside = Path(__file__).resolve().parents[3].parent / "shared" / "peers"
    return beside if beside.is_dir() else FALLBACK_ROOT


def source_tree(component: str, env: Mapping[str, str] | None = None) -> Path:
    """Where `component`'s source tree is expected."""
    return peers_root(env) / PEERS[component].folder


def tree_digest(tree: Path) -> str | None:
    """A digest of every file's path and content under `tree`; None when it has no go.mod."""
    if not (tree / "go.mod").is_file():
        return None
    h = hashlib.sha256()
    for path in sorted(p for p in tree.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(tree)).encode() + b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()[:16]


class PeerBuilds(GoBuilder):
    """The peers' build steps, for `building.Builder` (which names them in `extra`)."""

    def _peer_components(self, extra: tuple[str, ...]) -> dict[str, list[Path]]:
        return {c: [self.bin / c] for c in PEERS if c in extra}

    def _peer_stamp(self, component: str) -> str:
        peer = PEERS[component]
        tree = source_tree(component)
        digest = tree_digest(tree)
        state = f"tree sha256:{digest}" if digest else f"no source tree at {tree}"
        patched = "".join(f"; {p.why}" for p in peer.patches)
        return f"{component} {peer.ref} ({peer.commit}), {state}{patched}"

    def _build_reloader_v1(self) -> None:
        self._build_peer(PEERS["reloader-v1"])

    def _build_reloader_v2(self) -> None:
        self._build_peer(PEERS["reloader-v2"])

    def _build_peer(self, peer: Peer) -> None:
        tree = source_tree(peer.component)
        if not (tree / "go.mod").is_file():
            raise BuildError(
                f"building {peer.component}: no source tree at {tree} "
                f"(set {PEERS_ENV} to the folder holding {peer.folder}/)"
            )
        work = self.root / "src" / peer.component
        if work.exists():
            shutil.rmtree(work)
        shutil.copytree(tree, work, symlinks=True)
        for path in [work, *work.rglob("*")]:
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | 0o200)
        for patch in peer.patches:
            source = work / patch.path
            text = source.read_text()
            if text.count(patch.old) != 1:
                raise BuildError(
                    f"building {peer.component}: {patch.path} no longer has {patch.old!r} "
                    f"once; cannot make {patch.why}"
                )
            source.write_text(text.replace(patch.old, patch.new))
        run = self._runner(peer.component, work)
        self._pin_served_openshift_api(peer.component, work, run)
        pkg = peer.version_pkg
        self._compile(
            run,
            peer.component,
            [peer.package],
            ["-o", str(self.bin / peer.component)],
            ldflags=f"-s -w -X {pkg}.Version={peer.version} -X {pkg}.Commit={peer.commit}",
        )

    def _pin_served_openshift_api(self, component: str, work: Path, run: Run) -> None:
        """Replace the pinned github.com/openshift/api when the module proxy refuses it."""
        pinned = re.search(r"github\.com/openshift/api (v\S+)", (work / "go.mod").read_text())
        if pinned is None:
            return
        scratch = self._workdir(f"{component}-probe", f"kube-reloader.local/{component}probe")
        probe = subprocess.run(
            [self.go, "mod", "download", "-json", f"github.com/openshift/api@{pinned.group(1)}"],
            cwd=scratch,
            env=self._env(),
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.returncode == 0:
            return
        served = f"github.com/openshift/api@{OPENSHIFT_API_FALLBACK}"
        run(
            f"pinning a served openshift/api ({pinned.group(1)} is not served)",
            [self.go, "mod", "edit", f"-replace=github.com/openshift/api={served}"],
        )
