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
import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from kube_reloader.devcluster import images, nodeclean
from kube_reloader.devcluster.nodebuild import NodeBinaries
from kube_reloader.devcluster.pki import Pki, node_client
from kube_reloader.devcluster.state import ClusterError

NODE_NAME = "kr-real-node"
NODE_IP = "10.88.0.1"
POD_CIDR = "10.88.0.0/16"
BRIDGE = "kr0"
RELAY_PORT = 6443
#: the `kubernetes` Service's address (the first of the service CIDR) and port
SERVICE_IP, SERVICE_PORT, SERVICE_CIDR = "10.0.0.1", 443, "10.0.0.0/24"
TAINT = "kube-reloader.dev/real-node"
LABELS = {"type": "real", TAINT: "true"}
PAUSE_IMAGE = "kube-reloader.local/pause:1"
KUBELET_HEALTHZ_PORT = 10248
#: what the machine must have: the command and the Debian package that brings it
PREREQUISITES = {
    "ip": "iproute2",
    "iptables": "iptables",
    "mount": "mount",
    "nsenter": "util-linux",
}
CLONE_NEWNET = 0x40000000

Spawn = Callable[[str, list[str], "str | None", "dict[str, str] | None"], int]


def key_of(state_dir: Path) -> str:
    return hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:8]


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


class RealNode:
    """The real node of the cluster in `state_dir`."""

    def __init__(self, state_dir: Path, binaries: NodeBinaries) -> None:
        self.key = key_of(state_dir)
        self.dir = state_dir / "node"
        self.netns = f"kr-{self.key}"
        self.netns_path = f"/run/netns/{self.netns}"
        #: sockets live here (short paths: a unix socket path has at most 107 bytes)
        self.run = Path("/run/kube-reloader") / self.key
        self.cgroup_root = f"/kube-reloader-{self.key}"
        self.bins = binaries

    @property
    def containerd_socket(self) -> Path:
        return self.run / "containerd.sock"

    @property
    def pod_logs(self) -> Path:
        return self.dir / "pod-logs"

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
            raise ClusterError("dev-cluster: a real node needs overlayfs (no 'overlay' in "
                               "/proc/filesystems)")  # fmt: skip
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
        for chain in ("OUTPUT", "PREROUTING"):
            self._iptables(
                "-t", "nat", "-A", chain, "-d", f"{SERVICE_IP}/32", "-p", "tcp",
                "--dport", str(SERVICE_PORT), "-j", "DNAT",
                "--to-destination", f"{NODE_IP}:{RELAY_PORT}",
            )  # fmt: skip
        for cidr in (POD_CIDR, SERVICE_CIDR):
            self._ip("route", "replace", "blackhole", cidr, netns=False)

    def network_down(self) -> None:
        """Its namespace; the host's blackholes too once no other real node's namespace is
        left (they are shared by every real node of this machine)."""
        self._ip("netns", "del", self.netns, netns=False, check=False)
        if not any(n.startswith("kr-") for n in nodeclean.namespaces()):
            for cidr in (POD_CIDR, SERVICE_CIDR):
                self._ip("route", "del", "blackhole", cidr, netns=False, check=False)

    # ------------------------------------------------------------------ configuration

    def write_config(self, pki: Pki) -> None:
        d = self.dir
        for sub in ("cni-conf", "kubelet", "kubelet-pki", "pod-logs", "containerd", "images"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        self.run.mkdir(parents=True, exist_ok=True)
        (d / "containerd.toml").write_text(self.containerd_toml())
        (d / "cni-conf" / "10-kr.conflist").write_text(json.dumps(cni_conflist(), indent=2))
        crt, key = node_client(pki, d / "kubelet-pki", NODE_NAME)
        kubeconfig = {
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "dev", "cluster": {
                "server": f"https://127.0.0.1:{RELAY_PORT}",
                "certificate-authority": str(pki.ca_crt)}}],
            "users": [{"name": "kubelet", "user": {
                "client-certificate": str(crt), "client-key": str(key)}}],
            "contexts": [{"name": "dev", "context": {"cluster": "dev", "user": "kubelet"}}],
            "current-context": "dev",
        }  # fmt: skip
        (d / "kubelet.kubeconfig").write_text(yaml.safe_dump(kubeconfig, sort_keys=False))
        (d / "kubelet.yaml").write_text(yaml.safe_dump(self.kubelet_config(pki), sort_keys=False))

    def containerd_toml(self) -> str:
        d, b = self.dir, self.bins
        return f"""version = 3
root = '{d / "containerd"}'
state = '{self.run / "state"}'
[grpc]
  address = '{self.containerd_socket}'
[ttrpc]
  address = '{self.run / "containerd.sock.ttrpc"}'
[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = '{PAUSE_IMAGE}'
[plugins.'io.containerd.cri.v1.runtime']
  disable_apparmor = true
  # no OOM score below containerd's own: this machine lacks CAP_SYS_RESOURCE, so the
  # sandbox's -998 would fail every pod
  restrict_oom_score_adj = true
  # pods' network namespaces under the node's run directory, not /run/netns: torn down with it
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
    runtime_type = 'io.containerd.runc.v2'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
      BinaryName = '{b.path("runc")}'
      SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ['{b.cni}']
    conf_dir = '{d / "cni-conf"}'
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = '127.0.0.1'
"""

    def kubelet_config(self, pki: Pki) -> dict[str, object]:
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            # this machine has cgroup v1 only; Kubernetes 1.35+ refuses it unless told
            "failCgroupV1": False,
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": self.cgroup_root,
            "containerRuntimeEndpoint": f"unix://{self.containerd_socket}",
            "address": "127.0.0.1",
            "port": 10250,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": KUBELET_HEALTHZ_PORT,
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": False},
                "x509": {"clientCAFile": str(pki.ca_crt)},
            },
            "authorization": {"mode": "AlwaysAllow"},
            "failSwapOn": False,
            "registerWithTaints": [{"key": TAINT, "effect": "NoSchedule"}],
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%",
                             "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "serializeImagePulls": False,
            "resolvConf": "/etc/resolv.conf",
            "podLogsDir": str(self.pod_logs),
            "maxPods": 40,
            # mounted ConfigMaps and Secrets are refreshed at each pod sync
            "syncFrequency": "10s",
            "nodeStatusReportFrequency": "10s",
            "shutdownGracePeriod": "0s",
        }  # fmt: skip

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
        cmd = [str(self.bins.path("ctr")), "--address", str(self.containerd_socket),
               "--namespace", "k8s.io", *args]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode != 0:
            raise ClusterError(f"dev-cluster: `ctr {' '.join(args)}` failed: "
                               f"{done.stderr.strip()[-400:]}")  # fmt: skip
        return done.stdout

    def import_image(self, archive: Path) -> None:
        self.ctr("images", "import", "--platform", "linux/amd64", str(archive))

    def pause_archive(self) -> Path:
        out = self.dir / "images" / "pause.tar"
        layer = images.files_layer(self.dir / "images" / "pause.layer",
                                   [images.File("pause", self.bins.path("pause"))])  # fmt: skip
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
                raise ClusterError("dev-cluster: containerd did not answer on "
                                   f"{self.containerd_socket} in time")  # fmt: skip
            time.sleep(0.2)

    # ------------------------------------------------------------------ teardown

    def teardown(self) -> None:
        """After the kubelet and containerd are stopped: kill what they left (shims and
        container processes), unmount what is mounted under the node's directories, remove
        its cgroups, its namespace, its routes and its files."""
        nodeclean.kill_leftovers(self.bins.path("containerd-shim-runc-v2"), self.run,
                                 self.cgroup_root)  # fmt: skip
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


def cni_conflist() -> dict[str, object]:
    return {
        "cniVersion": "1.0.0",
        "name": "kr",
        "plugins": [
            {
                "type": "bridge", "bridge": BRIDGE, "isGateway": True, "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_CIDR, "gateway": NODE_IP,
                                 "rangeStart": "10.88.1.1"}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            },
            {"type": "loopback"},
        ],
    }  # fmt: skip
