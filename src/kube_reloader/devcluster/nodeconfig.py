"""What the real node is configured as: the name, labels, taint and addresses it is known
by, where it keeps its files and sockets, and the files rendered from them that configure
containerd, the kubelet (its configuration and kubeconfig) and the CNI plugins.

`NodeConfig` is the part of `node.RealNode` that only names and writes; `RealNode` adds
what it does on the machine (the network namespace, images, teardown).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import yaml

from kube_reloader.devcluster.nodebuild import NodeBinaries
from kube_reloader.devcluster.pki import Pki, node_client

NODE_NAME = "kr-real-node"
NODE_IP = "10.88.0.1"
POD_CIDR = "10.88.0.0/16"
BRIDGE = "kr0"
RELAY_PORT = 6443
TAINT = "kube-reloader.dev/real-node"
LABELS = {"type": "real", TAINT: "true"}
PAUSE_IMAGE = "kube-reloader.local/pause:1"
KUBELET_HEALTHZ_PORT = 10248


def key_of(state_dir: Path) -> str:
    return hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:8]


class NodeConfig:
    """The real node of the cluster in `state_dir`: its names, paths and configuration."""

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

    def write_config(self, pki: Pki) -> None:
        d = self.dir
        for sub in ("cni-conf", "kubelet", "kubelet-pki", "pod-logs", "containerd", "images"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        self.run.mkdir(parents=True, exist_ok=True)
        (d / "containerd.toml").write_text(self.containerd_toml())
        (d / "cni-conf" / "10-kr.conflist").write_text(json.dumps(cni_conflist(), indent=2))
        crt, key = node_client(pki, d / "kubelet-pki", NODE_NAME)
        kubeconfig = kubelet_kubeconfig(pki.ca_crt, crt, key)
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
            "evictionHard": {
                "memory.available": "100Mi",
                "nodefs.available": "1%",
                "imagefs.available": "1%",
                "nodefs.inodesFree": "1%",
            },
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
        }


def kubelet_kubeconfig(ca: Path, crt: Path, key: Path) -> dict[str, object]:
    """The kubelet's kubeconfig: the API server through the relay, its client certificate."""
    cluster = {"server": f"https://127.0.0.1:{RELAY_PORT}", "certificate-authority": str(ca)}
    user = {"client-certificate": str(crt), "client-key": str(key)}
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "dev", "cluster": cluster}],
        "users": [{"name": "kubelet", "user": user}],
        "contexts": [{"name": "dev", "context": {"cluster": "dev", "user": "kubelet"}}],
        "current-context": "dev",
    }


def cni_conflist() -> dict[str, object]:
    ranges = [[{"subnet": POD_CIDR, "gateway": NODE_IP, "rangeStart": "10.88.1.1"}]]
    ipam = {"type": "host-local", "ranges": ranges, "routes": [{"dst": "0.0.0.0/0"}]}
    bridge = {
        "type": "bridge",
        "bridge": BRIDGE,
        "isGateway": True,
        "ipMasq": False,
        "hairpinMode": True,
        "ipam": ipam,
    }
    return {"cniVersion": "1.0.0", "name": "kr", "plugins": [bridge, {"type": "loopback"}]}
