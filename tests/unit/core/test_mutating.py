"""Whole-object writes: Jobs from CronJobs, recreated Jobs, guarded JSON patches."""

from __future__ import annotations

from typing import Any

from kube_reloader.core import mutating, strategies
from kube_reloader.core.references import pod_template_from_manifest

TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"app": "x", "controller-uid": "old", "job-name": "j"}},
    "spec": {"containers": [{"name": "a", "env": [{"name": "KEEP", "value": "1"}]}, {"name": "b"}]},
}


def test_apply_strategic_sets_or_appends_env_and_never_mutates_input() -> None:
    body = strategies.env_patch(
        pod_template_from_manifest(TEMPLATE), "b", "STAKATER_C_CONFIGMAP", "h"
    )
    assert body is not None
    out = mutating.apply_strategic(TEMPLATE, body)
    assert out["spec"]["containers"][1]["env"] == [{"name": "STAKATER_C_CONFIGMAP", "value": "h"}]
    assert "env" not in TEMPLATE["spec"]["containers"][1]
    again = mutating.apply_strategic(
        out,
        strategies.env_patch(
            pod_template_from_manifest(TEMPLATE), "b", "STAKATER_C_CONFIGMAP", "h2"
        )
        or {},
    )
    assert again["spec"]["containers"][1]["env"] == [
        {"name": "STAKATER_C_CONFIGMAP", "value": "h2"}
    ]


def test_job_from_cronjob_has_v1s_metadata() -> None:
    cron = {"metadata": {"name": "nightly", "namespace": "ns", "uid": "u1"},
            "spec": {"jobTemplate": {"metadata": {"labels": {"l": "1"}, "annotations": {"cronjob.kubernetes.io/instantiate": "x", "n": "v"}},
                                     "spec": {"backoffLimit": 2, "template": {}}}}}  # fmt: skip
    job = mutating.job_from_cronjob(cron, TEMPLATE)
    assert job["metadata"] == {
        "generateName": "nightly-", "namespace": "ns",
        "annotations": {"cronjob.kubernetes.io/instantiate": "x", "n": "v"},  # template keys win
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly", "uid": "u1",
                             "controller": True, "blockOwnerDeletion": True}],
        "labels": {"l": "1"},
    }  # fmt: skip
    assert job["spec"]["backoffLimit"] == 2
    assert job["spec"]["template"] == TEMPLATE


def test_recreated_job_strips_server_fields_and_controller_labels() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "j", "namespace": "ns", "uid": "u", "resourceVersion": "5", "creationTimestamp": "t",
                        "managedFields": [{}], "labels": {"team": "x", "controller-uid": "u", "batch.kubernetes.io/job-name": "j"}},
           "spec": {"backoffLimit": 4, "selector": {"matchLabels": {"controller-uid": "u"}}, "template": TEMPLATE},
           "status": {"succeeded": 1}}  # fmt: skip
    out = mutating.recreated_job(job, TEMPLATE)
    assert out["metadata"] == {"name": "j", "namespace": "ns", "labels": {"team": "x"}}
    assert "status" not in out
    assert "selector" not in out["spec"]
    assert out["spec"]["backoffLimit"] == 4
    assert out["spec"]["template"]["metadata"]["labels"] == {"app": "x"}
    assert job["metadata"]["uid"] == "u", "input untouched"


def test_env_json_patch_is_guarded_and_idempotent() -> None:
    tmpl = pod_template_from_manifest({"spec": {"containers": [
        {"name": "a", "env": [{"name": "X", "value": "1"}, {"name": "STAKATER_C_CONFIGMAP", "value": "old"}]},
        {"name": "b"}]}})  # fmt: skip
    assert mutating.env_json_patch(tmpl, "a", "STAKATER_C_CONFIGMAP", "new") == [
        {"op": "test", "path": "/spec/template/spec/containers/0/name", "value": "a"},
        {
            "op": "test",
            "path": "/spec/template/spec/containers/0/env/1/name",
            "value": "STAKATER_C_CONFIGMAP",
        },
        {
            "op": "replace",
            "path": "/spec/template/spec/containers/0/env/1",
            "value": {"name": "STAKATER_C_CONFIGMAP", "value": "new"},
        },
    ]
    assert mutating.env_json_patch(tmpl, "a", "STAKATER_C_CONFIGMAP", "old") is None
    assert mutating.env_json_patch(tmpl, "a", "STAKATER_D_SECRET", "h")[-1] == {
        "op": "add",
        "path": "/spec/template/spec/containers/0/env/-",
        "value": {"name": "STAKATER_D_SECRET", "value": "h"},
    }
    assert mutating.env_json_patch(tmpl, "b", "STAKATER_D_SECRET", "h")[-1] == {
        "op": "add",
        "path": "/spec/template/spec/containers/1/env",
        "value": [{"name": "STAKATER_D_SECRET", "value": "h"}],
    }
    assert mutating.env_json_patch(tmpl, "missing", "X", "h") is None
