"""The staleness audit at scale: what one audit of 20,000 pods costs in memory and API requests,
as `kube-reloader audit` and as the controller's periodic room (`--audit-interval`).

On a private dev cluster (one kwok node per 250 pods), `--namespaces` namespaces each hold
Deployments of `--replicas` pods: every `--stale-every`-th one mounts the namespace's TLS
Secret and reads its ConfigMap with no reload annotation (stale once both change); the others
are annotated `auto` on a ConfigMap that never changes (no rule has anything to do, so nothing
rolls while measuring). Once every pod runs, each namespace's ConfigMap and TLS Secret change.
So every namespace has a candidate: each audit lists every pod (the worst case for the room).

* CLI: `cli.audit.run` in a child process (what `kube-reloader audit --cluster` runs), its API
  requests counted by the client's own observer, its peak RSS from getrusage;
* controller: kube-reloader as a subprocess with `--audit-interval`; RSS after sync and after
  each audit round; API requests of one round from its `kube_reloader_api_requests_total`
  (scraped right before a round and when the round's log line appears); the number of series
  of `kube_reloader_stale_workloads` it exposes.

    .venv/bin/python -m bench.audit_scale [--pods 20000] [--replicas 10] [--namespaces 20]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
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

import msgspec
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kube_reloader.devcluster.cluster import DevCluster
from kube_reloader.kube import config, resources
from kube_reloader.kube.client import Client, PatchType

from .pod_reloads import free_port
from .reload_bench import gather_limited, rss_kib

AUTO = {"reloader.stakater.com/auto": "true"}
CLI_CHILD = """
import asyncio, json, resource, sys, time
from kube_reloader.cli import audit, flags
from kube_reloader.kube import config
class Count:
    def __init__(self): self.by = {}
    def api_request(self, method, code, host): self.by[method] = self.by.get(method, 0) + 1
    def api_request_done(self, verb, host, seconds): pass
count = Count()
settings = flags.parse([])
conn = config.load(sys.argv[1])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.monotonic()
report = asyncio.run(audit.run(settings.options, conn, None, observer=count))
print(json.dumps({"seconds": round(time.monotonic() - started, 2),
                  "rss_peak_mib_before": round(before / 1024, 1),
                  "rss_peak_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                  "requests": count.by, "stale": len(report.findings),
                  "workloads": report.workloads, "namespaces_read": report.namespaces_read,
                  "errors": report.errors[:3]}))
"""


def tls_data(days: int) -> dict[str, str]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bench")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now).not_valid_after(now + dt.timedelta(days=days))
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())  # fmt: skip
    return {
        "tls.crt": cert.public_bytes(serialization.Encoding.PEM).decode(),
        "tls.key": pem.decode(),
    }


def deployment(ns: str, i: int, replicas: int, stale: bool) -> dict[str, Any]:
    name = f"d{i}"
    container: dict[str, Any] = {"name": "app", "image": "registry.local/app:1",
                                 "envFrom": [{"configMapRef": {"name": "shared" if stale else "stable"}}]}  # fmt: skip
    spec: dict[str, Any] = {"containers": [container]}
    if stale:
        container["volumeMounts"] = [{"name": "tls", "mountPath": "/tls"}]
        spec["volumes"] = [{"name": "tls", "secret": {"secretName": "tls"}}]
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "annotations": {} if stale else AUTO},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": spec}},
    }  # fmt: skip


class _Phase(msgspec.Struct):
    phase: str = ""


class _Pod(msgspec.Struct):
    status: _Phase = msgspec.field(default_factory=_Phase)


async def running(client: Client) -> int:
    n = 0

    def reduce(p: _Pod) -> None:
        nonlocal n
        n += p.status.phase == "Running"

    await client.list_reduced(resources.PODS, type=_Pod, reduce=reduce)
    return n


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        return str(resp.read().decode())


def requests_total(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for m in re.finditer(r'^kube_reloader_api_requests_total\{code="[^"]*",verb="([A-Z]+)"\} (\S+)$',
                         text, re.M):  # fmt: skip
        out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(2))
    return out


async def build(client: Client, args: argparse.Namespace) -> int:
    per_ns = args.pods // args.replicas // args.namespaces
    stale = 0
    for n in range(args.namespaces):
        ns = f"audit-{n}"
        await client.create(resources.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                                   "metadata": {"name": ns}})  # fmt: skip
        for cm in ("shared", "stable"):
            await client.create(resources.CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": cm, "namespace": ns}, "data": {"v": "1"}})  # fmt: skip
        await client.create(resources.SECRETS, {"apiVersion": "v1", "kind": "Secret",
                            "type": "kubernetes.io/tls", "metadata": {"name": "tls", "namespace": ns},
                            "stringData": tls_data(30)})  # fmt: skip
        flags = [i % args.stale_every == 0 for i in range(per_ns)]
        stale += sum(flags)
        await gather_limited(16, [client.create(resources.DEPLOYMENTS,
                                                deployment(ns, i, args.replicas, s))
                                  for i, s in enumerate(flags)])  # fmt: skip
    want = per_ns * args.namespaces * args.replicas
    started = time.monotonic()
    while (got := await running(client)) < want:
        print(f"  {got}/{want} pods running ({time.monotonic() - started:.0f}s)", flush=True)
        if time.monotonic() - started > args.timeout:
            raise SystemExit(f"only {got} of {want} pods running after {args.timeout}s")
        await asyncio.sleep(10)
    await asyncio.sleep(1.1)
    for n in range(args.namespaces):
        ns = f"audit-{n}"
        await client.patch(resources.CONFIGMAPS, "shared", {"data": {"v": "2"}}, namespace=ns,
                           patch_type=PatchType.MERGE)  # fmt: skip
        await client.patch(resources.SECRETS, "tls", {"stringData": tls_data(60)}, namespace=ns,
                           patch_type=PatchType.MERGE)  # fmt: skip
    return stale


def cli_run(kubeconfig: Path) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", CLI_CHILD, str(kubeconfig)], check=True,
                          capture_output=True, text=True)  # fmt: skip
    row: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"cli: {row}", flush=True)
    return row


async def controller_run(kubeconfig: Path, workdir: Path, interval: int) -> dict[str, Any]:
    port = free_port()
    log_path = workdir / "kube-reloader.log"
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    with log_path.open("w") as log:
        proc = subprocess.Popen(  # noqa: ASYNC220 - a long-lived child, not awaited
            [sys.executable, "-m", "kube_reloader", "--log-format=json",
             f"--metrics-addr=127.0.0.1:{port}", f"--audit-interval={interval}s"],
            env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    row: dict[str, Any] = {"interval_s": interval, "rounds": []}
    try:
        while "caches synced" not in log_path.read_text():
            if proc.poll() is not None:
                raise SystemExit(f"kube-reloader exited: see {log_path}")
            await asyncio.sleep(0.05)
        await asyncio.sleep(2)
        row["rss_synced_mib"] = round(rss_kib(proc.pid)[0] / 1024, 1)
        seen = 0
        for _ in range(3):
            before = requests_total(scrape(port))
            while (count := log_path.read_text().count('"staleness audit"')) <= seen:
                if proc.poll() is not None:
                    raise SystemExit(f"kube-reloader exited: see {log_path}")
                await asyncio.sleep(0.05)
            seen = count
            text = scrape(port)
            after = requests_total(text)
            rss, peak = rss_kib(proc.pid)
            line = [ln for ln in log_path.read_text().splitlines() if '"staleness audit"' in ln][-1]
            logged = json.loads(line)
            rnd = {
                "requests": {k: int(after.get(k, 0) - before.get(k, 0)) for k in after
                             if after.get(k, 0) != before.get(k, 0)},
                "stale_series": text.count("kube_reloader_stale_workloads{"),
                "namespaces_read": logged.get("namespaces_read"),
                "rss_mib": round(rss / 1024, 1), "rss_peak_mib": round(peak / 1024, 1),
            }  # fmt: skip
            print(f"controller round: {rnd}", flush=True)
            row["rounds"].append(rnd)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return row


async def run(args: argparse.Namespace, kubeconfig: Path, out: dict[str, Any]) -> None:
    cfg = config.load_kubeconfig([kubeconfig])
    async with Client(cfg, user_agent="kube-reloader-bench", max_connections=32) as client:
        started = time.monotonic()
        out["stale_planted"] = await build(client, args)
        out["setup_s"] = round(time.monotonic() - started)
    out["cli"] = cli_run(kubeconfig)
    out["controller"] = await controller_run(kubeconfig, Path(args.workdir), args.interval)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.audit_scale",
                                     description=__doc__.splitlines()[0])  # fmt: skip
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--replicas", type=int, default=10)
    parser.add_argument("--namespaces", type=int, default=20)
    parser.add_argument("--stale-every", type=int, default=10)
    parser.add_argument("--interval", type=int, default=20, help="--audit-interval, seconds")
    parser.add_argument("--timeout", type=int, default=2400, help="seconds for the pods to run")
    parser.add_argument("--results", default=str(Path(__file__).parent / "results"))
    args = parser.parse_args()
    results = Path(args.results) / time.strftime("%Y%m%dT%H%M%SZ-audit", time.gmtime())
    results.mkdir(parents=True, exist_ok=True)
    args.workdir = str(results)
    cluster = DevCluster(Path(tempfile.mkdtemp(prefix="kube-reloader-test-bench-audit-")))
    out: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "params": {k: v for k, v in vars(args).items() if k not in ("workdir", "results")},
    }  # fmt: skip
    try:
        cluster.up(nodes=-(-args.pods // 250) + 1, timeout=600)
        asyncio.run(run(args, cluster.kubeconfig, out))
    finally:
        cluster.down()
        (results / "audit_scale.json").write_text(json.dumps(out, indent=2) + "\n")
        print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
