"""cert-manager's controller on the dev cluster, so TLS Secrets rotate the way they do in
production (a real issuance, a real renewal, a new key and serial each time).

Built on first use only (the cert-manager tests ask for it), from the Go module proxy like the
control plane, into `<cache>/cert-manager-v<version>/`:

* `crds/`: the CustomResourceDefinitions of the module's `deploy/crds/` (a download, no
  compile);
* `bin/cert-manager-controller`: upstream's controller. Upstream builds it from the nested
  module `cmd/controller` (module path `github.com/cert-manager/cert-manager/controller-binary`),
  which the proxy does not serve (404 under either name; a module zip leaves nested modules
  out). So the main package is `certmanager_main.go` next to this file: upstream's
  `cmd/controller/app` Run cut to the dev cluster's needs, built as a module of that same path
  (so it may import cert-manager's `internal/` packages) against the served
  `github.com/cert-manager/cert-manager` module. Every controller, issuer and default comes
  from that module; only flag parsing, leader election and pprof are left out. One
  dependency differs: the proxy refuses `github.com/Venafi/vcert/v5` v5.13.7 (cert-manager's
  pin) and serves v5.13.8, which a `replace` selects.

`running` does all three for a test or a tool: built, CRDs installed, controller running.

`CertManagerController` runs the binary against a kubeconfig (leader election off, metrics
and health on free 127.0.0.1 ports; the ACME HTTP-01 solver is a pod it would create, never a
listener of its own) and stops it; `install_crds` creates or replaces the CRDs and waits until
Certificates are served. cert-manager's webhook is not run: nothing validates or defaults the
objects a test creates, so tests write complete, valid objects.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import shutil
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kube_reloader.devcluster import addons
from kube_reloader.devcluster.gobuild import BuildError, Reporter, _stderr
from kube_reloader.devcluster.versions import CERT_MANAGER
from kube_reloader.kube import config, resources
from kube_reloader.kube.client import Client

MODULE = "github.com/cert-manager/cert-manager"
#: upstream's module path of cmd/controller; the main package is built under it
CONTROLLER_MODULE = "github.com/cert-manager/cert-manager/controller-binary"
MAIN_SOURCE = Path(__file__).with_name("certmanager_main.go")
CRD_FILES = (
    "cert-manager.io_certificaterequests.yaml",
    "cert-manager.io_certificates.yaml",
    "cert-manager.io_clusterissuers.yaml",
    "cert-manager.io_issuers.yaml",
    "acme.cert-manager.io_challenges.yaml",
    "acme.cert-manager.io_orders.yaml",
)
#: (module, the version the proxy refuses, the served one used instead)
REPLACEMENTS = (("github.com/Venafi/vcert/v5", "v5.13.7", "v5.13.8"),)
CERTIFICATES = resources.Resource("cert-manager.io", "v1", "certificates", "Certificate")
ISSUERS = resources.Resource("cert-manager.io", "v1", "issuers", "Issuer")
CERTIFICATEREQUESTS = resources.Resource(
    "cert-manager.io", "v1", "certificaterequests", "CertificateRequest"
)


class CertManagerBuilder(addons.AddonBuilder):
    """Builds cert-manager's CRDs (always) and controller (when `controller=True`)."""

    cold_note = "first use only; a cold controller build takes up to 20 minutes on 2 cores"
    slug = "cert-manager"
    binary_name = "cert-manager-controller"
    crd_files = CRD_FILES
    crds_component = "cert-manager-crds"
    controller_component = "cert-manager"

    def __init__(
        self,
        *,
        controller: bool = True,
        version: str = CERT_MANAGER,
        root: Path | None = None,
        report: Reporter = _stderr,
        go: str = "go",
    ) -> None:
        super().__init__(version=version, controller=controller, root=root, report=report, go=go)

    def _stamp_text(self, component: str) -> str:
        if component == "cert-manager-crds":
            return f"cert-manager v{self.version} crds"
        replaced = ", ".join(f"{m} {new}" for m, _, new in REPLACEMENTS)
        return (
            f"cert-manager-controller v{self.version} ({replaced}), servers on 127.0.0.1, "
            f"main {_digest(MAIN_SOURCE.read_bytes())}"
        )

    def _build_cert_manager_crds(self) -> None:
        work, _ = self._module_source("cert-manager-crds", f"{MODULE}@v{self.version}")
        self.crds.mkdir(parents=True, exist_ok=True)
        for name in CRD_FILES:
            target = self.crds / name
            shutil.copyfile(work / "deploy" / "crds" / name, target)
            target.chmod(0o644)

    def _build_cert_manager(self) -> None:
        work = self._workdir("cert-manager", CONTROLLER_MODULE)
        run = self._runner("cert-manager", work)
        module = f"{MODULE}@v{self.version}"
        info: dict[str, Any] = json.loads(
            run("downloading the module", [self.go, "mod", "download", "-json", module])
        )
        if info.get("Error"):
            raise BuildError(f"building cert-manager: {module}: {info['Error']}")
        upstream = Path(info["Dir"])
        pins = (upstream / "go.mod").read_text()
        for dep, refused, _ in REPLACEMENTS:
            if f"\t{dep} {refused}\n" not in pins:
                raise BuildError(
                    f"building cert-manager: its go.mod no longer pins {dep} {refused}; "
                    "review REPLACEMENTS in devcluster/certmanager.py"
                )
        replaces = "".join(f"replace {m} => {m} {new}\n" for m, _, new in REPLACEMENTS)
        (work / "go.mod").write_text(
            f"module {CONTROLLER_MODULE}\n\ngo 1.26.0\n\n"
            f"require {MODULE} v{self.version}\n\n{replaces}"
        )
        # upstream's go.sum (part of the checked module zip) plus the module's own lines
        (work / "go.sum").write_text(
            (upstream / "go.sum").read_text()
            + f"{MODULE} v{self.version} {info['Sum']}\n"
            + f"{MODULE} v{self.version}/go.mod {info['GoModSum']}\n"
        )
        shutil.copyfile(MAIN_SOURCE, work / "main.go")
        self._compile(
            run,
            "cert-manager",
            ["."],
            ["-o", str(self.binary)],
            ldflags=f"-s -w -X {MODULE}/pkg/util.AppVersion=v{self.version}",
        )


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


async def install_crds(client: Client, crds: Path, *, wait_seconds: float = 60.0) -> None:
    """Create (or replace with these) cert-manager's CRDs, then wait until they are served."""
    served = (CERTIFICATES, ISSUERS, CERTIFICATEREQUESTS)
    await addons.install_crds(client, crds, CRD_FILES, served, wait_seconds=wait_seconds)


class CertManagerController(addons.LocalController):
    """`cert-manager-controller` running against `kubeconfig`, its log in `log`."""

    label = "cert-manager controller"
    health_path = "/livez"

    def __init__(
        self,
        binary: Path,
        kubeconfig: Path,
        log: Path,
        *,
        cluster_resource_namespace: str = "kube-system",
        report: Callable[[str], None] = _stderr,
    ) -> None:
        super().__init__(binary, kubeconfig, log, report=report)
        #: where the Secrets of ClusterIssuers live
        self.cluster_resource_namespace = cluster_resource_namespace

    def command(self) -> list[str]:
        # Backoff after a failed issuance: upstream's flags, 5 s to 30 s instead of 1 h to 32 h.
        # In CI a renewal failed ("SecretMismatch" re-issued at once, then "CSR not signed by
        # referenced private key": a race between v1.21's controllers, as its log reads) and a
        # Certificate renewed every 25 s then stopped for an hour. A request failed like that
        # is deleted and made anew after the backoff (checked on the dev cluster: 4.5 s).
        return [
            str(self.binary),
            f"--kubeconfig={self.kubeconfig}",
            "--leader-elect=false",
            f"--metrics-listen-address=127.0.0.1:{self.metrics_port}",
            f"--healthz-listen-address=127.0.0.1:{self.healthz_port}",
            f"--cluster-resource-namespace={self.cluster_resource_namespace}",
            "--concurrent-workers=2",
            "--certificate-request-minimum-backoff-duration=5s",
            "--certificate-request-maximum-backoff-duration=30s",
            "--v=2",
        ]


@contextlib.contextmanager
def running(
    kubeconfig: Path, log: Path, *, report: Callable[[str], None] = _stderr
) -> Iterator[CertManagerController]:
    """cert-manager on the cluster of `kubeconfig` until the block ends: built on first use,
    its CRDs installed (or replaced), its controller running with its log in `log`."""
    built = CertManagerBuilder(controller=True, report=report).ensure()

    async def install() -> None:
        async with Client(config.load_kubeconfig([kubeconfig])) as client:
            await install_crds(client, built.crds)

    # on a thread of its own: a caller may be inside an event loop already
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, install()).result()
    with CertManagerController(built.binary, kubeconfig, log, report=report) as controller:
        yield controller
