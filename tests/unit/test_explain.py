"""`kube-reloader explain -f FILE`: the same rules as the controller, with every reason."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from kube_reloader import cli
from kube_reloader.core.annotations import Keys, shadowed_template_keys

DATA = Path(__file__).parent.parent / "data" / "explain-statefulset.yaml"


def test_text_output_names_sources_shadowed_keys_references_and_staleness(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["explain", "sts/db", "-f", str(DATA)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("StatefulSet prod/db\n")
    assert (
        "CONFIGMAP  read from workload metadata: configmap.reloader.stakater.com/reload='app-config'"
        in out
    )
    assert (
        "SHADOWED on the pod template (never read): configmap.reloader.stakater.com/auto='true'"
        in out
    )
    assert (
        "SECRET     read from pod template (fallback): secret.reloader.stakater.com/reload='tls'"
        in out
    )
    assert "container db, volumeMounts[tls] -> volume.secret" in out
    assert "CONFIGMAP app-config: reloads on change; up to date now" in out
    assert (
        "SECRET tls: reloads on the next change; at controller start it reloads now only if "
        "Secret prod/tls was written after the pod template" in out
    )
    assert "RELOAD DUE NOW" not in out, "a template without a hash is not a reload due"
    assert "(no hash carried yet)" in out


def test_json_output_for_one_change(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        cli.main(
            [
                "explain",
                "statefulset/db",
                "-n",
                "prod",
                "-f",
                str(DATA),
                "--change",
                "configmap/app-config",
                "--format",
                "json",
            ]
        )
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert [v["name"] for v in doc["verdicts"]] == ["app-config"]
    v = doc["verdicts"][0]
    assert (v["outcome"], v["target_container"], v["stale"]) == ("up_to_date", "db", False)
    assert v["current_hash"] == "f83e99e324ba68ccc373a58ef1eb42f8ab88646a"


def test_a_change_to_a_missing_resource_is_said_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["explain", "sts/db", "-f", str(DATA), "--change", "secret/nope"]) == 0
    out = capsys.readouterr().out
    assert "SECRET nope: never reloads" in out
    assert "this resource does not exist" in out


@pytest.mark.parametrize(("argv", "message"), [
    (["explain", "pod/x", "-f", str(DATA)], "expected KIND/NAME"),
    (["explain", "sts/nope", "-f", str(DATA)], "no StatefulSet named 'nope'"),
    (["explain", "sts/db", "-f", str(DATA), "--change", "service/x"], "expected configmap/NAME or secret/NAME"),
])  # fmt: skip
def test_bad_input_is_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1


def test_shadowed_keys_are_those_of_types_pinned_by_the_workload() -> None:
    keys = Keys()
    wa = {"configmap.reloader.stakater.com/reload": "x"}
    pa = {"configmap.reloader.stakater.com/auto": "true", "secret.reloader.stakater.com/auto": "true",
          "reloader.stakater.com/auto": "true"}  # fmt: skip
    assert shadowed_template_keys(wa, pa, keys) == {
        "configmap.reloader.stakater.com/auto": "true",
        "reloader.stakater.com/auto": "true",
    }
    assert shadowed_template_keys({}, pa, keys) == {}


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_secret_hash_is_shown_as_a_short_prefix_only(
    fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    from kube_reloader.cli.explain import content_hash

    secret = next(d for d in yaml.safe_load_all(DATA.read_text()) if d["kind"] == "Secret")
    full = content_hash(secret)
    assert cli.main(["explain", "sts/db", "-f", str(DATA), "--format", fmt]) == 0
    out = capsys.readouterr().out
    assert full not in out
    assert full[:8] + "..." in out


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("deployment", "Deployment"), ("Deployments", "Deployment"), ("deploy", "Deployment"),
        ("sts", "StatefulSet"), ("statefulsets", "StatefulSet"), ("ds", "DaemonSet"),
        ("cj", "CronJob"), ("job", "Job"), ("rollouts", "Rollout"), ("dc", "DeploymentConfig"),
        ("pod", None), ("pods", None), ("", None),
    ],
)  # fmt: skip
def test_explain_names_a_workload_kind_as_kubectl_does(name: str, kind: str | None) -> None:
    from kube_reloader.kube.resources import WORKLOAD_RESOURCES, workload_resource

    resource = workload_resource(name)
    assert (resource.kind if resource else None) == kind
    if resource is not None:
        assert WORKLOAD_RESOURCES[resource.kind] is resource


@pytest.mark.parametrize(
    ("argv", "want"),
    [([], "Reload by: patch: the pod template is written (Reloader's way)"),
     (["--default-strategy=evict"], "Reload by: evict: its pods older than the change are evicted "
                                    "(one pod at a time, highest ordinal first; disruption budgets "
                                    "honoured); the template is never written")],
)  # fmt: skip
def test_explain_says_how_the_workload_is_reloaded_as_the_controller_would(
    argv: list[str], want: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["explain", "sts/db", "-f", str(DATA), *argv]) == 0
    assert want in capsys.readouterr().out.splitlines()


def explain_with(tmp_path: Path, annotations: str) -> None:
    """`explain sts/db` on the test StatefulSet with `annotations` (YAML lines) added."""
    doc = DATA.read_text().replace(
        '    configmap.reloader.stakater.com/reload: "app-config"\n',
        '    configmap.reloader.stakater.com/reload: "app-config"\n' + annotations,
    )
    path = tmp_path / "w.yaml"
    path.write_text(doc)
    assert cli.main(["explain", "sts/db", "-f", str(path)]) == 0


def test_explain_names_an_unreadable_strategy_as_no_reload(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    explain_with(tmp_path, "    kube-reloader.io/strategy: restart\n")
    out = capsys.readouterr().out
    assert "Reload by: not reloaded: invalid kube-reloader.io/strategy 'restart'" in out


@pytest.mark.parametrize(
    ("annotations", "want"),
    [("    kube-reloader.io/strategy: restart-in-place\n",
      "Reload by: restart-in-place: its pods' containers are restarted in place by the "
      "kube-reloader agent sidecar"),
     ("    kube-reloader.io/strategy: signal\n    kube-reloader.io/signal: USR2\n",
      "Reload by: signal: the kube-reloader agent sidecar sends SIGUSR2 to the application")],
)  # fmt: skip
def test_explain_names_an_in_place_strategy_and_its_signal(
    annotations: str, want: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    explain_with(tmp_path, annotations)
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith(want) for line in lines), lines


#: an hour-long daily window twelve hours away from now (UTC): closed whenever the test runs
CLOSED_HOUR = (dt.datetime.now(dt.UTC).hour + 12) % 24


@pytest.mark.parametrize(
    ("extra", "want"),
    [
        ("", "Schedule: written as soon as planned (no window, order or Job policy)"),
        (f'    kube-reloader.io/reload-window: "0 {CLOSED_HOUR} * * * 1h"\n',
         f"Schedule: window '0 {CLOSED_HOUR} * * * 1h' (closed now, opens "),
        ('    kube-reloader.io/reload-window: "* * * * * 1h"\n',
         "Schedule: window '* * * * * 1h' (open now)"),
        ('    kube-reloader.io/reload-after: "Deployment/api"\n', "Schedule: after Deployment/api"),
        ('    kube-reloader.io/reload-after: "api"\n',
         "Schedule: warning: kube-reloader.io/reload-after: 'api' is not KIND/NAME"),
    ],
)  # fmt: skip
def test_explain_says_when_a_reload_may_be_written(
    extra: str, want: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    explain_with(tmp_path, extra)
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith(want) for line in lines), lines


FRESH = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: app-config}
data: {a: "1"}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations: {reloader.stakater.com/auto: "true"}
spec:
  template:
    spec:
      containers:
        - name: app
          envFrom: [{configMapRef: {name: app-config}}]
%s
"""
OLDER_HASH = """\
          env:
            - {name: STAKATER_APP_CONFIG_CONFIGMAP, value: 0000000000000000000000000000000000000000}
"""


def explain_json(
    tmp_path: Path, manifest: str, capsys: pytest.CaptureFixture[str]
) -> tuple[Any, str]:
    path = tmp_path / "rendered.yaml"
    path.write_text(manifest)
    assert cli.main(["explain", "deploy/web", "-f", str(path), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert cli.main(["explain", "deploy/web", "-f", str(path)]) == 0
    return doc, capsys.readouterr().out


def test_a_freshly_rendered_manifest_is_tracked_but_no_reload_is_due(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `helm template` output: no hash in the pod template yet. The controller reloads such a
    # workload on the next change of the ConfigMap, not for content it never saw change
    doc, text = explain_json(tmp_path, FRESH % "", capsys)
    (v,) = doc["verdicts"]
    assert (v["outcome"], v["reload"], v["due"], v["carried_hash"]) == ("reload", True, False, None)
    assert (
        "CONFIGMAP app-config: reloads on the next change; at controller start it reloads now "
        "only if ConfigMap /app-config was written after the pod template" in text
    )
    assert "RELOAD DUE NOW" not in text


def test_a_template_carrying_an_older_hash_has_a_reload_due_now(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc, text = explain_json(tmp_path, FRESH % OLDER_HASH, capsys)
    (v,) = doc["verdicts"]
    assert (v["outcome"], v["due"], v["stale"]) == ("reload", True, True)
    assert "CONFIGMAP app-config: RELOAD DUE NOW (the controller reloads it at start: " in text
    assert "changed while kube-reloader was not watching (carried " in text
