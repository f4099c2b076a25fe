"""`make test`: the whole suite in tiers, one dev cluster shared by the tiers that need one.

1. `tests/unit` on `--unit-workers` processes (no cluster);
2. the integration and adversarial tests not marked `serial`, on `--workers` processes
   (pytest-xdist, a test module per worker at a time: its module fixtures stay in one process)
   against one dev cluster; each test works in namespaces of its own;
3. the tests marked `serial` (cluster-scoped objects, a cluster of their own, timing bounds),
   one at a time, on the same cluster.

The cluster is started here once (or taken from `KUBE_RELOADER_TEST_KUBECONFIG`) and handed to
every worker through that variable. Every tier runs even when an earlier one failed, so one
CI run shows every failure; the exit code is the first failure's. Each tier's time is printed
as `==> [tier] took Ns`. With arguments (`make test PYTEST_ARGS="-k name"`), one plain pytest
run with those arguments instead.
"""

from __future__ import annotations

import argparse
import functools
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTEST = [sys.executable, "-m", "pytest"]
CLUSTER_TIERS = ["tests/integration", "tests/adversarial"]
#: pytest's exit code when a selection is empty: not a failure for a tier
NO_TESTS = 5
KUBECONFIG_ENV = "KUBE_RELOADER_TEST_KUBECONFIG"
#: kwok nodes of the shared cluster: one, as the tests expect (a DaemonSet has one pod); it
#: holds 1,000 pods, room for the modules running at once (200 Deployments in test_fleet and
#: in test_audit, a rollout's surge)
NODES = 1


#: the tiers, in the order they run
TIERS = ("unit-tests", "parallel-tests", "serial-tests")


def tier(
    name: str, args: Sequence[str], env: dict[str, str] | None = None, junit: Path | None = None
) -> int:
    if junit is not None:
        args = [*args, f"--junitxml={junit / (name + '.xml')}"]
    print(f"==> [{name}] pytest {' '.join(args)}", file=sys.stderr, flush=True)
    start = time.monotonic()
    code = subprocess.call([*PYTEST, *args], cwd=ROOT, env=env)
    took = time.monotonic() - start
    print(f"==> [{name}] took {took:.0f}s (exit {code})", file=sys.stderr, flush=True)
    return 0 if code == NO_TESTS else code


@contextmanager
def dev_cluster() -> Iterator[str]:
    """A kubeconfig for the tiers: the given one, or a dev cluster started (and removed) here."""
    given = os.environ.get(KUBECONFIG_ENV)
    if given:
        yield given
        return
    from kube_reloader.devcluster.cluster import temporary  # only when a cluster is needed

    prefix = "kube-reloader-test-cluster-"
    say = functools.partial(print, flush=True)
    with temporary(prefix, report=say, nodes=NODES, build=True) as (_, state):
        print(f"dev cluster ready in {state.ready_seconds:.1f}s", flush=True)
        yield str(state.kubeconfig)


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--workers", type=int, default=3, help="integration workers (default 3)")
    parser.add_argument("--unit-workers", type=int, default=2, help="unit workers (default 2)")
    parser.add_argument(
        "--tiers",
        default=",".join(TIERS),
        help=f"the tiers to run, comma-separated (default: all, {','.join(TIERS)})",
    )
    parser.add_argument(
        "--junit-dir", type=Path, help="write each tier's results to DIR/<tier>.xml"
    )
    known, extra = parser.parse_known_args(argv)
    if extra:
        return tier("tests", extra)
    chosen = [t.strip() for t in known.tiers.split(",") if t.strip()]
    unknown = sorted(set(chosen) - set(TIERS))
    if unknown:
        parser.error(f"--tiers: unknown {', '.join(unknown)} (known: {', '.join(TIERS)})")
    junit = known.junit_dir
    failures = []
    if "unit-tests" in chosen:
        unit = ["tests/unit", "-n", str(known.unit_workers)]
        failures.append(tier("unit-tests", unit, junit=junit))
    if {"parallel-tests", "serial-tests"} & set(chosen):
        with dev_cluster() as kubeconfig:
            env = {**os.environ, KUBECONFIG_ENV: kubeconfig}
            parallel = [*CLUSTER_TIERS, "-m", "not serial", "-n", str(known.workers)]
            if "parallel-tests" in chosen:
                args = [*parallel, "--dist", "loadfile"]
                failures.append(tier("parallel-tests", args, env, junit))
            if "serial-tests" in chosen:
                args = [*CLUSTER_TIERS, "-m", "serial"]
                failures.append(tier("serial-tests", args, env, junit))
    return next((code for code in failures if code), 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
