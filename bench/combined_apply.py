"""Combined apply: a ConfigMap and its Deployment's image changed in one apply, for N
Deployments (200 by default). For each controller: how many template revisions (rollouts)
and new ReplicaSets the applies cost, and how long until every Deployment runs the new image
with the new ConfigMap's hash.

On a private dev cluster (its kube-controller-manager makes the ReplicaSets; kwok runs the
pods), each controller runs as a real process, cluster-wide, over a fresh namespace of its
own, with its default flags:

* kube-reloader with its mutating admission webhook (`--admission-addr`; the API server calls
  it at a 127.0.0.1 URL, and the controller keeps the webhook's caBundle current);
* kube-reloader without it;
* Stakater Reloader v1.4.21 and v2 (`--peers`), built from ../shared/peers.

An apply is what `kubectl apply -f` of a List (ConfigMap, Deployment) sends: the ConfigMap's
patch, then at once the Deployment's new image; `--parallel` applies (16) run at a time. "Converged" is from
the first apply until every Deployment carries the new image and hash and has finished its
rollout (polled every second, at most `--limit` seconds); the counts are taken 5 s later.
Timing is a benchmark, never a test: report it with the machine and the date.

    .venv/bin/python -m bench.combined_apply [--deployments 200] [--parallel 16]
        [--peers reloader-v1,reloader-v2]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from kube_reloader.core import hashing
from kube_reloader.core.objects import ResourceType
from kube_reloader.core.strategies import env_var_name
from kube_reloader.kube import config, errors, resources
from kube_reloader.kube.admissioncerts import MUTATING_WEBHOOKS
from kube_reloader.kube.client import Client

from . import oneshot
from .bad_rotation import listing, settled
from .controllers import free_port, peer_argv
from .observation import carried_hashes
from .oneshot import delete_namespace
from .reload_bench import gather_limited

IMAGES = ("registry.local/app:1", "registry.local/app:2")
WEBHOOK = "kube-reloader + webhook"
PLAIN = "kube-reloader"
TAIL = 5.0


def deployment(i: int, ns: str) -> dict[str, Any]:
    labels = {"app": f"w{i:04}"}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": f"w{i:04}", "namespace": ns,
                     "annotations": {"reloader.stakater.com/auto": "true"}},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"containers": [{"name": "app", "image": IMAGES[0],
                                       "envFrom": [{"configMapRef": {"name": f"cfg{i:04}"}}]}]}}},
    }  # fmt: skip


def webhook_config(name: str, ns: str, port: int) -> dict[str, Any]:
    """The chart's MutatingWebhookConfiguration for namespace `ns`, with a URL, no Service."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": "reload.kube-reloader.io",
            "clientConfig": {"url": f"https://127.0.0.1:{port}/mutate"},
            "rules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                       "resources": ["deployments", "statefulsets", "daemonsets"]}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
            "failurePolicy": "Ignore", "sideEffects": "None", "timeoutSeconds": 2,
            "admissionReviewVersions": ["v1"],
        }],
    }  # fmt: skip


def env_of(d: dict[str, Any]) -> tuple[str, str]:
    """The env var that carries Deployment wNNNN's ConfigMap cfgNNNN (what carried_hashes keys)."""
    cm = "cfg" + d["metadata"]["name"].removeprefix("w")
    return ("ENV", env_var_name(cm, ResourceType.CONFIGMAP))


def image(d: dict[str, Any]) -> str:
    return str(d["spec"]["template"]["spec"]["containers"][0]["image"])


async def replicasets(client: Client, ns: str) -> Counter[str]:
    """ReplicaSets per owning Deployment."""
    owned: Counter[str] = Counter()
    for rs in (await client.list(resources.REPLICASETS, namespace=ns)).items:
        for o in rs["metadata"].get("ownerReferences") or []:
            owned[o.get("name", "")] += 1
    return owned


async def ready(client: Client, log: Path, ours: bool, hook: str | None) -> None:
    """kube-reloader: its caches synced, and with the webhook its caBundle in place (then 3 s
    for the API server to load it); a peer: 5 s (both of them sync N objects in well under)."""
    deadline = time.monotonic() + 60
    if not ours:
        await asyncio.sleep(5)
        return
    while time.monotonic() < deadline:
        synced = "caches synced" in log.read_text()
        bundle = hook is None or bool(
            (await client.get(MUTATING_WEBHOOKS, hook))["webhooks"][0]["clientConfig"].get(
                "caBundle"
            )
        )
        if synced and bundle:
            await asyncio.sleep(3 if hook else 0)
            return
        await asyncio.sleep(0.2)
    raise RuntimeError(f"{log.name}: not ready within 60 s")


async def scenario(client: Client, name: str, command: tuple[list[str], dict[str, str]],
                   hook: str | None, ns: str, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:  # fmt: skip
    n = args.deployments
    await gather_limited(32, [client.create(resources.CONFIGMAPS, {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cfg{i:04}", "namespace": ns},
        "data": {"v": "0"}}) for i in range(n)])  # fmt: skip
    await gather_limited(
        32, [client.create(resources.DEPLOYMENTS, deployment(i, ns)) for i in range(n)]
    )
    while not all(settled(d) for d in await listing(client, ns)):  # noqa: ASYNC110 - polling the API
        await asyncio.sleep(2)
    before = {d["metadata"]["name"]: d["metadata"]["generation"] for d in await listing(client, ns)}
    rs_before = await replicasets(client, ns)
    print(f"{name}: {n} Deployments available", flush=True)
    log_path = workdir / f"{name.replace(' ', '').replace('+', '-')}.log"
    argv, env = command
    with log_path.open("w") as log:
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)  # noqa: ASYNC220
    try:
        await ready(client, log_path, name in (WEBHOOK, PLAIN), hook)
        want = hashing.configmap_hash({"v": "1"})
        patch = {
            "spec": {"template": {"spec": {"containers": [{"name": "app", "image": IMAGES[1]}]}}}
        }

        async def apply(i: int) -> None:
            await client.patch(
                resources.CONFIGMAPS, f"cfg{i:04}", {"data": {"v": "1"}}, namespace=ns
            )
            await client.patch(resources.DEPLOYMENTS, f"w{i:04}", patch, namespace=ns)

        started = time.monotonic()
        await gather_limited(args.parallel, [apply(i) for i in range(n)])
        converged: float | None = None
        while time.monotonic() - started < args.limit:
            items = await listing(client, ns)
            done = [d for d in items if image(d) == IMAGES[1] and settled(d)
                    and carried_hashes(d).get(env_of(d)) == want]  # fmt: skip
            if len(done) == n:
                converged = time.monotonic() - started
                break
            await asyncio.sleep(1)
        await asyncio.sleep(TAIL)  # a reloader's late write (one more rollout) counts
        items = await listing(client, ns)
        rs_after = await replicasets(client, ns)
        revisions = Counter(
            d["metadata"]["generation"] - before[d["metadata"]["name"]] for d in items
        )
        made = Counter(rs_after[k] - rs_before[k] for k in before)
        print(
            f"{name}: converged {converged}s; revisions {dict(revisions)}; new RS {dict(made)}",
            flush=True,
        )
        return {"deployments": n, "converged_s": None if converged is None else round(converged, 1),
                "revisions": sum(k * v for k, v in revisions.items()),
                "replicasets": sum(k * v for k, v in made.items()),
                "revisions_per_deployment": {str(k): v for k, v in sorted(revisions.items())},
                "replicasets_per_deployment": {str(k): v for k, v in sorted(made.items())}}  # fmt: skip
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def run(args: argparse.Namespace, kubeconfig: Path, bins: Path, out: dict[str, Any],
              workdir: Path) -> None:  # fmt: skip
    cfg = config.load_kubeconfig([kubeconfig])
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    ours = [
        sys.executable,
        "-m",
        "kube_reloader",
        "--log-format=json",
        "--metrics-addr=127.0.0.1:0",
    ]
    async with Client(cfg, user_agent="kube-reloader-bench", max_connections=64) as client:
        for name in [WEBHOOK, PLAIN, *args.peers]:
            ns = "ca-" + name.replace(" + webhook", "-hook").replace("kube-reloader", "kr")
            await client.create(resources.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                                       "metadata": {"name": ns}})  # fmt: skip
            hook = f"kube-reloader-bench-{ns}" if name == WEBHOOK else None
            if name == WEBHOOK:
                port = free_port()
                await client.create(MUTATING_WEBHOOKS, webhook_config(str(hook), ns, port))
                command = ([*ours, f"--admission-addr=127.0.0.1:{port}", f"--admission-webhook-config={hook}",
                            "--admission-ca-secret=admission-ca"], {**env, "POD_NAMESPACE": ns})  # fmt: skip
            else:
                command = (ours, env) if name == PLAIN else peer_argv(name, bins, env, [])
            try:
                out["results"][name] = await scenario(
                    client, name, command, hook, ns, args, workdir
                )
            finally:
                if hook is not None:
                    with contextlib.suppress(errors.NotFound):
                        await client.delete(MUTATING_WEBHOOKS, hook)
                await delete_namespace(client, ns)


def table(doc: dict[str, Any]) -> list[str]:
    """The Markdown table of one run (bench.readme puts it into bench/README.md)."""
    p = doc["params"]
    peers = ", ".join(f"{k} {v}" for k, v in doc["peers"].items())
    parallel = p.get("parallel", 16)  # runs before --parallel: 16
    lines = [f"{doc['date']} — {doc['machine']} — one run: {p['deployments']:,} Deployments, each "
             f"applied once with its ConfigMap (new data) and a new image, {parallel} applies at "
             f"a time; {peers}.", "",
             "| controller | template revisions | new ReplicaSets | Deployments rolled twice | converged (s) |",
             "|---|---|---|---|---|"]  # fmt: skip
    for name, r in doc["results"].items():
        twice = sum(v for k, v in r["revisions_per_deployment"].items() if int(k) >= 2)
        converged = (
            r["converged_s"] if r["converged_s"] is not None else f"not within {p['limit']:g}"
        )
        lines.append(f"| {name} | {r['revisions']:,} | {r['replicasets']:,} | {twice:,} of "
                     f"{r['deployments']:,} | {converged} |")  # fmt: skip
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.combined_apply",
                                     description=__doc__.splitlines()[0])  # fmt: skip
    parser.add_argument("--deployments", type=int, default=200)
    parser.add_argument("--parallel", type=int, default=16, help="applies at a time")
    parser.add_argument("--limit", type=float, default=600.0)
    oneshot.add_options(parser)
    return oneshot.run_tool(oneshot.parse(parser), "combined-apply", run)


if __name__ == "__main__":
    raise SystemExit(main())
