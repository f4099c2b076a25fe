"""`kube-reloader dev-cluster` lifecycle: idempotent up, stale state, faults, clean down."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kube_reloader.devcluster.cluster import ClusterError, DevCluster

pytestmark = pytest.mark.cluster


def _our_processes(state_dir: Path) -> list[str]:
    """PIDs of any process whose command line mentions this cluster's state directory."""
    out = subprocess.run(["pgrep", "-f", str(state_dir)], capture_output=True, text=True)
    return [p for p in out.stdout.split() if p != str(os.getpid())]


def _cli(*args: str, state_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "kube_reloader",
            "dev-cluster",
            *args,
            "--state-dir",
            str(state_dir),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_up_status_kubeconfig_and_down_through_the_command_line(tmp_path: Path) -> None:
    state_dir = tmp_path / "cli"
    up = _cli("up", state_dir=state_dir)
    try:
        assert up.returncode == 0, up.stderr
        kubeconfig = up.stdout.strip()
        assert kubeconfig == str(state_dir / "kubeconfig")
        assert "ready in" in up.stderr

        printed = _cli("kubeconfig", state_dir=state_dir)
        assert printed.stdout.splitlines() == [kubeconfig]

        status = _cli("status", "--format", "json", state_dir=state_dir)
        assert status.returncode == 0, status.stdout
        components = {c["name"]: c for c in json.loads(status.stdout)}
        assert set(components) == {
            "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"
        }  # fmt: skip
        assert all(c["healthy"] for c in components.values())

        again = _cli("up", state_dir=state_dir)
        assert again.returncode == 0
        assert "already running" in again.stderr
        status2 = json.loads(_cli("status", "--format", "json", state_dir=state_dir).stdout)
        assert {c["name"]: c["pid"] for c in status2} == {
            n: c["pid"] for n, c in components.items()
        }
    finally:
        down = _cli("down", state_dir=state_dir)
    assert down.returncode == 0
    assert (
        "stopped kwok, kube-scheduler, kube-controller-manager, kube-apiserver, etcd" in down.stderr
    )
    assert not state_dir.exists()
    assert _our_processes(state_dir) == []
    gone = _cli("status", state_dir=state_dir)
    assert gone.returncode == 1
    assert "not running" in gone.stdout


def test_up_replaces_stale_state_left_by_a_killed_run(tmp_path: Path) -> None:
    state_dir = tmp_path / "stale"
    cluster = DevCluster(state_dir)
    cluster.up(minimal=True)
    state = cluster.load_state()
    assert state is not None
    for proc in state.procs:  # simulate `kill -9` of the whole cluster: state stays behind
        os.killpg(proc.pid, 9)
    try:
        fresh = DevCluster(state_dir).up(minimal=True)
        assert {p.pid for p in fresh.procs}.isdisjoint({p.pid for p in state.procs})
        assert all(s.healthy for s in DevCluster(state_dir).status())
    finally:
        DevCluster(state_dir).down()
    assert _our_processes(state_dir) == []


def test_a_port_already_taken_fails_with_the_component_and_its_log_and_leaves_nothing_running(
    tmp_path: Path,
) -> None:
    state_dir = tmp_path / "taken"
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        with pytest.raises(ClusterError) as info:
            DevCluster(state_dir).up(minimal=True, ports={"kube-apiserver": port})
    message = str(info.value)
    assert "\n" not in message
    assert "kube-apiserver exited during startup" in message
    assert f"(log: {state_dir}/logs/kube-apiserver.log)" in message
    assert "address already in use" in message
    assert _our_processes(state_dir) == []
    DevCluster(state_dir).down()


def test_restart_of_a_component_keeps_the_cluster_usable(tmp_path: Path) -> None:
    state_dir = tmp_path / "restart"
    cluster = DevCluster(state_dir)
    try:
        cluster.up(minimal=True)
        before = {p.name: p.pid for p in cluster.load_state().procs}  # type: ignore[union-attr]
        cluster.restart("kube-apiserver")
        after = {p.name: p.pid for p in cluster.load_state().procs}  # type: ignore[union-attr]
        assert after["etcd"] == before["etcd"]
        assert after["kube-apiserver"] != before["kube-apiserver"]
        assert all(s.healthy for s in cluster.status())
    finally:
        cluster.down()
    assert _our_processes(state_dir) == []
