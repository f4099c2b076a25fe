"""The report: the Markdown table of every measure side by side, and the plots (latency CDF,
RSS over time)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scenarios import S5_NOTE, SCENARIOS

ROWS = [
    ("updates", "updates made"), ("latency_ms.p50", "latency p50 (ms)"), ("latency_ms.p95", "latency p95 (ms)"),
    ("latency_ms.p99", "latency p99 (ms)"), ("latency_ms.max", "latency max (ms)"), ("applied", "(update, workload) applied"),
    ("missed", "missed (final state not reached)"), ("superseded", "superseded before applied"), ("rollouts", "rollouts"),
    ("duplicates", "duplicate rollouts"), ("spurious", "spurious rollouts"), ("api_requests", "API requests"),
    ("api_per_update", "API requests per update"), ("cpu_seconds", "CPU seconds"), ("rss_peak_mib", "RSS peak (MiB)"),
    ("rss_avg_mib", "RSS average (MiB)"), ("first_reload_s", "start to first reload (s)"), ("pause_cycles", "pause cycles"),
]  # fmt: skip


def _get(d: dict[str, Any], path: str) -> Any:
    for p in path.split("."):
        d = d.get(p) if isinstance(d, dict) else None  # type: ignore[assignment]
    return d


def report(results: dict[str, dict[str, dict[str, Any]]], meta: dict[str, Any]) -> str:
    lines = [f"# kube-reloader vs Stakater Reloader v{meta['reloader_version']}", "",
             f"{meta['date']} — {meta['machine']} — {'quick' if meta['quick'] else 'full'} run, seed {meta['seed']}, "
             f"{meta['duration']} s per scenario. Ratio = kube-reloader / Reloader (lower is better for latency, "
             "requests, CPU and memory).", "", S5_NOTE, ""]  # fmt: skip
    for sid, by_ctrl in results.items():
        title = next(s.title for s in SCENARIOS if s.id == sid)
        lines += [
            f"## {sid} — {title}",
            "",
            "| measure | kube-reloader | Reloader | ratio |",
            "|---|---|---|---|",
        ]
        kr, st = by_ctrl.get("kube-reloader", {}), by_ctrl.get("reloader", {})
        for key, label in ROWS:
            a, b = _get(kr, key), _get(st, key)
            if a is None and b is None:
                continue
            ratio = (
                f"{a / b:.2f}"
                if isinstance(a, int | float) and isinstance(b, int | float) and b
                else "—"
            )
            lines.append(
                f"| {label} | {a if a is not None else '—'} | {b if b is not None else '—'} | {ratio} |"
            )
        top = sorted((kr.get("api_by_verb_resource") or {}).items(), key=lambda kv: -kv[1])[:4]
        top_b = sorted((st.get("api_by_verb_resource") or {}).items(), key=lambda kv: -kv[1])[:4]
        lines += ["", f"API calls — kube-reloader: {', '.join(f'{k} {v}' for k, v in top) or 'none'}; "
                      f"Reloader: {', '.join(f'{k} {v}' for k, v in top_b) or 'none'}", ""]  # fmt: skip
    return "\n".join(lines) + "\n"


def plots(results: dict[str, dict[str, dict[str, Any]]], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    ids = list(results)
    cols = 4
    rows = (len(ids) + cols - 1) // cols
    for what, fname in (("latency", "latency_cdf.png"), ("rss", "rss.png")):
        fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows), squeeze=False)
        for ax, sid in zip(axes.flat, ids, strict=False):
            for ctrl, style in (("kube-reloader", "-"), ("reloader", "--")):
                r = results[sid].get(ctrl)
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
