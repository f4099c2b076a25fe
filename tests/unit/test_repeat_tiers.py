"""`make test-repeat`'s counting: a tier's JUnit XML becomes its line in the table, and a run
with one failed test makes the whole report unclean, naming the test."""

from __future__ import annotations

from pathlib import Path

import pytest
from scripts import repeat_tiers

XML = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4" failures="{failed}" errors="0" skipped="1"
time="12.5"><testcase classname="tests.integration.test_a" name="test_one" time="1"/>
<testcase classname="tests.integration.test_a" name="test_two" time="1">{failure}</testcase>
<testcase classname="tests.integration.test_b" name="test_three" time="1"/>
<testcase classname="tests.integration.test_b" name="test_four" time="1"><skipped/></testcase>
</testsuite></testsuites>"""


def write(path: Path, *, failed: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    failure = '<failure message="assert 1 == 2">boom</failure>' if failed else ""
    path.write_text(XML.format(failed=int(failed), failure=failure))


def test_a_tiers_junit_xml_is_counted_and_its_failed_tests_named(tmp_path: Path) -> None:
    write(tmp_path / "t.xml", failed=True)
    t = repeat_tiers.tally(tmp_path / "t.xml")
    assert t is not None
    assert (t.tests, t.passed, t.failed, t.skipped, t.seconds) == (4, 2, 1, 1, 12.5)
    assert t.names == ["tests.integration.test_a::test_two"]


@pytest.mark.parametrize("failed", [False, True])
def test_the_report_is_clean_only_when_no_run_failed(
    tmp_path: Path, failed: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    for run in (1, 2):
        write(tmp_path / f"run-{run}" / "serial-tests.xml", failed=failed and run == 2)
    assert repeat_tiers.report(tmp_path, 2, ["serial-tests"]) is not failed
    out = capsys.readouterr().out
    assert ("run 2, serial-tests: tests.integration.test_a::test_two" in out) is failed


def test_a_tier_that_wrote_no_results_is_not_clean(tmp_path: Path) -> None:
    write(tmp_path / "run-1" / "parallel-tests.xml", failed=False)
    assert not repeat_tiers.report(tmp_path, 1, ["parallel-tests", "node"])
