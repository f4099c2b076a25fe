"""What the dev cluster's add-on controllers (Argo Rollouts, cert-manager) share: building
their CRDs and binary, installing the CRDs, and running the binary as a local process that is
up once its health endpoint on 127.0.0.1 answers 200.

`LocalController` subclasses say only what differs: the command line (`command`), the health
path and the environment.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import yaml

from kube_reloader.devcluster.gobuild import GoBuilder, Reporter, _stderr
from kube_reloader.devcluster.ports import free_port
from kube_reloader.devcluster.versions import cache_root
from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client


async def install_crds(
    client: Client,
    crds: Path,
    files: Iterable[str],
    served: Iterable[resources.Resource],
    *,
    wait_seconds: float = 60.0,
) -> None:
    """Create (or replace with these) the CRDs in `files`, then wait until every resource of
    `served` can be listed."""
    for name in files:
        doc: dict[str, Any] = yaml.safe_load((crds / name).read_text())
        try:
            await client.create(resources.CUSTOMRESOURCEDEFINITIONS, doc)
        except errors.AlreadyExists:
            current = await client.get(resources.CUSTOMRESOURCEDEFINITIONS, doc["metadata"]["name"])
            doc["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            await client.update(resources.CUSTOMRESOURCEDEFINITIONS, doc)
    deadline = time.monotonic() + wait_seconds
    for resource in served:
        while True:
            try:
                await client.list(resource, limit=1)
                break
            except errors.NotFound:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:  # noqa: S310 (loopback only)
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


class AddonBuilder(GoBuilder):
    """Builds an add-on's CRDs (always: a download) and its controller (when
    `controller=True`) under `<cache>/<slug>-v<version>/`: `crds/` and `bin/<binary_name>`.
    Subclasses name their two components and write the `_build_<component>` steps."""

    slug = ""
    binary_name = ""
    crd_files: tuple[str, ...] = ()
    #: the component names (they key the build stamps)
    crds_component = ""
    controller_component = ""

    def __init__(
        self,
        *,
        version: str,
        controller: bool = True,
        root: Path | None = None,
        report: Reporter = _stderr,
        go: str = "go",
    ) -> None:
        self.version = version
        self.controller = controller
        super().__init__(root or cache_root() / f"{self.slug}-v{version}", report=report, go=go)

    @property
    def crds(self) -> Path:
        return self.root / "crds"

    @property
    def binary(self) -> Path:
        return self.bin / self.binary_name

    def ensure(self) -> Self:
        self.build_missing()
        return self

    def _components(self) -> dict[str, list[Path]]:
        out = {self.crds_component: [self.crds / f for f in self.crd_files]}
        if self.controller:
            out[self.controller_component] = [self.binary]
        return out


class LocalController:
    """An add-on controller binary running against `kubeconfig`, its log in `log`; metrics and
    health on free 127.0.0.1 ports chosen at each start."""

    #: how it is named in reports and errors
    label = "controller"
    #: the health endpoint's path on the health port
    health_path = "/healthz"

    def __init__(
        self,
        binary: Path,
        kubeconfig: Path,
        log: Path,
        *,
        report: Callable[[str], None] = _stderr,
    ) -> None:
        self.binary, self.kubeconfig, self.log = binary, kubeconfig, log
        self.report = report
        self.metrics_port = self.healthz_port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        """The command line (the ports are chosen by then)."""
        raise NotImplementedError

    def environment(self) -> dict[str, str]:
        return dict(os.environ)

    def start(self, *, timeout: float = 60.0) -> None:
        self.metrics_port, self.healthz_port = free_port(), free_port()
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.command(),
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.environment(),
                start_new_session=True,
            )
        url = f"http://127.0.0.1:{self.healthz_port}{self.health_path}"
        deadline = time.monotonic() + timeout
        while not http_ok(url):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = self.log.read_text(errors="replace").splitlines()[-10:]
                raise RuntimeError(
                    f"{self.label} did not become healthy (log {self.log}):\n" + "\n".join(tail)
                )
            time.sleep(0.2)
        self.report(f"[{self.label}] pid {self.proc.pid} healthy on {url}")

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

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
