"""Bad rotation: one Secret referenced by N Deployments (2,000 by default) gets a value that
makes new pods fail readiness; then a fixed value. For each controller: how many workloads
were broken (rolled to the bad value), and how long until every one runs the fixed value.

On a private dev cluster (its kube-controller-manager rolls the Deployments and reports their
progress deadlines; kwok makes pods Ready except those running the bad value: the dev
cluster's readiness gate, devcluster/stages.py), each controller runs as a real process,
cluster-wide, over a fresh namespace of its own:

* Stakater Reloader v1.4.21 and v2 (`--peers`), built from ../shared/peers as `make bench`
  builds them (`devcluster.peers`);
* kube-reloader with `--max-concurrent-rollouts=CAP --halt-after-failures=HALT`.

"Broken" counts the Deployments whose template carries the bad value once nothing more
changes (30 s with no new one, past the 15 s progress deadline; or all N); "converged" is the time from the fixed value's
accepted update until every Deployment carries it and has finished its rollout (polled every
second, at most `--limit` seconds). Timing is a benchmark, never a test: report it with the
machine and the date.

    .venv/bin/python -m bench.bad_rotation [--deployments 2000] [--cap 50] [--halt 3]
        [--peers reloader-v1,reloader-v2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kube_reloader.core import hashing
from kube_reloader.devcluster.stages import NEVER_READY_IF_ENV
from kube_reloader.kube import config, resources
from kube_reloader.kube.client import Client

from . import oneshot
from .controllers import peer_argv
from .observation import carried_hashes
from .oneshot import delete_namespace
from .reload_bench import gather_limited

ENV = "STAKATER_DB_SECRET"
#: the Deployments' progressDeadlineSeconds, and how long "broken" must stay unchanged to be
#: final (past the deadline, so the circuit breaker has had its failures)
DEADLINE = 15
QUIET = DEADLINE + 15


def content(value: str) -> str:
    return hashing.secret_hash({"password": value.encode()})


def deployment(name: str, ns: str, bad: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns,
                     "annotations": {"reloader.stakater.com/auto": "true"}},
        "spec": {"replicas": 1, "progressDeadlineSeconds": DEADLINE, "selector": {"matchLabels": labels},
                 "template": {
                     "metadata": {"labels": labels, "annotations": {NEVER_READY_IF_ENV: bad}},
                     "spec": {"containers": [{"name": "app", "image": "registry.local/app:1",
                                              "envFrom": [{"secretRef": {"name": "db"}}]}]}}},
    }  # fmt: skip


def carried(d: dict[str, Any]) -> str | None:
    return carried_hashes(d).get(("ENV", ENV))


def settled(d: dict[str, Any]) -> bool:
    s, want = d.get("status", {}), d["spec"]["replicas"]
    return s.get("observedGeneration") == d["metadata"]["generation"] and all(
        s.get(f) == want for f in ("replicas", "updatedReplicas", "availableReplicas")
    )


async def listing(client: Client, ns: str) -> list[dict[str, Any]]:
    return (await client.list(resources.DEPLOYMENTS, namespace=ns)).items


async def scenario(client: Client, kubeconfig: Path, name: str,
                   command: tuple[list[str], dict[str, str]], args: argparse.Namespace,
                   workdir: Path) -> dict[str, Any]:  # fmt: skip
    ns = f"bad-{name}"
    n = args.deployments
    await client.create(resources.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                               "metadata": {"name": ns}})  # fmt: skip
    await client.create(resources.SECRETS, {"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": "db", "namespace": ns}, "stringData": {"password": "good"}})  # fmt: skip
    bad = content("bad")
    await gather_limited(32, [client.create(resources.DEPLOYMENTS, deployment(f"w{i:04}", ns, bad))
                              for i in range(n)])  # fmt: skip
    while not all(settled(d) for d in await listing(client, ns)):  # noqa: ASYNC110 - polling the API
        await asyncio.sleep(2)
    print(f"{name}: {n} Deployments available", flush=True)
    log = (workdir / f"{name}.log").open("w")
    argv, env = command
    proc = subprocess.Popen(  # noqa: ASYNC220 - a long-lived child, not awaited
        argv, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        await asyncio.sleep(15)  # synced (both log it; 15 s is ample for this size)
        await client.patch(resources.SECRETS, "db", {"stringData": {"password": "bad"}},
                           namespace=ns)  # fmt: skip
        started = time.monotonic()
        broken, last_change = 0, time.monotonic()
        while time.monotonic() - last_change < QUIET and broken < n:
            await asyncio.sleep(1)
            now = sum(1 for d in await listing(client, ns) if carried(d) == bad)
            if now != broken:
                broken, last_change = now, time.monotonic()
        broke_in = last_change - started
        print(f"{name}: {broken} of {n} broken ({broke_in:.1f}s)", flush=True)
        await client.patch(resources.SECRETS, "db", {"stringData": {"password": "fixed"}},
                           namespace=ns)  # fmt: skip
        fixed, started = content("fixed"), time.monotonic()
        converged: float | None = None
        done = 0
        while time.monotonic() - started < args.limit:
            items = await listing(client, ns)
            done = sum(1 for d in items if carried(d) == fixed and settled(d))
            if done == n:
                converged = time.monotonic() - started
                break
            await asyncio.sleep(1)
        print(f"{name}: converged {converged}s ({done} of {n})", flush=True)
        return {"deployments": n, "broken": broken, "broken_after_s": round(broke_in, 1),
                "converged_s": None if converged is None else round(converged, 1),
                "converged_workloads": done}  # fmt: skip
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
        await delete_namespace(client, ns)


async def run(args: argparse.Namespace, kubeconfig: Path, bins: Path, out: dict[str, Any],
              workdir: Path) -> None:  # fmt: skip
    cfg = config.load_kubeconfig([kubeconfig])
    ours = [sys.executable, "-m", "kube_reloader", "--log-format=json",
            "--metrics-addr=127.0.0.1:0", f"--max-concurrent-rollouts={args.cap}",
            f"--halt-after-failures={args.halt}"]  # fmt: skip
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    commands = {p: peer_argv(p, bins, env, []) for p in args.peers}
    commands["kube-reloader"] = (ours, env)
    async with Client(cfg, user_agent="kube-reloader-bench", max_connections=64) as client:
        for name, command in commands.items():
            out["results"][name] = await scenario(client, kubeconfig, name, command, args, workdir)


def table(doc: dict[str, Any]) -> list[str]:
    """The Markdown table of one run (bench.readme puts it into bench/README.md)."""
    p = doc["params"]
    peers = ", ".join(f"{k} {v}" for k, v in doc["peers"].items())
    lines = [f"{doc['date']} — {doc['machine']} — one run: {p['deployments']:,} Deployments on one "
             f"Secret; kube-reloader with `--max-concurrent-rollouts={p['cap']} "
             f"--halt-after-failures={p['halt']}`; {peers}.", "",
             "| controller | broken | time to break them (s) | converged after the fix (s) |",
             "|---|---|---|---|"]  # fmt: skip
    for name, r in doc["results"].items():
        converged = (
            f"{r['converged_s']}"
            if r["converged_s"] is not None
            else f"not within {p['limit']:g} ({r['converged_workloads']:,} of {r['deployments']:,})"
        )
        lines.append(f"| {name} | {r['broken']:,} of {r['deployments']:,} | {r['broken_after_s']} "
                     f"| {converged} |")  # fmt: skip
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bad_rotation",
                                     description=__doc__.splitlines()[0])  # fmt: skip
    parser.add_argument("--deployments", type=int, default=2000)
    parser.add_argument("--cap", type=int, default=50)
    parser.add_argument("--halt", type=int, default=3)
    parser.add_argument("--limit", type=float, default=900.0)
    oneshot.add_options(parser)
    return oneshot.run_tool(oneshot.parse(parser), "bad-rotation", run)


if __name__ == "__main__":
    raise SystemExit(main())
