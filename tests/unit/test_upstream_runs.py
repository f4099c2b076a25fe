"""`make test-upstream`'s pure parts: the JUnit report read back, the summary's counts and
differences, the tree prepared for a run of ours or of the peer."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.upstream import report, suites

JUNIT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="7">
 <testsuite name="Core" tests="7">
  <properties>
   <property name="SuiteSucceeded" value="VERDICT"></property>
  </properties>
  <testcase name="[SynchronizedBeforeSuite]" classname="Core" status="passed" time="9"></testcase>
  <testcase name="[It] reloads a Deployment" classname="Core" status="passed" time="1"></testcase>
  <testcase name="[It] reloads a DeploymentConfig [openshift]" classname="Core" status="skipped"
    time="0"><skipped message="skipped"></skipped></testcase>
  <testcase name="[It] triggers a Job" classname="Core" status="failed" time="15">
   <failure message="no Job" type="failed">no Job</failure></testcase>
  <testcase name="[It] waits forever" classname="Core" status="timedout" time="60">
   <failure message="timed out" type="timedout">x</failure></testcase>
  <testcase name="[It] not yet written" classname="Core" status="pending" time="0">
   <skipped message="pending"></skipped></testcase>
  <testcase name="[It] old style" classname="Core" time="1"><error message="x"></error></testcase>
  <testcase name="[DeferCleanup (Suite)]" classname="Core" status="panicked" time="1">
   <failure message="x" type="panicked">x</failure></testcase>
 </testsuite>
</testsuites>
"""


def test_the_junit_report_gives_each_spec_its_own_state_and_the_suites_verdict(
    tmp_path: Path,
) -> None:
    path = tmp_path / "core.xml"
    path.write_text(JUNIT.replace("VERDICT", "false"))
    specs, succeeded = suites.read_junit(path) or ({}, True)
    assert specs == {
        "[It] reloads a Deployment": "passed",
        "[It] reloads a DeploymentConfig [openshift]": "skipped",
        "[It] triggers a Job": "failed",
        "[It] waits forever": "timedout",
        "[It] not yet written": "pending",
        "[It] old style": "failed",
        "[DeferCleanup (Suite)]": "panicked",
    }
    assert succeeded is False
    path.write_text(JUNIT.replace("VERDICT", "true"))
    assert suites.read_junit(path) == (specs, True)


def test_a_truncated_report_reads_as_none_and_a_run_without_one_is_no_success(
    tmp_path: Path,
) -> None:
    path = tmp_path / "core.xml"
    path.write_text(JUNIT[:300])
    assert suites.read_junit(path) is None
    results = {"v2-ours": {"core": {"specs": {}, "seconds": 3, "exit_code": 2, "succeeded": None}}}
    assert "| v2-ours | core | 0 | 0 | 0 | 0 | no report (exit 2) | 3 |" in report.summary(results)
    assert report.incomplete(results) == ["v2-ours/core"]


def test_the_summary_counts_each_run_and_names_the_specs_one_side_passes_alone() -> None:
    results = {
        "v2-peer": {"core": {"specs": {"a": "passed", "b": "passed", "c": "skipped", "d": "pending"},
                             "seconds": 10, "succeeded": True}},
        "v2-ours": {"core": {"specs": {"a": "passed", "b": "timedout", "c": "skipped", "d": "pending"},
                             "seconds": 12, "succeeded": False}},
    }  # fmt: skip
    text = report.summary(results)
    assert "| v2-peer | core | 2 | 0 | 1 | 1 | passed | 10 |" in text
    assert "| v2-ours | core | 1 | 1 | 1 | 1 | failed | 12 |" in text
    peer_only = text.split("Specs v2's peer passes and kube-reloader does not:")[1]
    assert peer_only.split("Specs kube-reloader passes")[0].strip() == "- core: b (timedout)"
    assert text.rstrip().endswith("- none")


def test_a_spec_the_other_side_never_ran_is_named_as_not_run() -> None:
    results = {
        "v1-peer": {"flags": {"specs": {"x": "passed"}, "seconds": 1, "succeeded": True}},
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
    tree = suites.prepare_tree(source, tmp_path / "run", suites.Target("v1", "ours"), ours)
    values = yaml.safe_load((tree / suites.CHART_PATH / "values.yaml").read_text())
    assert values == {"nameOverride": "", "reloader": {"compat": "v1", "logLevel": "info"}}


def test_the_suites_environment_names_the_image_under_test_and_puts_our_tools_first(
    tmp_path: Path,
) -> None:
    env = suites.go_env(tmp_path / "kubeconfig", "kube-reloader.local/x:1", [tmp_path / "bin"])
    assert env["RELOADER_IMAGE"] == "kube-reloader.local/x:1"
    assert env["KUBECONFIG"] == str(tmp_path / "kubeconfig")
    assert env["PATH"].split(":")[0] == str(tmp_path / "bin")


def test_a_run_of_the_peer_keeps_its_chart_without_the_enterprise_sub_chart(tmp_path: Path) -> None:
    source = _peer_tree(tmp_path / "peer")
    tree = suites.prepare_tree(source, tmp_path / "run", suites.Target("v2", "peer"), tmp_path)
    chart = tree / suites.CHART_PATH
    assert yaml.safe_load((chart / "Chart.yaml").read_text()) == {"name": "reloader-v2"}
    assert not (chart / "charts").exists()
    assert (source / suites.CHART_PATH / "charts").exists()


def test_a_suite_that_does_not_build_is_a_run_without_a_report(tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "go").write_text("#!/bin/sh\necho 'setup failed' >&2\nexit 2\n")
    (fake / "go").chmod(0o755)
    env = {"PATH": f"{fake}:/usr/bin:/bin"}
    outcome = suites.run_suite(
        tmp_path, "core", env=env, label_filter="!csi", report_dir=tmp_path,
        timeout_minutes=1, log=tmp_path / "core.log",
    )  # fmt: skip
    assert (outcome.exit_code, outcome.succeeded, outcome.specs) == (2, None, {})
    assert "setup failed" in (tmp_path / "core.log").read_text()


def test_a_runs_outcome_reaches_the_summary_with_its_verdict() -> None:
    outcome = suites.Outcome("core", specs={"[It] a": "passed"}, seconds=4.2, succeeded=True)
    text = report.summary({"v2-ours": {"core": outcome.result()}})
    assert "| v2-ours | core | 1 | 0 | 0 | 0 | passed | 4 |" in text
