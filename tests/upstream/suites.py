"""Upstream's end-to-end suites run as they are: a copy of a peer's source tree, with its chart
swapped for ours (and our values' defaults set to the ones the swap needs) when kube-reloader
is the controller under test, then `go test` on the suite packages with Ginkgo's JUnit report,
read back into pass counts per spec."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import yaml

from kube_reloader.devcluster import gobuild
from kube_reloader.devcluster.peers import PeerBuilds

#: where upstream's suites install the chart from (`utils.DefaultHelmChartPath`)
CHART_PATH = Path("deployments/kubernetes/chart/reloader")
#: the suite packages, in the order upstream's README lists them
SUITES = ("core", "annotations", "flags", "advanced", "csi", "argo")
#: what this environment cannot give: CSI needs Vault and the CSI driver, OpenShift a cluster
DEFAULT_LABEL_FILTER = "!csi && !openshift"


@dataclass(frozen=True)
class Target:
    """One run: which peer's suites (`v1`, `v2`) against which controller (`peer`, `ours`)."""

    version: str
    controller: str

    @property
    def name(self) -> str:
        return f"{self.version}-{self.controller}"


@dataclass
class Outcome:
    """One suite's result: each spec's state by its full name, and how long it ran."""

    suite: str
    specs: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    exit_code: int = 0
    #: the report's verdict; None: no report was written (a build failure, a crash)
    succeeded: bool | None = None

    def count(self, *states: str) -> int:
        return sum(1 for s in self.specs.values() if s in states)

    def result(self) -> dict[str, Any]:
        """As `results.json` and `report.summary` hold it."""
        return {
            "specs": self.specs,
            "seconds": round(self.seconds, 1),
            "exit_code": self.exit_code,
            "succeeded": self.succeeded,
        }


def our_values(version: str) -> dict[str, Any]:
    """Our chart's defaults for a swap in place of Stakater's, as docs/migration.md tells a
    user to make it: the compatibility mode of the suite's Reloader and, for v2, the name its
    source tree gives its chart (`reloader-v2`), from which the suites derive the Deployment's,
    the ClusterRole's and the pods' names."""
    if version == "v2":
        return {"nameOverride": "reloader-v2", "reloader": {"compat": "v2"}}
    return {"reloader": {"compat": "v1"}}


def prepare_tree(source: Path, dest: Path, target: Target, our_chart: Path) -> Path:
    """A writable copy of the peer's tree for `target`: its chart replaced by ours (with
    `our_values`) for a run of ours; for a run of the peer, its own chart without the
    enterprise sub-chart (an OCI dependency, off by default, that cannot be fetched here)."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns(".git"), symlinks=True)
    chart = dest / CHART_PATH
    if target.controller == "ours":
        shutil.rmtree(chart)
        shutil.copytree(our_chart, chart)
        values_file = chart / "values.yaml"
        values = yaml.safe_load(values_file.read_text())
        _merge(values, our_values(target.version))
        values_file.write_text(yaml.safe_dump(values, sort_keys=False))
    else:
        meta_file = chart / "Chart.yaml"
        meta = yaml.safe_load(meta_file.read_text())
        if meta.pop("dependencies", None) is not None:
            meta_file.write_text(yaml.safe_dump(meta, sort_keys=False))
            shutil.rmtree(chart / "charts", ignore_errors=True)
    return dest


def pin_served_modules(tree: Path, builder: PeerBuilds) -> None:
    """The peer's go.mod pins a `github.com/openshift/api` pseudo-version the module proxy
    refuses; a served one replaces it, as in the peers' own builds (the same step)."""
    run = builder._runner("upstream-e2e", tree)
    builder._pin_served_openshift_api("upstream-e2e", tree, run)


def run_suite(
    tree: Path,
    suite: str,
    *,
    env: dict[str, str],
    label_filter: str,
    report_dir: Path,
    timeout_minutes: int,
    log: Path,
    focus: str = "",
) -> Outcome:
    """`go test ./test/e2e/<suite>/...` in `tree`, its JUnit report read back. Ginkgo's own
    timeout is the one that ends a long suite (it still writes its report); `go test`'s is a
    few minutes longer, a backstop."""
    junit = report_dir / f"{suite}.xml"
    junit.unlink(missing_ok=True)
    argv = [
        "go", "test", f"./test/e2e/{suite}/...", "-count=1", f"-timeout={timeout_minutes + 5}m",
        "-v", "-args", f"-ginkgo.label-filter={label_filter}", "-ginkgo.no-color",
        f"-ginkgo.timeout={timeout_minutes}m", f"-ginkgo.junit-report={junit}", "-ginkgo.v",
        *([f"-ginkgo.focus={focus}"] if focus else []),
    ]  # fmt: skip
    started = time.monotonic()
    with log.open("w") as out:
        code = _run_group(argv, tree, env, out)
    outcome = Outcome(suite, seconds=time.monotonic() - started, exit_code=code)
    read = read_junit(junit) if junit.exists() else None
    if read is not None:
        outcome.specs, outcome.succeeded = read
    return outcome


def _run_group(argv: list[str], cwd: Path, env: dict[str, str], out: IO[str]) -> int:
    """Run `argv` in a process group of its own; on any exit of ours (an error, Ctrl-C, a
    SIGTERM turned into SystemExit) the whole group is interrupted, so the test binary runs its
    clean-up, and killed if it has not ended within a minute."""
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        return proc.wait()
    except BaseException:
        for sig, grace in ((signal.SIGINT, 60.0), (signal.SIGKILL, 10.0)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=grace)
                break
        raise


#: Ginkgo's states of a spec that did not pass and was not left out
FAILED_STATES = frozenset({"failed", "timedout", "panicked", "interrupted", "aborted"})


def read_junit(path: Path) -> tuple[dict[str, str], bool] | None:
    """Each spec's state by its name (Ginkgo's: `passed`, `skipped`, `pending`, or one of
    `FAILED_STATES`) and whether the suite succeeded (its `SuiteSucceeded` property), from
    Ginkgo's JUnit report; None for a report that cannot be read. The suite's setup nodes
    (`[SynchronizedBeforeSuite]` ...) are listed only when they did not pass: a failed setup
    runs no spec, and the suite's verdict says so."""
    try:
        root = ET.parse(path).getroot()  # noqa: S314 - our own Ginkgo run wrote it
    except ET.ParseError:
        return None
    specs: dict[str, str] = {}
    for case in root.iter("testcase"):
        name = case.get("name", "")
        state = case.get("status") or _state_of(case)
        if not name.startswith("[It]") and state == "passed":
            continue
        specs[name] = state
    verdicts = [p.get("value") for p in root.iter("property") if p.get("name") == "SuiteSucceeded"]
    return specs, bool(verdicts) and all(v == "true" for v in verdicts)


def _state_of(case: ET.Element) -> str:
    for tag, state in (("failure", "failed"), ("error", "failed"), ("skipped", "skipped")):
        if case.find(tag) is not None:
            return state
    return "passed"


def go_env(kubeconfig: Path, image: str, tools: list[Path]) -> dict[str, str]:
    """The suites' environment: the cluster, the image under test, kubectl and helm first on
    PATH, Go's settings as our builds use them (`gobuild.go_env`)."""
    path = os.pathsep.join([*(str(t) for t in tools), os.environ.get("PATH", "")])
    return gobuild.go_env({"KUBECONFIG": str(kubeconfig), "RELOADER_IMAGE": image, "PATH": path})


def _merge(into: dict[str, Any], extra: dict[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value
