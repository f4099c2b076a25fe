"""The real node's pure parts: the relay forwards bytes both ways, the host's routes that
overlap the node's ranges are found, apt's mirror is read from a deb822 sources file, and the
node's configuration names what this machine needs (cgroup v1, no OOM score below
containerd's, pod network namespaces under the node's own directory)."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kube_reloader.devcluster import node, nodeclean, ownimage, relay
from kube_reloader.devcluster.nodebuild import NodeBinaries
from kube_reloader.devcluster.pki import generate


async def test_the_relay_forwards_a_connection_byte_for_byte_both_ways() -> None:
    async def echo(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        w.write(b"echo:" + await r.read(100))
        await w.drain()
        w.close()

    target = await asyncio.start_server(echo, "127.0.0.1", 0)
    port = target.sockets[0].getsockname()[1]
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    front = listener.getsockname()[1]
    serving = asyncio.create_task(relay._serve(listener, port))
    try:
        r, w = await asyncio.open_connection("127.0.0.1", front)
        w.write(b"\x16\x03\x01 tls bytes")
        await w.drain()
        assert await asyncio.wait_for(r.read(100), 5) == b"echo:\x16\x03\x01 tls bytes"
        w.close()
    finally:
        serving.cancel()
        target.close()


def test_host_routes_overlapping_the_nodes_ranges_are_found(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    routes = [
        {"dst": "default", "gateway": "192.0.2.1"},
        {"type": "blackhole", "dst": "10.88.0.0/16"},  # another real node's: ours
        {"dst": "10.0.0.0/16", "dev": "eth1"},  # a LAN that holds the Service range
        {"dst": "192.0.2.0/24", "dev": "eth0"},
        {"dst": "fd00::/8", "dev": "eth0"},
    ]

    def fake_run(*args: Any, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(args, 0, json.dumps(routes), "")

    monkeypatch.setattr(nodeclean.subprocess, "run", fake_run)
    assert nodeclean.routes_overlapping(("10.88.0.0/16", "10.0.0.0/24")) == ["10.0.0.0/16"]


def test_the_apt_mirror_is_read_from_the_main_archives_stanza(tmp_path: Path) -> None:
    sources = tmp_path / "debian.sources"
    sources.write_text(
        "Types: deb\nURIs: http://mirror.invalid/debian\nSuites: bookworm bookworm-updates\n"
        "Components: main\n\nTypes: deb\nURIs: http://mirror.invalid/debian-security\n"
        "Suites: bookworm-security\nComponents: main\n"
    )
    assert ownimage.apt_mirror(sources) == "http://mirror.invalid/debian"


def test_the_nodes_configuration_says_what_this_machine_needs(tmp_path: Path) -> None:
    pki = generate(tmp_path / "pki")
    n = node.RealNode(tmp_path / "cluster", NodeBinaries(tmp_path / "cache"))
    kubelet = n.kubelet_config(pki)
    assert kubelet["failCgroupV1"] is False
    assert kubelet["cgroupRoot"] == n.cgroup_root
    assert kubelet["registerWithTaints"] == [{"key": node.TAINT, "effect": "NoSchedule"}]
    assert kubelet["podLogsDir"] == str(n.pod_logs)
    toml = n.containerd_toml()
    assert "restrict_oom_score_adj = true" in toml
    assert "netns_mounts_under_state_dir = true" in toml
    assert f"sandbox = '{node.PAUSE_IMAGE}'" in toml
    assert f"--node-ip={node.NODE_IP}" in n.kubelet_argv()
    assert len(str(n.containerd_socket)) < 108  # a unix socket path's limit
    plugins = node.cni_conflist()["plugins"]
    assert isinstance(plugins, list)
    assert plugins[0]["bridge"] == node.BRIDGE
    assert plugins[0]["ipMasq"] is False  # nothing is ever routed out of the namespace
