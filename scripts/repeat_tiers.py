"""`make test-repeat RUNS=5`: flakiness measured, not hoped for.

Runs the cluster tiers (`scripts/test_tiers.py --tiers parallel-tests,serial-tests`, each run
on a dev cluster of its own) and then the real-node tier (`tests/node`), `--runs` times in a
row, each tier writing JUnit XML under `--out`; then prints one line per run and tier (tests,
passed, failed, errors, skipped, seconds), every failed test by name, and the totals. Exit 1
when any test failed in any run. `--no-node` leaves the real-node tier out (it needs root).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = ("parallel-tests", "serial-tests")


@dataclass
class Tally:
    tests: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    seconds: float = 0.0
    names: list[str] = field(default_factory=list)

    @property
    def passed(self) -> int:
        return self.tests - self.failed - self.errors - self.skipped


def tally(path: Path) -> Tally | None:
    """What one tier's JUnit XML says, or None when the tier wrote none (it did not start)."""
    if not path.exists():
        return None
    out = Tally()
    root = ET.parse(path).getroot()  # noqa: S314 - our own pytest run wrote it
    for suite in root.iter("testsuite"):
        out.tests += int(suite.get("tests", 0))
        out.failed += int(suite.get("failures", 0))
        out.errors += int(suite.get("errors", 0))
        out.skipped += int(suite.get("skipped", 0))
        out.seconds += float(suite.get("time", 0))
    for case in root.iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            out.names.append(f"{case.get('classname')}::{case.get('name')}")
    return out


def run_once(out: Path, node: bool) -> int:
    out.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "KUBE_RELOADER_TEST_KUBECONFIG"}
    tiers = [sys.executable, "scripts/test_tiers.py", "--tiers", ",".join(CLUSTER)]
    code = subprocess.call([*tiers, "--junit-dir", str(out)], cwd=ROOT, env=env)
    if node:
        pytest = [sys.executable, "-m", "pytest", "tests/node", f"--junitxml={out / 'node.xml'}"]
        node_env = {**env, "KUBE_RELOADER_NODE_TESTS": "1"}
        code = subprocess.call(pytest, cwd=ROOT, env=node_env) or code
    return code


def report(out: Path, runs: int, tiers: Sequence[str]) -> bool:
    """Print the table; True when every tier of every run passed."""
    clean = True
    print("| run | tier | tests | passed | failed | errors | skipped | seconds |")
    print("|---|---|---|---|---|---|---|---|")
    total = Tally()
    failures: list[str] = []
    for i in range(1, runs + 1):
        for name in tiers:
            t = tally(out / f"run-{i}" / f"{name}.xml")
            if t is None:
                print(f"| {i} | {name} | (no results) | | | | | |")
                clean = False
                continue
            print(f"| {i} | {name} | {t.tests} | {t.passed} | {t.failed} | {t.errors} "
                  f"| {t.skipped} | {t.seconds:.0f} |")  # fmt: skip # one table row
            total.tests, total.failed = total.tests + t.tests, total.failed + t.failed
            total.errors += t.errors
            failures += [f"run {i}, {name}: {n}" for n in t.names]
            clean = clean and not (t.failed or t.errors)
    print(f"\n{runs} runs: {total.tests} tests, {total.failed} failed, {total.errors} errors")
    for line in failures:
        print(f"- {line}")
    return clean


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=5, help="runs in a row (default 5)")
    parser.add_argument("--out", type=Path, default=ROOT / ".test-repeat", help="results here")
    parser.add_argument("--no-node", action="store_true", help="leave the real-node tier out")
    known = parser.parse_args(argv)
    tiers = [*CLUSTER] if known.no_node else [*CLUSTER, "node"]
    for i in range(1, known.runs + 1):
        started = time.monotonic()
        code = run_once(known.out / f"run-{i}", node=not known.no_node)
        print(f"==> run {i}: exit {code} in {time.monotonic() - started:.0f}s", flush=True)
    return 0 if report(known.out, known.runs, tiers) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
