"""The upstream runs' summary: pass counts per target and suite, and for each version the specs
the real peer passes that kube-reloader does not (each one is fixed or a listed difference)."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

from tests.upstream.suites import FAILED_STATES, read_junit

Results = dict[str, dict[str, dict[str, Any]]]


def summary(results: Results) -> str:
    lines = [
        "| target | suite | passed | failed | skipped | pending | suite verdict | seconds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for target, per_suite in results.items():
        for suite, run in per_suite.items():
            counts = Counter(run["specs"].values())
            failed = sum(n for s, n in counts.items() if s in FAILED_STATES)
            lines.append(
                f"| {target} | {suite} | {counts['passed']} | {failed} | {counts['skipped']} | "
                f"{counts['pending']} | {verdict(run)} | {run['seconds']:.0f} |"
            )
    for version in ("v1", "v2"):
        peer, ours = results.get(f"{version}-peer"), results.get(f"{version}-ours")
        if peer is None or ours is None:
            continue
        lines += ["", f"Specs {version}'s peer passes and kube-reloader does not:", ""]
        lines += [f"- {s}: {name} ({state})" for s, name, state in lost(peer, ours)] or ["- none"]
        lines += ["", f"Specs kube-reloader passes and {version}'s peer does not:", ""]
        lines += [f"- {s}: {name} ({state})" for s, name, state in lost(ours, peer)] or ["- none"]
    return "\n".join(lines) + "\n"


def verdict(run: dict[str, Any]) -> str:
    """`passed`, `failed`, or `no report (exit N)`: a run whose suite wrote no report (it did
    not build, or it crashed) counts nothing, and must not read as an empty success."""
    succeeded = run.get("succeeded")
    if succeeded is None:
        return f"no report (exit {run.get('exit_code')})"
    return "passed" if succeeded else "failed"


def incomplete(results: Results) -> list[str]:
    """The runs that wrote no report, as `target/suite`."""
    return [
        f"{target}/{suite}"
        for target, per_suite in results.items()
        for suite, run in per_suite.items()
        if run.get("succeeded") is None
    ]


def lost(
    first: dict[str, dict[str, Any]], second: dict[str, dict[str, Any]]
) -> list[tuple[str, str, str]]:
    """The specs `first` passes and `second` does not (with `second`'s state), sorted."""
    out = []
    for suite, run in first.items():
        theirs = second.get(suite, {}).get("specs", {})
        for name, state in run["specs"].items():
            if state == "passed" and theirs.get(name, "not run") != "passed":
                out.append((suite, name, theirs.get(name, "not run")))
    return sorted(out)


def from_reports(out_dirs: list[Path]) -> Results:
    """The results of earlier runs read back from their JUnit reports (`<out>/reports/<target>/
    <suite>.xml`), to summarise runs made separately (`python -m tests.upstream.report DIR...`);
    a later directory's run of a target and suite replaces an earlier one's."""
    results: Results = {}
    for out in out_dirs:
        for xml in sorted((out / "reports").glob("*/*.xml")):
            read = read_junit(xml)
            specs, succeeded = read if read is not None else ({}, None)
            results.setdefault(xml.parent.name, {})[xml.stem] = {
                "specs": specs,
                "succeeded": succeeded,
                "seconds": _seconds(xml),
                "exit_code": None,
            }
    return results


def _seconds(xml: Path) -> float:
    suites_root = ET.parse(xml).getroot()  # noqa: S314 - our own Ginkgo run wrote it
    return float(suites_root.get("time") or 0.0)


if __name__ == "__main__":
    print(summary(from_reports([Path(a) for a in sys.argv[1:]])), end="")
