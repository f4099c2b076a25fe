"""`explain` and `impact` take the controller's flags in the controller's syntax, from the
controller's flag table, and read them with the controller's code (`flags.settings`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from kube_reloader import cli
from kube_reloader.cli import explain, flags, flagset, impact

DATA = Path(__file__).parent.parent / "data"
EXPLAIN = str(DATA / "explain-statefulset.yaml")
IMPACT = str(DATA / "impact" / "prod.yaml")
#: a valid value for the flags whose default cannot be written back as a value
EXAMPLES = {
    "workload_kind": "serving.knative.dev/v1/services:spec.template",
    "leader_election_id": "my-lock",
    "kubeconfig": "/nonexistent/kubeconfig",
    "context": "kind-dev",
    "admission_addr": ":9443",
}


#: `explain` refuses this one value: it cannot compute keyed hashes, and SHA-1 ones compared
#: with a keyed cluster's would call every up-to-date workload stale (impact compares none)
REFUSED = {("explain", "--hash-algorithm=hmac-sha256")}


def controller_flags() -> list[tuple[str, str]]:
    """(flag, `--flag=value`) for every flag of the controller's parser: its default, or an
    example where the default is not a value (None, an empty list); and hmac-sha256, the
    value of --hash-algorithm that needs a key."""
    out = [("--hash-algorithm", "--hash-algorithm=hmac-sha256")]
    for action in flagset.build_parser()._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        default = action.default
        if action.dest in EXAMPLES:
            value = EXAMPLES[action.dest]
        elif isinstance(default, bool):
            value = str(default).lower()
        else:
            value = "" if default in (None, []) else str(default)
        for flag in action.option_strings:
            out.append((flag, f"{flag}={value}"))
    return out


@pytest.mark.parametrize("tool", ["explain", "impact"])
@pytest.mark.parametrize(("flag", "arg"), controller_flags())
def test_every_controller_flag_is_accepted_and_read_as_the_controller_reads_it(
    tool: str, flag: str, arg: str
) -> None:
    parser = explain.build_parser() if tool == "explain" else impact.build_parser()
    _, got = explain.parse_args(parser, ["kind/name", arg])
    want = flags.parse([arg], env=explain.TOOL_ENV)
    assert got.options == want.options, flag
    if (tool, arg) not in REFUSED:
        return
    code = cli.main([tool, "sts/db", "-f", EXPLAIN, arg])
    assert code == 2, "parsed as the controller parses it, then refused"


def test_explain_refuses_hmac_hashes_and_impact_which_compares_none_accepts_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    hmac = "--hash-algorithm=hmac-sha256"
    assert cli.main(["explain", "sts/db", "-f", EXPLAIN, hmac]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "error: explain cannot compute keyed hashes (--hash-algorithm=hmac-sha256): the "
        "controller's key lives in a Secret it reads at start, and SHA-1 hashes compared with "
        "keyed ones would call every up-to-date workload stale"
    ]
    assert cli.main(["impact", "configmap/app-config", "-f", IMPACT, hmac]) == 0
    assert capsys.readouterr().err == ""


VALUE_FORMS = [
    ("explain", ["sts/db", "-f", EXPLAIN, "--auto-reload-all=false"]),
    ("explain", ["sts/db", "-f", EXPLAIN, "--reload-scope=keys", "--compat=v2"]),
    ("impact", ["configmap/app-config", "-f", IMPACT, "--freeze=true"]),
    ("impact", ["configmap/app-config", "-f", IMPACT, "--reload-scope=keys"]),
    ("impact", ["configmap/app-config", "-f", IMPACT, "--namespace-policies=false"]),
]


@pytest.mark.parametrize(("tool", "argv"), VALUE_FORMS)
def test_the_controllers_flag_value_form_is_accepted(
    tool: str, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main([tool, *argv]) == 0
    assert capsys.readouterr().err == ""


def test_impact_freeze_true_holds_every_reload(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["impact", "configmap/app-config", "-f", IMPACT]
    assert cli.main([*argv, "--freeze=false"]) == 0
    assert "held: frozen" not in capsys.readouterr().out
    assert cli.main([*argv, "--freeze=true"]) == 0
    assert "Deployment/web      reload  env-vars  held: frozen" in capsys.readouterr().out


def test_explain_applies_a_renamed_annotation_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["explain", "sts/db", "-f", EXPLAIN]) == 0
    assert "CONFIGMAP app-config: reloads on change" in capsys.readouterr().out
    renamed = "--configmap-annotation=example.com/reload"
    assert cli.main(["explain", "sts/db", "-f", EXPLAIN, renamed]) == 0
    out = capsys.readouterr().out
    # the workload's configmap.reloader.stakater.com/reload is no key any more: the auto key
    # on the pod template, shadowed before, is what the controller would read
    assert (
        "CONFIGMAP  read from pod template (fallback): configmap.reloader.stakater.com/auto" in out
    )
    assert "configmap.reloader.stakater.com/reload='app-config'" not in out


@pytest.mark.parametrize(("tool", "target"), [("explain", "sts/db"), ("impact", "cm/app-config")])
def test_a_bad_controller_flag_value_is_a_usage_error(
    tool: str, target: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main([tool, target, "-f", EXPLAIN, "--reload-scope=everything"])
    assert done.value.code == 2
    assert "--reload-scope: 'everything' must be object or keys" in capsys.readouterr().err


RENAMED_AUTO = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: app-config, namespace: prod}
data: {a: "1"}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: prod
  annotations: {x.io/auto: "true"}
spec:
  template:
    spec:
      containers:
        - name: app
          envFrom: [{configMapRef: {name: app-config}}]
"""


def test_impact_applies_a_renamed_annotation_flag_as_explain_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "renamed.yaml"
    path.write_text(RENAMED_AUTO)
    renamed = "--auto-annotation=x.io/auto"
    assert cli.main(["impact", "configmap/app-config", "-f", str(path), renamed]) == 0
    out = capsys.readouterr().out
    assert "Deployment/web" in out
    assert "no reload annotation" not in out
    argv = ["impact", "configmap/app-config", "-f", str(path), renamed, "--format", "json"]
    assert cli.main(argv) == 0
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    assert row["outcome"] == "reload"
    assert cli.main(["explain", "deploy/web", "-f", str(path), renamed]) == 0
    assert "CONFIGMAP app-config: reloads on the next change" in capsys.readouterr().out
