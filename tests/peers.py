"""Run a Stakater Reloader peer (`reloader-v1`, `reloader-v2`: `devcluster.peers`) against
the dev cluster, for tests that compare kube-reloader with the systems it replaces.

`start_peer` builds the peer on first use (minutes; later calls only check the stamp), or
skips the test when the peer's source tree is missing. The process gets the cluster's
kubeconfig, `POD_NAME`/`POD_NAMESPACE` (both peers read them for HA: the Lease's holder
identity and namespace), `--namespaces=<namespace>`, its own log file, and its name as
`argv[0]`, which client-go makes the product of its user agent (`PeerProcess.user_agent`).
Every server it runs listens on a free 127.0.0.1 port: v2's through `--metrics-addr`/
`--health-addr`, v1's one server (`/metrics`, `/live`) through the variable its build reads
(`peers.LISTEN_ENV`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

from kube_reloader.devcluster.building import Builder
from kube_reloader.devcluster.peers import LISTEN_ENV, PEERS, source_tree
from kube_reloader.devcluster.ports import free_port
from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client
from tests.waiting import eventually

#: the Lease each peer takes with --enable-ha (v2: `--leader-election-id`'s default)
LEASES = {"reloader-v1": "stakater-reloader-lock", "reloader-v2": "reloader-leader-election"}
#: variables that would change a peer's scope or make it write its meta-info ConfigMap
SCRUBBED = ("KUBERNETES_NAMESPACE", "RELOADER_NAMESPACE", "POD_NAME", "POD_NAMESPACE")


def binary(component: str) -> Path:
    """The built peer, built now if needed; skips the test when its source tree is missing."""
    tree = source_tree(component)
    if not (tree / "go.mod").is_file():
        pytest.skip(f"{component}: no peer source tree at {tree} (set KUBE_RELOADER_PEERS)")
    builder = Builder(extra=(component,), report=lambda line: print(line, flush=True))
    return builder.ensure().path(component)


class ChildProcess:
    """A process a test started (`self.proc`): `stop()` (SIGTERM, then SIGKILL) or `kill()`."""

    proc: subprocess.Popen[bytes]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM, wait up to `timeout` seconds, then SIGKILL; the exit code."""
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait(10)

    def kill(self) -> int:
        if self.alive():
            self.proc.kill()
        return self.proc.wait(10)


class PeerProcess(ChildProcess):
    """One running peer; `stop()` (SIGTERM, then SIGKILL) or `kill()` ends it."""

    def __init__(
        self,
        component: str,
        kubeconfig: Path,
        namespace: str,
        log_dir: Path,
        *,
        name: str | None = None,
        flags: Sequence[str] = (),
        ha: bool = True,
    ) -> None:
        if component not in PEERS:
            raise ValueError(f"unknown peer {component!r}; one of {sorted(PEERS)}")
        self.component = component
        self.name = name or component
        self.namespace = namespace
        #: the Lease (in `namespace`) this peer takes, or None without HA
        self.lease = LEASES[component] if ha else None
        self.log = log_dir / f"{self.name}.log"
        env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
        env.update(KUBECONFIG=str(kubeconfig), POD_NAME=self.name, POD_NAMESPACE=namespace)
        argv = [str(binary(component)), f"--namespaces={namespace}", "--log-format=json",
                "--pprof-addr=127.0.0.1:0"]  # fmt: skip
        if component == "reloader-v1":
            self.metrics_port = self.health_port = free_port()
            env[LISTEN_ENV] = f"127.0.0.1:{self.metrics_port}"
            self.health_path = "/live"
        else:
            self.metrics_port, self.health_port = free_port(), free_port()
            argv += [
                f"--metrics-addr=127.0.0.1:{self.metrics_port}",
                f"--health-addr=127.0.0.1:{self.health_port}",
            ]
            self.health_path = "/healthz"
        argv += ["--enable-ha"] if ha else []
        self.argv = [*argv, *flags]
        log_dir.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            # argv[0] is the peer's name: client-go builds the user agent from its base
            # name, so each peer's requests are told apart in an audit log
            self.proc = subprocess.Popen(
                [self.name, *self.argv[1:]], executable=self.argv[0], env=env, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def user_agent(self) -> str:
        """The prefix of the user agent of each of its requests: `<name>/v0.0.0 (linux/...)`,
        v2's leader election appending `/leader-election`."""
        return f"{self.name}/"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    @property
    def health_url(self) -> str:
        return f"http://127.0.0.1:{self.health_port}{self.health_path}"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def get(self, url: str) -> tuple[int, str]:
        """Status and body of a GET on one of the peer's loopback servers (0 if none)."""
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:  # noqa: S310 (loopback only)
                return int(resp.status), resp.read().decode(errors="replace")
        except urllib.error.HTTPError as exc:
            return int(exc.code), exc.read().decode(errors="replace")
        except (urllib.error.URLError, OSError):
            return 0, ""

    async def metrics(self) -> str:
        return (await asyncio.to_thread(self.get, self.metrics_url))[1]

    def holds(self, holder: str | None) -> bool:
        """Whether `holder` (a Lease's holderIdentity) is this peer. v1 uses POD_NAME; v2
        requires POD_NAME with --enable-ha but leaves controller-runtime's default identity,
        `<hostname>_<uuid>`, so the peer is recognised by its log's acquisition line."""
        if holder is None:
            return False
        if self.component == "reloader-v1":
            return holder == self.name
        acquired = f'"Successfully acquired lease" lock="{self.namespace}/{self.lease}"'
        return holder.startswith(socket.gethostname() + "_") and acquired in self.log_text()

    def configmaps_synced(self, metrics: str) -> bool:
        """Whether the peer's ConfigMap watch has listed (so a later change is seen): v1
        counts the initial list's add events (every namespace has `kube-root-ca.crt`), v2's
        controller-runtime logs `Starting workers` for its configmap controller."""
        if self.component == "reloader-v1":
            return any(
                line.startswith("reloader_events_received_total{")
                and 'event_type="add"' in line
                and "configmap" in line.lower()
                and float(line.rsplit(" ", 1)[1]) >= 1
                for line in metrics.splitlines()
            )
        return any(
            "Starting workers" in line and '"configmap"' in line.lower()
            for line in self.log_text().splitlines()
        )

    async def wait_ready(self, client: Client, timeout: float = 60.0) -> None:
        """Until the peer holds its Lease (with HA) and watches ConfigMaps; fails early, with
        its log's tail, if it exits."""

        async def ready() -> bool:
            if not self.alive():
                tail = "\n".join(self.log_text().splitlines()[-20:])
                raise AssertionError(f"{self.name} exited ({self.proc.returncode}):\n{tail}")
            if self.lease and not self.holds(
                await lease_holder(client, self.namespace, self.lease)
            ):
                return False
            return self.configmaps_synced(await self.metrics())

        await eventually(ready, timeout=timeout, interval=0.25, what=f"{self.name} ready")

    def __enter__(self) -> PeerProcess:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:  # fmt: skip
        self.stop()


async def lease_holder(client: Client, namespace: str, lease: str) -> str | None:
    try:
        obj: dict[str, Any] = await client.get(resources.LEASES, lease, namespace=namespace)
    except errors.NotFound:
        return None
    return (obj.get("spec") or {}).get("holderIdentity") or None


@contextlib.contextmanager
def start_peer(
    component: str, kubeconfig: Path, namespace: str, log_dir: Path, *,
    name: str | None = None, flags: Sequence[str] = (), ha: bool = True,
) -> Iterator[PeerProcess]:  # fmt: skip
    """`component` running against the cluster of `kubeconfig`, watching `namespace` (and
    taking its Lease there with `ha`), with `flags` appended; stopped when the block ends."""
    with PeerProcess(
        component, kubeconfig, namespace, log_dir, name=name, flags=flags, ha=ha
    ) as peer:
        yield peer
