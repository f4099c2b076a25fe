"""The report: the Markdown table of every measure side by side, the before/after table when a
baseline ran (kube-reloader@<ref> against the current tree), and the plots (latency CDF, RSS
over time)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .baseline import CURRENT, STAKATER
from .scenarios import S5_NOTE, SCENARIOS

ROWS = [
    ("updates", "updates made"), ("latency_ms.p50", "latency p50 (ms)"), ("latency_ms.p95", "latency p95 (ms)"),
    ("latency_ms.p99", "latency p99 (ms)"), ("latency_ms.max", "latency max (ms)"), ("applied", "(update, workload) applied"),
    ("missed", "missed (final state not reached)"), ("superseded", "superseded before applied"), ("rollouts", "rollouts"),
    ("duplicates", "duplicate rollouts"), ("spurious", "spurious rollouts"), ("api_requests", "API requests"),
    ("api_per_update", "API requests per update"), ("cpu_seconds", "CPU seconds"), ("rss_peak_mib", "RSS peak (MiB)"),
    ("rss_avg_mib", "RSS average (MiB)"), ("first_reload_s", "start to first reload (s)"), ("pause_cycles", "pause cycles"),
]  # fmt: skip
# The before/after table: (key, label, whether a ratio means anything).
BEFORE_AFTER = [
    ("missed", "missed", False), ("duplicates", "duplicates", False), ("latency_ms.p50", "p50 (ms)", True),
    ("latency_ms.p99", "p99 (ms)", True), ("cpu_seconds", "CPU s", True), ("rss_peak_mib", "RSS peak (MiB)", True),
]  # fmt: skip


def _get(d: dict[str, Any], path: str) -> Any:
    for p in path.split("."):
        d = d.get(p) if isinstance(d, dict) else None  # type: ignore[assignment]
    return d


def _ratio(a: Any, b: Any) -> str:
    ok = isinstance(a, int | float) and isinstance(b, int | float) and b
    return f"{a / b:.2f}" if ok else "—"


def _cell(v: Any) -> str:
    return "—" if v is None else str(v)


def _top_calls(r: dict[str, Any]) -> str:
    top = sorted((r.get("api_by_verb_resource") or {}).items(), key=lambda kv: -kv[1])[:4]
    return ", ".join(f"{k} {v}" for k, v in top) or "none"


def report(results: dict[str, dict[str, dict[str, Any]]], meta: dict[str, Any]) -> str:
    base = (meta.get("baseline") or {}).get("name")
    lines = [f"# kube-reloader vs Stakater Reloader v{meta['reloader_version']}", "",
             f"{meta['date']} — {meta['machine']} — {'quick' if meta['quick'] else 'full'} run, seed {meta['seed']}, "
             f"{meta['duration']} s per scenario. Ratio = kube-reloader / Reloader (lower is better for latency, "
             "requests, CPU and memory).", "", S5_NOTE, ""]  # fmt: skip
    if base:
        lines += [*before_after(results, meta), ""]
    for sid, by_ctrl in results.items():
        title = next(s.title for s in SCENARIOS if s.id == sid)
        kr, st = by_ctrl.get(CURRENT, {}), by_ctrl.get(STAKATER, {})
        kb = by_ctrl.get(base, {}) if base else {}
        head = f"| measure | kube-reloader | {base} | Reloader | ratio | after / before |" if base else \
            "| measure | kube-reloader | Reloader | ratio |"  # fmt: skip
        lines += [f"## {sid} — {title}", "", head, "|---" * (6 if base else 4) + "|"]
        for key, label in ROWS:
            a, b, c = _get(kr, key), _get(st, key), _get(kb, key)
            if a is None and b is None and c is None:
                continue
            if base:
                lines.append(
                    f"| {label} | {_cell(a)} | {_cell(c)} | {_cell(b)} | {_ratio(a, b)} | {_ratio(a, c)} |"
                )
            else:
                lines.append(f"| {label} | {_cell(a)} | {_cell(b)} | {_ratio(a, b)} |")
        calls = f"API calls — kube-reloader: {_top_calls(kr)}; "
        if base:
            calls += f"{base}: {_top_calls(kb)}; "
        lines += ["", calls + f"Reloader: {_top_calls(st)}", ""]
    return "\n".join(lines) + "\n"


def before_after(results: dict[str, dict[str, dict[str, Any]]], meta: dict[str, Any]) -> list[str]:
    """Per scenario, the baseline's figure -> the current tree's, and after / before."""
    b = meta["baseline"]
    lines = [f"## Before / after: {b['name']} → kube-reloader (current tree)", "",
             f"Before: `{b['subject']}` ({b['commit']}). After: the working tree, `{meta.get('current', '?')}`. "
             "Same machine, same run, same seed, same cluster; each cell is before → after "
             "(after / before); the two kube-reloader columns alternate which runs first.", "",
             "| scenario | " + " | ".join(label for _, label, _ in BEFORE_AFTER) + " |",
             "|---" * (len(BEFORE_AFTER) + 1) + "|"]  # fmt: skip
    for sid, by_ctrl in results.items():
        after, before = by_ctrl.get(CURRENT, {}), by_ctrl.get(b["name"], {})
        cells = []
        for key, _, ratio in BEFORE_AFTER:
            x, y = _get(before, key), _get(after, key)
            cell = f"{_cell(x)} → {_cell(y)}"
            if ratio and _ratio(y, x) != "—":
                cell += f" ({_ratio(y, x)})"
            elif not ratio and isinstance(x, int) and isinstance(y, int) and y > x:
                cell = f"**{cell}**"  # more missed or duplicate reloads than before
            cells.append(cell)
        lines.append(f"| {sid} | " + " | ".join(cells) + " |")
    return lines


def plots(results: dict[str, dict[str, dict[str, Any]]], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    ids = list(results)
    cols = 4
    rows = (len(ids) + cols - 1) // cols
    styles = {CURRENT: "-", STAKATER: "--"}  # a baseline: dotted
    for what, fname in (("latency", "latency_cdf.png"), ("rss", "rss.png")):
        fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows), squeeze=False)
        for ax, sid in zip(axes.flat, ids, strict=False):
            for ctrl, r in results[sid].items():
                style = styles.get(ctrl, ":")
                if not r:
                    continue
                if what == "latency":
                    xs = sorted(r["latency_samples"])
                    if xs:
                        ax.plot(xs, [(i + 1) / len(xs) for i in range(len(xs))], style, label=ctrl)
                    ax.set_xscale("log")
                    ax.set_xlabel("ms")
                else:
                    pts = r["rss_samples"]
                    if pts:
                        ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=ctrl)
                    ax.set_xlabel("s")
                    ax.set_ylabel("MiB")
            ax.set_title(sid)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7)
        for ax in list(axes.flat)[len(ids) :]:
            ax.axis("off")
        fig.suptitle("Reload latency CDF" if what == "latency" else "RSS over time")
        fig.tight_layout()
        fig.savefig(out / fname, dpi=90)
        plt.close(fig)
        made.append(fname)
    return made
