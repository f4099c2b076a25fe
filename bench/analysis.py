"""Analysis of one run: latency of each (update, workload) pair, missed and superseded
updates, rollouts, duplicates and spurious rollouts, API load, CPU and RSS."""

from __future__ import annotations

import itertools
import statistics
from collections import defaultdict
from typing import Any

from .controllers import Controller
from .observation import Observation
from .runs import Run


def carried(o: Observation, res: tuple[str, str, str]) -> str | None:
    """The hash of `res` the workload carried in `o` (env var, else last-reloaded-from)."""
    from kube_reloader.core.objects import ResourceType
    from kube_reloader.core.strategies import env_var_name

    rtype, _, name = res
    env = o.carried.get(("ENV", env_var_name(name, ResourceType(rtype))))
    return env if env is not None else o.carried.get((rtype, name))


def convergence(run: Run, obs: list[Observation]) -> tuple[int, float | None]:
    """How far the run is from its final state: the (resource, workload) pairs whose last
    committed update (highest resourceVersion) no workload state carries yet, and, once there
    are none, the seconds from the run's last accepted update of a resource some workload
    reads until the last pair carried its final hash (0 without such updates). A pair counts
    from the first observation at or after that update that carries its hash."""
    # an update nothing reads has no final state to reach
    final = {res: th for res, th in run.final().items() if run.plan.affects.get(res)}
    if not final:
        return 0, 0.0
    by_workload: dict[tuple[str, str, str], list[Observation]] = defaultdict(list)
    for o in list(obs):
        by_workload[o.workload].append(o)
    pending, reached = 0, 0.0
    for res, (t, h) in final.items():
        for w in run.plan.affects.get(res, []):
            seen = next(
                (o.t for o in by_workload[w] if o.t >= t - 0.005 and carried(o, res) == h), None
            )
            if seen is None:
                pending += 1
            else:
                reached = max(reached, seen)
    if pending:
        return pending, None
    last = max(t for t, _ in final.values())
    return 0, round(max(0.0, reached - last), 3)


def analyse(run: Run, obs: list[Observation], ctrl: Controller, api: dict[str, int], api_total: int,
            first_reload_s: float | None, events: list[float]) -> dict[str, Any]:  # fmt: skip
    by_workload: dict[tuple[str, str, str], list[Observation]] = defaultdict(list)
    for o in obs:
        by_workload[o.workload].append(o)
    latencies: list[float] = []
    applied = superseded = missed = 0
    last_update = run.final()
    for t, res, h in run.updates:
        for w in run.plan.affects.get(res, []):
            seen = next(
                (o.t for o in by_workload[w] if o.t >= t - 0.005 and carried(o, res) == h), None
            )
            if seen is not None:
                latencies.append((seen - t) * 1000)
                applied += 1
            elif last_update[res][1] != h:
                superseded += 1
            else:
                missed += 1
    # rollouts vs distinct changes, per workload
    duplicates = spurious = rollouts = pauses = 0
    suspects: dict[str, list[tuple[float, int, bool, list[str]]]] = {}
    touched = {w for _, res, _ in run.updates for w in run.plan.affects.get(res, [])}
    for w in run.plan.workloads:
        trace = by_workload[w]
        if not trace:
            continue
        pairs = list(itertools.pairwise(trace))
        pauses += sum(1 for a, b in pairs if b.paused and not a.paused)
        # Pausing or resuming a Deployment (pause-period) changes its spec, so its generation,
        # but not its pod template: not a rollout.
        pausing = sum(
            1
            for a, b in pairs
            if b.generation > a.generation and b.carried == a.carried and b.paused != a.paused
        )
        gens = [o.generation for o in trace]
        bumps = max(0, max(gens) - min(gens) - pausing)
        rollouts += bumps
        distinct = len({tuple(sorted(o.carried.items())) for o in trace}) - 1
        extra = bumps if w not in touched else max(0, bumps - distinct)
        if w not in touched:
            spurious += extra
        else:
            duplicates += extra
        if extra:  # what the harness saw of this workload, to tell why (t from the run's start)
            suspects["/".join(w)] = [
                (round(o.t - ctrl.started, 3), o.generation, o.paused, sorted(o.carried.values()))
                for o in trace
            ]
    cpu = ctrl.samples[-1][1] if ctrl.samples else 0.0
    # The cost per event: CPU and watch events from the first update to the end (the
    # start-up before, imports and initial LISTs, is `start_cpu_seconds`).
    stopped = ctrl.stopped or float("inf")
    t0, cpu0 = ctrl.driving or (ctrl.started, 0.0)
    watch_events = sum(1 for t in events if t0 <= t <= stopped)
    _, converged_s = convergence(run, obs)  # its pending pairs are `missed` below
    rss = [s[2] for s in ctrl.samples]
    n = len(run.updates)
    return {
        "scenario": run.scenario.id, "controller": run.controller, "updates": n, "attempted": run.attempted,
        "nominal_rate": None, "achieved_rate": round(n / run.duration, 2) if run.duration else None,
        "latency_ms": _summary(latencies), "latency_samples": [round(x, 2) for x in latencies],
        "applied": applied, "superseded": superseded, "missed": missed,
        "rollouts": rollouts, "duplicates": duplicates, "spurious": spurious, "pause_cycles": pauses,
        "api_requests": api_total, "api_by_verb_resource": api, "api_per_update": round(api_total / n, 2) if n else None,
        "cpu_seconds": round(cpu, 2), "rss_peak_mib": round(max(ctrl.peak, *rss) / 2**20, 1) if rss else None,
        "rss_avg_mib": round(statistics.mean(rss) / 2**20, 1) if rss else None,
        "rss_samples": [(round(t, 1), round(r / 2**20, 1)) for t, _, r in ctrl.samples],
        "first_reload_s": first_reload_s, "duplicate_or_spurious_traces": suspects,
        "converged_s": converged_s, "watch_events": watch_events,
        "start_cpu_seconds": round(cpu0, 2),
        "cpu_per_1k_events": round((cpu - cpu0) / watch_events * 1000, 3) if watch_events else None,
    }  # fmt: skip


def _summary(xs: list[float]) -> dict[str, float | None]:
    if not xs:
        return {"p50": None, "p95": None, "p99": None, "max": None}
    s = sorted(xs)

    def q(p: float) -> float:
        return round(s[min(len(s) - 1, round(p * (len(s) - 1)))], 1)

    return {"p50": q(0.5), "p95": q(0.95), "p99": q(0.99), "max": round(s[-1], 1)}
