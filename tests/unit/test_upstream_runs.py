"""`make test-upstream`'s pure parts: the JUnit report read back, the summary's counts and
differences, the tree prepared for a run of ours or of the peer."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.upstream import report, suites

JUNIT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="5">
 <testsuite name="Core" tests="5">
  <testcase name="[SynchronizedBeforeSuite]" classname="Core" status="passed" time="9"></testcase>
  <testcase name="[It] reloads a Deployment" classname="Core" status="passed" time="1"></testcase>
  <testcase name="[It] reloads a DeploymentConfig [openshift]" classname="Core" status="skipped"
    time="0"><skipped message="skipped"></skipped></testcase>
  <testcase name="[It] triggers a Job" classname="Core" status="failed" time="15">
   <failure message="no Job" type="failed">no Job</failure></testcase>
  <testcase name="[It] old style" classname="Core" time="1"><error message="x"></error></testcase>
  <testcase name="[DeferCleanup (Suite)]" classname="Core" status="failed" time="1">
   <failure message="x" type="failed">x</failure></testcase>
 </testsuite>
</testsuites>
"""


def test_the_junit_report_gives_each_spec_its_state_and_a_failed_setup_counts(
    tmp_path: Path,
) -> None:
    path = tmp_path / "core.xml"
    path.write_text(JUNIT)
    assert suites.read_junit(path) == {
        "[It] reloads a Deployment": "passed",
        "[It] reloads a DeploymentConfig [openshift]": "skipped",
        "[It] triggers a Job": "failed",
        "[It] old style": "failed",
        "[DeferCleanup (Suite)]": "failed",
    }


def test_the_summary_counts_each_run_and_names_the_specs_one_side_passes_alone() -> None:
    results = {
        "v2-peer": {"core": {"specs": {"a": "passed", "b": "passed", "c": "skipped"}, "seconds": 10}},
        "v2-ours": {"core": {"specs": {"a": "passed", "b": "failed", "c": "skipped"}, "seconds": 12}},
    }  # fmt: skip
    text = report.summary(results)
    assert "| v2-peer | core | 2 | 0 | 1 | 0 | 10 |" in text
    assert "| v2-ours | core | 1 | 1 | 1 | 0 | 12 |" in text
    peer_only = text.split("Specs v2's peer passes and kube-reloader does not:")[1]
    assert peer_only.split("Specs kube-reloader passes")[0].strip() == "- core: b (failed)"
    assert text.rstrip().endswith("- none")


def test_a_spec_the_other_side_never_ran_is_named_as_not_run() -> None:
    results = {
        "v1-peer": {"flags": {"specs": {"x": "passed"}, "seconds": 1}},
        "v1-ours": {},
    }
    assert "- flags: x (not run)" in report.summary(results)


def _peer_tree(root: Path) -> Path:
    chart = root / suites.CHART_PATH
    chart.mkdir(parents=True)
    (root / "go.mod").write_text("module github.com/stakater/Reloader\n")
    (root / ".git").mkdir()
    meta = {"name": "reloader-v2", "dependencies": [{"name": "enterprise"}]}
    (chart / "Chart.yaml").write_text(yaml.safe_dump(meta))
    (chart / "charts").mkdir()
    (chart / "values.yaml").write_text("image: {}\n")
    return root


def test_a_run_of_ours_installs_our_chart_with_the_values_a_migrating_user_sets(
    tmp_path: Path,
) -> None:
    ours = tmp_path / "ours"
    ours.mkdir()
    (ours / "Chart.yaml").write_text("name: kube-reloader\n")
    (ours / "values.yaml").write_text(
        "nameOverride: ''\nreloader:\n  compat: ''\n  logLevel: info\n"
    )
    source = _peer_tree(tmp_path / "peer")
    tree = suites.prepare_tree(source, tmp_path / "run", suites.Target("v2", "ours"), ours)
    chart = tree / suites.CHART_PATH
    assert yaml.safe_load((chart / "Chart.yaml").read_text()) == {"name": "kube-reloader"}
    values = yaml.safe_load((chart / "values.yaml").read_text())
    assert values == {
        "nameOverride": "reloader-v2",
        "reloader": {"compat": "v2", "logLevel": "info"},
    }
    assert not (tree / ".git").exists()
    assert (tree / "go.mod").exists()


def test_a_run_of_the_peer_keeps_its_chart_without_the_enterprise_sub_chart(tmp_path: Path) -> None:
    source = _peer_tree(tmp_path / "peer")
    tree = suites.prepare_tree(source, tmp_path / "run", suites.Target("v2", "peer"), tmp_path)
    chart = tree / suites.CHART_PATH
    assert yaml.safe_load((chart / "Chart.yaml").read_text()) == {"name": "reloader-v2"}
    assert not (chart / "charts").exists()
    assert (source / suites.CHART_PATH / "charts").exists()
