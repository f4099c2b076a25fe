"""A real node beside the kwok ones: containerd, runc and a kubelet on this machine.

`dev-cluster up --real-node` starts it after the control plane. Everything of the node lives
in a network namespace of its own (`kr-<key>`), so none of its addresses exists on the host
and nothing it does can leave the machine:

* in that namespace, a bridge `kr0` holds the node's address, `NODE_IP`; pods get addresses
  of `POD_CIDR` on it from the CNI `bridge` plugin; the namespace has no other interface and
  no default route;
* the API server listens on the host's 127.0.0.1 only. `relay.py` listens on
  `NODE_IP:RELAY_PORT` (and the namespace's own loopback) and forwards to it; the kubelet
  talks to `https://127.0.0.1:RELAY_PORT`;
* in-cluster clients use the `kubernetes` Service's address (`KUBERNETES_SERVICE_HOST`,
  10.0.0.1:443, as the kubelet injects it). No kube-proxy runs: a DNAT rule inside the
  namespace sends that address to the relay, so in-cluster authentication works unchanged;
* on the host, blackhole routes for the node's ranges make sure a host process that dials a
  node or pod address (the API server asking a kubelet for logs, say) fails at once instead
  of sending anything toward the default route.

The kubelet registers the node `NODE_NAME` with the taint `TAINT` and the label
`type=real`: only pods that tolerate it land there, so the kwok-based tests never do.
Processes are started inside the namespace with `setns` before `exec` (not `ip netns exec`,
which remounts /sys and hides the cgroup hierarchy from runc).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from kube_reloader.devcluster import images, nodeclean
from kube_reloader.devcluster.nodeconfig import (
    BRIDGE,
    LABELS,
    NODE_IP,
    NODE_NAME,
    PAUSE_IMAGE,
    POD_CIDR,
    RELAY_PORT,
    TAINT,
    NodeConfig,
    cni_conflist,
)
from kube_reloader.devcluster.state import ClusterError

#: what realnode and the node tests read here (the constants and `cni_conflist` are
#: `nodeconfig`'s)
__all__ = [
    "BRIDGE",
    "LABELS",
    "NODE_IP",
    "NODE_NAME",
    "PAUSE_IMAGE",
    "RELAY_PORT",
    "TAINT",
    "RealNode",
    "cni_conflist",
    "enter_netns",
]

#: the `kubernetes` Service's address (the first of the service CIDR) and port
SERVICE_IP, SERVICE_PORT, SERVICE_CIDR = "10.0.0.1", 443, "10.0.0.0/24"
#: what the machine must have: the command and the Debian package that brings it
PREREQUISITES = {
    "ip": "iproute2",
    "iptables": "iptables",
    "mount": "mount",
    "nsenter": "util-linux",
}
CLONE_NEWNET = 0x40000000

Spawn = Callable[[str, list[str], "str | None", "dict[str, str] | None"], int]


def enter_netns(path: str) -> Callable[[], None]:
    """A `preexec_fn` moving the child into the network namespace at `path`."""

    def enter() -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            if ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns")
        finally:
            os.close(fd)

    return enter


class RealNode(NodeConfig):
    """The real node of the cluster in `state_dir` (its names, paths and configuration files
    in `NodeConfig`)."""

    # ------------------------------------------------------------------ checks

    @staticmethod
    def check_prerequisites() -> None:
        """One line naming what this machine lacks for a real node, or nothing."""
        if os.geteuid() != 0:
            raise ClusterError("dev-cluster: a real node needs root (kubelet, containerd, netns)")
        missing = [pkg for cmd, pkg in PREREQUISITES.items() if shutil.which(cmd) is None]
        if missing:
            raise ClusterError(
                "dev-cluster: a real node needs "
                + ", ".join(sorted(set(missing)))
                + " (apt-get install -y "
                + " ".join(sorted(set(missing)))
                + ")"
            )
        filesystems = Path("/proc/filesystems").read_text()
        if "overlay" not in filesystems:
            raise ClusterError(
                "dev-cluster: a real node needs overlayfs (no 'overlay' in /proc/filesystems)"
            )
        if not Path("/sys/fs/cgroup").is_dir():
            raise ClusterError(
                "dev-cluster: a real node needs a cgroup hierarchy at /sys/fs/cgroup"
            )

    # ------------------------------------------------------------------ network

    def _ip(self, *args: str, netns: bool = True, check: bool = True) -> None:
        cmd = ["ip", *(["-n", self.netns] if netns else []), *args]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if check and done.returncode != 0:
            raise ClusterError(f"dev-cluster: `{' '.join(cmd)}` failed: {done.stderr.strip()}")

    def _iptables(self, *args: str) -> None:
        cmd = ["ip", "netns", "exec", self.netns, "iptables", "-w", *args]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise ClusterError(f"dev-cluster: `{' '.join(cmd)}` failed: {done.stderr.strip()}")

    def network_up(self) -> None:
        """The namespace, its bridge and routes, the DNAT to the relay, the host's blackholes.
        Refused when the host already routes part of the node's ranges (a LAN, another
        container runtime's bridge): a blackhole would cut it off."""
        taken = nodeclean.routes_overlapping((POD_CIDR, SERVICE_CIDR))
        if taken:
            raise ClusterError(
                f"dev-cluster: the host routes {', '.join(taken)}, which the real node needs "
                f"({POD_CIDR}, {SERVICE_CIDR}); a real node cannot run beside it"
            )
        self._ip("netns", "add", self.netns, netns=False)
        self._ip("link", "set", "lo", "up")
        self._ip("link", "add", BRIDGE, "type", "bridge")
        self._ip("addr", "add", f"{NODE_IP}/{POD_CIDR.split('/')[1]}", "dev", BRIDGE)
        self._ip("link", "set", BRIDGE, "up")
        # a route for the Service address, so the namespace's own processes can dial it
        self._ip("route", "add", SERVICE_CIDR, "dev", BRIDGE, "src", NODE_IP)
        service = ["-d", f"{SERVICE_IP}/32", "-p", "tcp", "--dport", str(SERVICE_PORT)]
        to_relay = ["-j", "DNAT", "--to-destination", f"{NODE_IP}:{RELAY_PORT}"]
        for chain in ("OUTPUT", "PREROUTING"):
            self._iptables("-t", "nat", "-A", chain, *service, *to_relay)
        for cidr in (POD_CIDR, SERVICE_CIDR):
            self._ip("route", "replace", "blackhole", cidr, netns=False)

    def network_down(self) -> None:
        """Its namespace; the host's blackholes too once no other real node's namespace is
        left (they are shared by every real node of this machine)."""
        self._ip("netns", "del", self.netns, netns=False, check=False)
        if not any(n.startswith("kr-") for n in nodeclean.namespaces()):
            for cidr in (POD_CIDR, SERVICE_CIDR):
                self._ip("route", "del", "blackhole", cidr, netns=False, check=False)

    # ------------------------------------------------------------------ processes

    def kubelet_argv(self) -> list[str]:
        d = self.dir
        labels = ",".join(f"{k}={v}" for k, v in LABELS.items())
        return [
            str(self.bins.path("kubelet")),
            f"--config={d / 'kubelet.yaml'}",
            f"--kubeconfig={d / 'kubelet.kubeconfig'}",
            f"--root-dir={d / 'kubelet'}",
            f"--cert-dir={d / 'kubelet-pki'}",
            f"--node-ip={NODE_IP}",
            f"--hostname-override={NODE_NAME}",
            f"--node-labels={labels}",
            "--v=1",
        ]

    def containerd_argv(self) -> list[str]:
        return [str(self.bins.path("containerd")), f"--config={self.dir / 'containerd.toml'}"]

    def environment(self) -> dict[str, str]:
        """containerd finds its shim on PATH; everything else is named by absolute path."""
        env = dict(os.environ)
        env["PATH"] = f"{self.bins.bin}:{env.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}"
        return env

    # ------------------------------------------------------------------ images

    def ctr(self, *args: str, timeout: float = 300.0) -> str:
        ctr, address = str(self.bins.path("ctr")), str(self.containerd_socket)
        cmd = [ctr, "--address", address, "--namespace", "k8s.io", *args]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode != 0:
            stderr = done.stderr.strip()[-400:]
            raise ClusterError(f"dev-cluster: `ctr {' '.join(args)}` failed: {stderr}")
        return done.stdout

    def import_image(self, archive: Path) -> None:
        self.ctr("images", "import", "--platform", "linux/amd64", str(archive))

    def pause_archive(self) -> Path:
        out = self.dir / "images" / "pause.tar"
        pause = images.File("pause", self.bins.path("pause"))
        layer = images.files_layer(self.dir / "images" / "pause.layer", [pause])
        images.oci_archive(out, PAUSE_IMAGE, [layer], images.ImageConfig(entrypoint=("/pause",)))
        layer.unlink()
        return out

    def wait_containerd(self, deadline: float, alive: Callable[[], None]) -> None:
        while True:
            alive()
            if self.containerd_socket.exists():
                with contextlib.suppress(ClusterError):
                    self.ctr("version", timeout=10)
                    return
            if time.monotonic() > deadline:
                socket = self.containerd_socket
                raise ClusterError(f"dev-cluster: containerd did not answer on {socket} in time")
            time.sleep(0.2)

    # ------------------------------------------------------------------ teardown

    def teardown(self) -> None:
        """After the kubelet and containerd are stopped: kill what they left (shims and
        container processes), unmount what is mounted under the node's directories, remove
        its cgroups, its namespace, its routes and its files."""
        shim = self.bins.path("containerd-shim-runc-v2")
        nodeclean.kill_leftovers(shim, self.run, self.cgroup_root)
        nodeclean.unmount_under((self.dir, self.run))
        nodeclean.remove_cgroups(self.cgroup_root)
        self.network_down()
        shutil.rmtree(self.run, ignore_errors=True)
        shutil.rmtree(self.dir, ignore_errors=True)

    def make_cgroups(self) -> None:
        """The kubelet's `cgroupRoot` must exist in every hierarchy before it starts."""
        for hierarchy in Path("/sys/fs/cgroup").iterdir():
            if hierarchy.is_dir() and (hierarchy / "cgroup.procs").exists():
                (hierarchy / self.cgroup_root.strip("/")).mkdir(exist_ok=True)
