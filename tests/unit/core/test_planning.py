"""plan(): decision + container + strategy, with the reason in every outcome."""

from __future__ import annotations

import dataclasses
from typing import Any

from kube_reloader.core import hashing
from kube_reloader.core.matching import MatchConfig
from kube_reloader.core.objects import ObjectKey, ResourceType
from kube_reloader.core.planning import (
    Change,
    Config,
    Event,
    Outcome,
    combine,
    plan,
    workload_from_manifest,
)
from kube_reloader.core.strategies import PatchType, Strategy

H = "f83e99e324ba68ccc373a58ef1eb42f8ab88646a"


def deployment(annotations: dict[str, str] | None = None, env: list[dict[str, str]] | None = None,
               template_annotations: dict[str, str] | None = None) -> Any:  # fmt: skip
    return workload_from_manifest(
        {
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "ns", "annotations": annotations or {}},
            "spec": {"template": {
                "metadata": {"annotations": template_annotations or {}},
                "spec": {"containers": [{"name": "app", "env": env or [], "envFrom": [{"configMapRef": {"name": "cm"}}]}]},
            }},
        }
    )  # fmt: skip


CHANGE = Change(ResourceType.CONFIGMAP, "ns", "cm", H)
AUTO = {"reloader.stakater.com/auto": "true"}


def test_auto_reload_plans_the_env_var_on_the_referencing_container() -> None:
    p = plan(change=CHANGE, workload=deployment(AUTO), config=Config(), now=0)
    assert p.outcome is Outcome.RELOAD
    assert p.patch_type is PatchType.STRATEGIC
    assert p.env_name == "STAKATER_CM_CONFIGMAP"
    assert p.patch["spec"]["template"]["spec"]["containers"] == [
        {"name": "app", "env": [{"name": "STAKATER_CM_CONFIGMAP", "value": H}]}
    ]
    assert "set STAKATER_CM_CONFIGMAP=" in p.message
    assert "container 'app' references it" in p.message


def test_a_workload_already_carrying_the_hash_is_up_to_date() -> None:
    w = deployment(AUTO, env=[{"name": "STAKATER_CM_CONFIGMAP", "value": H}])
    p = plan(change=CHANGE, workload=w, config=Config(), now=0)
    assert p.outcome is Outcome.UP_TO_DATE
    assert p.patch is None


def test_no_annotation_is_skipped_with_the_reason() -> None:
    p = plan(change=CHANGE, workload=deployment(), config=Config(), now=0)
    assert p.outcome is Outcome.SKIPPED
    assert "no reload annotation" in p.message


def test_auto_without_reference_is_no_container() -> None:
    change = Change(ResourceType.CONFIGMAP, "ns", "other", H)
    p = plan(change=change, workload=deployment(AUTO), config=Config(), now=0)
    assert p.outcome is Outcome.NO_CONTAINER
    assert "no container mounts or references it" in p.message


def test_annotations_strategy_is_idempotent_on_the_same_hash() -> None:
    cfg = Config(strategy=Strategy.ANNOTATIONS)
    first = plan(change=CHANGE, workload=deployment(AUTO), config=cfg, now=1714564800)
    assert first.outcome is Outcome.RELOAD
    value = first.patch["spec"]["template"]["metadata"]["annotations"][
        "reloader.stakater.com/last-reloaded-from"
    ]
    assert '"observedAt":1714564800' in value
    again = plan(
        change=CHANGE,
        workload=deployment(
            AUTO, template_annotations={"reloader.stakater.com/last-reloaded-from": value}
        ),
        config=cfg,
        now=1714564999,
    )
    assert again.outcome is Outcome.UP_TO_DATE


def test_delete_in_env_mode_removes_the_var_and_in_annotations_mode_writes_the_marker() -> None:
    gone = Change(ResourceType.CONFIGMAP, "ns", "cm", "", event=Event.DELETED)
    w = deployment(AUTO, env=[{"name": "STAKATER_CM_CONFIGMAP", "value": H}])
    p = plan(change=gone, workload=w, config=Config(), now=0)
    assert p.outcome is Outcome.RELOAD
    assert p.patch_type is PatchType.JSON
    assert p.patch[1] == {"op": "remove", "path": "/spec/template/spec/containers/0/env/0"}
    assert (
        plan(change=gone, workload=deployment(AUTO), config=Config(), now=0).outcome
        is Outcome.UP_TO_DATE
    )
    a = plan(
        change=gone, workload=deployment(AUTO), config=Config(strategy=Strategy.ANNOTATIONS), now=5
    )
    assert hashing.DELETE_MARKER_HASH in str(a.patch)


def test_combine_makes_one_strategic_patch_for_several_changes() -> None:
    w = deployment({"configmap.reloader.stakater.com/reload": "cm,cm2"})
    plans = [
        plan(change=CHANGE, workload=w, config=Config(), now=0),
        plan(
            change=Change(ResourceType.CONFIGMAP, "ns", "cm2", "h2"),
            workload=w,
            config=Config(),
            now=0,
        ),
    ]
    writes = combine(plans)
    assert len(writes) == 1
    ptype, body = writes[0]
    assert ptype is PatchType.STRATEGIC
    env = body["spec"]["template"]["spec"]["containers"][0]["env"]
    assert [e["name"] for e in env] == ["STAKATER_CM_CONFIGMAP", "STAKATER_CM2_CONFIGMAP"]


def test_auto_reload_all_is_passed_through() -> None:
    p = plan(
        change=CHANGE,
        workload=deployment(),
        config=Config(match=MatchConfig(auto_reload_all=True)),
        now=0,
    )
    assert p.outcome is Outcome.RELOAD


def test_cronjob_template_comes_from_the_job_template() -> None:
    w = workload_from_manifest({
        "kind": "CronJob", "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"jobTemplate": {"spec": {"template": {"metadata": {"annotations": AUTO},
                 "spec": {"containers": [{"name": "j", "envFrom": [{"configMapRef": {"name": "cm"}}]}]}}}}},
    })  # fmt: skip
    assert w.template.annotations == AUTO
    assert w.template.containers[0].name == "j"


def test_a_workloads_key_names_it_and_follows_a_replaced_name_but_not_its_equality() -> None:
    w = deployment(AUTO)
    assert w.key == ObjectKey("Deployment", "ns", "web")
    moved = dataclasses.replace(w, namespace="other", name="api")
    assert moved.key == ObjectKey("Deployment", "other", "api")
    assert dataclasses.replace(w, paused=False) == w
    assert "key=" not in repr(w)
