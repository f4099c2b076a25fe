"""`kube-reloader lint --fix` by round trip (issue 32) and `lint` on folders holding Helm charts."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
import yaml

from kube_reloader import cli
from kube_reloader.cli import charts, lintfix

ROOT = Path(__file__).resolve().parents[2]
AUTO = "reloader.stakater.com/auto"

TWO_DEPLOYMENTS = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: one
spec:
  template:
    metadata:
      annotations:
        reloader.stakater.com/auto: "true"
      labels:
        app: one
    spec:
      containers:
        - name: c
          image: x
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: two
spec:
  template:
    metadata:
      annotations:
        reloader.stakater.com/auto: "true"
    spec:
      containers:
        - name: c
          image: y
"""


def deployment(name: str, image: str, labels: dict[str, str] | None) -> dict[str, object]:
    template: dict[str, object] = {"metadata": {"labels": labels} if labels else {}}
    template["spec"] = {"containers": [{"name": "c", "image": image}]}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "annotations": {AUTO: "true"}},
        "spec": {"template": template},
    }


def lint_json(*argv: str, capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    cli.main(["lint", "--format", "json", *argv])
    findings: list[dict[str, object]] = json.loads(capsys.readouterr().out)
    return findings


def test_two_deployments_in_one_file_are_each_fixed_once_and_nothing_else_moves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "two.yaml"
    target.write_text(TWO_DEPLOYMENTS)
    assert cli.main(["lint", "--fix", str(target)]) == 0
    assert "moved 2 annotation(s)" in capsys.readouterr().err
    fixed = target.read_text()
    assert list(yaml.safe_load_all(fixed)) == [
        deployment("one", "x", {"app": "one"}),
        deployment("two", "y", None),
    ]
    assert fixed.count(AUTO) == 2
    assert cli.main(["lint", "--fix", str(target)]) == 0
    assert target.read_text() == fixed, "a second --fix changes nothing"
    capsys.readouterr()
    assert [f for f in lint_json(str(target), capsys=capsys) if f["rule"] == "KR001"] == []


def test_the_fix_keeps_the_other_lines_and_the_file_mode(tmp_path: Path) -> None:
    target = tmp_path / "two.yaml"
    target.write_text(TWO_DEPLOYMENTS)
    target.chmod(0o640)
    assert lintfix.fix_file(str(target)) == lintfix.Outcome(moved=2)
    assert stat.S_IMODE(target.stat().st_mode) == 0o640

    def others(text: str) -> list[str]:
        return [
            ln
            for ln in text.splitlines()
            if not {AUTO, "annotations", "metadata"} & set(ln.strip(" :{}").split(": "))
        ]

    assert others(target.read_text()) == others(TWO_DEPLOYMENTS)
    assert "    metadata: {}\n" in target.read_text(), "the emptied template metadata, kept"
    assert [p.name for p in tmp_path.iterdir()] == ["two.yaml"], "no temporary file is left"


def test_conflicting_values_refuse_the_file_and_leave_it_byte_identical(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = TWO_DEPLOYMENTS.replace(
        "  name: two\n",
        '  name: two\n  annotations: {reloader.stakater.com/auto: "false", reloader.stakater.com/search: "true"}\n',
    )
    text = text.replace(
        '        reloader.stakater.com/auto: "true"\n    spec:',
        '        reloader.stakater.com/auto: "true"\n        configmap.reloader.stakater.com/auto: "true"\n    spec:',
    )
    target = tmp_path / "conflict.yaml"
    target.write_text(text)
    outcome = lintfix.fix_file(str(target))
    assert outcome.moved == 0
    assert outcome.refused is not None
    assert "different values" in outcome.refused
    assert target.read_bytes() == text.encode()


def test_an_anchor_shared_with_the_moved_annotations_refuses_the_file(tmp_path: Path) -> None:
    text = TWO_DEPLOYMENTS.replace(
        '      annotations:\n        reloader.stakater.com/auto: "true"\n      labels:\n        app: one\n',
        '      annotations: &shared\n        reloader.stakater.com/auto: "true"\n      labels: *shared\n',
    )
    assert "*shared" in text
    target = tmp_path / "anchored.yaml"
    target.write_text(text)
    outcome = lintfix.fix_file(str(target))
    assert outcome.refused == "document 1: the edit would change more than the moved annotations"
    assert target.read_text() == text


def test_crlf_line_ends_are_kept(tmp_path: Path) -> None:
    target = tmp_path / "crlf.yaml"
    target.write_bytes(TWO_DEPLOYMENTS.replace("\n", "\r\n").encode())
    assert lintfix.fix_file(str(target)).moved == 2
    data = target.read_bytes()
    assert b"\n" not in data.replace(b"\r\n", b"")


def test_unreadable_input_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    target = tmp_path / "tabs.yaml"
    text = TWO_DEPLOYMENTS.replace("  name: one\n", "  name: one\n  labels: {a: b, a: c}\n")
    target.write_text(text)
    outcome = lintfix.fix_file(str(target))
    assert outcome.refused is not None
    assert "\n" not in outcome.refused
    assert target.read_text() == text


# ----------------------------------------------------------------------- charts


def tiny_chart(root: Path) -> Path:
    chart = root / "chart"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: tiny\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text('auto: "true"\n')
    (chart / "values.schema.json").write_text("{}\n")
    (chart / "templates" / "deployment.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}-tiny\n"
        "spec:\n  template:\n    metadata:\n      annotations:\n"
        "        reloader.stakater.com/auto: {{ .Values.auto | quote }}\n"
        "    spec:\n      containers: [{name: c, image: x}]\n"
    )
    return chart


def no_helm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setenv("KUBE_RELOADER_CACHE_DIR", str(tmp_path / "no-cache"))


def test_a_chart_without_helm_is_skipped_in_one_line_and_exits_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    chart = tiny_chart(tmp_path)
    no_helm(monkeypatch, tmp_path)
    assert cli.main(["lint", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert "KR000" not in out
    assert out.endswith("0 finding(s): 0 error(s), 0 warning(s)\n")
    assert err.splitlines() == [
        f"lint: {chart}: a Helm chart, and no helm binary (PATH, --helm, or the dev cluster's "
        "cache): its templates were skipped"
    ]


def test_a_template_named_on_the_command_line_is_not_parsed_as_yaml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    chart = tiny_chart(tmp_path)
    no_helm(monkeypatch, tmp_path)
    argv = [str(chart / "templates" / "deployment.yaml"), str(chart / "Chart.yaml")]
    assert cli.main(["lint", *argv]) == 0
    assert "KR000" not in capsys.readouterr().out


def test_the_values_file_of_a_chart_is_still_linted_as_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    chart = tiny_chart(tmp_path)
    (chart / "values.yaml").write_text("podAnnotations:\n  reloader.stakater.com/auto: 'true'\n")
    no_helm(monkeypatch, tmp_path)
    assert [f["rule"] for f in lint_json(str(tmp_path), capsys=capsys)] == ["KR003"]


def helm_or_skip() -> str:
    helm = charts.find_helm()
    if helm is None:
        pytest.skip("no helm binary: `make cluster-binaries` builds one (CI has it)")
    return helm


def test_a_rendered_chart_is_linted_by_template_and_never_fixed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    helm = helm_or_skip()
    chart = tiny_chart(tmp_path)
    before = (chart / "templates" / "deployment.yaml").read_text()
    assert cli.main(["lint", "--fix", "--helm", helm, str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert f"{chart}/templates/deployment.yaml: warning KR001" in out
    assert "Deployment default/release-name-tiny" in out
    assert f"lint: {chart}: a Helm chart, linted as helm template renders it (1 document(s))" in err
    assert "--fix leaves a chart alone" in err
    assert (chart / "templates" / "deployment.yaml").read_text() == before


def test_a_chart_helm_cannot_render_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    helm = helm_or_skip()
    chart = tiny_chart(tmp_path)
    (chart / "templates" / "broken.yaml").write_text('{{ fail "values needed" }}\n')
    assert cli.main(["lint", "--helm", helm, str(tmp_path)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert "values needed" in err[0]


@pytest.mark.parametrize("values", [[], ["image.yaml"]])
def test_lint_on_this_repository_s_deploy_folder_never_reports_invalid_yaml(
    values: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "image.yaml").write_text("image:\n  repository: registry.example/kube-reloader\n")
    monkeypatch.chdir(ROOT)
    argv = [arg for v in values for arg in ("--helm-values", str(tmp_path / v))]
    assert cli.main(["lint", "deploy/", *argv]) in (0, 1)
    out = capsys.readouterr().out
    assert "KR000" not in out
    assert os.path.isdir(ROOT / "deploy" / "helm")


def test_a_list_s_items_are_fixed_in_place(tmp_path: Path) -> None:
    text = (
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: apps/v1\n  kind: Deployment\n"
        "  metadata:\n    name: one\n  spec:\n    template:\n      metadata:\n        annotations:\n"
        '          reloader.stakater.com/auto: "true"\n      spec:\n        containers: []\n'
    )
    target = tmp_path / "list.yaml"
    target.write_text(text)
    assert lintfix.fix_file(str(target)) == lintfix.Outcome(moved=1)
    (item,) = yaml.safe_load(target.read_text())["items"]
    assert item["metadata"] == {"name": "one", "annotations": {AUTO: "true"}}
    assert item["spec"]["template"] == {"metadata": {}, "spec": {"containers": []}}


def test_a_byte_order_mark_and_document_markers_are_kept(tmp_path: Path) -> None:
    text = "\ufeff--- # first\n" + TWO_DEPLOYMENTS.replace("---\n", "...\n--- # second\n") + "...\n"
    target = tmp_path / "marked.yaml"
    target.write_text(text, encoding="utf-8")
    assert lintfix.fix_file(str(target)).moved == 2
    fixed = target.read_text(encoding="utf-8")
    assert fixed.startswith("\ufeff--- # first\napiVersion: apps/v1\n")
    assert "          image: x\n...\n--- # second\napiVersion: apps/v1\n" in fixed
    assert fixed.endswith("...\n")
    assert fixed.count("...\n") == 2


def test_a_refused_file_is_named_in_one_line_by_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = TWO_DEPLOYMENTS.replace(
        "  name: two\n", '  name: two\n  annotations: {reloader.stakater.com/auto: "false"}\n'
    )
    target = tmp_path / "conflict.yaml"
    target.write_text(text)
    assert cli.main(["lint", "--fix", str(target)]) == 1, "the shadowed annotation is an error"
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"not fixed {target}: document 2: reloader.stakater.com/auto is on both the workload and its "
        "pod template, with different values; the file is unchanged"
    ]
    assert target.read_text() == text
