"""What key-level reloads cost in memory, on the M1 data set (10,000 Secrets of 8 KiB, 5,000
ConfigMaps, 2,000 Deployments; bench/scenarios.py `scale_setup`).

The Deployments read their ConfigMap's and Secret's key through `configMapKeyRef` and
`secretKeyRef` (M1 itself uses envFrom, which consumes every key and keeps no digests), so
under `keys` every one of them makes its two configs keep per-key digests. Runs, one after the
other against the same private cluster (etcd + kube-apiserver; replicas 0):

* `object`: the default (`--reload-scope=object`): digests kept during the initial list only;
* `keys`: `--reload-scope=keys`: 2,000 ConfigMaps and 2,000 Secrets keep digests;
* `baseline` (with `--baseline REF`): kube-reloader from REF's src/, before key-level reloads.

For each, `--repeats` times round-robin (median and range): seconds to ready, RSS 15 s after
ready and the peak (VmHWM). Results go to
`bench/results/key-scope-memory.json`, and a Markdown table to stdout.

    .venv/bin/python -m bench.key_scope_memory [--baseline eb8cfe4] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from kube_reloader.devcluster.cluster import DevCluster
from kube_reloader.devcluster.ports import free_port
from kube_reloader.kube import config
from kube_reloader.kube.client import Client

from .baseline import current_tree, export
from .runs import cm, create_all, namespaces, progress, secret

RESULTS = Path(__file__).parent / "results" / "key-scope-memory.json"


def data_set(run: str, quick: bool) -> list[dict[str, Any]]:
    n_secret, n_cm, n_deploy = (1000, 500, 200) if quick else (10000, 5000, 2000)
    nss = [f"{run}-{i}" for i in range(10)]
    blob = "s" * 8192
    objs: list[dict[str, Any]] = []
    for i in range(n_secret):
        objs.append(secret(f"secret-{i}", nss[i % 10], {"blob": blob[:-8] + f"{i:08d}"}))
    for i in range(n_cm):
        objs.append(cm(f"cm-{i}", nss[i % 10], {"key": f"v{i}"}))
    for i in range(n_deploy):
        env = [
            {"name": "K", "valueFrom": {"configMapKeyRef": {"name": f"cm-{i % n_cm}", "key": "key"}}},
            {"name": "B", "valueFrom": {"secretKeyRef": {"name": f"secret-{i % n_secret}",
                                                          "key": "blob"}}},
        ]  # fmt: skip
        labels = {"app": f"deploy-{i}"}
        objs.append({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": f"deploy-{i}", "namespace": nss[i % 10],
                         "annotations": {"reloader.stakater.com/auto": "true"}},
            "spec": {"replicas": 0, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "registry.local/app:1",
                                         "env": env}]}}},
        })  # fmt: skip
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in nss] + objs


def rss(pid: int) -> tuple[int, int]:
    """(RSS, VmHWM) in bytes."""
    status = Path(f"/proc/{pid}/status").read_text()

    def field(name: str) -> int:
        return int(status.split(f"{name}:", 1)[1].split()[0]) * 1024

    return field("VmRSS"), field("VmHWM")


def measure(name: str, kubeconfig: Path, flags: list[str], env: dict[str, str]) -> dict[str, Any]:
    port = free_port()
    argv = [sys.executable, "-m", "kube_reloader", f"--kubeconfig={kubeconfig}",
            "--log-format=json", f"--metrics-addr=127.0.0.1:{port}", *flags]  # fmt: skip
    log = Path(tempfile.mkstemp(prefix=f"key-scope-{name}-", suffix=".log")[1])
    started = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    try:
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"{name}: exited {proc.returncode}; see {log}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() - started > 600:
                raise SystemExit(f"{name}: not ready after 600 s; see {log}")
            time.sleep(0.5)
        ready = time.monotonic() - started
        time.sleep(15)
        steady, peak = rss(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    progress(f"  {name}: ready in {ready:.1f} s, RSS {steady / 2**20:.1f} MiB, "
             f"peak {peak / 2**20:.1f} MiB")  # fmt: skip
    return {"name": name, "flags": flags, "ready_s": round(ready, 1),
            "rss_mib": round(steady / 2**20, 1), "peak_mib": round(peak / 2**20, 1)}  # fmt: skip


async def create(kubeconfig: Path, quick: bool) -> int:
    objs = data_set("ks", quick)
    async with Client(config.load_kubeconfig([kubeconfig]), user_agent="bench") as client:
        await namespaces(client, [o["metadata"]["name"] for o in objs if o["kind"] == "Namespace"])
        await create_all(client, [o for o in objs if o["kind"] != "Namespace"], limit=48)
    return len(objs)


def median_of(name: str, flags: list[str], got: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "flags": flags, "repeats": len(got)}
    for key in ("ready_s", "rss_mib", "peak_mib"):
        values = sorted(r[key] for r in got)
        out[key] = statistics.median(values)
        out[f"{key}_range"] = [values[0], values[-1]]
    return out


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m bench.key_scope_memory")
    p.add_argument("--quick", action="store_true", help="a tenth of the objects")
    p.add_argument("--baseline", default="", metavar="REF", help="also run REF's src/")
    p.add_argument("--repeats", type=int, default=3, help="runs of each configuration")
    args = p.parse_args()
    state = Path(tempfile.mkdtemp(prefix="kube-reloader-test-bench-keys-"))
    cluster = DevCluster(state)
    base = export(args.baseline) if args.baseline else None
    try:
        cluster.up(minimal=True, build=True)
        progress("creating the data set")
        count = asyncio.run(create(cluster.kubeconfig, args.quick))
        env = {**os.environ}
        configs = [("object", [], env), ("keys", ["--reload-scope=keys"], env)]
        if base is not None:
            configs.insert(0, (f"baseline@{args.baseline}", [], base.env(env)))
        samples: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in configs}
        for _ in range(args.repeats):  # round-robin: drift hits every configuration alike
            for name, flags, run_env in configs:
                samples[name].append(measure(name, cluster.kubeconfig, flags, run_env))
        runs = [median_of(name, flags, samples[name]) for name, flags, _ in configs]
    finally:
        cluster.down()
        if base is not None:
            base.remove()
    result = {
        "date": time.strftime("%Y-%m-%d"), "machine": f"{platform.machine()}, "
        f"{os.cpu_count()} cores", "python": platform.python_version(), "tree": current_tree(),
        "objects": count, "quick": args.quick, "runs": runs,
    }  # fmt: skip
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{count} objects, median of {args.repeats} runs (min-max)")
    print("| run | flags | ready (s) | RSS after ready (MiB) | peak RSS (MiB) |")
    print("|---|---|---|---|---|")

    def cell(r: dict[str, Any], key: str) -> str:
        lo, hi = r[f"{key}_range"]
        return f"{r[key]} ({lo}-{hi})"

    for r in runs:
        print(f"| {r['name']} | {' '.join(r['flags']) or '-'} | {cell(r, 'ready_s')} | "
              f"{cell(r, 'rss_mib')} | {cell(r, 'peak_mib')} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
