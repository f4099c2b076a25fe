"""The plots, every controller on each: reload latency CDF per scenario (the runs' samples
pooled), RSS over time (each controller's first run), and per scenario, CPU seconds per 1,000
watch events and the time to converge (bars at the median, whiskers from min to max)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .baseline import CURRENT
from .report import controllers
from .summary import Results, spread

STYLES = {CURRENT: "-", "reloader-v1": "--", "reloader-v2": "-."}  # a baseline: dotted
FILES = ("latency_cdf.png", "rss.png", "cpu.png", "convergence.png")


def plots(results: Results, out: Path) -> list[str]:
    """Write the four PNGs into `out`; their file names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ids = list(results)
    ctrls = controllers(results)
    cols = min(4, max(1, len(ids)))
    rows = (len(ids) + cols - 1) // cols
    for fname, title in (
        ("latency_cdf.png", "Reload latency CDF (all runs)"),
        ("rss.png", "RSS over time (first run)"),
    ):
        fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows), squeeze=False)
        for ax, sid in zip(axes.flat, ids, strict=False):
            for ctrl in ctrls:
                runs: list[dict[str, Any]] = results[sid].get(ctrl, [])
                style = STYLES.get(ctrl, ":")
                if fname == "latency_cdf.png":
                    xs = sorted(x for r in runs for x in r.get("latency_samples") or [])
                    if xs:
                        ax.plot(xs, [(i + 1) / len(xs) for i in range(len(xs))], style, label=ctrl)
                    ax.set_xscale("log")
                    ax.set_xlabel("ms")
                elif runs and runs[0].get("rss_samples"):
                    pts = runs[0]["rss_samples"]
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=ctrl)
                    ax.set_xlabel("s")
                    ax.set_ylabel("MiB")
            ax.set_title(sid)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7)
        for ax in list(axes.flat)[len(ids) :]:
            ax.axis("off")
        fig.suptitle(title)
        fig.tight_layout()
        fig.savefig(out / fname, dpi=80)
        plt.close(fig)
    for fname, key, label in (("cpu.png", "cpu_per_1k_events", "CPU seconds per 1,000 watch events"),
                              ("convergence.png", "converged_s", "seconds from the last update to the final state")):  # fmt: skip
        fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(ids) + 2), 3.5))
        width = 0.8 / max(1, len(ctrls))
        for k, ctrl in enumerate(ctrls):
            xs, meds, lo, hi = [], [], [], []
            for j, sid in enumerate(ids):
                s = spread(results[sid].get(ctrl, []), key)
                if s is not None:
                    xs.append(j + (k - (len(ctrls) - 1) / 2) * width)
                    meds.append(s[0])
                    lo.append(s[0] - s[1])
                    hi.append(s[2] - s[0])
            ax.bar(xs, meds, width, yerr=[lo, hi], capsize=2, label=ctrl)
        ax.set_xticks(range(len(ids)), ids)
        ax.set_ylabel(label, fontsize=8)
        ax.set_title(f"{label}: median, min–max")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / fname, dpi=80)
        plt.close(fig)
    return list(FILES)
