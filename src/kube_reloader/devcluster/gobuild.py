"""Build Go programs from the Go module proxy into a cache directory, once per version.

`GoBuilder` holds what every build shares: a stamp per component so a finished build is
never repeated, a lock so concurrent callers build once, a log per component, progress
lines at least every `PROGRESS_SECONDS` (packages compiled, elapsed time) and Go's checksum
verification left on: every module comes with its `go.sum` line or is looked up in the
checksum database. Subclasses (`building.Builder` for the control plane, `argo.ArgoBuilder`
for the Argo Rollouts controller) name their components and how each one is built.
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
from pathlib import Path
from typing import Any, TextIO

PROGRESS_SECONDS = 15.0

Reporter = Callable[[str], None]
Run = Callable[[str, Sequence[str]], str]


class BuildError(RuntimeError):
    """A component failed to build; the message names it and its full log."""


def go_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment every Go command here runs in: this process's, with static builds, the
    local toolchain, modules resolved as needed, and `extra` on top."""
    env = dict(os.environ)
    env.update({"CGO_ENABLED": "0", "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"})
    # checksum verification stays on: never inherit a switch that turns it off
    for name in ("GONOSUMDB", "GOPRIVATE", "GOINSECURE"):
        env.pop(name, None)
    if env.get("GOSUMDB") == "off":
        del env["GOSUMDB"]
    env.update(extra or {})
    return env


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class GoBuilder:
    """Builds missing components into `root/bin`; `ensure()` is cheap when all are present."""

    #: said once before a cold build starts
    cold_note = "first use only"

    def __init__(self, root: Path, *, report: Reporter = _stderr, go: str = "go") -> None:
        self.root = root
        self.bin = root / "bin"
        self.report = report
        self.go = go
        self.logs = root / "logs"
        self.timings: dict[str, float] = {}

    # ------------------------------------------------------------------ to override

    def _components(self) -> dict[str, list[Path]]:
        """Each component and the files it leaves behind."""
        raise NotImplementedError

    def _stamp_text(self, component: str) -> str:
        """What a finished build of `component` writes into its stamp (versions, options)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ public

    def missing(self) -> list[str]:
        """Components that still need a build."""
        out = []
        for component, files in self._components().items():
            stamp = self.bin / f".{component}.stamp"
            wanted = self._stamp_text(component)
            present = all(f.exists() for f in files)
            if not present or not stamp.exists() or stamp.read_text() != wanted:
                out.append(component)
        return out

    def build_missing(self) -> None:
        """Build whatever is missing (under a lock shared by concurrent callers)."""
        if not self.missing():
            return
        if shutil.which(self.go) is None:
            raise BuildError(
                f"building {', '.join(self.missing())} needs Go ({self.go!r} is not on PATH); "
                "install Go >= 1.26"
            )
        self.bin.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        with _locked(self.root / ".build.lock", self.report):
            todo = self.missing()
            if todo:
                self.report(
                    f"[build] building {', '.join(todo)} into {self.bin} ({self.cold_note})"
                )
            started = time.monotonic()
            for component in todo:
                t0 = time.monotonic()
                getattr(self, "_build_" + component.replace("-", "_"))()
                (self.bin / f".{component}.stamp").write_text(self._stamp_text(component))
                self.timings[component] = time.monotonic() - t0
                self.report(f"[build] {component}: done in {_fmt(self.timings[component])}")
            if todo:
                self.report(f"[build] all components built in {_fmt(time.monotonic() - started)}")

    # ------------------------------------------------------------------ helpers

    def _workdir(self, component: str, module: str) -> Path:
        """A fresh wrapper module `src/<component>` to `go get` and build from."""
        work = self.root / "src" / component
        if work.exists():
            shutil.rmtree(work)
        work.mkdir(parents=True)
        go_version = _local_go_version(self.go)
        (work / "go.mod").write_text(f"module {module}\n\ngo {go_version}\n")
        return work

    def _module_source(
        self, component: str, module: str, *, env: dict[str, str] | None = None
    ) -> tuple[Path, dict[str, Any]]:
        """A writable copy of `module` (`path@version`) in `src/<component>`, to build as the
        main module (so its own `replace` directives apply), and `go mod download`'s answer."""
        scratch = self._workdir(f"{component}-dl", f"kube-reloader.local/{component}dl")
        run = self._runner(component, scratch, env)
        info: dict[str, Any] = json.loads(
            run("downloading the module", [self.go, "mod", "download", "-json", module])
        )
        if info.get("Error"):
            raise BuildError(f"building {component}: {module}: {info['Error']}")
        work = self.root / "src" / component
        if work.exists():
            shutil.rmtree(work)
        shutil.copytree(info["Dir"], work)
        for path in [work, *work.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)
        return work, info

    def _env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return go_env(extra)

    def _runner(self, component: str, work: Path, env: dict[str, str] | None = None) -> Run:
        log_path = self.logs / f"build-{component}.log"
        log_path.write_text("")

        def run(phase: str, cmd: Sequence[str]) -> str:
            return self._run(component, phase, cmd, work, log_path, env=env)

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
        env: dict[str, str] | None = None,
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
                env=self._env(env),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                bufsize=1,
            )
            stop = threading.Event()
            ticker = threading.Thread(
                target=self._tick, args=(stop, component, phase, started, progress), daemon=True
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
        run: Run,
        component: str,
        packages: Sequence[str],
        out_args: Sequence[str],
        *,
        ldflags: str,
        env: dict[str, str] | None = None,
    ) -> None:
        work = self.root / "src" / component
        listing = run(
            "counting packages", [self.go, "list", "-deps", "-f", "{{.ImportPath}}", *packages]
        )
        total = len(listing.split())
        compiled = [0]

        def count(line: str) -> None:
            # `go build -v` names each package as it compiles it; errors have spaces/colons
            if line and " " not in line and ":" not in line and not line.startswith("#"):
                compiled[0] += 1

        jobs = str(max(1, os.cpu_count() or 1))
        flags = ["-v", "-p", jobs, "-trimpath", f"-ldflags={ldflags}"]
        cmd = [self.go, "build", *flags, *out_args, *packages]
        self._run(
            component,
            "compiling",
            cmd,
            work,
            self.logs / f"build-{component}.log",
            counter=count,
            progress=lambda: f"{min(compiled[0], total)}/{total} packages compiled",
            env=env,
        )


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
