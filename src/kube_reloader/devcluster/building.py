"""Build the control-plane binaries from the Go module proxy, once per version set.

Upstream's `go install k8s.io/kubernetes/cmd/...@v1.X.Y` is refused (its go.mod replaces every
staging module with a local path), so Kubernetes is built from a throwaway wrapper module
whose `replace` lines point each staging module at its published `v0.X.Y` tag; the list is
derived from the go.mod the proxy serves for that exact version. etcd and kwok have plain
requires and build the same way. Everything lands in `<cache>/bin`; stamps, logs, progress
and checksum verification are `gobuild.GoBuilder`'s.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kube_reloader.devcluster.gobuild import BuildError, GoBuilder, Reporter, _stderr
from kube_reloader.devcluster.peers import PEERS, PeerBuilds
from kube_reloader.devcluster.versions import (
    OPENSHIFT_API_FALLBACK,
    RELOADER,
    RELOADER_SUMS,
    Versions,
    cache_dir,
)

__all__ = ["Binaries", "BuildError", "Builder", "wrapper_go_mod"]

K8S_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
KWOK_STAGES = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-complete.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
)


@dataclass(frozen=True, slots=True)
class Binaries:
    """Paths of everything `up` needs."""

    root: Path

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def stages(self) -> Path:
        return self.root / "kwok-stages"

    def path(self, name: str) -> Path:
        return self.bin / name

    def stage_files(self) -> list[Path]:
        return [self.stages / Path(s).name for s in KWOK_STAGES]


class Builder(PeerBuilds):
    """Builds missing control-plane components; `ensure()` is cheap when all are present."""

    cold_note = "first use only; a cold build takes 10-30 min on 2 cores"

    def __init__(
        self,
        versions: Versions | None = None,
        *,
        root: Path | None = None,
        report: Reporter = _stderr,
        go: str = "go",
        extra: tuple[str, ...] = (),
    ) -> None:
        self.versions = versions or Versions()
        self.binaries = Binaries(root or cache_dir(self.versions))
        super().__init__(self.binaries.root, report=report, go=go)
        #: optional components built on request ("reloader" for the benchmark; the peers of
        #: `peers.PEERS`, "reloader-v1" and "reloader-v2", for compatibility tests)
        self.extra = extra

    def ensure(self) -> Binaries:
        """Build whatever is missing (under a lock shared by concurrent callers)."""
        self.build_missing()
        return self.binaries

    # ------------------------------------------------------------------ components

    def _components(self) -> dict[str, list[Path]]:
        b = self.binaries
        return {
            "etcd": [b.path("etcd")],
            "kwok": [b.path("kwok"), *b.stage_files()],
            "kubernetes": [b.path(c) for c in K8S_COMMANDS],
            "helm": [b.path("helm")],
            **({"reloader": [b.path("reloader")]} if "reloader" in self.extra else {}),
            **self._peer_components(self.extra),
        }

    def _stamp_text(self, component: str) -> str:
        if component in PEERS:
            return self._peer_stamp(component)
        v = self.versions
        return {
            "etcd": f"etcd v{v.etcd}",
            "kwok": f"kwok v{v.kwok}",
            "kubernetes": f"kubernetes v{v.kubernetes}",
            "helm": f"helm v{v.helm}",
            "reloader": f"reloader v{RELOADER}",
        }[component]

    def _build_etcd(self) -> None:
        v = self.versions
        work = self._workdir("etcd", "kube-reloader.local/etcdbin")
        run = self._runner("etcd", work)
        run("resolving modules", [self.go, "get", f"go.etcd.io/etcd/server/v3@v{v.etcd}"])
        self._compile(
            run,
            "etcd",
            ["go.etcd.io/etcd/server/v3"],
            ["-o", str(self.binaries.path("etcd"))],
            ldflags="-s -w",
        )

    def _build_kwok(self) -> None:
        v = self.versions
        work = self._workdir("kwok", "kube-reloader.local/kwokbin")
        run = self._runner("kwok", work)
        run("resolving modules", [self.go, "get", f"sigs.k8s.io/kwok@v{v.kwok}"])
        info = json.loads(
            run(
                "locating stages",
                [self.go, "mod", "download", "-json", f"sigs.k8s.io/kwok@v{v.kwok}"],
            )
        )
        src = Path(info["Dir"])
        self.binaries.stages.mkdir(parents=True, exist_ok=True)
        for rel in KWOK_STAGES:
            target = self.binaries.stages / Path(rel).name
            shutil.copyfile(src / rel, target)
            target.chmod(0o644)
        self._compile(
            run,
            "kwok",
            ["sigs.k8s.io/kwok/cmd/kwok"],
            ["-o", str(self.binaries.path("kwok"))],
            ldflags=f"-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=v{v.kwok}",
        )

    def _build_reloader(self) -> None:
        """Stakater Reloader v1, as the benchmark's peer: its go.mod has replace directives,
        so it is built as the main module from the downloaded module source.

        The checksum database reached through the proxy answers 404 for every
        github.com/stakater/Reloader version, so for that one module path (and no other)
        the download is checked against the hashes pinned in `versions.RELOADER_SUMS`
        instead; its dependencies are verified by its go.sum and the database as usual."""
        module = f"github.com/stakater/Reloader@v{RELOADER}"
        work, info = self._module_source(
            "reloader", module, env={"GONOSUMDB": "github.com/stakater/Reloader"}
        )
        got = (info.get("Sum"), info.get("GoModSum"))
        if got != RELOADER_SUMS:
            raise BuildError(
                f"building reloader: {module} has checksums {got}, pinned {RELOADER_SUMS}"
            )
        gomod = (work / "go.mod").read_text()
        pinned = re.search(r"github\.com/openshift/api (v\S+)", gomod)
        run = self._runner("reloader", work)
        if pinned:
            wanted = f"github.com/openshift/api@{pinned.group(1)}"
            probe = subprocess.run(
                [self.go, "mod", "download", "-json", wanted],
                cwd=self.root / "src" / "reloader-dl",
                env=self._env(),
                capture_output=True,
                text=True,
                check=False,
            )
            if probe.returncode != 0:
                served = f"github.com/openshift/api@{OPENSHIFT_API_FALLBACK}"
                run(
                    "pinning a served openshift/api",
                    [self.go, "mod", "edit", f"-replace=github.com/openshift/api={served}"],
                )
        self._compile(
            run,
            "reloader",
            ["."],
            ["-o", str(self.binaries.path("reloader"))],
            ldflags=f"-s -w -X github.com/stakater/Reloader/pkg/common.Version=v{RELOADER}",
        )

    def _build_helm(self) -> None:
        """Helm, for the chart tests (`helm lint` / `helm template`); no replace directives."""
        v = self.versions
        work = self._workdir("helm", "kube-reloader.local/helmbin")
        run = self._runner("helm", work)
        run("resolving modules", [self.go, "get", f"helm.sh/helm/v3@v{v.helm}"])
        self._compile(
            run,
            "helm",
            ["helm.sh/helm/v3/cmd/helm"],
            ["-o", str(self.binaries.path("helm"))],
            ldflags=f"-s -w -X helm.sh/helm/v3/internal/version.version=v{v.helm}",
        )

    def _build_kubernetes(self) -> None:
        module = "kube-reloader.local/k8sbin"
        out = ["-o", str(self.binaries.bin) + "/"]
        build_kubernetes_commands(self, "kubernetes", module, self.versions, K8S_COMMANDS, out)


def build_kubernetes_commands(
    b: GoBuilder,
    component: str,
    module: str,
    v: Versions,
    commands: Sequence[str],
    out_args: Sequence[str],
) -> None:
    """Build `k8s.io/kubernetes/cmd/<command>` for each of `commands` from a wrapper module
    (`wrapper_go_mod`) in `src/<component>`, with upstream's version stamped in."""
    work = b._workdir(component, module)
    run = b._runner(component, work)
    info = json.loads(
        run(
            "reading upstream go.mod",
            [b.go, "mod", "download", "-json", f"k8s.io/kubernetes@v{v.kubernetes}"],
        )
    )
    upstream = Path(info["GoMod"]).read_text()
    (work / "go.mod").write_text(wrapper_go_mod(upstream, module, v))
    pkgs = [f"k8s.io/kubernetes/cmd/{c}" for c in commands]
    run("resolving modules", [b.go, "get", *[f"{p}@v{v.kubernetes}" for p in pkgs]])
    ver = " ".join(
        f"-X {pkg}.{k}={val}"
        for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
        for k, val in (
            ("gitVersion", f"v{v.kubernetes}"),
            ("gitMajor", "1"),
            ("gitMinor", v.minor),
            ("gitTreeState", "clean"),
        )
    )
    out = [*out_args, "-tags=selinux,notest,grpcnotrace"]
    b._compile(run, component, pkgs, out, ldflags=f"all={ver} -s -w")


def wrapper_go_mod(upstream: str, module: str, versions: Versions) -> str:
    """A go.mod requiring k8s.io/kubernetes with its staging replaces pinned to tags.

    The `go` and `godebug` lines are copied from upstream so the binaries get upstream's
    GODEBUG defaults, not the wrapper's.
    """
    go_line = re.search(r"^go\s+(\S+)\s*$", upstream, re.M)
    if go_line is None:
        raise BuildError("k8s.io/kubernetes go.mod has no `go` line")
    lines = [f"module {module}", "", f"go {go_line.group(1)}", ""]
    godebug = re.findall(r"^godebug\s.*$", upstream, re.M)
    lines += godebug + ([""] if godebug else [])
    lines.append(f"require k8s.io/kubernetes v{versions.kubernetes}")
    lines.append("")
    staging = sorted(
        set(re.findall(r"^\s*(k8s\.io/[A-Za-z0-9._-]+)\s+=>\s+\./staging/", upstream, re.M))
    )
    if not staging:
        raise BuildError(
            "k8s.io/kubernetes go.mod has no ./staging replace lines; the wrapper cannot be built"
        )
    lines.append("replace (")
    lines += [f"\t{m} => {m} v{versions.staging}" for m in staging]
    lines.append(")")
    return "\n".join(lines) + "\n"
