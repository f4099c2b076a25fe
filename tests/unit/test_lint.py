"""`kube-reloader lint`: the corpus under tests/data/lint, its golden outputs (text, JSON,
SARIF validated against the official 2.1.0 schema), --fix, stdin, exit codes."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import jsonschema
import pytest

from kube_reloader import cli
from tests.sarif import schema

ROOT = Path(__file__).resolve().parents[2]
CORPUS = "tests/data/lint"
GOLDEN = ROOT / "tests" / "data" / "lint-golden"


@pytest.fixture(autouse=True)
def in_repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # golden outputs carry paths relative to the repository


@pytest.mark.parametrize("fmt", ["text", "json", "sarif"])
def test_corpus_output_matches_the_golden_file(
    fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["lint", CORPUS, "--format", fmt])
    out = capsys.readouterr().out
    assert code == 2, "the corpus holds a broken YAML document"
    assert out == (GOLDEN / f"corpus.{fmt}").read_text()


def test_sarif_output_is_valid_sarif_2_1_0(capsys: pytest.CaptureFixture[str]) -> None:
    cli.main(["lint", CORPUS, "--format", "sarif"])
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, schema())
    results = doc["runs"][0]["results"]
    assert results
    assert all(r["locations"][0]["physicalLocation"]["region"]["startLine"] >= 1 for r in results)


def test_every_rule_is_exercised_by_the_corpus(capsys: pytest.CaptureFixture[str]) -> None:
    from kube_reloader.core.linting import RULES

    cli.main(["lint", CORPUS, "--format", "json"])
    seen = {f["rule"] for f in json.loads(capsys.readouterr().out)}
    assert seen == set(RULES)


def test_correct_manifests_give_no_finding_and_exit_zero(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["lint", f"{CORPUS}/correct.yaml"]) == 0
    assert capsys.readouterr().out == "0 finding(s): 0 error(s), 0 warning(s)\n"


@pytest.mark.parametrize(("fail_on", "code"), [("error", 0), ("warning", 1)])
def test_fail_on_sets_the_threshold(fail_on: str, code: int) -> None:
    assert cli.main(["lint", f"{CORPUS}/tls-without-reload.yaml", "--fail-on", fail_on]) == code


def test_stdin_is_read_with_dash(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (ROOT / CORPUS / "values-podannotations.yaml").read_text()
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    assert cli.main(["lint", "-"]) == 1
    assert "<stdin>:8: error KR003" in capsys.readouterr().out


def test_usage_errors_exit_two(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["lint"]) == 2
    assert cli.main(["lint", "no/such/file.yaml"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_fix_moves_only_the_misplaced_lines_and_keeps_everything_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    original = (ROOT / CORPUS / "podannotations-statefulset.yaml").read_text()
    target = tmp_path / "sts.yaml"
    shutil.copy(ROOT / CORPUS / "podannotations-statefulset.yaml", target)
    assert cli.main(["lint", "--fix", str(target)]) == 0
    fixed = target.read_text()
    moved = ['        secret.reloader.stakater.com/reload: "vault-tls"\n', '        configmap.reloader.stakater.com/auto: "true"\n',
             "      annotations:\n"]  # fmt: skip
    assert [ln for ln in original.splitlines(keepends=True) if ln not in moved] == [
        ln
        for ln in fixed.splitlines(keepends=True)
        if ln
        not in (
            '    secret.reloader.stakater.com/reload: "vault-tls"\n',
            '    configmap.reloader.stakater.com/auto: "true"\n',
        )
    ], "every other line is byte for byte the same, in the same order"
    assert (
        '  annotations:\n    secret.reloader.stakater.com/reload: "vault-tls"\n'
        '    configmap.reloader.stakater.com/auto: "true"\n'
        '    configmap.reloader.stakater.com/reload: "vault-config"\n'
    ) in fixed
    assert "# came from values.yaml podAnnotations" in fixed
    assert "moved 2 annotation(s)" in capsys.readouterr().err


def test_fix_creates_the_annotations_block_when_metadata_has_none(tmp_path: Path) -> None:
    target = tmp_path / "broken.yaml"
    shutil.copy(ROOT / CORPUS / "broken.yaml", target)
    cli.main(["lint", "--fix", str(target)])
    fixed = target.read_text()
    assert "  name: still-linted\n  namespace: default\n" in fixed
    assert '  annotations:\n    reloader.stakater.com/auto: "true"\n' in fixed
    assert fixed.count("reloader.stakater.com/auto") == (
        ROOT / CORPUS / "broken.yaml"
    ).read_text().count("reloader.stakater.com/auto")


def test_pre_commit_hook_is_declared() -> None:
    import yaml

    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    hook = next(h for h in hooks if h["id"] == "kube-reloader-lint")
    assert hook["entry"] == "kube-reloader lint"
    assert hook["language"] == "python"
