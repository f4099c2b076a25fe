"""Helpers of the real-node tests: images, workloads with the agent sidecar, pod snapshots
and HTTP requests sent from inside the node's network namespace."""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from kube_reloader.core import inplace
from kube_reloader.devcluster import images as oci
from kube_reloader.devcluster.node import LABELS, TAINT, RealNode, enter_netns
from kube_reloader.devcluster.ownimage import ImageBuilder
from kube_reloader.kube import resources
from kube_reloader.kube.client import Client

APP_IMAGE = "kube-reloader.local/sighup-app:1"


@dataclass(frozen=True)
class Images:
    controller: str
    app: str = APP_IMAGE


def import_images(node: RealNode) -> Images:
    ref, archive = ImageBuilder().build()
    node.import_image(archive)
    work = node.dir / "images"
    layer = oci.files_layer(work / "app.layer",
                            [oci.File("sighup-app", node.bins.path("sighup-app"))])  # fmt: skip
    oci.oci_archive(work / "app.tar", APP_IMAGE, [layer],
                    oci.ImageConfig(entrypoint=("/sighup-app",), user="65534:65534"))  # fmt: skip
    node.import_image(work / "app.tar")
    return Images(controller=ref)


def on_real_node(spec: dict[str, Any]) -> dict[str, Any]:
    """A pod spec scheduled on the real node only."""
    return {
        **spec,
        "nodeSelector": {"type": LABELS["type"]},
        "tolerations": [{"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}],
    }


def agent_sidecar(
    image: str, *, restart: bool, volumes: dict[str, str] | None = None, process: str = ""
) -> dict[str, Any]:
    """The kube-reloader agent as a native sidecar reading its pod's annotations; with
    `restart`, its restart rule restarts every container of the pod on its exit code;
    `volumes`: name -> mount path of the volumes it watches (mounted read-only there)."""
    volumes = volumes or {}
    args = [a for name, path in volumes.items() for a in ("--volume", f"{name}={path}")]
    args += ["--process", process] if process else []
    c: dict[str, Any] = {
        "name": "kube-reloader-agent", "image": image, "imagePullPolicy": "Never",
        "restartPolicy": "Always",
        "args": ["agent", "--annotations", "/etc/kube-reloader/annotations", *args],
        "volumeMounts": [{"name": "kube-reloader-podinfo", "mountPath": "/etc/kube-reloader"}]
        + [{"name": n, "mountPath": p, "readOnly": True} for n, p in volumes.items()],
        "securityContext": {"runAsUser": 65534, "runAsGroup": 65534,
                            "readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False},
        "resources": {"requests": {"cpu": "5m", "memory": "24Mi"}},
    }  # fmt: skip
    if restart:
        c["restartPolicyRules"] = [{
            "action": "RestartAllContainers",
            "exitCodes": {"operator": "In", "values": [inplace.RESTART_EXIT_CODE]},
        }]  # fmt: skip
    return c


PODINFO_VOLUME = {
    "name": "kube-reloader-podinfo",
    "downwardAPI": {"items": [{"path": "annotations",
                               "fieldRef": {"fieldPath": "metadata.annotations"}}]},
}  # fmt: skip


def app_container(config_file: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": "app", "image": APP_IMAGE, "imagePullPolicy": "Never",
        "env": [{"name": "LISTEN", "value": "0.0.0.0:8080"},
                {"name": "CONFIG_FILE", "value": config_file}],
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 1},
        "securityContext": {"runAsUser": 65534, "runAsGroup": 65534},
        **extra,
    }  # fmt: skip


async def pods_of(client: Client, namespace: str, app: str) -> list[dict[str, Any]]:
    listed = await client.list(resources.PODS, namespace=namespace, label_selector=f"app={app}")
    return [p for p in listed.items if not p["metadata"].get("deletionTimestamp")]


def ready(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())  # fmt: skip


def restarts(pod: dict[str, Any]) -> dict[str, int]:
    status = pod.get("status") or {}
    return {c["name"]: int(c.get("restartCount", 0))
            for c in (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or [])}  # fmt: skip


def _enter(netns: str) -> None:
    enter_netns(netns)()  # the dev cluster's own: a thread enters the namespace


def get_in_node(netns: str, url: str, timeout: float = 5.0) -> bytes:
    """GET `url` from inside the node's network namespace (a thread that enters it)."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            _enter(netns)
            with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - a pod IP
                out["body"] = resp.read()
        except Exception as exc:  # noqa: BLE001 - handed to the caller
            out["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout + 5)
    if "error" in out:
        raise out["error"]
    return bytes(out.get("body", b""))


@dataclass
class Poller:
    """GETs every URL in turn from inside the node's namespace until stopped; counts the
    answers, the failures and the last document each URL served."""

    netns: str
    urls: list[str]
    interval: float = 0.1
    ok: int = 0
    failures: list[str] = field(default_factory=list)
    last: dict[str, Any] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _run(self) -> None:
        _enter(self.netns)
        while not self._stop.is_set():
            for url in self.urls:
                try:
                    with urllib.request.urlopen(url, timeout=3) as resp:  # noqa: S310
                        self.last[url] = json.loads(resp.read())
                        self.ok += 1
                except (urllib.error.URLError, OSError, ValueError) as exc:
                    self.failures.append(f"{time.time():.3f} {url}: {exc}")
            time.sleep(self.interval)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)


@contextlib.contextmanager
def polling(netns: str, urls: list[str]) -> Iterator[Poller]:
    p = Poller(netns, urls)
    p.start()
    try:
        yield p
    finally:
        p.stop()
