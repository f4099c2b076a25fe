"""TLS rotation, measured as a user feels it: cert-manager renews a short-lived certificate
(`tests/node/tlsharness.py`: a private CA, LIFETIME s certificates renewed every RENEW_AFTER s)
and a prober inside the real node's network connects every 0.1 s over TLS. Two of the four
cases of `tests/node/test_tls_cases.py`, each with every controller on the same renewals:

* `nats`: the real nats-server, one replica (a StatefulSet);
* `webhook`: a server that loads its certificate once, two replicas, registered as a
  `failurePolicy: Fail` validating webhook for pod creation in another namespace (a pod is
  created there with dryRun every 0.2 s).

kube-reloader uses `signal` (SIGHUP) for NATS and `restart-in-place` for the webhook, with
`--reload-tls-secrets` and no Reloader annotation. Stakater Reloader v1.4.21 and v2 get their
best case: `secret.reloader.stakater.com/reload` on the workload (a rolling restart is what
they do). Per controller and case: seconds from cert-manager's renewal (seen in the API) until
every ready pod serves the new serial, seconds of failed TLS connections, NATS sessions
dropped, failed admissions, and restarts (containers restarted plus pods replaced) per
renewal.

Needs root (the real node). A benchmark, never a test: report it with the machine and date.

    .venv/bin/python -m bench.tls_rotation [--renewals 3] [--peers reloader-v1,reloader-v2]
        [--state DIR]   # reuse a running `dev-cluster up --real-node` cluster
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import secrets
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from tests.harness import running
from tests.node import tlsharness as t
from tests.node import tlsworkloads as w
from tests.node import webhookpath as wp
from tests.node.nodeharness import agent_sidecar, import_images
from tests.peers import PeerProcess
from tests.waiting import eventually

from kube_reloader.core.annotations import POD_STRATEGY, SIGNAL
from kube_reloader.core.matching import MatchConfig
from kube_reloader.devcluster import certmanager
from kube_reloader.devcluster.building import Builder
from kube_reloader.devcluster.cluster import DevCluster
from kube_reloader.devcluster.node import RealNode
from kube_reloader.devcluster.nodebuild import NodeBuilder
from kube_reloader.kube import config, resources
from kube_reloader.kube.client import Client

from .oneshot import delete_namespace, header

CASES = ("nats", "webhook")
HERE = Path(__file__).resolve().parent


def objects(case: str, controller: str, image: str) -> list[dict[str, Any]]:
    if controller == "kube-reloader":
        if case == "nats":
            agent = agent_sidecar(image, restart=False, volumes={"tls": "/tls"},
                                  process="nats-server")  # fmt: skip
            return w.nats_statefulset("nats", agent=agent,
                                      annotations={POD_STRATEGY: "signal", SIGNAL: "SIGHUP"})  # fmt: skip
        spec = w.tls_server("webhook-tls", agent=agent_sidecar(image, restart=True))
        return [w.workload("Deployment", "webhook", spec, replicas=2,
                           annotations={POD_STRATEGY: "restart-in-place"})]  # fmt: skip
    secret = f"{case}-tls"
    reload = {"secret.reloader.stakater.com/reload": secret}
    if case == "nats":
        return w.nats_statefulset("nats", annotations=reload)
    return [w.workload("Deployment", "webhook", w.tls_server(secret), replicas=2,
                       annotations=reload)]  # fmt: skip


@contextlib.asynccontextmanager
async def controlling(client: Client, kubeconfig: Path, name: str, ns: str,
                      logs: Path) -> AsyncIterator[None]:  # fmt: skip
    if name == "kube-reloader":
        async with running(client, ns, match=MatchConfig(reload_tls_secrets=True)):
            yield
        return
    peer = PeerProcess(name, kubeconfig, ns, logs, ha=False)
    try:
        yield
    finally:
        peer.stop()


async def settled(client: Client, ns: str, app: str) -> tuple[int, set[str]]:
    """The pods' state once the last reload has ended: the same for 3 s running (at most
    30 s), so a restart still under way counts."""
    last, since = await t.pod_state(client, ns, app), time.monotonic()
    deadline = since + 30
    while time.monotonic() < deadline and time.monotonic() - since < 3:
        await asyncio.sleep(0.5)
        now = await t.pod_state(client, ns, app)
        if now != last:
            last, since = now, time.monotonic()
    return last


async def renewals(client: Client, ns: str, secret: str, prober: t.Prober, targets: t.Targets,
                   count: int) -> list[float | None]:  # fmt: skip
    """Per renewal: seconds until every ready pod served its serial (None: not before the next
    renewal or the old certificate's end)."""
    out: list[float | None] = []
    serial = await eventually(lambda: t.serial_of(client, ns, secret), timeout=60,
                              what="the first issuance")  # fmt: skip
    for _ in range(count):
        serial = await t.renewals_after(client, ns, secret, serial)
        seen = time.monotonic()
        try:
            await eventually(lambda s=serial: t.all_serving(prober, targets, s),  # type: ignore[misc]
                             timeout=t.RENEW_AFTER - 1, interval=0.1, what="the new serial")  # fmt: skip
            out.append(round(time.monotonic() - seen, 1))
        except AssertionError:
            out.append(None)
    return out


async def case_run(client: Client, kubeconfig: Path, node: RealNode, case: str, name: str,
                   image: str, count: int, logs: Path) -> dict[str, Any]:  # fmt: skip
    ns = f"tls-{case}-{secrets.token_hex(3)}"
    await client.create(resources.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                               "metadata": {"name": ns}})  # fmt: skip
    ca, host = await t.issue(client, ns, case, ips=("127.0.0.1",) if case == "webhook" else ())
    await w.create_all(client, ns, *objects(case, name, image))
    port = 4222 if case == "nats" else 8443
    handshake = t.nats_handshake if case == "nats" else t.https_handshake
    admissions = wp.Admissions()
    prober: t.Prober | None = None
    try:
        async with contextlib.AsyncExitStack() as stack:
            targets = await stack.enter_async_context(t.following(client, ns, case, port))
            await stack.enter_async_context(controlling(client, kubeconfig, name, ns, logs))
            if case == "webhook":
                guarded = await stack.enter_async_context(w.guarded_namespace(client))
                relay = await stack.enter_async_context(wp.Relay(node.netns_path, targets))
                await stack.enter_async_context(w.registered(
                    client, w.webhook_configuration(ns, relay.port, ca, guarded)))  # fmt: skip
                admissions = await stack.enter_async_context(wp.admitting(client, guarded))
            before = await t.pod_state(client, ns, case)
            prober = stack.enter_context(t.Prober(node.netns_path, targets, ca, host, handshake,
                                                  session=case == "nats"))  # fmt: skip
            served = await renewals(client, ns, f"{case}-tls", prober, targets, count)
            after = await settled(client, ns, case)
            replaced = len(targets.uids) - len(before[1])
    finally:
        await delete_namespace(client, ns)
    assert prober is not None
    r = prober.record
    # containers restarted in place (pods kept from the start), plus pods replaced
    in_place = after[0] - before[0] if before[1] <= after[1] else after[0]
    restarts = max(0, in_place) + replaced
    return {"case": case, "controller": name, "renewals": count, "served_after_s": served,
            "failed_seconds": r.failed_seconds(), "failed_connections": len(r.failures),
            "probes": r.ok, "dropped_sessions": len(r.drops),
            "admissions": admissions.ok, "failed_admissions": len(admissions.failures),
            "restarts_per_renewal": round(restarts / count, 2),
            "failures_sample": [e for _, e in r.failures[:3]]}  # fmt: skip


async def run(args: argparse.Namespace, cluster: DevCluster, out: dict[str, Any],
              workdir: Path) -> None:  # fmt: skip
    node = RealNode(cluster.state_dir, NodeBuilder().ensure().binaries)
    images = import_images(node)
    t.import_tls_images(node)
    cfg = config.load_kubeconfig([cluster.kubeconfig])
    async with Client(cfg, user_agent="kube-reloader-bench") as client:
        with certmanager.running(cluster.kubeconfig, workdir / "cm.log"):
            for case in CASES:
                for name in ("kube-reloader", *args.peers):
                    row = await case_run(client, cluster.kubeconfig, node, case, name,
                                         images.controller, args.renewals, workdir)  # fmt: skip
                    print(json.dumps(row), flush=True)
                    out["results"].append(row)


def table(doc: dict[str, Any]) -> list[str]:
    """The Markdown table of one run (bench.readme puts it into bench/README.md)."""
    peers = ", ".join(f"{k} {v}" for k, v in doc["peers"].items())
    p = doc["params"]
    lines = [f"{doc['date']} — {doc['machine']} — one run, {p['renewals']} renewals per row "
             f"(certificates of {t.LIFETIME} s renewed every {t.RENEW_AFTER} s); {peers}. "
             "kube-reloader: `signal` for NATS, `restart-in-place` for the webhook.", "",
             "| case | controller | new serial served after (s, per renewal) | failed connections (s) "
             "| NATS sessions dropped | failed admissions | restarts per renewal |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in doc["results"]:
        served = ", ".join("not served" if s is None else f"{s}" for s in r["served_after_s"])
        admissions = (f"{r['failed_admissions']} of {r['admissions']}"
                      if r["case"] == "webhook" else "—")  # fmt: skip
        dropped = str(r["dropped_sessions"]) if r["case"] == "nats" else "—"
        lines.append(f"| {r['case']} | {r['controller']} | {served} | {r['failed_seconds']} "
                     f"| {dropped} | {admissions} | {r['restarts_per_renewal']} |")  # fmt: skip
    return lines


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m bench.tls_rotation",
                                description=__doc__.splitlines()[0])  # fmt: skip
    p.add_argument("--renewals", type=int, default=3)
    p.add_argument("--peers", type=lambda s: [x for x in s.split(",") if x],
                   default=["reloader-v1", "reloader-v2"])  # fmt: skip
    p.add_argument("--state", type=Path, help="a running real-node dev cluster's state dir")
    p.add_argument("--results", default=str(HERE / "results"))
    args = p.parse_args()
    workdir = Path(args.results) / time.strftime("%Y%m%dT%H%M%SZ-tls-rotation", time.gmtime())
    workdir.mkdir(parents=True, exist_ok=True)
    Builder(extra=tuple(args.peers)).ensure()
    out = header(args.peers, {"renewals": args.renewals, "peers": args.peers}, [])
    cluster = DevCluster(args.state or Path(tempfile.mkdtemp(prefix="kr-tls-bench-")))
    try:
        if args.state is None:
            cluster.up(nodes=1, build=True, real_node=True, timeout=600)
        asyncio.run(run(args, cluster, out, workdir))
    finally:
        if args.state is None:
            cluster.down()
    (workdir / "results.json").write_text(json.dumps(out, indent=2))
    print("\n".join(table(out)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
