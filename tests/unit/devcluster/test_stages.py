"""The kwok stages file the dev cluster writes: upstream's stages, `pod-ready` gated."""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest
import yaml

from kube_reloader.devcluster import stages
from kube_reloader.devcluster.state import ClusterError
from tests import builders

POD_READY = """\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'NotIn'
      values:
      - 'True'
  next:
    statusTemplate: |
      {{ $now := Now }}

      conditions:
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Ready
      {{ range .spec.containers }}
      - name: {{ .name | Quote }}
      {{ end }}
      phase: Running
"""

POD_DELETE = """\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'Exists'
  next:
    delete: true
"""


def _pod(
    annotation: str | None, *envs: list[dict[str, Any]], init: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p"}
    if annotation is not None:
        meta["annotations"] = {stages.NEVER_READY_IF_ENV: annotation}
    spec: dict[str, Any] = {
        "containers": [{"name": f"c{i}", **({"env": e} if e else {})} for i, e in enumerate(envs)]
    }
    if init is not None:
        spec["initContainers"] = [{"name": "init", "env": init}]
    return {"metadata": meta, "spec": spec}


def test_the_pod_ready_stage_gains_exactly_the_readiness_gate_and_keeps_everything_else() -> None:
    before = yaml.safe_load(POD_READY)
    after = yaml.safe_load(stages.gate_pod_ready(POD_READY))
    exprs = after["spec"]["selector"].pop("matchExpressions")
    assert exprs[:-1] == before["spec"]["selector"].pop("matchExpressions")
    assert exprs[-1] == {"key": stages.GATE_QUERY, "operator": "In", "values": ["ok"]}
    assert after == before
    assert after["spec"]["next"]["statusTemplate"].startswith("{{ $now := Now }}\n\nconditions:\n")


def test_gating_an_already_gated_stage_changes_nothing() -> None:
    once = stages.gate_pod_ready(POD_READY)
    assert stages.gate_pod_ready(once) == once


def test_the_stages_file_gates_pod_ready_and_leaves_the_other_stages_byte_for_byte() -> None:
    text = stages.kwok_stages([POD_DELETE, POD_READY, POD_DELETE])
    parts = text.split("\n---\n")
    assert len(parts) == 3
    assert parts[0] == POD_DELETE.strip()
    assert parts[2] == POD_DELETE  # the last document ends the file with one newline
    docs = list(yaml.safe_load_all(text))
    assert [d["metadata"]["name"] for d in docs] == ["pod-delete", "pod-ready", "pod-delete"]
    assert stages.READINESS_GATE in docs[1]["spec"]["selector"]["matchExpressions"]


def test_a_stages_file_without_a_pod_ready_stage_is_refused() -> None:
    with pytest.raises(ClusterError, match="no 'pod-ready' stage"):
        stages.kwok_stages([POD_DELETE])


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (POD_DELETE, "expected the 'pod-ready' stage"),
        (
            "kind: Stage\nmetadata: {name: pod-ready}\nspec: {}\n",
            "no spec.selector.matchExpressions",
        ),
        ("[1, 2]\n", "one `kind: Stage` document"),
        ("a: [\n", "not valid YAML"),
    ],
)
def test_a_stage_that_is_not_the_expected_pod_ready_shape_is_refused(
    text: str, problem: str
) -> None:
    with pytest.raises(stages.StageError, match=problem):
        stages.gate_pod_ready(text)


CASES = [
    ("no annotation: ready as before", _pod(None, [{"name": "FOO", "value": "bad"}]), "ok"),
    (
        "annotated, no container has the value",
        _pod("bad", [{"name": "FOO", "value": "good"}]),
        "ok",
    ),
    ("annotated, containers without env", _pod("bad", [], []), "ok"),
    (
        "annotated, the value in a later container",
        _pod(
            "bad",
            [],
            [
                {"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
                {"name": "FOO", "value": "bad"},
            ],
        ),
        "gated",
    ),
    (
        "annotated, the value in an init container",
        _pod("bad", [], init=[{"name": "FOO", "value": "bad"}]),
        "gated",
    ),
    ("the value is only a name, not a value", _pod("FOO", [{"name": "FOO", "value": "x"}]), "ok"),
    ("no metadata or spec at all", {}, "ok"),
]


@pytest.mark.skipif(shutil.which("jq") is None, reason="needs the jq command")
@pytest.mark.parametrize(("pod", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_gate_query_yields_one_string_gated_only_for_an_annotated_pod_with_that_env_value(
    pod: dict[str, Any], want: str
) -> None:
    out = subprocess.run(
        ["jq", "-c", stages.GATE_QUERY],
        input=json.dumps(pod),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out == [json.dumps(want)]


def test_the_builder_annotates_the_deployment_pod_template_with_the_gate_value() -> None:
    d = builders.never_ready_if_env(builders.deployment("web", "ns"), "bad")
    assert d["spec"]["template"]["metadata"]["annotations"] == {stages.NEVER_READY_IF_ENV: "bad"}
    assert "annotations" not in d["metadata"]
