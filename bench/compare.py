"""Side-by-side benchmark: kube-reloader vs Stakater Reloader v1 on one local control plane.

Both controllers run, one after the other, as local processes against the same dev cluster
(etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok: reloads cause real
rollouts), through the same scenarios (Reloader's load test S1-S13, portable version, plus
M1 memory at scale, M2 coalescing, M3 SIGKILL restart) with the same seed. Everything is
measured from outside, identically for both:

* reload latency: update accepted -> the workload's pod template carries the new hash, seen by
  this harness's own watch (p50/p95/p99/max);
* correctness: final state per workload, (update, workload) pairs applied, rollouts beyond the
  distinct changes (duplicates), rollouts on untouched workloads (spurious);
* API load: the API server's audit log (requests by verb and resource, all user agents but the
  harness's and the control plane's own);
* CPU seconds and RSS (peak/average) from /proc.

Flags are Reloader-equivalent for both (env-vars strategy, all namespaces, JSON logs; for
kube-reloader coalescing and rate limits off), except M2 which runs kube-reloader's defaults.

    python -m bench.compare [--scenarios S1,S2] [--quick] [--seed 7] [--baseline REF]

--baseline REF adds a column: kube-reloader run from REF's src/ (git archive), so each scenario
runs the current tree, kube-reloader@REF and Reloader in one invocation, and the report opens
with a before/after table (bench/baseline.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kube_reloader.devcluster.building import Builder
from kube_reloader.devcluster.cluster import DevCluster
from kube_reloader.devcluster.versions import RELOADER

from .baseline import CURRENT, STAKATER, current_tree, export
from .driving import run_one
from .report import before_after, plots, report
from .runs import Scenario, progress
from .scenarios import SCENARIOS


async def main_async(args: argparse.Namespace) -> int:
    selected = [s for s in SCENARIOS if not args.scenarios or s.id in args.scenarios]
    if not selected:
        print(
            f"no such scenario; choose from {', '.join(s.id for s in SCENARIOS)}", file=sys.stderr
        )
        return 2
    if args.baseline_ref:  # before the build: a wrong ref fails at once
        args.baseline = export(args.baseline_ref)
        progress(
            f"baseline {args.baseline.name}: {args.baseline.subject} (from {args.baseline.src})"
        )
    try:
        builder = Builder(extra=("reloader",), report=lambda line: progress(line))
        return await _compare(args, selected, builder.ensure().bin)
    finally:
        if args.baseline is not None:
            args.baseline.remove()


async def _compare(args: argparse.Namespace, selected: list[Scenario], bins: Path) -> int:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = Path(args.results) / stamp
    (out / "raw").mkdir(parents=True, exist_ok=True)
    args.run = stamp[-6:].lower()
    state = Path(tempfile.mkdtemp(prefix="kube-reloader-compare-"))
    cluster = DevCluster(state, report=lambda line: None)
    results: dict[str, dict[str, dict[str, Any]]] = {}
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "quick": args.quick, "seed": args.seed,
            "duration": args.duration, "reloader_version": RELOADER,
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
            "current": current_tree()}  # fmt: skip
    base = args.baseline
    if base is not None:
        meta["baseline"] = {
            "name": base.name,
            "ref": base.ref,
            "commit": base.commit,
            "subject": base.subject,
        }
    # SIGTERM (timeout, CI) cancels the run like Ctrl-C, so the cluster below is stopped.
    main_task = asyncio.current_task()
    assert main_task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main_task.cancel)
    try:
        progress("starting the dev cluster (with an audit log)")
        await asyncio.to_thread(cluster.up, nodes=2, audit=True)
        audit = state / "audit.log"
        total = len(selected) * (3 if base else 2)
        done = 0
        started = time.monotonic()
        for i, scenario in enumerate(selected):
            results[scenario.id] = {}
            # With a baseline, the two kube-reloaders alternate which runs first (an order
            # effect, such as the previous run's namespaces going away, falls on both).
            krs = [CURRENT, base.name] if base else [CURRENT]
            for controller in [*(krs if i % 2 == 0 else krs[::-1]), STAKATER]:
                eta = ""
                if done:
                    eta = f", ETA {((time.monotonic() - started) / done) * (total - done) / 60:.1f} min"
                progress(f"{scenario.id} {scenario.title} — {controller} ({done + 1}/{total}{eta})")
                results[scenario.id][controller] = await run_one(
                    scenario, controller, cluster.kubeconfig, audit, bins, args, out, i
                )
                r = results[scenario.id][controller]
                progress(f"  p50 {r['latency_ms']['p50']} ms, p99 {r['latency_ms']['p99']} ms, missed {r['missed']}, "
                         f"dup {r['duplicates']}, api {r['api_requests']}, cpu {r['cpu_seconds']} s, rss {r['rss_peak_mib']} MiB")  # fmt: skip
                done += 1
    finally:
        cluster.down()
    (out / "results.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    (out / "report.md").write_text(report(results, meta))
    try:
        made = plots(results, out)
        progress(f"plots: {', '.join(made)}")
    except ImportError:
        progress("matplotlib is not installed: no plots (pip install -e '.[bench]')")
    if base is not None:
        print("\n".join(["", *before_after(results, meta), ""]), flush=True)
    progress(f"report: {out / 'report.md'}")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__.splitlines()[0])
    p.add_argument(
        "--scenarios",
        type=lambda s: [x.strip().upper() for x in s.split(",") if x.strip()],
        default=[],
    )
    p.add_argument(
        "--quick", action="store_true", help="short durations and fewer objects (< 10 min)"
    )
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--duration", type=float, default=None)
    p.add_argument("--results", default=str(Path(__file__).parent / "results"))
    p.add_argument(
        "--baseline",
        dest="baseline_ref",
        metavar="REF",
        default="",
        help="also run kube-reloader from this git ref's src/ (before/after columns)",
    )
    args = p.parse_args()
    args.baseline = None
    if args.duration is None:
        args.duration = 10.0 if args.quick else 55.0
    try:
        return asyncio.run(main_async(args))
    except (asyncio.CancelledError, KeyboardInterrupt):
        progress("interrupted: the dev cluster was stopped")
        return 143


if __name__ == "__main__":
    sys.exit(main())
