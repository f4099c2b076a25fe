"""Side-by-side benchmark: kube-reloader vs Stakater Reloader v1.4.21 and v2 on one local
control plane.

The three controllers run, one after the other, as local processes against the same dev cluster
(etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok: reloads cause real
rollouts), through the same scenarios (Reloader's load test S1-S13, portable version, plus
M1 memory at scale, M2 coalescing, M3 SIGKILL restart) with the same seed. Everything is
measured from outside, identically for all:

* reload latency: update accepted -> the workload's pod template carries the new hash, seen by
  this harness's own watch (p50/p95/p99/max);
* convergence: last update accepted -> every workload carries its final state (waiting up to
  --converge-timeout, 300 s; "missed" = not there by then);
* correctness: final state per workload, (update, workload) pairs applied, rollouts beyond the
  distinct changes (duplicates), rollouts on untouched workloads (spurious);
* API load: the API server's audit log (requests by verb and resource, all user agents but the
  harness's and the control plane's own);
* CPU seconds (and per 1,000 watch events of the kinds every controller watches) and RSS
  (peak/average) from /proc; with --profile, a py-spy flame graph of kube-reloader.

Each scenario runs --repeats times (3) per controller, the controllers' order rotating from one
repeat to the next; the report gives the median and the range.

Flags are Reloader-equivalent for all (env-vars strategy, all namespaces, JSON logs; for
kube-reloader coalescing and rate limits off), except M2 which runs kube-reloader's defaults.

    python -m bench.compare [--scenarios S1,S2] [--quick] [--repeats 3] [--profile] [--baseline REF]

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

import yaml

from kube_reloader.devcluster.building import Builder
from kube_reloader.devcluster.cluster import DevCluster

from .baseline import CURRENT, PEER_NAMES, REPO, byte_compile, current_tree, export
from .driving import run_one
from .oneshot import peer_versions
from .plots import plots
from .report import before_after, report
from .runs import FULL_DURATION, Scenario, progress
from .scenarios import SCENARIOS

#: the scenarios of a quick run: the CPU goal's three (S1, S4, S10) and fan-out (S2)
QUICK = ["S1", "S2", "S4", "S10"]


async def main_async(args: argparse.Namespace) -> int:
    wanted = args.scenarios or (QUICK if args.quick else [])
    selected = [s for s in SCENARIOS if not wanted or s.id in wanted]
    if not selected:
        print(
            f"no such scenario; choose from {', '.join(s.id for s in SCENARIOS)}", file=sys.stderr
        )
        return 2
    byte_compile(REPO / "src")  # as the image runs it: compiled once, never at start
    if args.baseline_ref:  # before the build: a wrong ref fails at once
        args.baseline = export(args.baseline_ref)
        progress(
            f"baseline {args.baseline.name}: {args.baseline.subject} (from {args.baseline.src})"
        )
    try:
        builder = Builder(extra=args.peers, report=lambda line: progress(line))
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
    results: dict[str, dict[str, list[dict[str, Any]]]] = {}
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "quick": args.quick, "seed": args.seed,
            "duration": args.duration, "repeats": args.repeats, "converge_timeout": args.converge_timeout,
            "peers": peer_versions(args.peers),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
            "current": current_tree(), "current_args": args.current_args,
            "baseline_args": args.baseline_args}  # fmt: skip
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
        kubeconfig = as_json(cluster.kubeconfig)
        # With a baseline, the two kube-reloaders alternate which runs first; every repeat
        # rotates the order of all controllers (an order effect, such as the previous run's
        # namespaces going away, falls on each).
        krs = [CURRENT, base.name] if base else [CURRENT]
        total = len(selected) * args.repeats * (len(krs) + len(args.peers))
        done = 0
        started = time.monotonic()
        for i, scenario in enumerate(selected):
            results[scenario.id] = {}
            for repeat in range(args.repeats):
                order = [*(krs if (i + repeat) % 2 == 0 else krs[::-1]), *args.peers]
                shift = repeat % len(order)
                for controller in order[shift:] + order[:shift]:
                    eta = ""
                    if done:
                        eta = f", ETA {((time.monotonic() - started) / done) * (total - done) / 60:.1f} min"
                    progress(
                        f"{scenario.id} {scenario.title} — {controller}, run {repeat + 1} ({done + 1}/{total}{eta})"
                    )
                    r = await run_one(
                        scenario, controller, kubeconfig, audit, bins, args, out, i, repeat
                    )
                    results[scenario.id].setdefault(controller, []).append(r)
                    # kept after every run: an interrupted run leaves what it measured
                    (out / "results.json").write_text(json.dumps({"meta": {**meta, "complete": False},
                                                                  "results": results}, indent=2))  # fmt: skip
                    progress(f"  p50 {r['latency_ms']['p50']} ms, p99 {r['latency_ms']['p99']} ms, missed {r['missed']}, "
                             f"converged {r['converged_s']} s, dup {r['duplicates']}, api {r['api_requests']}, "
                             f"cpu {r['cpu_seconds']} s ({r['cpu_per_1k_events']} per 1k events), rss {r['rss_peak_mib']} MiB")  # fmt: skip
                    done += 1
    finally:
        cluster.down()
    meta["complete"] = True
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


def as_json(kubeconfig: Path) -> Path:
    """The cluster's kubeconfig as JSON, beside it: what every controller reads. A pod reads
    its in-cluster credentials without a YAML parser, and kube-reloader reads a JSON kubeconfig
    the same way, so its start-up here is the one it has in a cluster (a YAML kubeconfig costs
    it ~15 ms more)."""
    out = kubeconfig.with_name(kubeconfig.name + ".json")
    out.write_text(json.dumps(yaml.safe_load(kubeconfig.read_text())))
    return out


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__.splitlines()[0])
    p.add_argument(
        "--scenarios",
        type=lambda s: [x.strip().upper() for x in s.split(",") if x.strip()],
        default=[],
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"short durations and fewer objects, scenarios {','.join(QUICK)} unless --scenarios (< 15 min)",
    )
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--duration", type=float, default=None)
    p.add_argument("--repeats", type=int, default=3, help="runs per scenario and controller (3)")
    p.add_argument(
        "--peers",
        type=lambda s: tuple(x.strip() for x in s.split(",") if x.strip()),
        default=PEER_NAMES,
        help=f"the Reloader peers to run ({','.join(PEER_NAMES)})",
    )
    p.add_argument("--converge-timeout", type=float, default=300.0,
                   help="seconds after the last update a run waits for the final state (300)")  # fmt: skip
    p.add_argument("--profile", nargs="?", const="svg", default="", choices=("svg", "folded"),
                   help="record a py-spy profile of kube-reloader's first run of each scenario: a "
                   "flame graph (svg), or collapsed stacks to tally with `python -m bench.folded`")  # fmt: skip
    p.add_argument("--profile-rate", type=int, default=100, metavar="HZ",
                   help="py-spy's samples per second (100)")  # fmt: skip
    p.add_argument("--results", default=str(Path(__file__).parent / "results"))
    p.add_argument(
        "--baseline",
        dest="baseline_ref",
        metavar="REF",
        default="",
        help="also run kube-reloader from this git ref's src/ (before/after columns)",
    )
    p.add_argument("--current-args", type=str.split, default=[], metavar="FLAGS",
                   help="flags for the current tree's kube-reloader only, split on spaces, given as "
                   "--current-args=FLAGS (e.g. =--event-loop=uvloop against a --baseline without them)")  # fmt: skip
    p.add_argument("--baseline-args", type=str.split, default=[], metavar="FLAGS",
                   help="flags for the --baseline's kube-reloader only, as --baseline-args=FLAGS")  # fmt: skip
    args = p.parse_args()
    args.baseline = None
    unknown = [x for x in args.peers if x not in PEER_NAMES]
    if unknown or args.repeats < 1:
        p.error(f"--peers: one or more of {','.join(PEER_NAMES)}; --repeats: at least 1")
    args.tail = 3.0 if args.quick else 5.0
    if args.duration is None:
        args.duration = 10.0 if args.quick else FULL_DURATION
    try:
        return asyncio.run(main_async(args))
    except (asyncio.CancelledError, KeyboardInterrupt):
        progress("interrupted: the dev cluster was stopped")
        return 143


if __name__ == "__main__":
    sys.exit(main())
