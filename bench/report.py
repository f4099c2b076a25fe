"""The report: per scenario, the Markdown table of every measure side by side (median and range
of the runs, and the ratios to each peer), and the before/after table when a baseline ran
(kube-reloader@<ref> against the current tree)."""

from __future__ import annotations

from typing import Any

from .baseline import CURRENT, PEER_NAMES, is_kube_reloader
from .runs import FULL_DURATION
from .scenarios import S5_NOTE, SCENARIOS
from .summary import Results, cell, median, ratio_spread, run_count, spread, total

ROWS = [
    ("updates", "updates made", 0), ("latency_ms.p50", "latency p50 (ms)", 1), ("latency_ms.p95", "latency p95 (ms)", 1),
    ("latency_ms.p99", "latency p99 (ms)", 1), ("latency_ms.max", "latency max (ms)", 1),
    ("converged_s", "converged after the last update (s)", 2), ("applied", "(update, workload) applied", 0),
    ("missed", "missed (final state not reached)", 0), ("superseded", "superseded before applied", 0), ("rollouts", "rollouts", 0),
    ("duplicates", "duplicate rollouts", 0), ("spurious", "spurious rollouts", 0), ("api_requests", "API requests", 0),
    ("api_per_update", "API requests per update", 2), ("cpu_seconds", "CPU seconds", 2),
    ("start_cpu_seconds", "CPU seconds before the first update", 2),
    ("watch_events", "watch events", 0), ("cpu_per_1k_events", "CPU seconds per 1,000 watch events", 2),
    ("rss_peak_mib", "RSS peak (MiB)", 1), ("rss_avg_mib", "RSS average (MiB)", 1),
    ("first_reload_s", "start to first reload (s)", 2), ("pause_cycles", "pause cycles", 0),
]  # fmt: skip
# The before/after table: (key, label, whether a ratio means anything).
BEFORE_AFTER = [
    ("missed", "missed", False), ("duplicates", "duplicates", False), ("latency_ms.p50", "p50 (ms)", True),
    ("latency_ms.p99", "p99 (ms)", True), ("cpu_seconds", "CPU s", True), ("rss_peak_mib", "RSS peak (MiB)", True),
]  # fmt: skip


def controllers(results: Results) -> list[str]:
    """Every controller that ran, kube-reloader (and a baseline) first, then the peers."""
    seen = {c for by in results.values() for c in by}
    ours = sorted((c for c in seen if is_kube_reloader(c)), key=lambda c: c != CURRENT)
    return ours + [p for p in PEER_NAMES if p in seen]


def _top_calls(runs: list[dict[str, Any]]) -> str:
    """The most frequent requests of the first run."""
    r = runs[0] if runs else {}
    top = sorted((r.get("api_by_verb_resource") or {}).items(), key=lambda kv: -kv[1])[:4]
    return ", ".join(f"{k} {v}" for k, v in top) or "none"


def _with(meta: dict[str, Any]) -> str:
    """The flags the current tree alone ran with (`--current-args`), and the baseline's
    (`--baseline-args`), if any."""
    extra, base = meta.get("current_args") or [], meta.get("baseline_args") or []
    said = f" with `{' '.join(extra)}`" if extra else ""
    return said + (f" (the baseline with `{' '.join(base)}`)" if base else "")


def header(meta: dict[str, Any], n: int, scenarios: int) -> list[str]:
    names = ", ".join(f"{p} {v}" for p, v in (meta.get("peers") or {}).items())
    peers = f"; {names}" if names else ""  # a run of kube-reloader alone (`--peers=`) has none
    kind = (
        "quick" if meta["quick"] else "full-length" if meta["duration"] >= FULL_DURATION else "full"
    )
    shortened = (
        ""
        if meta["quick"] or meta["duration"] >= FULL_DURATION
        else f" (a full-length run has {FULL_DURATION:g})"
    )
    return [f"{meta['date']} — {meta['machine']} — {kind} run of {scenarios} scenario(s), "
            f"{n} run(s) per scenario and controller, seed {meta['seed']}, {meta['duration']} s of updates "
            f"per scenario{shortened}, convergence awaited up to {meta.get('converge_timeout', '?')} s. "
            f"kube-reloader: `{meta.get('current', '?')}`{_with(meta)}{peers}. Each cell is the median (min–max) "
            "of the runs; a ratio is kube-reloader / peer, taken repeat by repeat (lower is better "
            "for latency, convergence, requests, CPU and memory)."]  # fmt: skip


def report(results: Results, meta: dict[str, Any]) -> str:
    ctrls = controllers(results)
    peers = [c for c in ctrls if not is_kube_reloader(c)]
    base = (meta.get("baseline") or {}).get("name")
    lines = [
        "# kube-reloader vs Stakater Reloader",
        "",
        *header(meta, run_count(results), len(results)),
        "",
        S5_NOTE,
        "",
    ]
    if base:
        lines += [*before_after(results, meta), ""]
    for sid, by_ctrl in results.items():
        title = next(s.title for s in SCENARIOS if s.id == sid)
        ours = by_ctrl.get(CURRENT, [])
        cols = [*ctrls, *(f"÷ {p}" for p in peers), *(["after / before"] if base else [])]
        lines += [f"## {sid} — {title}", "", "| measure | " + " | ".join(cols) + " |",
                  "|---" * (len(cols) + 1) + "|"]  # fmt: skip
        for key, label, digits in ROWS:
            cells = [cell(spread(by_ctrl.get(c, []), key), digits) for c in ctrls]
            if all(c == "—" for c in cells):
                continue
            cells += [cell(ratio_spread(ours, by_ctrl.get(p, []), key), 2) for p in peers]
            if base:
                cells.append(cell(ratio_spread(ours, by_ctrl.get(base, []), key), 2))
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        calls = "; ".join(f"{c}: {_top_calls(by_ctrl.get(c, []))}" for c in ctrls)
        lines += ["", f"API calls (first run) — {calls}", ""]
    return "\n".join(lines) + "\n"


def before_after(results: Results, meta: dict[str, Any]) -> list[str]:
    """Per scenario, the baseline's median -> the current tree's, and after / before."""
    b = meta["baseline"]
    lines = [f"## Before / after: {b['name']} → kube-reloader (current tree)", "",
             f"Before: `{b['subject']}` ({b['commit']}). After: the working tree, `{meta.get('current', '?')}`. "
             "Same machine, same run, same seed, same cluster; each cell is before → after, medians "
             "of the runs (after / before, median of the runs' ratios); the two kube-reloader columns "
             "alternate which runs first.", "",
             "| scenario | " + " | ".join(label for _, label, _ in BEFORE_AFTER) + " |",
             "|---" * (len(BEFORE_AFTER) + 1) + "|"]  # fmt: skip
    for sid, by_ctrl in results.items():
        after, before = by_ctrl.get(CURRENT, []), by_ctrl.get(b["name"], [])
        cells = []
        for key, _, ratio in BEFORE_AFTER:
            if not ratio:  # counts: the total over the runs
                x, y = total(before, key), total(after, key)
                cells.append(f"**{x} → {y}**" if y > x else f"{x} → {y}")
                continue
            c = f"{median(before, key)} → {median(after, key)}"
            r = ratio_spread(after, before, key)
            cells.append(c + (f" ({r[0]:.2f})" if r else ""))
        lines.append(f"| {sid} | " + " | ".join(cells) + " |")
    return lines
