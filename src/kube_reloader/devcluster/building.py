"""Build the control-plane binaries from the Go module proxy, once per version set.

Upstream's `go install k8s.io/kubernetes/cmd/...@v1.X.Y` is refused (its go.mod replaces every
staging module with a local path), so Kubernetes is built from a throwaway wrapper module
whose `replace` lines point each staging module at its published `v0.X.Y` tag; the list is
derived from the go.mod the proxy serves for that exact version. etcd and kwok have plain
requires and build the same way. Everything lands in `<cache>/bin`, with a stamp per
component so a finished build is never repeated, and a log per component for failures.
A cold build takes many minutes on two cores, so progress (component, phase, packages
compiled, elapsed time) is printed at least every `PROGRESS_SECONDS`.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from kube_reloader.devcluster.versions import OPENSHIFT_API_FALLBACK, RELOADER, Versions, cache_dir

PROGRESS_SECONDS = 15.0
K8S_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
KWOK_STAGES = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-complete.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
)


class BuildError(RuntimeError):
    """A component failed to build; the message names it and its full log."""


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


Reporter = Callable[[str], None]


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Builder:
    """Builds missing components; `ensure()` is cheap when all are present."""

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
        self.report = report
        self.go = go
        self.logs = self.binaries.root / "logs"
        self.timings: dict[str, float] = {}
        #: optional components built on request (e.g. "reloader" for the benchmark)
        self.extra = extra

    # ------------------------------------------------------------------ public

    def missing(self) -> list[str]:
        """Components that still need a build."""
        out = []
        for component, files in self._components().items():
            stamp = self.binaries.bin / f".{component}.stamp"
            wanted = self._stamp_text(component)
            present = all(f.exists() for f in files)
            if not present or not stamp.exists() or stamp.read_text() != wanted:
                out.append(component)
        return out

    def ensure(self) -> Binaries:
        """Build whatever is missing (under a lock shared by concurrent callers)."""
        if not self.missing():
            return self.binaries
        if shutil.which(self.go) is None:
            raise BuildError(
                f"building the control plane needs Go ({self.go!r} is not on PATH); "
                "install Go >= 1.26"
            )
        self.binaries.bin.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        with _locked(self.binaries.root / ".build.lock", self.report):
            todo = self.missing()
            if todo:
                self.report(
                    f"[build] building {', '.join(todo)} into {self.binaries.bin} "
                    "(first use only; a cold build takes 10-30 min on 2 cores)"
                )
            started = time.monotonic()
            for component in todo:
                t0 = time.monotonic()
                getattr(self, f"_build_{component}")()
                stamp = self.binaries.bin / f".{component}.stamp"
                stamp.write_text(self._stamp_text(component))
                self.timings[component] = time.monotonic() - t0
                self.report(f"[build] {component}: done in {_fmt(self.timings[component])}")
            if todo:
                self.report(f"[build] all components built in {_fmt(time.monotonic() - started)}")
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
        }

    def _stamp_text(self, component: str) -> str:
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
        so it is built as the main module from the downloaded module source."""
        module = f"github.com/stakater/Reloader@v{RELOADER}"
        scratch = self._workdir("reloader-dl", "kube-reloader.local/reloaderdl")
        run = self._runner("reloader", scratch)
        info = json.loads(
            run("downloading the module", [self.go, "mod", "download", "-json", module])
        )
        work = self.binaries.root / "src" / "reloader"
        if work.exists():
            shutil.rmtree(work)
        shutil.copytree(info["Dir"], work)
        for path in [work, *work.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)
        gomod = (work / "go.mod").read_text()
        pinned = re.search(r"github\.com/openshift/api (v\S+)", gomod)
        run = self._runner("reloader", work)
        if pinned:
            wanted = f"github.com/openshift/api@{pinned.group(1)}"
            probe = subprocess.run(
                [self.go, "mod", "download", "-json", wanted],
                cwd=scratch, env=self._env(), capture_output=True, text=True, check=False,
            )  # fmt: skip
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
        v = self.versions
        work = self._workdir("kubernetes", "kube-reloader.local/k8sbin")
        run = self._runner("kubernetes", work)
        info = json.loads(
            run(
                "reading upstream go.mod",
                [self.go, "mod", "download", "-json", f"k8s.io/kubernetes@v{v.kubernetes}"],
            )
        )
        upstream = Path(info["GoMod"]).read_text()
        (work / "go.mod").write_text(wrapper_go_mod(upstream, "kube-reloader.local/k8sbin", v))
        pkgs = [f"k8s.io/kubernetes/cmd/{c}" for c in K8S_COMMANDS]
        run("resolving modules", [self.go, "get", *[f"{p}@v{v.kubernetes}" for p in pkgs]])
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
        self._compile(
            run,
            "kubernetes",
            pkgs,
            ["-o", str(self.binaries.bin) + "/", "-tags=selinux,notest,grpcnotrace"],
            ldflags=f"all={ver} -s -w",
        )

    # ------------------------------------------------------------------ helpers

    def _workdir(self, component: str, module: str) -> Path:
        work = self.binaries.root / "src" / component
        if work.exists():
            shutil.rmtree(work)
        work.mkdir(parents=True)
        go_version = _local_go_version(self.go)
        (work / "go.mod").write_text(f"module {module}\n\ngo {go_version}\n")
        return work

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({"CGO_ENABLED": "0", "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"})
        # Reloader's own module is served, but its checksum is not in the reachable sum database
        env.setdefault("GONOSUMDB", "github.com/stakater")
        return env

    def _runner(self, component: str, work: Path) -> Callable[[str, Sequence[str]], str]:
        log_path = self.logs / f"build-{component}.log"
        log_path.write_text("")

        def run(phase: str, cmd: Sequence[str]) -> str:
            return self._run(component, phase, cmd, work, log_path)

        return run

    def _run(
        self,
        component: str,
        phase: str,
        cmd: Sequence[str],
        work: Path,
        log_path: Path,
        counter: Callable[[str], None] | None = None,
        progress: Callable[[], str] | None = None,
    ) -> str:
        started = time.monotonic()
        self.report(f"[build] {component}: {phase}")
        out_lines: list[str] = []
        with log_path.open("a") as log:
            log.write(f"\n$ {' '.join(cmd)}\n")
            log.flush()
            proc = subprocess.Popen(
                cmd,
                cwd=work,
                env=self._env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                bufsize=1,
            )
            stop = threading.Event()
            ticker = threading.Thread(
                target=self._tick,
                args=(stop, component, phase, started, progress),
                daemon=True,
            )
            ticker.start()
            err_thread = threading.Thread(
                target=_pump, args=(proc.stderr, log, counter), daemon=True
            )
            err_thread.start()
            assert proc.stdout is not None
            for line in proc.stdout:
                out_lines.append(line)
            rc = proc.wait()
            err_thread.join()
            stop.set()
            ticker.join()
        if rc != 0:
            tail = _tail(log_path, 15)
            raise BuildError(
                f"building {component} failed while {phase} (exit {rc}); "
                f"full log: {log_path}\n{tail}"
            )
        return "".join(out_lines)

    def _tick(
        self,
        stop: threading.Event,
        component: str,
        phase: str,
        started: float,
        progress: Callable[[], str] | None,
    ) -> None:
        while not stop.wait(PROGRESS_SECONDS):
            extra = f", {progress()}" if progress else ""
            self.report(
                f"[build] {component}: {phase}{extra} ({_fmt(time.monotonic() - started)} elapsed)"
            )

    def _compile(
        self,
        run: Callable[[str, Sequence[str]], str],
        component: str,
        packages: Sequence[str],
        out_args: Sequence[str],
        *,
        ldflags: str,
    ) -> None:
        work = self.binaries.root / "src" / component
        listing = run(
            "counting packages", [self.go, "list", "-deps", "-f", "{{.ImportPath}}", *packages]
        )
        total = len(listing.split())
        compiled = [0]

        def count(line: str) -> None:
            # `go build -v` names each package as it compiles it; errors have spaces/colons
            if line and " " not in line and ":" not in line and not line.startswith("#"):
                compiled[0] += 1

        cmd = [
            self.go, "build", "-v", "-p", str(max(1, os.cpu_count() or 1)), "-trimpath",
            f"-ldflags={ldflags}", *out_args, *packages,
        ]  # fmt: skip
        self._run(
            component,
            "compiling",
            cmd,
            work,
            self.logs / f"build-{component}.log",
            counter=count,
            progress=lambda: f"{min(compiled[0], total)}/{total} packages compiled",
        )


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


def _pump(stream: TextIO | None, log: TextIO, counter: Callable[[str], None] | None) -> None:
    if stream is None:
        return
    for line in stream:
        log.write(line)
        log.flush()
        if counter is not None:
            counter(line.rstrip("\n"))


def _local_go_version(go: str) -> str:
    out = subprocess.run(
        [go, "env", "GOVERSION"], capture_output=True, text=True, check=True
    ).stdout.strip()
    m = re.match(r"go(\d+\.\d+)", out)
    return f"{m.group(1)}.0" if m else "1.26.0"


def _tail(path: Path, n: int) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join("    " + line for line in lines[-n:])


def _fmt(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m}m{s:02d}s" if m else f"{seconds:.1f}s"


@contextmanager
def _locked(path: Path, report: Reporter) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            report(f"[build] waiting for another build to finish (lock {path})")
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
