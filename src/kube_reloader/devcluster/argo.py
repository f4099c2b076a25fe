"""The Argo Rollouts controller on the dev cluster, so Rollouts get the `status` Argo writes.

Built on first use only (the Argo tests ask for it), from the Go module proxy like the
control plane, into `<cache>/argo-rollouts-v<version>/`:

* `crds/`: the CustomResourceDefinitions of the module's `manifests/crds/` (a download, no
  compile; the Rollout tests install them in place of a hand-written copy);
* `bin/rollouts-controller`: upstream's `cmd/rollouts-controller`, built as the main module
  (its go.mod has `replace` directives). Its metrics and health servers listen on a
  hard-coded `0.0.0.0:<port>`; the one constant that says so is rewritten to `127.0.0.1`
  before compiling, so nothing it serves leaves loopback.

`RolloutsController` runs the binary against a kubeconfig (leader election off, ports
chosen free on 127.0.0.1) and stops it; `install_crds` creates or replaces the CRDs and
waits until Rollouts are served.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from kube_reloader.devcluster.gobuild import BuildError, GoBuilder, Reporter, _stderr
from kube_reloader.devcluster.versions import ARGO_ROLLOUTS, cache_root
from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client

MODULE = "github.com/argoproj/argo-rollouts"
CRD_FILES = (
    "rollout-crd.yaml",
    "analysis-run-crd.yaml",
    "analysis-template-crd.yaml",
    "cluster-analysis-template-crd.yaml",
    "experiment-crd.yaml",
)
#: upstream's listen address for the metrics and health servers (controller/controller.go)
LISTEN_ANY = 'listenAddr                         = "0.0.0.0:%d"'
LISTEN_LOOPBACK = 'listenAddr                         = "127.0.0.1:%d"'


class ArgoBuilder(GoBuilder):
    """Builds the Argo Rollouts CRDs (always) and controller (when `controller=True`)."""

    cold_note = "first use only; a cold controller build takes several minutes on 2 cores"

    def __init__(
        self,
        *,
        controller: bool = True,
        version: str = ARGO_ROLLOUTS,
        root: Path | None = None,
        report: Reporter = _stderr,
        go: str = "go",
    ) -> None:
        self.version = version
        self.controller = controller
        super().__init__(root or cache_root() / f"argo-rollouts-v{version}", report=report, go=go)

    @property
    def crds(self) -> Path:
        return self.root / "crds"

    @property
    def binary(self) -> Path:
        return self.bin / "rollouts-controller"

    def ensure(self) -> ArgoBuilder:
        self.build_missing()
        return self

    def _components(self) -> dict[str, list[Path]]:
        out = {"argo-crds": [self.crds / f for f in CRD_FILES]}
        if self.controller:
            out["argo-rollouts"] = [self.binary]
        return out

    def _stamp_text(self, component: str) -> str:
        return {
            "argo-crds": f"argo-rollouts v{self.version} crds",
            "argo-rollouts": f"rollouts-controller v{self.version}, servers on 127.0.0.1",
        }[component]

    def _build_argo_crds(self) -> None:
        work, _ = self._module_source("argo-crds", f"{MODULE}@v{self.version}")
        self.crds.mkdir(parents=True, exist_ok=True)
        for name in CRD_FILES:
            target = self.crds / name
            shutil.copyfile(work / "manifests" / "crds" / name, target)
            target.chmod(0o644)

    def _build_argo_rollouts(self) -> None:
        work, _ = self._module_source("argo-rollouts", f"{MODULE}@v{self.version}")
        source = work / "controller" / "controller.go"
        text = source.read_text()
        if text.count(LISTEN_ANY) != 1:
            raise BuildError(
                f"building argo-rollouts: {source} no longer declares {LISTEN_ANY!r} once; "
                "cannot bind its servers to loopback"
            )
        source.write_text(text.replace(LISTEN_ANY, LISTEN_LOOPBACK))
        pkg = f"{MODULE}/utils/version"
        self._compile(
            self._runner("argo-rollouts", work),
            "argo-rollouts",
            ["./cmd/rollouts-controller"],
            ["-o", str(self.binary)],
            ldflags=f"-s -w -X {pkg}.version={self.version} -X {pkg}.gitTreeState=clean",
        )


async def install_crds(client: Client, crds: Path, *, wait_seconds: float = 60.0) -> None:
    """Create (or replace with these) Argo's CRDs, then wait until Rollouts are served."""
    for name in CRD_FILES:
        doc: dict[str, Any] = yaml.safe_load((crds / name).read_text())
        try:
            await client.create(resources.CUSTOMRESOURCEDEFINITIONS, doc)
        except errors.AlreadyExists:
            current = await client.get(resources.CUSTOMRESOURCEDEFINITIONS, doc["metadata"]["name"])
            doc["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            await client.update(resources.CUSTOMRESOURCEDEFINITIONS, doc)
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            await client.list(resources.ROLLOUTS, limit=1)
            return
        except errors.NotFound:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


class RolloutsController:
    """`rollouts-controller` running against `kubeconfig`, its log in `log`."""

    def __init__(
        self,
        binary: Path,
        kubeconfig: Path,
        log: Path,
        *,
        namespace: str = "default",
        report: Callable[[str], None] = _stderr,
    ) -> None:
        self.binary, self.kubeconfig, self.log = binary, kubeconfig, log
        #: where it looks for its notification ConfigMap/Secret (POD_NAMESPACE)
        self.namespace = namespace
        self.report = report
        self.metrics_port = self.healthz_port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, *, timeout: float = 60.0) -> None:
        self.metrics_port, self.healthz_port = _free_port(), _free_port()
        cmd = [
            str(self.binary), f"--kubeconfig={self.kubeconfig}", "--leader-elect=false",
            f"--metricsPort={self.metrics_port}", f"--healthzPort={self.healthz_port}",
            "--loglevel=info", "--rollout-threads=2", "--experiment-threads=1",
            "--analysis-threads=1", "--service-threads=1", "--ingress-threads=1",
        ]  # fmt: skip
        env = {**os.environ, "POD_NAMESPACE": self.namespace}
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        url = f"http://127.0.0.1:{self.healthz_port}/healthz"
        deadline = time.monotonic() + timeout
        while not _http_ok(url):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = self.log.read_text(errors="replace").splitlines()[-10:]
                raise RuntimeError(
                    f"rollouts-controller did not become healthy (log {self.log}):\n"
                    + "\n".join(tail)
                )
            time.sleep(0.2)
        self.report(f"[argo] rollouts-controller pid {self.proc.pid} healthy on {url}")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)

    def __enter__(self) -> RolloutsController:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:  # noqa: S310 (loopback only)
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False
