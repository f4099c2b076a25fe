"""The upstream runs' summary: pass counts per target and suite, and for each version the specs
the real peer passes that kube-reloader does not (each one is fixed or a listed difference)."""

from __future__ import annotations

from collections import Counter
from typing import Any

Results = dict[str, dict[str, dict[str, Any]]]


def summary(results: Results) -> str:
    lines = [
        "| target | suite | passed | failed | skipped | other | seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    for target, per_suite in results.items():
        for suite, run in per_suite.items():
            counts = Counter(run["specs"].values())
            other = sum(n for s, n in counts.items() if s not in ("passed", "failed", "skipped"))
            lines.append(
                f"| {target} | {suite} | {counts['passed']} | {counts['failed']} | "
                f"{counts['skipped']} | {other} | {run['seconds']:.0f} |"
            )
    for version in ("v1", "v2"):
        peer, ours = results.get(f"{version}-peer"), results.get(f"{version}-ours")
        if peer is None or ours is None:
            continue
        lines += ["", f"Specs {version}'s peer passes and kube-reloader does not:", ""]
        lost = sorted(_lost(peer, ours))
        lines += [f"- {suite}: {name} ({state})" for suite, name, state in lost] or ["- none"]
        gained = sorted(_lost(ours, peer))
        lines += ["", f"Specs kube-reloader passes and {version}'s peer does not:", ""]
        lines += [f"- {suite}: {name} ({state})" for suite, name, state in gained] or ["- none"]
    return "\n".join(lines) + "\n"


def _lost(
    first: dict[str, dict[str, Any]], second: dict[str, dict[str, Any]]
) -> list[tuple[str, str, str]]:
    out = []
    for suite, run in first.items():
        theirs = second.get(suite, {}).get("specs", {})
        for name, state in run["specs"].items():
            if state == "passed" and theirs.get(name, "not run") != "passed":
                out.append((suite, name, theirs.get(name, "not run")))
    return out
