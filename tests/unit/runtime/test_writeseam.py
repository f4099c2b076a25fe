"""The strategy seam: what each way of reloading sends to the API, with a recording client."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import pytest

from kube_reloader.core import planning
from kube_reloader.core.matching import MatchConfig
from kube_reloader.core.objects import WorkloadKind
from kube_reloader.core.planning import Config, Plan
from kube_reloader.core.strategies import Compat
from kube_reloader.core.strategies import Strategy as PatchStrategy
from kube_reloader.kube.client import PatchType
from kube_reloader.runtime import writeseam
from kube_reloader.runtime.kinds import BUILTIN
from kube_reloader.runtime.writing import KubeWriter

from .fakes import AUTO, EPOCH, change, workload

NOW = dt.datetime.fromtimestamp(EPOCH, dt.UTC)
CRONJOB = {
    "apiVersion": "batch/v1", "kind": "CronJob",
    "metadata": {"name": "web", "namespace": "ns", "uid": "u", "annotations": AUTO},
    "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [
        {"name": "app", "envFrom": [{"configMapRef": {"name": "cm"}}]}]}}}}},
}  # fmt: skip


class RecordingClient:
    def __init__(self, objects: dict[str, Any] | None = None) -> None:
        self.calls: list[tuple[str, str, Any, Any]] = []
        self.objects = objects or {}

    async def patch(self, res: Any, name: str, body: Any, *, patch_type: PatchType = PatchType.STRATEGIC,
                    **_: Any) -> dict[str, Any]:  # fmt: skip
        self.calls.append(("patch", res.plural, patch_type, body))
        return {"kind": res.kind}

    async def get(self, res: Any, name: str, **_: Any) -> dict[str, Any]:
        self.calls.append(("get", res.plural, None, name))
        return self.objects[res.kind]

    async def create(self, res: Any, body: Any, **_: Any) -> dict[str, Any]:
        self.calls.append(("create", res.plural, None, body))
        return body  # type: ignore[no-any-return]


def plans_for(w: planning.Workload, strategy: PatchStrategy = PatchStrategy.ENV_VARS) -> list[Plan]:
    config = Config(match=MatchConfig(), strategy=strategy)
    return [planning.plan(change=change("cm", "2"), workload=w, config=config, now=int(EPOCH))]


async def write(kind: str, w: planning.Workload, plans: list[Plan], client: RecordingClient,
                pause: dict[str, Any] | None = None,
                v2: bool = False) -> list[tuple[str, str, Any, Any]]:  # fmt: skip
    writer = KubeWriter(client, BUILTIN, "Reloader", v2=v2)  # type: ignore[arg-type]
    await writer.reload(w, plans, now=NOW, pause=pause)
    return client.calls


@pytest.mark.parametrize("kind", [WorkloadKind.DEPLOYMENT, WorkloadKind.STATEFULSET,
                                  WorkloadKind.DAEMONSET])  # fmt: skip
async def test_a_built_in_template_kind_gets_one_strategic_merge_patch(kind: str) -> None:
    w = workload(kind=kind)
    calls = await write(kind, w, plans_for(w), RecordingClient())
    assert [(c[0], c[2]) for c in calls] == [("patch", PatchType.STRATEGIC)]
    containers = calls[0][3]["spec"]["template"]["spec"]["containers"]
    assert containers[0]["env"][0]["name"] == "STAKATER_CM_CONFIGMAP"


async def test_a_deployment_config_gets_a_guarded_json_patch_not_a_strategic_merge() -> None:
    w = workload(kind=WorkloadKind.DEPLOYMENTCONFIG)
    calls = await write("DeploymentConfig", w, plans_for(w), RecordingClient())
    assert [(c[0], c[2]) for c in calls] == [("patch", PatchType.JSON)]
    assert {op["op"] for op in calls[0][3]} <= {"add", "test", "replace"}


async def test_a_deployment_config_in_annotations_mode_gets_a_merge_patch() -> None:
    w = workload(kind=WorkloadKind.DEPLOYMENTCONFIG)
    plans = plans_for(w, PatchStrategy.ANNOTATIONS)
    calls = await write("DeploymentConfig", w, plans, RecordingClient())
    assert [(c[0], c[2]) for c in calls] == [("patch", PatchType.MERGE)]
    written = calls[0][3]["spec"]["template"]["metadata"]["annotations"]
    assert "reloader.stakater.com/last-reloaded-from" in written


def v2_plans(w: planning.Workload) -> list[Plan]:
    config = Config(match=MatchConfig(), strategy=PatchStrategy.ENV_VARS, compat=Compat.V2)
    return [planning.plan(change=change("cm", "2"), workload=w, config=config, now=int(EPOCH))]


LRF_OP = "/spec/template/metadata/annotations/reloader.stakater.com~1last-reloaded-from"


async def test_a_v2_env_reload_of_a_custom_kind_is_one_json_patch_with_its_annotation() -> None:
    """Reloader v2 writes the env var and last-reloaded-from together: one revision."""
    w = workload(kind=WorkloadKind.DEPLOYMENTCONFIG)
    tmpl = dataclasses.replace(w.template, annotations={"team": "a"})
    w = dataclasses.replace(w, template=tmpl)
    calls = await write("DeploymentConfig", w, v2_plans(w), RecordingClient())
    assert [(c[0], c[2]) for c in calls] == [("patch", PatchType.JSON)]
    ops = calls[0][3]
    assert next(op["path"] for op in ops if op["op"] == "add") == LRF_OP
    assert any("/env" in op["path"] for op in ops if op["op"] != "test")


@pytest.mark.parametrize(("template", "added"), [
    ({"spec": {}}, ("/spec/template/metadata", {"annotations"})),
    ({"metadata": {"labels": {"app": "web"}}, "spec": {}},
     ("/spec/template/metadata/annotations", {"reloader.stakater.com/last-reloaded-from"})),
])  # fmt: skip
async def test_a_template_without_annotations_is_read_and_the_patch_tied_to_that_read(
    template: dict[str, Any], added: tuple[str, set[str]]
) -> None:
    w = workload(kind=WorkloadKind.DEPLOYMENTCONFIG)
    obj = {"metadata": {"resourceVersion": "42"}, "spec": {"template": template}}
    client = RecordingClient({"DeploymentConfig": obj})
    calls = await write("DeploymentConfig", w, v2_plans(w), client)
    assert [(c[0], c[2]) for c in calls] == [("get", None), ("patch", PatchType.JSON)]
    ops = calls[1][3]
    assert ops[0] == {"op": "test", "path": "/metadata/resourceVersion", "value": "42"}
    assert (ops[1]["op"], ops[1]["path"]) == ("add", added[0])
    assert set(ops[1]["value"]) == added[1], "the labels are never replaced"


async def test_annotations_of_several_resources_reloaded_together_are_one_merge_patch() -> None:
    w = workload(kind=WorkloadKind.ROLLOUT,
                 annotations={"configmap.reloader.stakater.com/reload": "cm,other"})  # fmt: skip
    config = Config(match=MatchConfig(), strategy=PatchStrategy.ANNOTATIONS)
    plans = [planning.plan(change=change(n, "2"), workload=w, config=config, now=int(EPOCH))
             for n in ("cm", "other")]  # fmt: skip
    assert [p.outcome for p in plans] == [planning.Outcome.RELOAD] * 2
    calls = await write("Rollout", w, plans, RecordingClient())
    assert [(c[0], c[2]) for c in calls] == [("patch", PatchType.MERGE)]


@pytest.mark.parametrize(("annotations", "workload_ref", "restarts"), [
    ({"reloader.stakater.com/rollout-strategy": "restart"}, "", True),
    ({}, "web-template", True),
    ({}, "", False),
])  # fmt: skip
async def test_an_argo_rollout_restarts_only_when_asked_or_when_its_template_is_borrowed(
    annotations: dict[str, str], workload_ref: str, restarts: bool
) -> None:
    w = workload(kind=WorkloadKind.ROLLOUT, annotations={"reloader.stakater.com/auto": "true",
                                                         **annotations})  # fmt: skip
    w = dataclasses.replace(w, workload_ref=workload_ref)
    calls = await write("Rollout", w, plans_for(w), RecordingClient())
    if restarts:
        assert calls == [("patch", "rollouts", PatchType.MERGE,
                          {"spec": {"restartAt": "2026-05-28T20:26:40Z"}})]  # fmt: skip
    else:
        assert [(c[0], c[2]) for c in calls] == [("patch", PatchType.JSON)]


@pytest.mark.parametrize("strategy", [PatchStrategy.ENV_VARS, PatchStrategy.ANNOTATIONS])
async def test_a_v2_argo_restart_also_records_the_change_in_the_template_in_the_same_write(
    strategy: PatchStrategy,
) -> None:
    w = workload(kind=WorkloadKind.ROLLOUT, annotations={
        "reloader.stakater.com/auto": "true", "reloader.stakater.com/rollout-strategy": "restart"})  # fmt: skip
    config = Config(match=MatchConfig(), strategy=strategy, compat=Compat.V2)
    plans = [planning.plan(change=change("cm", "2"), workload=w, config=config, now=int(EPOCH))]
    client = RecordingClient({"Rollout": {"metadata": {"resourceVersion": "7"}, "spec": {}}})
    calls = await write("Rollout", w, plans, client, v2=True)
    (verb, _, ptype, body) = calls[-1]
    assert verb == "patch"
    if ptype is PatchType.MERGE:
        assert body["spec"]["restartAt"] == "2026-05-28T20:26:40Z"
        assert (
            "reloader.stakater.com/last-reloaded-from"
            in body["spec"]["template"]["metadata"]["annotations"]
        )
    else:
        assert body[-1] == {"op": "add", "path": "/spec/restartAt", "value": "2026-05-28T20:26:40Z"}
        assert any(op["path"].startswith("/spec/template/spec/containers") for op in body)
    assert [c[0] for c in calls].count("patch") == 1, "one write: restart and template"


async def test_a_cronjob_is_never_modified_a_job_is_created_from_its_template() -> None:
    w = planning.workload_from_manifest(CRONJOB)
    client = RecordingClient({"CronJob": CRONJOB})
    calls = await write("CronJob", w, plans_for(w), client)
    assert [(c[0], c[1]) for c in calls] == [("get", "cronjobs"), ("create", "jobs")]
    job = calls[1][3]
    assert job["metadata"]["ownerReferences"][0]["kind"] == "CronJob"
    env = job["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env[0]["name"] == "STAKATER_CM_CONFIGMAP"


async def test_a_job_made_for_a_v2_delete_carries_the_variable_removed_and_the_delete_recorded() -> (
    None
):
    lrf = "reloader.stakater.com/last-reloaded-from"
    template = CRONJOB["spec"]["jobTemplate"]["spec"]["template"]  # type: ignore[index]
    cronjob = {**CRONJOB, "spec": {"jobTemplate": {"spec": {"template": {
        "metadata": {"annotations": {lrf: '{"kind":"configmap","name":"cm","hash":"x"}'}},
        "spec": {"containers": [{**template["spec"]["containers"][0],
                                 "env": [{"name": "STAKATER_CM_CONFIGMAP", "value": "x"}]}]},
    }}}}}  # fmt: skip
    w = planning.workload_from_manifest(cronjob)
    gone = dataclasses.replace(change("cm", "2"), event=planning.Event.DELETED)
    plans = [
        planning.plan(change=gone, workload=w, config=Config(compat=Compat.V2), now=int(EPOCH))
    ]
    calls = await write("CronJob", w, plans, RecordingClient({"CronJob": cronjob}))
    job = calls[1][3]
    assert job["spec"]["template"]["spec"]["containers"][0]["env"] == []
    recorded = job["spec"]["template"]["metadata"]["annotations"][lrf]
    assert '"name":"cm","namespace":"ns","hash":""' in recorded


PAUSE = {"metadata": {"annotations": {"deployment.reloader.stakater.com/paused-at": "t"}},
         "spec": {"paused": True}}  # fmt: skip


async def test_a_v2_pause_goes_into_the_reloads_one_strategic_merge_patch() -> None:
    w = workload()
    calls = await write("Deployment", w, plans_for(w), RecordingClient(), pause=PAUSE)
    [(verb, _, ptype, body)] = calls
    assert (verb, ptype) == ("patch", PatchType.STRATEGIC)
    assert body["spec"]["paused"] is True
    assert body["metadata"] == PAUSE["metadata"]
    assert body["spec"]["template"]["spec"]["containers"][0]["env"][0]["name"] == (
        "STAKATER_CM_CONFIGMAP"
    )


async def test_a_v2_pause_with_a_delete_goes_into_its_json_patch_as_ops() -> None:
    w = workload()
    w = dataclasses.replace(w, template=dataclasses.replace(w.template, containers=(
        dataclasses.replace(w.template.containers[0], env=planning.workload_from_manifest({
            "kind": "Deployment", "metadata": {"name": "x"},
            "spec": {"template": {"spec": {"containers": [{"name": "app", "env": [
                {"name": "STAKATER_CM_CONFIGMAP", "value": "h"}]}]}}},
        }).template.containers[0].env),)))  # fmt: skip
    gone = dataclasses.replace(change("cm", "2"), event=planning.Event.DELETED)
    plans = [planning.plan(change=gone, workload=w, config=Config(), now=int(EPOCH))]
    [(_, _, ptype, ops)] = await write("Deployment", w, plans, RecordingClient(), pause=PAUSE)
    assert ptype is PatchType.JSON
    assert ops[-2:] == [
        {"op": "add", "path": "/spec/paused", "value": True},
        {"op": "add", "path": "/metadata/annotations/deployment.reloader.stakater.com~1paused-at",
         "value": "t"},
    ]  # fmt: skip


def test_every_built_in_kind_has_a_strategy_and_its_resource() -> None:
    for spec in BUILTIN:
        assert spec.resource.kind == spec.kind
        assert isinstance(spec.strategy(workload(kind=spec.kind)).name, str)
    assert writeseam.rollout(workload(kind="Rollout")) is writeseam.CUSTOM_RESOURCE_PATCH
