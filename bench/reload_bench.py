"""Reload latency and memory of kube-reloader on a private local control plane.

Measured from outside the controller, as a user would see it:

* latency: ConfigMap PATCH accepted by the API server -> the watched Deployment's pod
  template carries the new `STAKATER_*` hash, seen by this harness's own watch; N sequential
  updates with `--deployments` annotated Deployments present (each referencing its own
  ConfigMap), p50 / p95 / p99 / max;
* memory: the controller process's RSS before and after `--secrets` Secrets of `--secret-kib`
  KiB each are created (only their hashes should be kept).

Runs kube-reloader as a real subprocess (`python -m kube_reloader`) against etcd +
kube-apiserver (no kube-controller-manager: the Deployments have 0 replicas, so the patches
are what is measured, not pod churn). Timing is a benchmark, never a test: numbers vary with
the machine; report them with the machine and the date.

    .venv/bin/python -m bench.reload_bench [--deployments 1000] [--updates 200] [--secrets 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kube_reloader.core import hashing
from kube_reloader.devcluster.cluster import DevCluster
from kube_reloader.kube import config, resources
from kube_reloader.kube.client import Client, PatchType

NS = "bench"


def rss_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process, in KiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0])
    return fields["VmRSS"], fields["VmHWM"]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def gather_limited(n: int, coros: list[Any]) -> None:
    sem = asyncio.Semaphore(n)

    async def one(c: Any) -> None:
        async with sem:
            await c

    await asyncio.gather(*(one(c) for c in coros))


def deployment(i: int) -> dict[str, Any]:
    labels = {"app": f"d{i}"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": f"d{i}",
            "namespace": NS,
            "annotations": {"reloader.stakater.com/auto": "true"},
        },
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "x",
                            "envFrom": [{"configMapRef": {"name": f"cm{i}"}}],
                        }
                    ]
                },
            },
        },
    }


async def run(args: argparse.Namespace, kubeconfig: Path, out: dict[str, Any]) -> None:
    cfg = config.load_kubeconfig([kubeconfig])
    async with Client(cfg, user_agent="kube-reloader-bench", max_connections=64) as client:
        await client.create(
            resources.NAMESPACES,
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        )
        t = time.monotonic()
        await gather_limited(32, [
            client.create(resources.CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": f"cm{i}", "namespace": NS}, "data": {"v": "0"}})
            for i in range(args.deployments)
        ])  # fmt: skip
        await gather_limited(
            32,
            [client.create(resources.DEPLOYMENTS, deployment(i)) for i in range(args.deployments)],
        )
        print(
            f"created {args.deployments} ConfigMaps + Deployments in {time.monotonic() - t:.1f}s",
            flush=True,
        )

        env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
        log_path = Path(args.workdir) / "kube-reloader.log"
        started = time.monotonic()
        with log_path.open("w") as log:
            proc = subprocess.Popen(  # noqa: ASYNC220 - a long-lived child, not awaited
                [sys.executable, "-m", "kube_reloader", "--log-format=json", "--metrics-addr=127.0.0.1:0",
                 *args.controller_args],
                env=env, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        try:
            while "caches synced" not in log_path.read_text():
                if proc.poll() is not None:
                    raise SystemExit(f"kube-reloader exited: see {log_path}")
                await asyncio.sleep(0.05)
            out["startup_to_synced_s"] = round(time.monotonic() - started, 3)
            await asyncio.sleep(1.0)
            out["rss_after_sync_kib"] = rss_kib(proc.pid)[0]

            # --------------------------------------------------------- latency
            seen: dict[str, tuple[str, float]] = {}
            listed = await client.list(resources.DEPLOYMENTS, namespace=NS)

            async def watch() -> None:
                async for ev in client.watch(resources.DEPLOYMENTS, namespace=NS,
                                             resource_version=listed.resource_version, timeout_seconds=3600):  # fmt: skip
                    if ev.type != "MODIFIED":
                        continue
                    obj = ev.object
                    for e in obj["spec"]["template"]["spec"]["containers"][0].get("env") or []:
                        if e["name"].startswith("STAKATER_"):
                            seen[obj["metadata"]["name"]] = (e["value"], time.monotonic())

            watcher = asyncio.create_task(watch())
            await asyncio.sleep(0.5)
            latencies: list[float] = []
            for n in range(args.updates):
                i = (n * 7919) % args.deployments
                value = f"{n}-{secrets.token_hex(4)}"
                want = hashing.configmap_hash({"v": value})
                await client.patch(resources.CONFIGMAPS, f"cm{i}", {"data": {"v": value}},
                                   namespace=NS, patch_type=PatchType.MERGE)  # fmt: skip
                accepted = time.monotonic()
                deadline = accepted + 30
                while seen.get(f"d{i}", ("", 0.0))[0] != want:
                    if time.monotonic() > deadline:
                        raise SystemExit(
                            f"update {n}: no reload of d{i} within 30s; see {log_path}"
                        )
                    await asyncio.sleep(0.001)
                latencies.append((seen[f"d{i}"][1] - accepted) * 1000)
            watcher.cancel()
            out["latency_ms"] = {
                "n": len(latencies),
                "p50": round(statistics.median(latencies), 1),
                "p95": round(pct(latencies, 0.95), 1),
                "p99": round(pct(latencies, 0.99), 1),
                "max": round(max(latencies), 1),
            }
            print(f"latency over {len(latencies)} updates: {out['latency_ms']}", flush=True)

            # --------------------------------------------------------- memory
            before = rss_kib(proc.pid)[0]
            blob = "x" * (args.secret_kib * 1024)
            t = time.monotonic()
            await gather_limited(32, [
                client.create(resources.SECRETS, {"apiVersion": "v1", "kind": "Secret",
                              "metadata": {"name": f"s{i}", "namespace": NS}, "stringData": {"blob": blob[:-8] + f"{i:08d}"}})
                for i in range(args.secrets)
            ])  # fmt: skip
            out["secrets_created_s"] = round(time.monotonic() - t, 1)
            await asyncio.sleep(5)  # let the controller's watch catch up
            after, peak = rss_kib(proc.pid)
            out["rss_before_secrets_kib"] = before
            out["rss_after_secrets_kib"] = after
            out["rss_peak_kib"] = peak
            out["rss_growth_mib"] = round((after - before) / 1024, 1)
            print(f"RSS {before / 1024:.1f} MiB -> {after / 1024:.1f} MiB after {args.secrets} Secrets of "
                  f"{args.secret_kib} KiB (growth {out['rss_growth_mib']} MiB, peak {peak / 1024:.1f} MiB)", flush=True)  # fmt: skip
        finally:
            proc.terminate()
            proc.wait(timeout=20)


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.reload_bench", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--deployments", type=int, default=1000)
    parser.add_argument("--updates", type=int, default=200)
    parser.add_argument("--secrets", type=int, default=10000)
    parser.add_argument("--secret-kib", type=int, default=8)
    parser.add_argument("--results", default=str(Path(__file__).parent / "results"))
    parser.add_argument(
        "--controller-arg", dest="controller_args", action="append", default=[],
        help="extra kube-reloader flag, e.g. --controller-arg=--reload-coalesce-window=0",
    )  # fmt: skip
    args = parser.parse_args()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    results = Path(args.results) / stamp
    results.mkdir(parents=True, exist_ok=True)
    args.workdir = str(results)
    state_dir = Path(tempfile.mkdtemp(prefix="kube-reloader-bench-"))
    cluster = DevCluster(state_dir)
    out: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "params": {k: v for k, v in vars(args).items() if k not in ("workdir", "results")},
    }
    try:
        cluster.up(minimal=True)
        asyncio.run(run(args, cluster.kubeconfig, out))
    finally:
        cluster.down()
    (results / "reload_bench.json").write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    print(f"results: {results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
