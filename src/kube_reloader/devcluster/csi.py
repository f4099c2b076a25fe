"""The Secrets Store CSI driver on the dev cluster's real node, so SecretProviderClassPodStatus
objects are written the way they are in production: by the driver, when the kubelet mounts a
pod's CSI volume and each time its rotation finds a new version.

Built on first use only, from the Go module proxy like the control plane, into
`<cache>/secrets-store-csi-v<version>/`:

* `crds/`: the SecretProviderClass and SecretProviderClassPodStatus CRDs and the CSIDriver
  object of the module (a download, no compile);
* `bin/secrets-store-csi-driver`: upstream's driver, built from a copy of its module as the main
  module. The proxy refuses `monis.app/mlog`, which its `main`, its gRPC server and its
  rotation reconciler call (`Setup`, the two formats, the level check, `Error`, `Fatal`):
  `csi_mlog.go`, next to this file, stands in on klog through a `replace`;
* `bin/kr-csi-node` (`csi_node_main.go`, built in the same module): what a cluster deploys
  beside the driver and the proxy does not serve here: the kubelet's plugin registration
  (node-driver-registrar's job) and a provider, `kube-reloader-files`, that serves files of
  `<state>/csi/files/<namespace>/` with their content hash as version.

`CSIDriverOnNode` runs both as processes of this machine (the kubelet shares its mount
namespace: the driver's tmpfs mounts under the kubelet's pod directories are the ones the
containers get) and is up once this run's registration was confirmed by the kubelet and the
node's CSINode lists the driver; before it stops, the pods still mounting its volumes are
waited for (the kubelet needs the driver to unmount them).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Self

import yaml

from kube_reloader.devcluster import addons
from kube_reloader.devcluster.gobuild import BuildError, GoBuilder, Reporter, _stderr
from kube_reloader.devcluster.nodeconfig import NODE_NAME
from kube_reloader.devcluster.ports import free_port
from kube_reloader.devcluster.versions import SECRETS_STORE_CSI, cache_root
from kube_reloader.kube import config, errors, resources
from kube_reloader.kube.client import Client

MODULE = "sigs.k8s.io/secrets-store-csi-driver"
DRIVER = "secrets-store.csi.k8s.io"
PROVIDER = "kube-reloader-files"
MLOG = "monis.app/mlog"
#: what kr-csi-node adds to the driver's module (the version the driver's Kubernetes libraries are)
KUBELET_API = "k8s.io/kubelet@v0.26.4"
MLOG_SOURCE = Path(__file__).with_name("csi_mlog.go")
NODE_SOURCE = Path(__file__).with_name("csi_node_main.go")
CRD_FILES = (
    "secrets-store.csi.x-k8s.io_secretproviderclasses.yaml",
    "secrets-store.csi.x-k8s.io_secretproviderclasspodstatuses.yaml",
)
CSIDRIVER_FILE = "csidriver.yaml"
CSIDRIVERS = resources.Resource("storage.k8s.io", "v1", "csidrivers", "CSIDriver", namespaced=False)
CSINODES = resources.Resource("storage.k8s.io", "v1", "csinodes", "CSINode", namespaced=False)
#: a unix socket's path has at most 107 bytes (sun_path)
SOCKET_PATH_MAX = 107


class CSIBuilder(GoBuilder):
    """Builds the driver's manifests (a download) and the two binaries."""

    cold_note = "first use only; a cold driver build takes a few minutes on 2 cores"

    def __init__(
        self,
        *,
        version: str = SECRETS_STORE_CSI,
        root: Path | None = None,
        report: Reporter = _stderr,
        go: str = "go",
    ) -> None:
        self.version = version
        super().__init__(
            root or cache_root() / f"secrets-store-csi-v{version}", report=report, go=go
        )

    @property
    def manifests(self) -> Path:
        return self.root / "crds"

    @property
    def driver(self) -> Path:
        return self.bin / "secrets-store-csi-driver"

    @property
    def node(self) -> Path:
        return self.bin / "kr-csi-node"

    def ensure(self) -> Self:
        self.build_missing()
        return self

    def _components(self) -> dict[str, list[Path]]:
        files = [self.manifests / f for f in (*CRD_FILES, CSIDRIVER_FILE)]
        return {"csi-manifests": files, "csi-driver": [self.driver, self.node]}

    def _stamp_text(self, component: str) -> str:
        if component == "csi-manifests":
            return f"secrets-store-csi-driver v{self.version} manifests"
        sources = hashlib.sha256(MLOG_SOURCE.read_bytes() + NODE_SOURCE.read_bytes())
        return (
            f"secrets-store-csi-driver v{self.version} ({MLOG} stand-in), kr-csi-node "
            f"({KUBELET_API}), sources {sources.hexdigest()[:16]}"
        )

    def _build_csi_manifests(self) -> None:
        work, _ = self._module_source("csi-manifests", f"{MODULE}@v{self.version}")
        self.manifests.mkdir(parents=True, exist_ok=True)
        sources = {name: work / "config" / "crd" / "bases" / name for name in CRD_FILES}
        sources[CSIDRIVER_FILE] = work / "deploy" / CSIDRIVER_FILE
        for name, source in sources.items():
            target = self.manifests / name
            shutil.copyfile(source, target)
            target.chmod(0o644)

    def _build_csi_driver(self) -> None:
        work, _ = self._module_source("csi-driver", f"{MODULE}@v{self.version}")
        gomod = work / "go.mod"
        pins = gomod.read_text()
        if f"\t{MLOG} " not in pins:
            raise BuildError(
                f"building the CSI driver: its go.mod no longer requires {MLOG}; "
                "review devcluster/csi.py"
            )
        klog = next(line.split()[1] for line in pins.splitlines() if "k8s.io/klog/v2 " in line)
        shim = work / "mlogshim"
        shim.mkdir()
        (shim / "go.mod").write_text(f"module {MLOG}\n\ngo 1.22\n\nrequire k8s.io/klog/v2 {klog}\n")
        shutil.copyfile(MLOG_SOURCE, shim / "mlog.go")
        gomod.write_text(pins + f"\nreplace {MLOG} => ./mlogshim\n")
        node = work / "cmd" / "kr-csi-node"
        node.mkdir(parents=True)
        shutil.copyfile(NODE_SOURCE, node / "main.go")
        env = {"GOFLAGS": "-mod=mod"}
        run = self._runner("csi-driver", work, env)
        run("adding the kubelet's registration API", [self.go, "get", KUBELET_API])
        self._compile(
            run,
            "csi-driver",
            ["./cmd/secrets-store-csi-driver", "./cmd/kr-csi-node"],
            ["-o", f"{self.bin}/"],
            ldflags=f"-s -w -X {MODULE}/pkg/version.BuildVersion=v{self.version}",
            env=env,
        )


async def install(client: Client, manifests: Path, *, wait_seconds: float = 60.0) -> None:
    """The CRDs (created or replaced) until served, and the CSIDriver object."""
    served = (resources.SECRETPROVIDERCLASSES, resources.SECRETPROVIDERCLASSPODSTATUSES)
    await addons.install_crds(client, manifests, CRD_FILES, served, wait_seconds=wait_seconds)
    driver: dict[str, Any] = yaml.safe_load((manifests / CSIDRIVER_FILE).read_text())
    with contextlib.suppress(errors.AlreadyExists):
        await client.create(CSIDRIVERS, driver)


async def registered(client: Client) -> bool:
    """Whether the real node's CSINode lists the driver (the kubelet registered it)."""
    try:
        node = await client.get(CSINODES, NODE_NAME)
    except errors.NotFound:
        return False
    return any(d.get("name") == DRIVER for d in (node.get("spec") or {}).get("drivers") or [])


class CSIDriverOnNode:
    """The driver and kr-csi-node running for the real node of the cluster in `state_dir`;
    their logs in `<state>/csi/`. `put` writes a file the provider serves."""

    def __init__(
        self,
        built: CSIBuilder,
        state_dir: Path,
        kubeconfig: Path,
        *,
        rotation_poll: str = "2s",
        report: Callable[[str], None] = _stderr,
    ) -> None:
        self.built, self.kubeconfig, self.report = built, kubeconfig, report
        self.dir = state_dir / "csi"
        self.files = self.dir / "files"
        self.providers = self.dir / "providers"
        kubelet = state_dir / "node" / "kubelet"
        self.endpoint = kubelet / "plugins" / "csi-secrets-store" / "csi.sock"
        self.registration = kubelet / "plugins_registry" / f"{DRIVER}-reg.sock"
        self.rotation_poll = rotation_poll
        #: each process by the name of its log
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        for path in (self.endpoint, self.registration, self.providers / f"{PROVIDER}.sock"):
            if len(os.fsencode(path)) > SOCKET_PATH_MAX:
                raise RuntimeError(f"CSI socket path too long for a unix socket: {path}")

    def node_command(self) -> list[str]:
        return [
            str(self.built.node),
            f"--driver={DRIVER}",
            f"--driver-endpoint={self.endpoint}",
            f"--registration-socket={self.registration}",
            f"--provider-socket={self.providers / f'{PROVIDER}.sock'}",
            f"--files={self.files}",
        ]

    def driver_command(self) -> list[str]:
        return [
            str(self.built.driver),
            f"--endpoint=unix://{self.endpoint}",
            f"--nodeid={NODE_NAME}",
            f"--provider-volume={self.providers}",
            f"--additional-provider-volume-paths={self.providers}",
            f"--metrics-addr=127.0.0.1:{free_port()}",
            "--enable-secret-rotation",
            f"--rotation-poll-interval={self.rotation_poll}",
            "--v=2",
        ]

    def put(self, namespace: str, name: str, data: bytes) -> None:
        """Write file `name` for pods of `namespace` (whole: written aside, then renamed)."""
        target = self.files / namespace / name
        target.parent.mkdir(parents=True, exist_ok=True)
        aside = target.with_name(f".{name}.tmp")
        aside.write_bytes(data)
        aside.replace(target)

    def _spawn(self, command: list[str], log: str) -> None:
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        with (self.dir / log).open("ab") as out:
            proc = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        self.procs[log] = proc

    def start(self, *, timeout: float = 60.0) -> None:
        for d in (self.files, self.providers, self.endpoint.parent, self.registration.parent):
            d.mkdir(parents=True, exist_ok=True)
        node_log = self.dir / "node.log"
        offset = node_log.stat().st_size if node_log.exists() else 0
        self._spawn(self.driver_command(), "driver.log")
        self._spawn(self.node_command(), "node.log")
        deadline = time.monotonic() + timeout

        async def wait() -> None:
            async with Client(config.load_kubeconfig([self.kubeconfig])) as client:
                while not (confirmed(node_log, offset) and await registered(client)):
                    dead = [log for log, p in self.procs.items() if p.poll() is not None]
                    if dead or time.monotonic() > deadline:
                        raise RuntimeError(
                            f"the CSI driver did not register with the kubelet (exited: {dead}; "
                            f"logs in {self.dir})"
                        )
                    await asyncio.sleep(0.2)

        try:
            _in_thread(wait)
        except BaseException:
            self.stop()
            raise
        self.report(f"[csi] {DRIVER} registered on {NODE_NAME}")

    def drain(self, *, timeout: float = 120.0) -> None:
        """Until no pod mounts a volume of the driver (their namespaces deleted, say)."""
        deadline = time.monotonic() + timeout

        async def wait() -> None:
            async with Client(config.load_kubeconfig([self.kubeconfig])) as client:
                while time.monotonic() < deadline:
                    if not await mounting_pods(client):
                        return
                    await asyncio.sleep(0.5)

        _in_thread(wait)

    def stop(self) -> None:
        procs, self.procs = list(self.procs.values()), {}
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


def confirmed(log: Path, offset: int) -> bool:
    """Whether kr-csi-node logged, past `offset`, that the kubelet registered the driver."""
    if not log.exists():
        return False
    with log.open("rb") as f:
        f.seek(offset)
        return b"kubelet registered" in f.read()


async def mounting_pods(client: Client) -> int:
    """How many pods of the cluster have a volume of the driver."""
    pods = (await client.list(resources.PODS)).items
    return sum(
        any((v.get("csi") or {}).get("driver") == DRIVER for v in p["spec"].get("volumes") or [])
        for p in pods
    )


def _in_thread(work: Callable[[], Any]) -> None:
    """Run coroutine function `work` on a thread of its own (a caller may be in a loop)."""
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, work()).result()


@contextlib.contextmanager
def running(
    state_dir: Path, kubeconfig: Path, *, report: Callable[[str], None] = _stderr
) -> Iterator[CSIDriverOnNode]:
    """The driver on the real node of the cluster in `state_dir` until the block ends: built on
    first use, its CRDs and CSIDriver installed, the driver and kr-csi-node running."""
    built = CSIBuilder(report=report).ensure()

    async def setup() -> None:
        async with Client(config.load_kubeconfig([kubeconfig])) as client:
            await install(client, built.manifests)

    _in_thread(setup)
    driver = CSIDriverOnNode(built, state_dir, kubeconfig, report=report)
    driver.start()
    try:
        yield driver
        driver.drain()
    finally:
        driver.stop()
