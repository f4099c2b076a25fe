"""Pod-level reloads (`kube-reloader.io/strategy: evict`): how long a rotation takes, what it
costs the API server, and what pods present in the cluster cost the controller's memory.

On a private dev cluster with its controllers and a kwok node (pods become Ready through
kwok's stages), kube-reloader runs as a real subprocess, cluster-wide:

* rotations: for each replica count, a Deployment of that many pods reading one ConfigMap; the
  ConfigMap is changed and the time is taken from the accepted update to the moment every pod
  older than it is gone and as many new pods are Ready (this harness's own polling, every
  100 ms); API requests per evicted pod come from the controller's own
  `kube_reloader_api_requests_total`;
* memory: the controller's RSS before and after `--pods` bare pods (bound to the kwok node)
  are created in a namespace no workload of it uses.

Timing is a benchmark, never a test: report it with the machine and the date.

    .venv/bin/python -m bench.pod_reloads [--replicas 5,20,100] [--max-unavailable 1] [--pods 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from kube_reloader.devcluster.cluster import DevCluster
from kube_reloader.devcluster.ports import free_port
from kube_reloader.kube import config, pods, resources
from kube_reloader.kube.client import Client, PatchType

from .reload_bench import gather_limited, rss_kib

NS, IDLE = "rotate", "idle-pods"


def scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = re.match(r"^(kube_reloader_(?:api_requests|evictions)_total)(\{[^}]*\})? (\S+)$", line)
        if m:
            out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


def total(sample: dict[str, float], prefix: str) -> float:
    return sum(v for k, v in sample.items() if k.startswith(prefix))


def deployment(name: str, replicas: int, max_unavailable: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS, "annotations": {
            "reloader.stakater.com/auto": "true", "kube-reloader.io/strategy": "evict",
            "kube-reloader.io/max-unavailable": max_unavailable}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "app", "image": "registry.local/app:1",
                                     "envFrom": [{"configMapRef": {"name": f"{name}-config"}}]}]},
        }},
    }  # fmt: skip


async def live(client: Client, app: str) -> list[Any]:
    listed = await client.list(resources.PODS, namespace=NS, label_selector=f"app={app}",
                               type=pods.PodObject)  # fmt: skip
    return [v for v in map(pods.view, listed.items) if not v.terminating]


async def wait_ready(client: Client, app: str, n: int, old: set[str], limit: float) -> float:
    started = time.monotonic()
    while True:
        now = await live(client, app)
        fresh = [p for p in now if p.uid not in old and p.ready]
        if len(now) == n and len(fresh) == n:
            return time.monotonic() - started
        if time.monotonic() - started > limit:
            raise SystemExit(f"{app}: {len(fresh)} of {n} replaced after {limit:.0f}s")
        await asyncio.sleep(0.1)


async def rotate(client: Client, port: int, replicas: int, max_unavailable: str) -> dict[str, Any]:
    name = (
        f"r{replicas}-{max_unavailable.rstrip('%')}{'p' if max_unavailable.endswith('%') else ''}"
    )
    await client.create(resources.CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": f"{name}-config", "namespace": NS}, "data": {"v": "0"}})  # fmt: skip
    await client.create(resources.DEPLOYMENTS, deployment(name, replicas, max_unavailable))
    await wait_ready(client, name, replicas, set(), 300)
    old = {p.uid for p in await live(client, name)}
    before = scrape(port)
    await client.patch(resources.CONFIGMAPS, f"{name}-config", {"data": {"v": "1"}},
                       namespace=NS, patch_type=PatchType.MERGE)  # fmt: skip
    took = await wait_ready(client, name, replicas, old, 1800)
    await asyncio.sleep(2)  # the rotation's last look
    after = scrape(port)
    evicted = total(after, 'kube_reloader_evictions_total{result="evicted"') - total(
        before, 'kube_reloader_evictions_total{result="evicted"'
    )
    requests = total(after, "kube_reloader_api_requests_total") - total(
        before, "kube_reloader_api_requests_total"
    )
    row = {"replicas": replicas, "max_unavailable": max_unavailable, "seconds": round(took, 1),
           "evicted": int(evicted), "api_requests": int(requests),
           "requests_per_evicted_pod": round(requests / evicted, 1) if evicted else None}  # fmt: skip
    print(f"rotation: {row}", flush=True)
    await client.delete(resources.DEPLOYMENTS, name, namespace=NS)
    return row


async def idle_pods(client: Client, pid: int, n: int) -> dict[str, Any]:
    await client.create(resources.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                               "metadata": {"name": IDLE}})  # fmt: skip
    await asyncio.sleep(3)
    before = rss_kib(pid)[0]
    started = time.monotonic()
    await gather_limited(32, [client.create(resources.PODS, {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"p{i}", "namespace": IDLE, "labels": {"app": "idle"}},
        "spec": {"nodeName": "kwok-node-0", "containers": [{"name": "c", "image": "x"}]},
    }) for i in range(n)])  # fmt: skip
    created = time.monotonic() - started
    await asyncio.sleep(10)
    after, peak = rss_kib(pid)
    row = {"pods": n, "created_s": round(created, 1), "rss_before_mib": round(before / 1024, 1),
           "rss_after_mib": round(after / 1024, 1), "rss_peak_mib": round(peak / 1024, 1)}  # fmt: skip
    print(f"memory: {row}", flush=True)
    return row


async def run(args: argparse.Namespace, kubeconfig: Path, out: dict[str, Any]) -> None:
    cfg = config.load_kubeconfig([kubeconfig])
    port = free_port()
    async with Client(cfg, user_agent="kube-reloader-bench", max_connections=64) as client:
        await client.create(resources.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                                   "metadata": {"name": NS}})  # fmt: skip
        log_path = Path(args.workdir) / "kube-reloader.log"
        env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
        with log_path.open("w") as log:
            proc = subprocess.Popen(  # noqa: ASYNC220 - a long-lived child, not awaited
                [sys.executable, "-m", "kube_reloader", "--log-format=json",
                 f"--metrics-addr=127.0.0.1:{port}", "--reload-min-interval=0"],
                env=env, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        try:
            while "caches synced" not in log_path.read_text():
                if proc.poll() is not None:
                    raise SystemExit(f"kube-reloader exited: see {log_path}")
                await asyncio.sleep(0.05)
            out["rotations"] = [
                await rotate(client, port, n, mu)
                for mu in args.max_unavailable.split(",") for n in map(int, args.replicas.split(","))
            ]  # fmt: skip
            if args.pods:
                out["memory"] = await idle_pods(client, proc.pid, args.pods)
        finally:
            proc.terminate()
            proc.wait(timeout=20)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pod_reloads",
                                     description=__doc__.splitlines()[0])  # fmt: skip
    parser.add_argument("--replicas", default="5,20,100")
    parser.add_argument("--max-unavailable", default="1,25%")
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--results", default=str(Path(__file__).parent / "results"))
    args = parser.parse_args()
    results = Path(args.results) / time.strftime("%Y%m%dT%H%M%SZ-pods", time.gmtime())
    results.mkdir(parents=True, exist_ok=True)
    args.workdir = str(results)
    cluster = DevCluster(Path(tempfile.mkdtemp(prefix="kube-reloader-bench-pods-")))
    out: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "params": {k: v for k, v in vars(args).items() if k not in ("workdir", "results")},
    }  # fmt: skip
    try:
        cluster.up(nodes=1)
        asyncio.run(run(args, cluster.kubeconfig, out))
    finally:
        cluster.down()
    (results / "pod_reloads.json").write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    print(f"results: {results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
