"""Start, inspect and stop a local control plane whose processes are recorded by PID.

`up` is idempotent (a healthy cluster is reused, a stale one from a killed run is cleaned
first), waits until the cluster is really usable (apiserver `/readyz`, the `default`
ServiceAccount created by kube-controller-manager, every kwok node Ready and untainted) and
on any failure stops what it started and names the component and its log file. `down`
stops only processes whose command line still matches what was recorded, so a recycled PID
is never killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kube_reloader.devcluster import pki as pkimod
from kube_reloader.devcluster.building import Binaries, Builder
from kube_reloader.devcluster.versions import Versions
from kube_reloader.kube import config as kubeconfig
from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client

COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
SERVICE_CIDR = "10.0.0.0/24"
POD_CIDR = "10.244.0.0/16"
CONTEXT = "kube-reloader-dev"
CERT_CONTEXT = "kube-reloader-dev-cert"

Reporter = Callable[[str], None]


class ClusterError(RuntimeError):
    """One line naming the component at fault and its log file."""


@dataclass
class Proc:
    name: str
    pid: int
    argv: list[str]
    log: str

    @property
    def argv0(self) -> str:
        return self.argv[0]


@dataclass
class State:
    """What `up` wrote and `status`/`down` read: `<state_dir>/state.json`."""

    versions: dict[str, str]
    ports: dict[str, int]
    kubeconfig: str
    nodes: int
    procs: list[Proc] = field(default_factory=list)
    minimal: bool = False
    audit: bool = False
    started_at: float = 0.0
    ready_seconds: float = 0.0

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> State:
        raw = json.loads(text)
        procs = [Proc(**p) for p in raw.pop("procs", [])]
        return cls(procs=procs, **raw)


def default_state_dir(name: str = "default", env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "kube-reloader" / "dev-clusters" / name


@dataclass(frozen=True)
class ComponentStatus:
    name: str
    pid: int | None
    running: bool
    healthy: bool
    detail: str


class DevCluster:
    """One local cluster living in `state_dir`."""

    def __init__(
        self,
        state_dir: Path,
        *,
        versions: Versions | None = None,
        report: Reporter | None = None,
        builder: Builder | None = None,
    ) -> None:
        self.state_dir = state_dir
        self.versions = versions or Versions()
        self.report = report or (lambda line: None)
        self.builder = builder or Builder(self.versions, report=self.report)
        self.pki = pkimod.Pki(state_dir / "pki")
        self.logs = state_dir / "logs"
        self.state_file = state_dir / "state.json"

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    # ------------------------------------------------------------------ state

    def load_state(self) -> State | None:
        try:
            return State.from_json(self.state_file.read_text())
        except FileNotFoundError:
            return None
        except (ValueError, TypeError, KeyError) as exc:
            raise ClusterError(
                f"dev-cluster: state file {self.state_file} is unreadable ({exc}); "
                f"remove {self.state_dir} after stopping its processes"
            ) from exc

    def _save(self, state: State) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(state.to_json())
        tmp.replace(self.state_file)

    # ------------------------------------------------------------------ up

    def up(
        self,
        *,
        nodes: int = 1,
        build: bool = True,
        timeout: float = 120.0,
        minimal: bool = False,
        ports: Mapping[str, int] | None = None,
        audit: bool = False,
    ) -> State:
        """Start the cluster (or reuse a healthy one) and return its state once ready.

        `minimal` starts only etcd and kube-apiserver (no controllers, no nodes): enough
        for API-level work, and quick to restart. `ports` pins some ports (tests use it).
        `audit` writes every request's metadata (user agent included) to `<state>/audit.log`,
        which is how the benchmark counts each controller's API calls.
        """
        state = self.load_state()
        if state is not None:
            statuses = self.status(state)
            if statuses and all(s.running and s.healthy for s in statuses):
                self.report(f"[dev-cluster] already running; kubeconfig: {state.kubeconfig}")
                return state
            bad = ", ".join(s.name for s in statuses if not (s.running and s.healthy))
            self.report(
                f"[dev-cluster] stale state in {self.state_dir} ({bad} not healthy): cleaning up"
            )
            self.down()
        elif self.state_dir.exists() and any(self.state_dir.iterdir()):
            self.report(f"[dev-cluster] removing leftover directory {self.state_dir}")
            self._remove_dir()

        if build:
            binaries = self.builder.ensure()
        else:
            binaries = self.builder.binaries
            missing = self.builder.missing()
            if missing:
                raise ClusterError(
                    f"dev-cluster: {', '.join(missing)} not built yet in {binaries.bin} "
                    "(run `kube-reloader dev-cluster build`)"
                )

        started = time.monotonic()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)
        pkimod.generate(self.pki.root)
        chosen = {
            name: _free_port()
            for name in ("etcd", "etcd-peer", "kube-apiserver", "kube-controller-manager",
                         "kube-scheduler", "kwok")
        }  # fmt: skip
        chosen.update(ports or {})
        state = State(
            versions={
                "kubernetes": self.versions.kubernetes,
                "etcd": self.versions.etcd,
                "kwok": self.versions.kwok,
            },
            ports=chosen,
            kubeconfig=str(self.kubeconfig),
            nodes=0 if minimal else nodes,
            minimal=minimal,
            audit=audit,
            started_at=time.time(),
        )
        self._save(state)
        try:
            self._start_all(state, binaries, started, timeout)
        except BaseException:
            with contextlib.suppress(Exception):
                self._stop_procs(state)
            raise
        state.ready_seconds = round(time.monotonic() - started, 2)
        self._save(state)
        self.report(
            f"[dev-cluster] ready in {state.ready_seconds:.1f}s; "
            f"export KUBECONFIG={state.kubeconfig}"
        )
        return state

    def _start_all(self, state: State, bins: Binaries, started: float, timeout: float) -> None:
        deadline = started + timeout
        p = state.ports
        data = self.state_dir / "etcd-data"
        self._spawn(
            state,
            "etcd",
            [
                str(bins.path("etcd")),
                "--name=dev",
                f"--data-dir={data}",
                f"--listen-client-urls=http://127.0.0.1:{p['etcd']}",
                f"--advertise-client-urls=http://127.0.0.1:{p['etcd']}",
                f"--listen-peer-urls=http://127.0.0.1:{p['etcd-peer']}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{p['etcd-peer']}",
                f"--initial-cluster=dev=http://127.0.0.1:{p['etcd-peer']}",
                "--listen-metrics-urls=",
                "--unsafe-no-fsync=true",
                "--quota-backend-bytes=8589934592",
                "--log-level=warn",
            ],
        )
        self._wait(
            state, "etcd", deadline, lambda: _http_ok(f"http://127.0.0.1:{p['etcd']}/readyz")
        )

        k = self.pki
        self._spawn(
            state,
            "kube-apiserver",
            [
                str(bins.path("kube-apiserver")),
                f"--etcd-servers=http://127.0.0.1:{p['etcd']}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={p['kube-apiserver']}",
                f"--tls-cert-file={k.serving_crt}",
                f"--tls-private-key-file={k.serving_key}",
                f"--client-ca-file={k.ca_crt}",
                f"--token-auth-file={k.tokens_csv}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={k.sa_pub}",
                f"--service-account-signing-key-file={k.sa_key}",
                "--authorization-mode=RBAC",
                "--disable-admission-plugins=ServiceAccount",
                "--endpoint-reconciler-type=none",
                "--allow-privileged=true",
                "--profiling=false",
                "--max-requests-inflight=1000",
                "--max-mutating-requests-inflight=500",
                f"--cert-dir={self.state_dir / 'apiserver-certs'}",
                *self._audit_flags(state),
            ],
        )
        ca_ctx = ssl.create_default_context(cafile=str(k.ca_crt))
        api = f"https://127.0.0.1:{p['kube-apiserver']}"
        self._wait(state, "kube-apiserver", deadline, lambda: _http_ok(f"{api}/readyz", ca_ctx))
        self._write_kubeconfig(api)
        if state.minimal:
            return

        kcfg = str(self.kubeconfig)
        delegated = [
            f"--kubeconfig={kcfg}",
            f"--authentication-kubeconfig={kcfg}",
            f"--authorization-kubeconfig={kcfg}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
            f"--cert-dir={self.state_dir / 'serving-certs'}",
        ]
        self._spawn(
            state,
            "kube-controller-manager",
            [
                str(bins.path("kube-controller-manager")),
                *delegated,
                f"--secure-port={p['kube-controller-manager']}",
                "--controllers=*",
                "--use-service-account-credentials=false",
                f"--service-account-private-key-file={k.sa_key}",
                f"--root-ca-file={k.ca_crt}",
                f"--cluster-cidr={POD_CIDR}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--kube-api-qps=500",
                "--kube-api-burst=1000",
                "--concurrent-deployment-syncs=10",
                "--concurrent-replicaset-syncs=10",
            ],
        )
        self._spawn(
            state,
            "kube-scheduler",
            [
                str(bins.path("kube-scheduler")),
                *delegated,
                f"--secure-port={p['kube-scheduler']}",
            ],
        )
        stages = self.state_dir / "kwok-stages.yaml"
        stages.write_text("\n---\n".join(f.read_text().strip() for f in bins.stage_files()) + "\n")
        self._spawn(
            state,
            "kwok",
            [
                str(bins.path("kwok")),
                f"--kubeconfig={kcfg}",
                "--manage-all-nodes=true",
                f"--config={stages}",
                "--node-lease-duration-seconds=40",
                f"--cidr={POD_CIDR}",
                f"--server-address=127.0.0.1:{p['kwok']}",
            ],
        )
        probes = self._probes(state)
        for name in ("kube-controller-manager", "kube-scheduler", "kwok"):
            self._wait(state, name, deadline, probes[name])
        asyncio.run(self._api_ready(state, deadline))

    async def _api_ready(self, state: State, deadline: float) -> None:
        """Create the kwok nodes; wait for the default SA and every node Ready, untainted."""
        cfg = kubeconfig.load_kubeconfig([self.kubeconfig])
        async with Client(cfg, user_agent="kube-reloader-dev-cluster") as client:
            for i in range(state.nodes):
                with contextlib.suppress(errors.AlreadyExists):
                    await client.create(resources.NODES, kwok_node(f"kwok-node-{i}"))
            while True:
                self._check_alive(state)
                sa_ok = True
                try:
                    await client.get(resources.SERVICEACCOUNTS, "default", namespace="default")
                except errors.NotFound:
                    sa_ok = False
                nodes = (await client.list(resources.NODES)).items
                ready = [n for n in nodes if node_ready(n)]
                if sa_ok and len(ready) >= state.nodes:
                    return
                if time.monotonic() > deadline:
                    what = (
                        "the default ServiceAccount was not created"
                        if not sa_ok
                        else f"{len(ready)}/{state.nodes} nodes Ready and untainted"
                    )
                    raise ClusterError(
                        f"dev-cluster: not ready in time: {what} "
                        f"(logs: {self.logs}/kube-controller-manager.log, {self.logs}/kwok.log)"
                    )
                await asyncio.sleep(0.25)

    def _spawn(self, state: State, name: str, argv: Sequence[str]) -> None:
        log_path = self.logs / f"{name}.log"
        with log_path.open("ab") as log:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=self.state_dir,
            )
        record = Proc(name=name, pid=proc.pid, argv=list(argv), log=str(log_path))
        names = [p.name for p in state.procs]
        if name in names:
            state.procs[names.index(name)] = record  # keep start order for `down`
        else:
            state.procs.append(record)
        self._save(state)
        self.report(f"[dev-cluster] started {name} (pid {proc.pid})")

    def _check_alive(self, state: State, only: str | None = None) -> None:
        for proc in state.procs:
            if only is not None and proc.name != only:
                continue
            if not _alive(proc.pid):
                hint = _last_error_line(Path(proc.log))
                raise ClusterError(
                    f"dev-cluster: {proc.name} exited during startup"
                    f"{': ' + hint if hint else ''} (log: {proc.log})"
                )

    def _wait(
        self,
        state: State,
        name: str,
        deadline: float,
        probe: Callable[[], bool],
        *,
        only: bool = False,
    ) -> None:
        t0 = time.monotonic()
        while True:
            self._check_alive(state, name if only else None)
            if probe():
                self.report(f"[dev-cluster] {name} healthy after {time.monotonic() - t0:.1f}s")
                return
            if time.monotonic() > deadline:
                log = next(p.log for p in state.procs if p.name == name)
                raise ClusterError(
                    f"dev-cluster: {name} did not become healthy in time (log: {log})"
                )
            time.sleep(0.1)

    def _audit_flags(self, state: State) -> list[str]:
        if not state.audit:
            return []
        policy = self.state_dir / "audit-policy.yaml"
        policy.write_text(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\n"
            "rules:\n  - level: Metadata\n"
        )
        return [
            f"--audit-policy-file={policy}",
            f"--audit-log-path={self.state_dir / 'audit.log'}",
            "--audit-log-format=json",
            "--audit-log-mode=blocking",
            # 0 means "the library default" (100 MB), and a rotation mid-scenario would make
            # the benchmark's byte-offset accounting read nothing: never rotate.
            "--audit-log-maxsize=1048576",
        ]

    def _write_kubeconfig(self, server: str) -> None:
        k = self.pki
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": CONTEXT,
                    "cluster": {"server": server, "certificate-authority": str(k.ca_crt)},
                }
            ],
            "users": [
                {"name": "admin-token", "user": {"token": k.token()}},
                {
                    "name": "admin-cert",
                    "user": {
                        "client-certificate": str(k.admin_crt),
                        "client-key": str(k.admin_key),
                    },
                },
            ],
            "contexts": [
                {"name": CONTEXT, "context": {"cluster": CONTEXT, "user": "admin-token"}},
                {"name": CERT_CONTEXT, "context": {"cluster": CONTEXT, "user": "admin-cert"}},
            ],
            "current-context": CONTEXT,
        }
        fd = os.open(self.kubeconfig, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            yaml.safe_dump(doc, fh, sort_keys=False)

    # ------------------------------------------------------------------ status / down

    def _probes(self, state: State) -> dict[str, Callable[[], bool]]:
        p = state.ports
        ca = self.pki.ca_crt
        ca_ctx = ssl.create_default_context(cafile=str(ca)) if ca.exists() else _insecure()
        return {
            "etcd": lambda: _http_ok(f"http://127.0.0.1:{p['etcd']}/readyz"),
            "kube-apiserver": lambda: _http_ok(
                f"https://127.0.0.1:{p['kube-apiserver']}/readyz", ca_ctx
            ),
            "kube-controller-manager": lambda: _http_ok(
                f"https://127.0.0.1:{p['kube-controller-manager']}/healthz", _insecure()
            ),
            "kube-scheduler": lambda: _http_ok(
                f"https://127.0.0.1:{p['kube-scheduler']}/healthz", _insecure()
            ),
            "kwok": lambda: _http_ok(f"http://127.0.0.1:{p['kwok']}/healthz"),
        }

    def status(self, state: State | None = None) -> list[ComponentStatus]:
        state = state or self.load_state()
        if state is None:
            return []
        probes = self._probes(state)
        out = []
        by_name = {proc.name: proc for proc in state.procs}
        for name in COMPONENTS[:2] if state.minimal else COMPONENTS:
            proc = by_name.get(name)
            if proc is None:
                out.append(ComponentStatus(name, None, False, False, "not started"))
                continue
            running = _alive(proc.pid) and _same_process(proc)
            healthy = running and probes[name]()
            detail = "ok" if healthy else ("unhealthy" if running else "not running")
            out.append(
                ComponentStatus(name, proc.pid, running, healthy, f"{detail} (log: {proc.log})")
            )
        return out

    def restart(self, name: str, *, timeout: float = 60.0) -> None:
        """Stop one component (SIGTERM, then SIGKILL) and start it again with the same flags."""
        state = self._require_state()
        proc = next((p for p in state.procs if p.name == name), None)
        if proc is None:
            raise ClusterError(f"dev-cluster: {name} is not part of this cluster")
        self._stop_one(proc, grace=8.0)
        self._spawn(state, name, proc.argv)
        self._wait(state, name, time.monotonic() + timeout, self._probes(state)[name], only=True)

    def stop_component(self, name: str) -> None:
        """Stop one component, keeping its record so `start_component` can bring it back."""
        state = self._require_state()
        proc = next((p for p in state.procs if p.name == name), None)
        if proc is None:
            raise ClusterError(f"dev-cluster: {name} is not part of this cluster")
        self._stop_one(proc, grace=8.0)

    def start_component(self, name: str, *, timeout: float = 60.0) -> None:
        state = self._require_state()
        proc = next((p for p in state.procs if p.name == name), None)
        if proc is None:
            raise ClusterError(f"dev-cluster: {name} is not part of this cluster")
        if _alive(proc.pid) and _same_process(proc):
            return
        self._spawn(state, name, proc.argv)
        self._wait(state, name, time.monotonic() + timeout, self._probes(state)[name], only=True)

    def compact_etcd(self) -> int:
        """Compact etcd's history up to its current revision; returns that revision.

        After this, a watch from any older resourceVersion that the API server's watch
        cache does not hold fails with 410 Gone.
        """
        state = self._require_state()
        base = f"http://127.0.0.1:{state.ports['etcd']}/v3/kv"
        header = _post_json(f"{base}/range", {"key": "AA==", "limit": 1})["header"]
        revision = int(header["revision"])
        _post_json(f"{base}/compaction", {"revision": str(revision), "physical": True})
        return revision

    def _require_state(self) -> State:
        state = self.load_state()
        if state is None:
            raise ClusterError(f"dev-cluster: not running ({self.state_dir})")
        return state

    def down(self) -> list[str]:
        """Stop every recorded process and remove the state directory. Returns what stopped."""
        stopped: list[str] = []
        state = None
        with contextlib.suppress(ClusterError):
            state = self.load_state()
        if state is not None:
            stopped = self._stop_procs(state)
        self._remove_dir()
        return stopped

    def _stop_procs(self, state: State, grace: float = 8.0) -> list[str]:
        """Stop in reverse start order, one at a time: the apiserver shuts down quickly only
        while etcd is still there."""
        return [p.name for p in reversed(state.procs) if self._stop_one(p, grace)]

    def _stop_one(self, proc: Proc, grace: float) -> bool:
        """SIGTERM the process group, SIGKILL it after `grace` seconds. False if not running."""
        if not (_alive(proc.pid) and _same_process(proc)):
            return False
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while _alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        if _alive(proc.pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            while _alive(proc.pid):
                time.sleep(0.02)
        return True

    def _remove_dir(self) -> None:
        shutil.rmtree(self.state_dir, ignore_errors=True)


def kwok_node(name: str) -> dict[str, Any]:
    capacity = {"cpu": "32", "memory": "256Gi", "pods": "250"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
            },
        },
        "status": {"allocatable": capacity, "capacity": capacity},
    }


def node_ready(node: Mapping[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    taints = (node.get("spec") or {}).get("taints") or []
    blocked = any(t.get("effect") in ("NoSchedule", "NoExecute") for t in taints)
    return ready and not blocked


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _insecure() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _http_ok(url: str, ctx: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2, context=ctx) as resp:  # noqa: S310
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _post_json(url: str, body: Mapping[str, Any]) -> Any:
    req = urllib.request.Request(  # noqa: S310 - a loopback etcd URL we built
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:  # noqa: S310
            return json.loads(resp.read())
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ClusterError(f"dev-cluster: etcd request {url} failed: {exc}") from exc


def _alive(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)  # reap our own children
        if done == pid:
            return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def _same_process(proc: Proc) -> bool:
    """Guard against PID reuse: the recorded binary must still be what runs there."""
    try:
        with open(f"/proc/{proc.pid}/cmdline", "rb") as fh:
            argv0 = fh.read().split(b"\0", 1)[0].decode(errors="replace")
    except OSError:
        return False
    return argv0 == proc.argv0


def _last_error_line(log: Path) -> str:
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    for line in reversed(lines[-40:]):
        low = line.lower()
        if any(w in low for w in ("error", "fatal", "failed", "panic", "address already in use")):
            return line.strip()[:240]
    return lines[-1].strip()[:240] if lines else ""
