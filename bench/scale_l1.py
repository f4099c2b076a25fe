"""L1, scale: 50,000 ConfigMaps and Secrets, 10,000 Deployments and 20,000 pods, then a burst of
changes, for kube-reloader and each Reloader peer in turn, on one private dev cluster.

The objects are made once (kwok nodes of 250 pods; the pods are the Deployments' own, made by
kube-controller-manager). Each controller then runs alone against them:

* start to first reload: a probe ConfigMap, read by a Deployment of its own, is changed every
  0.5 s from the controller's start until the Deployment carries the change;
* RSS after that (ready), peak RSS (VmHWM) and RSS 10 s after the burst converged (steady);
* a burst: `--burst` configs (half ConfigMaps, half Secrets, each read by one Deployment no
  other controller's burst touches) changed at once, 32 at a time; latency per (change,
  Deployment) from the change being accepted to the harness's watch seeing the new hash;
  convergence: from the last change to the last Deployment carrying its final state, up to
  `--converge-timeout` s (then "not converged: N");
* API requests from the API server's audit log, from start to stop; CPU seconds from /proc.

A controller that does not reload the probe within `--ready-timeout` s is reported as stopped
at start; one whose burst does not converge, with the pairs it never reached.

    .venv/bin/python -m bench.scale_l1 [--configs 50000] [--deployments 10000] [--burst 500]
    .venv/bin/python -m bench.readme --l1 bench/results/<stamp>-l1   # its table into README
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kube_reloader.devcluster.building import Builder
from kube_reloader.devcluster.cluster import DevCluster
from kube_reloader.devcluster.peers import PEERS
from kube_reloader.kube import config, resources
from kube_reloader.kube.client import Client

from .analysis import convergence
from .audit_scale import running
from .baseline import CURRENT, PEER_NAMES, current_tree
from .controllers import Controller, controller_argv
from .observation import Observation, audit_counts, watch_workloads
from .oneshot import peer_versions
from .reload_bench import gather_limited
from .runs import HARNESS_UA, Plan, Run, Scenario, cm, env_from, secret, workload
from .summary import get

L1 = Scenario("L1", "Scale: 50k configs, 10k Deployments, 20k pods", None, None)  # type: ignore[arg-type]


def layout(args: argparse.Namespace) -> tuple[list[str], list[dict[str, Any]], Plan]:
    """Namespaces, objects (ConfigMaps, Secrets, Deployments) and which Deployment reads what."""
    nss = [f"l1-{n}" for n in range(args.namespaces)]
    plan = Plan(nss)
    objs: list[dict[str, Any]] = []
    per_ns = args.configs // 2 // len(nss)
    value = "v" * args.value_bytes
    for ns in nss:
        for i in range(per_ns):
            objs.append(cm(f"cm-{i}", ns, {"key": value}))
            objs.append(secret(f"secret-{i}", ns, {"key": value}))
    for d in range(args.deployments):
        ns, i = nss[d % len(nss)], d // len(nss)
        refs = (("CONFIGMAP", f"cm-{i}"), ("SECRET", f"secret-{i}"))
        w = workload("Deployment", f"d-{i}", ns, env_from(*refs))
        w["spec"]["replicas"] = args.replicas
        objs.append(w)
        plan.workloads.append(("Deployment", ns, f"d-{i}"))
        for rtype, name in refs:
            plan.affects[(rtype, ns, name)] = [("Deployment", ns, f"d-{i}")]
    return nss, objs, plan


async def build(client: Client, args: argparse.Namespace) -> Plan:
    nss, objs, plan = layout(args)
    started = time.monotonic()
    await gather_limited(16, [client.create(resources.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                                                   "metadata": {"name": n}}) for n in nss])  # fmt: skip
    res = {
        "ConfigMap": resources.CONFIGMAPS,
        "Secret": resources.SECRETS,
        "Deployment": resources.DEPLOYMENTS,
    }
    await gather_limited(48, [client.create(res[o["kind"]], o) for o in objs])
    print(f"  {len(objs)} objects created in {time.monotonic() - started:.0f} s", flush=True)
    want = args.deployments * args.replicas
    while (got := await running(client)) < want:
        print(f"  {got}/{want} pods running ({time.monotonic() - started:.0f} s)", flush=True)
        if time.monotonic() - started > args.setup_timeout:
            raise SystemExit(f"only {got} of {want} pods running after {args.setup_timeout} s")
        await asyncio.sleep(15)
    return plan


def _pct(xs: list[float], q: float) -> float | None:
    s = sorted(xs)
    return round(s[min(len(s) - 1, round(q * (len(s) - 1)))], 1) if s else None


async def one(name: str, k: int, client: Client, plan: Plan, kubeconfig: Path, audit: Path,
              bins: Path, args: argparse.Namespace, out: Path) -> dict[str, Any]:  # fmt: skip
    """One controller: probe to first reload, burst, convergence, steady RSS."""
    # Its own probe and burst: Deployments no other controller's run touches.
    step = len(plan.workloads) // (len(args.controllers) + 1)
    mine = plan.workloads[k * step : (k + 1) * step]
    probe, burst = mine[0], mine[1 : 1 + args.burst]
    obs: list[Observation] = []
    watching = asyncio.Event()
    watcher = asyncio.create_task(watch_workloads(client, set(plan.namespaces), obs, watching))
    await watching.wait()
    offset = audit.stat().st_size
    argv, env = controller_argv(name, bins, L1, {**os.environ, "KUBECONFIG": str(kubeconfig)})
    ctrl = Controller(name, argv, env, out / f"{name}.log")
    run = Run(
        L1,
        name,
        client,
        Plan(plan.namespaces, plan.affects, mine),
        random.Random(k),
        0.0,
        args,
        process=ctrl,
    )
    row: dict[str, Any] = {"controller": name}
    try:
        _, pns, pname = probe
        cm_name = f"cm-{pname.removeprefix('d-')}"
        n = 0
        while (time.monotonic() - ctrl.started) < args.ready_timeout:
            await run.update("CONFIGMAP", pns, cm_name, {"key": f"probe-{name}-{n}"})
            n += 1
            await asyncio.sleep(0.5)
            if not convergence(run, obs)[0]:
                row["first_reload_s"] = round(time.monotonic() - ctrl.started, 1)
                break
        else:
            row["stopped"] = (
                f"no reload of the probe within {args.ready_timeout:.0f} s of its start"
            )
            return row
        row["rss_ready_mib"] = round(ctrl.samples[-1][2] / 2**20, 1) if ctrl.samples else None
        ctrl.mark_driving()
        run.clear_updates()
        tasks = []
        for j, (_, ns, wname) in enumerate(burst):
            i = wname.removeprefix("d-")
            rtype, rname = ("CONFIGMAP", f"cm-{i}") if j % 2 == 0 else ("SECRET", f"secret-{i}")
            tasks.append(run.update(rtype, ns, rname, {"key": f"burst-{name}-{j}"}))
        await gather_limited(32, tasks)
        last = max(t for t, _, _ in run.updates)
        deadline = last + args.converge_timeout
        while (pending := convergence(run, obs)[0]) and time.monotonic() < deadline:  # noqa: ASYNC110 - polls what the watch saw
            await asyncio.sleep(0.5)
        row["changes"] = len(run.updates)
        row["converged_s"] = convergence(run, obs)[1]
        row["not_converged"] = pending
        lat = latencies(run, obs)
        row["latency_ms"] = {"p50": _pct(lat, 0.5), "p99": _pct(lat, 0.99), "max": _pct(lat, 1.0)}
        await asyncio.sleep(10)
        row["rss_steady_mib"] = round(ctrl.samples[-1][2] / 2**20, 1) if ctrl.samples else None
    finally:
        ctrl.stop()
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await watcher
        row["rss_peak_mib"] = round(ctrl.peak / 2**20, 1)
        row["cpu_seconds"] = round(ctrl.samples[-1][1], 2) if ctrl.samples else None
        row["api_requests"] = audit_counts(audit, offset)[1]
    return row


def latencies(run: Run, obs: list[Observation]) -> list[float]:
    from .analysis import carried

    by_workload: dict[tuple[str, str, str], list[Observation]] = {}
    for o in list(obs):
        by_workload.setdefault(o.workload, []).append(o)
    out = []
    for t, res, h in run.updates:
        for w in run.plan.affects.get(res, []):
            seen = next(
                (o.t for o in by_workload.get(w, []) if o.t >= t - 0.005 and carried(o, res) == h),
                None,
            )
            if seen is not None:
                out.append((seen - t) * 1000)
    return out


async def main_async(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    bins = Builder(extra=tuple(p for p in args.controllers if p != CURRENT),
                   report=lambda line: print(line, flush=True)).ensure().bin  # fmt: skip
    state = Path(tempfile.mkdtemp(prefix="kube-reloader-l1-"))
    cluster = DevCluster(state, report=lambda line: None)
    doc: dict[str, Any] = {"meta": {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "current": current_tree(), "peers": peer_versions(p for p in args.controllers if p in PEERS),
        "params": {k: v for k, v in vars(args).items() if k not in ("results",)}}, "results": []}  # fmt: skip
    try:
        await asyncio.to_thread(cluster.up, nodes=-(-args.deployments * args.replicas // 250) + 1,
                                timeout=600, audit=True)  # fmt: skip
        cfg = config.load_kubeconfig([cluster.kubeconfig])
        async with Client(cfg, user_agent=HARNESS_UA, max_connections=64) as client:
            started = time.monotonic()
            plan = await build(client, args)
            doc["meta"]["setup_s"] = round(time.monotonic() - started)
            for k, name in enumerate(args.controllers):
                print(f"{name}: start, probe, burst of {args.burst}", flush=True)
                row = await one(name, k, client, plan, cluster.kubeconfig, state / "audit.log",
                                bins, args, out)  # fmt: skip
                print(f"  {row}", flush=True)
                doc["results"].append(row)
                (out / "results.json").write_text(json.dumps(doc, indent=2))
    finally:
        cluster.down()
    return doc


def table(doc: dict[str, Any]) -> list[str]:
    """The Markdown table of one L1 run (bench.readme puts it into bench/README.md)."""
    m = doc["meta"]
    p = m["params"]
    lines = [f"{m['date']} — {m['machine']} — one run: {p['configs']:,} ConfigMaps and Secrets "
             f"({p['value_bytes']} bytes each), {p['deployments']:,} Deployments × {p['replicas']} pods "
             f"(set up in {m.get('setup_s', '?')} s), a burst of {p['burst']} changes per controller. "
             f"kube-reloader: `{m['current']}`; " + ", ".join(f"{k} {v}" for k, v in m["peers"].items()) + ".", "",
             "| controller | start to first reload (s) | RSS ready / peak / steady (MiB) | burst p50 / p99 (ms) "
             "| converged (s) | not converged | API requests | CPU s |", "|---" * 8 + "|"]  # fmt: skip
    for r in doc["results"]:
        if "stopped" in r:
            lines.append(f"| {r['controller']} | stopped: {r['stopped']} | — / {r.get('rss_peak_mib')} / — "
                         f"| — | — | — | {r.get('api_requests')} | {r.get('cpu_seconds')} |")  # fmt: skip
            continue
        lat = " / ".join(
            f"{v:,.1f}" if isinstance(v, float) else "—"
            for v in (get(r, "latency_ms.p50"), get(r, "latency_ms.p99"))
        )
        lines.append(f"| {r['controller']} | {r['first_reload_s']} | {r['rss_ready_mib']} / {r['rss_peak_mib']} / "
                     f"{r['rss_steady_mib']} | {lat} | {r['converged_s'] if r['converged_s'] is not None else '—'} "
                     f"| {r['not_converged']} of {r['changes']} | {r['api_requests']:,} | {r['cpu_seconds']} |")  # fmt: skip
    return lines


def main() -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.scale_l1", description=__doc__.splitlines()[0]
    )
    p.add_argument("--configs", type=int, default=50000, help="ConfigMaps + Secrets (half each)")
    p.add_argument("--value-bytes", type=int, default=1024)
    p.add_argument("--deployments", type=int, default=10000)
    p.add_argument("--replicas", type=int, default=2)
    p.add_argument("--namespaces", type=int, default=50)
    p.add_argument("--burst", type=int, default=500)
    p.add_argument("--controllers", type=lambda s: [x.strip() for x in s.split(",") if x.strip()],
                   default=[CURRENT, *PEER_NAMES])  # fmt: skip
    p.add_argument("--ready-timeout", type=float, default=900.0)
    p.add_argument("--converge-timeout", type=float, default=300.0)
    p.add_argument("--setup-timeout", type=float, default=3600.0)
    p.add_argument("--results", default=str(Path(__file__).parent / "results"))
    args = p.parse_args()
    if any(c not in (CURRENT, *PEER_NAMES) for c in args.controllers):
        p.error(f"--controllers: of {CURRENT},{','.join(PEER_NAMES)}")
    args.quick = False
    out = Path(args.results) / time.strftime("%Y%m%dT%H%M%SZ-l1", time.gmtime())
    out.mkdir(parents=True, exist_ok=True)
    doc = asyncio.run(main_async(args, out))
    print("\n".join(table(doc)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
