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

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from kube_reloader.devcluster import addons
from kube_reloader.devcluster.gobuild import BuildError, Reporter, _stderr
from kube_reloader.devcluster.versions import ARGO_ROLLOUTS
from kube_reloader.kube import resources
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


class ArgoBuilder(addons.AddonBuilder):
    """Builds the Argo Rollouts CRDs (always) and controller (when `controller=True`)."""

    cold_note = "first use only; a cold controller build takes several minutes on 2 cores"
    slug = "argo-rollouts"
    binary_name = "rollouts-controller"
    crd_files = CRD_FILES
    crds_component = "argo-crds"
    controller_component = "argo-rollouts"

    def __init__(
        self,
        *,
        controller: bool = True,
        version: str = ARGO_ROLLOUTS,
        root: Path | None = None,
        report: Reporter = _stderr,
        go: str = "go",
    ) -> None:
        super().__init__(version=version, controller=controller, root=root, report=report, go=go)

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
    await addons.install_crds(
        client, crds, CRD_FILES, (resources.ROLLOUTS,), wait_seconds=wait_seconds
    )


class RolloutsController(addons.LocalController):
    """`rollouts-controller` running against `kubeconfig`, its log in `log`."""

    label = "argo rollouts-controller"

    def __init__(
        self,
        binary: Path,
        kubeconfig: Path,
        log: Path,
        *,
        namespace: str = "default",
        report: Callable[[str], None] = _stderr,
    ) -> None:
        super().__init__(binary, kubeconfig, log, report=report)
        #: where it looks for its notification ConfigMap/Secret (POD_NAMESPACE)
        self.namespace = namespace

    def command(self) -> list[str]:
        return [
            str(self.binary),
            f"--kubeconfig={self.kubeconfig}",
            "--leader-elect=false",
            f"--metricsPort={self.metrics_port}",
            f"--healthzPort={self.healthz_port}",
            "--loglevel=info",
            "--rollout-threads=2",
            "--experiment-threads=1",
            "--analysis-threads=1",
            "--service-threads=1",
            "--ingress-threads=1",
        ]

    def environment(self) -> dict[str, str]:
        return {**os.environ, "POD_NAMESPACE": self.namespace}
