"""`kube-reloader lint`: the corpus under tests/data/lint, its golden outputs (text, JSON,
SARIF validated against the official 2.1.0 schema), --fix, stdin, exit codes."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import tracemalloc
from pathlib import Path

import jsonschema
import pytest

from kube_reloader import cli, limits
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


AUTO_VALUE = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations:
    reloader.stakater.com/auto: "{value}"
spec:
  template:
    spec:
      containers: [{{name: app, image: app}}]
"""


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("True", "is read as true (Go's ParseBool) by Reloader v1 and as not true by v2"),
        ("1", "is read as true (Go's ParseBool) by Reloader v1 and as not true by v2"),
        ("False", 'opts the workload out in v1 only (v2: only "false" does)'),
        ("no", 'opts the workload out in v1 only (v2: only "false" does)'),
    ],
)
def test_an_auto_value_the_two_versions_read_differently_is_a_warning_saying_how(
    value: str, said: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(AUTO_VALUE.format(value=value)))
    assert cli.main(["lint", "-"]) == 0  # warnings only
    out = capsys.readouterr().out
    assert (
        f"KR009 invalid-value: Deployment default/web: reloader.stakater.com/auto='{value}' " in out
    )
    assert said in out


SPLIT_EXCLUDE = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations:
    configmaps.exclude.reloader.stakater.com/reload: "app-config"
spec:
  template:
    metadata:
      annotations:
        reloader.stakater.com/auto: "true"
    spec:
      containers: [{name: app, image: app}]
"""


def test_an_exclude_list_on_the_metadata_with_the_reload_annotation_on_the_template_is_named(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(SPLIT_EXCLUDE))
    cli.main(["lint", "-"])
    out = capsys.readouterr().out
    assert "KR001" in out
    assert (
        "configmaps.exclude.reloader.stakater.com/reload on the workload's metadata then "
        "excludes in Reloader v1 only (v2 reads the exclude list where it reads this annotation)"
    ) in out


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
             "      annotations:\n", "        # came from values.yaml podAnnotations\n"]  # fmt: skip
    assert [ln for ln in original.splitlines(keepends=True) if ln not in moved] == [
        ln
        for ln in fixed.splitlines(keepends=True)
        if ln
        not in (
            '    secret.reloader.stakater.com/reload: "vault-tls"\n',
            '    configmap.reloader.stakater.com/auto: "true"\n',
            "    # came from values.yaml podAnnotations\n",
        )
    ], "every other line is byte for byte the same, in the same order"
    assert (
        "  annotations:\n    # came from values.yaml podAnnotations\n"
        '    secret.reloader.stakater.com/reload: "vault-tls"\n'
        '    configmap.reloader.stakater.com/auto: "true"\n'
        '    configmap.reloader.stakater.com/reload: "vault-config"\n'
    ) in fixed
    assert fixed.count("# came from values.yaml podAnnotations") == 1, "the comment moves with them"
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


# ------------------------------------------------------------------ hostile input (issue 13)

STILL_LINTED = (ROOT / CORPUS / "broken.yaml").read_text().split("---\n")[2]


def auto_line(text: str) -> int:
    """The line of STILL_LINTED's pod-template annotation (a KR001 warning) in `text`."""
    return text.splitlines().index('        reloader.stakater.com/auto: "true"') + 1


def laughs(levels: int) -> str:
    """A "billion laughs" ConfigMap: each list holds nine aliases of the previous one."""
    lines = ["apiVersion: v1", "kind: ConfigMap", "metadata:", "  name: lol", "data:",
             '  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']  # fmt: skip
    for prev, name in zip("abcdefghijk", "bcdefghijkl", strict=False):
        if len(lines) - 5 == levels:
            break
        lines.append(f"  {name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_a_billion_laughs_alias_bomb_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(laughs(9) + "---\n" + STILL_LINTED)
    line = auto_line(bomb.read_text())
    assert len(laughs(9)) < 520, "the size of the reported bomb"

    # the unfixed linter dies of MemoryError in the child, instead of taking the machine
    child = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))\n"
        "from kube_reloader import cli\n"
        "code = cli.main(['lint', sys.argv[1]])\n"
        # VmHWM is this process's own peak: ru_maxrss would carry the parent's peak, which
        # Linux folds in at exec (a long test session's RSS, not the linter's)
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]\n"
        "print(hwm.split()[1], file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", child, str(bomb)], capture_output=True, timeout=60, check=False
    )
    peak_kib = int(proc.stderr.decode().split()[-1])  # VmHWM, in KiB
    text = proc.stdout.decode()
    assert proc.returncode == 2, proc.stderr.decode()[-2000:]
    refusals = [ln for ln in text.splitlines() if "KR000" in ln]
    assert refusals == [
        f"{bomb}:1: error KR000 invalid-yaml: refused YAML: aliases would expand this document "
        "from 38 to 490,329,074 nodes (an alias bomb?)"
    ]
    assert f"{bomb}:{line}: warning KR001" in text, "the next document in the file is still linted"
    assert peak_kib < 200 * 1024


def test_a_document_growing_past_the_alias_budget_is_refused_with_a_small_peak(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(laughs(6))  # 531,441 strings once expanded: the unfixed linter takes ~140 MB
    tracemalloc.start()
    try:
        code = cli.main(["lint", str(bomb)])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert code == 2
    assert "refused YAML: aliases would expand this document from 32 to 672,620 nodes" in (
        capsys.readouterr().out
    )
    assert peak < 4 * 2**20


ANCHORED = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: anchored
  namespace: default
  labels: &labels {app: web}
spec:
  selector: {matchLabels: *labels}
  template:
    metadata:
      labels: &pod {<<: *labels, tier: front}
      annotations: {reloader.stakater.com/auto: "true"}
    spec:
      containers: [{name: c, image: x, envFrom: [{configMapRef: {name: ok}}]}]
  extra: [*pod, *pod]
"""


def test_ordinary_anchors_lint_exactly_like_the_same_manifest_written_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    written_out = (
        ANCHORED.replace("&labels ", "")
        .replace("*labels", "{app: web}")
        .replace("&pod {<<: {app: web}, tier: front}", "{app: web, tier: front}")
        .replace("[*pod, *pod]", "[{app: web, tier: front}, {app: web, tier: front}]")
    )
    assert "*" not in written_out
    assert "&" not in written_out
    outputs = []
    for name, text in (("a.yaml", ANCHORED), ("b.yaml", written_out)):
        (tmp_path / name).write_text(text)
        code = cli.main(["lint", str(tmp_path / name), "--format", "json"])
        outputs.append((code, json.loads(capsys.readouterr().out)))
    for _, findings in outputs:
        for f in findings:
            f["file"] = "x.yaml"
    assert outputs[0] == outputs[1]
    assert [f["rule"] for f in outputs[0][1]] == ["KR001"]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("a: &r [1, *r]\n", "an alias refers to a collection that contains it"),
        ("[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
    ],
    ids=["recursive alias", "deep nesting"],
)
def test_a_document_that_cannot_be_expanded_safely_is_refused_not_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, problem: str
) -> None:
    target = tmp_path / "hostile.yaml"
    target.write_text(text + "---\n" + STILL_LINTED)
    assert cli.main(["lint", str(target)]) == 2
    out = capsys.readouterr().out
    assert f"{target}:1: error KR000 invalid-yaml: refused YAML: {problem}\n" in out
    assert f"{target}:{auto_line(target.read_text())}: warning KR001" in out


def test_an_input_file_over_the_size_cap_is_refused_and_the_others_are_still_linted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(limits, "MAX_FILE_CHARS", 4000)
    (tmp_path / "big.yaml").write_text("# padding\n" * 401)
    shutil.copy(ROOT / CORPUS / "tls-without-reload.yaml", tmp_path / "small.yaml")
    assert cli.main(["lint", str(tmp_path), "--fail-on", "warning"]) == 2
    out = capsys.readouterr().out
    assert (
        f"{tmp_path}/big.yaml:1: error KR000 invalid-yaml: refused: more than 4,000 characters"
        in out
    )
    assert f"{tmp_path}/small.yaml:" in out


def test_a_named_list_over_the_entry_cap_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kube_reloader.core.regexes import MAX_ENTRIES

    names = ",".join(f"c{i % 10}" for i in range(MAX_ENTRIES + 1))
    manifest = tmp_path / "big.yaml"
    manifest.write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\n  namespace: shop\n"
        f'  annotations:\n    configmap.reloader.stakater.com/reload: "{names}"\n'
        "spec:\n  template:\n    spec:\n      containers: [{name: app, image: x}]\n"
    )
    assert cli.main(["lint", str(manifest)]) != 0
    out = capsys.readouterr().out
    assert "KR007" in out
    assert f"more than the {MAX_ENTRIES}" in out


def test_an_alias_bomb_split_over_many_documents_is_refused_once_the_input_budget_is_spent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # each document alone stays under the per-document cap (about 66,000 nodes); together
    # they would have cost 1.7 GB before the budget spanned the whole input
    piece = laughs(5)
    bomb = tmp_path / "pieces.yaml"
    bomb.write_text("---\n".join([piece] * 150))
    code = cli.main(["lint", str(bomb), "--format", "json"])
    findings = json.loads(capsys.readouterr().out)
    refused = [f for f in findings if f["rule"] == "KR000"]
    assert code == 2
    assert 0 < len(refused) < 150, "the first pieces fit the budget, the rest are refused"
    assert all("past what aliases may add to one input" in f["message"] for f in refused)


@pytest.mark.parametrize(
    "document",
    ["a: !foo bar\n", "a: !!timestamp 2020-99-99x\n", 'a: !!int ""\n', "a: !!float abc\n",
     "? [1]\n: 2\n"],
    ids=["unknown tag", "bad timestamp", "empty int", "bad float", "list as a key"],
)  # fmt: skip
def test_a_document_pyyaml_cannot_construct_is_one_finding_and_the_next_is_still_linted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], document: str
) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text(document + "---\n" + STILL_LINTED)
    code = cli.main(["lint", str(manifest)])
    out = capsys.readouterr().out
    assert code == 2
    assert f"{manifest}:1: error KR000 invalid-yaml" in out
    assert "KR001" in out, "the next document in the file is still linted"
