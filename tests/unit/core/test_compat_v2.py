"""`--compat=v2`: what Reloader v2 writes (its last-reloaded-from shape, also in env-vars
mode; the first container for a named reload), and, in both modes, either shape read as the
record of a reload."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kube_reloader.core.catchup import carried
from kube_reloader.core.objects import ResourceType
from kube_reloader.core.planning import (
    Change,
    Config,
    Event,
    Outcome,
    plan,
    workload_from_manifest,
)
from kube_reloader.core.references import PodTemplate
from kube_reloader.core.strategies import Compat, Strategy, last_reloaded

H = "d6dbf8a400e3e00c352f9ceeca960bdf64ab6377"
OLD = "0b1f1a3c00000000000000000000000000000000"
LRF = "reloader.stakater.com/last-reloaded-from"
AUTO = {"reloader.stakater.com/auto": "true"}
CHANGE = Change(ResourceType.CONFIGMAP, "ns", "c", H)
NOW = 1796156742  # 2026-12-01T20:25:42Z
V1_SHAPE = (f'{{"type":"CONFIGMAP","name":"c","namespace":"ns","hash":"{H}",'
            f'"containerRefs":["app"],"observedAt":1796156000}}')  # fmt: skip
V2_SHAPE = (f'{{"kind":"configmap","name":"c","namespace":"ns","hash":"{H}",'
            f'"containers":["app"],"reloadedAt":"2026-12-01T20:25:44.317276816Z"}}')  # fmt: skip


def workload(annotations: dict[str, str], *, lrf: str | None = None,
             env: list[dict[str, str]] | None = None) -> Any:  # fmt: skip
    return workload_from_manifest({
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "ns", "annotations": annotations},
        "spec": {"template": {
            "metadata": {"annotations": {LRF: lrf} if lrf else {}},
            "spec": {"containers": [
                {"name": "side"},
                {"name": "app", "env": env or [], "envFrom": [{"configMapRef": {"name": "c"}}]},
            ]},
        }},
    })  # fmt: skip


def annotations_of(p: Any) -> dict[str, str]:
    return dict(p.patch["spec"]["template"]["metadata"]["annotations"])


def test_v2_mode_writes_reloader_v2s_last_reloaded_from_byte_for_byte() -> None:
    cfg = Config(strategy=Strategy.ANNOTATIONS, compat=Compat.V2)
    p = plan(change=CHANGE, workload=workload(AUTO), config=cfg, now=NOW)
    assert p.outcome is Outcome.RELOAD
    assert annotations_of(p)[LRF] == (
        f'{{"kind":"configmap","name":"c","namespace":"ns","hash":"{H}",'
        '"containers":["app"],"reloadedAt":"2026-12-01T20:25:42Z"}'
    )


@pytest.mark.parametrize(("now", "at"), [
    (NOW, "2026-12-01T20:25:42Z"),
    (NOW + 0.5, "2026-12-01T20:25:42.5Z"),
    (NOW + 0.317276, "2026-12-01T20:25:42.317276Z"),
    (NOW + 0.000001, "2026-12-01T20:25:42.000001Z"),
])  # fmt: skip
def test_v2s_reloaded_at_is_gos_rfc3339_nano_and_v1s_observed_at_whole_seconds(
    now: float, at: str
) -> None:
    v2 = plan(change=CHANGE, workload=workload(AUTO),
              config=Config(strategy=Strategy.ANNOTATIONS, compat=Compat.V2), now=now)  # fmt: skip
    assert json.loads(annotations_of(v2)[LRF])["reloadedAt"] == at
    v1 = plan(change=CHANGE, workload=workload(AUTO), config=Config(strategy=Strategy.ANNOTATIONS),
              now=now)  # fmt: skip
    assert json.loads(annotations_of(v1)[LRF])["observedAt"] == NOW


def test_v2_mode_with_env_vars_sets_the_variable_and_the_annotation_in_one_patch() -> None:
    p = plan(change=CHANGE, workload=workload(AUTO), config=Config(compat=Compat.V2), now=NOW)
    assert p.outcome is Outcome.RELOAD
    containers = p.patch["spec"]["template"]["spec"]["containers"]
    assert containers == [{"name": "app", "env": [{"name": "STAKATER_C_CONFIGMAP", "value": H}]}]
    assert json.loads(annotations_of(p)[LRF])["kind"] == "configmap"
    v1 = plan(change=CHANGE, workload=workload(AUTO), config=Config(), now=NOW)
    assert "metadata" not in v1.patch["spec"]["template"], "v1 writes no annotation there"


def test_v2_mode_with_env_vars_is_up_to_date_on_the_variable_alone() -> None:
    w = workload(AUTO, env=[{"name": "STAKATER_C_CONFIGMAP", "value": H}])
    assert plan(change=CHANGE, workload=w, config=Config(compat=Compat.V2), now=NOW).outcome is (
        Outcome.UP_TO_DATE
    )


def test_v2_mode_with_env_vars_records_a_delete_in_last_reloaded_from_with_an_empty_hash() -> None:
    gone = Change(ResourceType.CONFIGMAP, "ns", "c", H, event=Event.DELETED)
    w = workload(AUTO, lrf=V2_SHAPE, env=[{"name": "STAKATER_C_CONFIGMAP", "value": H}])
    p = plan(change=gone, workload=w, config=Config(compat=Compat.V2), now=NOW)
    assert p.outcome is Outcome.RELOAD
    test, remove, annotate = p.patch
    assert test["op"] == "test"
    assert remove == {"op": "remove", "path": "/spec/template/spec/containers/1/env/0"}
    assert annotate == {
        "op": "add",
        "path": "/spec/template/metadata/annotations/reloader.stakater.com~1last-reloaded-from",
        "value": '{"kind":"configmap","name":"c","namespace":"ns","hash":"","containers":["app"],'
        '"reloadedAt":"2026-12-01T20:25:42Z"}',
    }
    v1 = plan(change=gone, workload=w, config=Config(), now=NOW)
    assert len(v1.patch) == 2, "v1 removes the variable only"


def test_a_v2_delete_writes_no_annotation_where_the_template_may_have_no_annotations_map() -> None:
    """The cache keeps Reloader's keys only: without one, whether the map exists is unknown;
    adding the whole map could erase the others, adding under a missing one fails the patch."""
    gone = Change(ResourceType.CONFIGMAP, "ns", "c", H, event=Event.DELETED)
    w = workload(AUTO, env=[{"name": "STAKATER_C_CONFIGMAP", "value": H}])
    p = plan(change=gone, workload=w, config=Config(compat=Compat.V2), now=NOW)
    assert [op["op"] for op in p.patch] == ["test", "remove"]


@pytest.mark.parametrize(("compat", "container"), [(Compat.V1, "app"), (Compat.V2, "side")])
def test_a_named_reload_goes_to_the_referencing_container_in_v1_and_the_first_in_v2(
    compat: Compat, container: str
) -> None:
    w = workload({"configmap.reloader.stakater.com/reload": "c"})
    p = plan(change=CHANGE, workload=w, config=Config(compat=compat), now=NOW)
    assert p.target is not None
    assert p.target.container == container


@pytest.mark.parametrize("compat", list(Compat))
@pytest.mark.parametrize("shape", [V1_SHAPE, V2_SHAPE], ids=["v1-shape", "v2-shape"])
def test_either_shape_recording_the_current_content_is_up_to_date_in_either_mode(
    compat: Compat, shape: str
) -> None:
    cfg = Config(strategy=Strategy.ANNOTATIONS, compat=compat)
    p = plan(change=CHANGE, workload=workload(AUTO, lrf=shape), config=cfg, now=NOW)
    assert p.outcome is Outcome.UP_TO_DATE
    assert carried(p, workload(AUTO, lrf=shape), Strategy.ANNOTATIONS) == H


@pytest.mark.parametrize("shape", [V1_SHAPE, V2_SHAPE], ids=["v1-shape", "v2-shape"])
def test_either_shape_recording_older_content_is_carried_as_that_hash(shape: str) -> None:
    older = shape.replace(H, OLD)
    cfg = Config(strategy=Strategy.ANNOTATIONS)
    p = plan(change=CHANGE, workload=workload(AUTO, lrf=older), config=cfg, now=NOW)
    assert p.outcome is Outcome.RELOAD
    assert carried(p, workload(AUTO, lrf=older), Strategy.ANNOTATIONS) == OLD


@pytest.mark.parametrize(
    "raw",
    [
        "", "not json", "[]", "{}", '{"kind":7,"name":"c","hash":"x"}',
        '{"kind":"pod","name":"c","hash":"x"}', '{"type":"CONFIGMAP","name":"c"}',
        '{"type":"CONFIGMAP","name":["c"],"hash":"x"}', "{" * 10_000,
    ],
)  # fmt: skip
def test_an_unreadable_last_reloaded_from_is_no_record(raw: str) -> None:
    assert last_reloaded(PodTemplate(annotations={LRF: raw})) is None


def test_a_v2_record_of_another_resource_is_not_this_ones() -> None:
    other = V2_SHAPE.replace('"name":"c"', '"name":"d"')
    p = plan(change=CHANGE, workload=workload(AUTO, lrf=other),
             config=Config(strategy=Strategy.ANNOTATIONS), now=NOW)  # fmt: skip
    assert carried(p, workload(AUTO, lrf=other), Strategy.ANNOTATIONS) is None


@pytest.mark.parametrize("shape", [V1_SHAPE, V2_SHAPE], ids=["v1-shape", "v2-shape"])
def test_a_rollback_after_a_switch_to_reloader_and_back_reloads(shape: str) -> None:
    """kube-reloader recorded OLD; Reloader then reloaded to H (last-reloaded-from only);
    the content goes back to OLD: the pods run H, so OLD must be written again."""
    w = workload_from_manifest({
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "ns", "annotations": AUTO},
        "spec": {"template": {
            "metadata": {"annotations": {
                LRF: shape, "kube-reloader.io/reloaded-hashes": f'{{"CONFIGMAP/c":"{OLD}"}}',
            }},
            "spec": {"containers": [{"name": "app", "envFrom": [{"configMapRef": {"name": "c"}}]}]},
        }},
    })  # fmt: skip
    back = Change(ResourceType.CONFIGMAP, "ns", "c", OLD)
    for compat in Compat:
        cfg = Config(strategy=Strategy.ANNOTATIONS, compat=compat)
        p = plan(change=back, workload=w, config=cfg, now=NOW)
        assert p.outcome is Outcome.RELOAD, compat
        assert carried(p, w, Strategy.ANNOTATIONS) == H
