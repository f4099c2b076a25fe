"""Start, inspect and stop a local control plane whose processes are recorded by PID.

`DevCluster` owns the lifecycle: `up` is idempotent (a healthy cluster is reused, a stale
one from a killed run is cleaned first), waits until the cluster is really usable (apiserver
`/readyz`, the `default` ServiceAccount created by kube-controller-manager, every kwok node
Ready and untainted) and on any failure stops what it started and names the component and
its log file. `down` stops only processes whose command line still matches what was
recorded, so a recycled PID is never killed. The components' command lines and config
files live in `components`, the state types in `state` (a new cluster's, its ports chosen, in
`newstate`), each process's start, record and wait for health in `launcher`, the
process/HTTP helpers and health probes in `processes`, the API-level readiness wait in
`readiness`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import ssl
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from kube_reloader.devcluster import components, realnode
from kube_reloader.devcluster import pki as pkimod
from kube_reloader.devcluster.building import Binaries, Builder
from kube_reloader.devcluster.components import COMPONENTS
from kube_reloader.devcluster.launcher import Launcher
from kube_reloader.devcluster.newstate import new_state
from kube_reloader.devcluster.processes import (
    alive,
    health_probes,
    http_ok,
    post_json,
    same_process,
    stop_process,
)
from kube_reloader.devcluster.readiness import wait_api_ready
from kube_reloader.devcluster.stages import kwok_stages
from kube_reloader.devcluster.state import (
    ClusterError,
    ComponentStatus,
    Proc,
    State,
    default_state_dir,
)
from kube_reloader.devcluster.versions import Versions

__all__ = ["ClusterError", "DevCluster", "default_state_dir"]

Reporter = Callable[[str], None]


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
        real_node: bool = False,
    ) -> State:
        """Start the cluster (or reuse a healthy one) and return its state once ready.

        `minimal` starts only etcd and kube-apiserver (no controllers, no nodes): enough
        for API-level work, and quick to restart. `ports` pins some ports (tests use it).
        `audit` writes every request's metadata (user agent included) to `<state>/audit.log`,
        which is how the benchmark counts each controller's API calls. `real_node` adds a
        kubelet with containerd on this machine (`devcluster/node.py`; root only).
        """
        running = self._reuse_or_clean(real_node=real_node)
        if running is not None:
            return running
        binaries = self._binaries(build=build)
        started = time.monotonic()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)
        pkimod.generate(self.pki.root)
        state = new_state(
            self.versions,
            self.kubeconfig,
            nodes=nodes,
            minimal=minimal,
            ports=ports,
            audit=audit,
            real_node=real_node,
        )
        self._save(state)
        try:
            self._start_all(state, binaries, started, timeout)
        except BaseException:
            with contextlib.suppress(Exception):
                self._stop_procs(state)
            if state.real_node:
                realnode.stop(self.state_dir)
            raise
        state.ready_seconds = round(time.monotonic() - started, 2)
        self._save(state)
        self.report(
            f"[dev-cluster] ready in {state.ready_seconds:.1f}s; "
            f"export KUBECONFIG={state.kubeconfig}"
        )
        return state

    def _reuse_or_clean(self, *, real_node: bool) -> State | None:
        """The state of a healthy cluster from an earlier `up`, to reuse; else None, once a
        stale cluster (its processes and directory) or a leftover directory is removed."""
        state = self.load_state()
        if state is not None:
            statuses = self.status(state)
            if statuses and all(s.running and s.healthy for s in statuses):
                if real_node and not state.real_node:
                    raise ClusterError("dev-cluster: running without a real node; `down` it first")
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
        return None

    def _binaries(self, *, build: bool) -> Binaries:
        """The control plane's programs: built first if `build`, else they must be built."""
        if build:
            return self.builder.ensure()
        binaries = self.builder.binaries
        missing = self.builder.missing()
        if missing:
            raise ClusterError(
                f"dev-cluster: {', '.join(missing)} not built yet in {binaries.bin} "
                "(run `kube-reloader dev-cluster build`)"
            )
        return binaries

    def _launcher(self, state: State) -> Launcher:
        return Launcher(
            state, cwd=self.state_dir, logs=self.logs, save=self._save, report=self.report
        )

    def _start_all(self, state: State, bins: Binaries, started: float, timeout: float) -> None:
        deadline = started + timeout
        launcher = self._launcher(state)
        p = state.ports
        data = self.state_dir / "etcd-data"
        launcher.spawn("etcd", components.etcd_argv(bins, p, data))
        launcher.wait("etcd", deadline, lambda: http_ok(f"http://127.0.0.1:{p['etcd']}/readyz"))

        k = self.pki
        argv = components.apiserver_argv(
            bins, p, k, self.state_dir, self._audit_flags(state), service_accounts=state.real_node
        )
        launcher.spawn("kube-apiserver", argv)
        ca_ctx = ssl.create_default_context(cafile=str(k.ca_crt))
        api = f"https://127.0.0.1:{p['kube-apiserver']}"
        launcher.wait("kube-apiserver", deadline, lambda: http_ok(f"{api}/readyz", ca_ctx))
        self._write_kubeconfig(api)
        if state.minimal:
            return

        delegated = components.delegated_flags(self.kubeconfig, self.state_dir)
        argv = components.controller_manager_argv(bins, p, k, delegated)
        launcher.spawn("kube-controller-manager", argv)
        launcher.spawn("kube-scheduler", components.scheduler_argv(bins, p, delegated))
        stages = self.state_dir / "kwok-stages.yaml"
        stages.write_text(kwok_stages([f.read_text() for f in bins.stage_files()]))
        launcher.spawn("kwok", components.kwok_argv(bins, p, self.kubeconfig, stages))
        probes = self._probes(state)
        for name in ("kube-controller-manager", "kube-scheduler", "kwok"):
            launcher.wait(name, deadline, probes[name])
        asyncio.run(
            wait_api_ready(self.kubeconfig, state.nodes, deadline, launcher.check_alive, self.logs)
        )
        if state.real_node:
            realnode.start(
                self.state_dir,
                k,
                self.kubeconfig,
                p["kube-apiserver"],
                spawn=launcher.spawn,
                check_alive=launcher.check_alive,
                deadline=deadline,
                report=self.report,
            )

    def _audit_flags(self, state: State) -> list[str]:
        if not state.audit:
            return []
        policy = self.state_dir / "audit-policy.yaml"
        policy.write_text(components.AUDIT_POLICY)
        return components.audit_flags(policy, self.state_dir / "audit.log")

    def _write_kubeconfig(self, server: str) -> None:
        # JSON, which is YAML too: client-go, kubectl and Helm read it as any kubeconfig, and
        # a kube-reloader started with it loads no YAML parser (kube.kubeconfig._document)
        doc = components.kubeconfig_doc(server, self.pki)
        fd = os.open(self.kubeconfig, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(doc, fh, indent=2)

    # ------------------------------------------------------------------ status / down

    def _probes(self, state: State) -> dict[str, Callable[[], bool]]:
        return health_probes(state.ports, self.pki.ca_crt)

    def status(self, state: State | None = None) -> list[ComponentStatus]:
        state = state or self.load_state()
        if state is None:
            return []
        probes = self._probes(state)
        out = []
        by_name = {proc.name: proc for proc in state.procs}
        names = COMPONENTS[:2] if state.minimal else COMPONENTS
        for name in names + (realnode.NODE_COMPONENTS if state.real_node else ()):
            proc = by_name.get(name)
            if proc is None:
                out.append(ComponentStatus(name, None, False, False, "not started"))
                continue
            running = alive(proc.pid) and same_process(proc)
            healthy = running and (name not in probes or probes[name]())
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
        stop_process(proc, grace=8.0)
        self._launch_again(state, proc, timeout)

    def stop_component(self, name: str) -> None:
        """Stop one component, keeping its record so `start_component` can bring it back."""
        state = self._require_state()
        proc = next((p for p in state.procs if p.name == name), None)
        if proc is None:
            raise ClusterError(f"dev-cluster: {name} is not part of this cluster")
        stop_process(proc, grace=8.0)

    def start_component(self, name: str, *, timeout: float = 60.0) -> None:
        state = self._require_state()
        proc = next((p for p in state.procs if p.name == name), None)
        if proc is None:
            raise ClusterError(f"dev-cluster: {name} is not part of this cluster")
        if alive(proc.pid) and same_process(proc):
            return
        self._launch_again(state, proc, timeout)

    def _launch_again(self, state: State, proc: Proc, timeout: float) -> None:
        """`proc` started again with the same command line, waited for alone."""
        launcher = self._launcher(state)
        launcher.spawn(proc.name, proc.argv)
        deadline = time.monotonic() + timeout
        launcher.wait(proc.name, deadline, self._probes(state)[proc.name], only=True)

    def compact_etcd(self) -> int:
        """Compact etcd's history up to its current revision; returns that revision.

        After this, a watch from any older resourceVersion that the API server's watch
        cache does not hold fails with 410 Gone.
        """
        state = self._require_state()
        base = f"http://127.0.0.1:{state.ports['etcd']}/v3/kv"
        header = post_json(f"{base}/range", {"key": "AA==", "limit": 1})["header"]
        revision = int(header["revision"])
        post_json(f"{base}/compaction", {"revision": str(revision), "physical": True})
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
            if state.real_node:
                realnode.stop(self.state_dir)
        self._remove_dir()
        return stopped

    def _stop_procs(self, state: State, grace: float = 8.0) -> list[str]:
        """Stop in reverse start order, one at a time: the apiserver shuts down quickly only
        while etcd is still there."""
        return [p.name for p in reversed(state.procs) if stop_process(p, grace)]

    def _remove_dir(self) -> None:
        shutil.rmtree(self.state_dir, ignore_errors=True)


@contextlib.contextmanager
def temporary(
    prefix: str, *, report: Reporter | None = None, **up: Any
) -> Iterator[tuple[DevCluster, State]]:
    """A cluster in a new temporary state directory (`prefix`), up (with `up`'s arguments)
    for the block, and down and removed after it, or when it fails to come up."""
    cluster = DevCluster(Path(tempfile.mkdtemp(prefix=prefix)), report=report)
    try:
        yield cluster, cluster.up(**up)
    finally:
        cluster.down()
