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
from kube_reloader.core.strategies import Strategy as PatchStrategy
from kube_reloader.kube.client import PatchType
from kube_reloader.runtime import strategies
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


async def write(kind: str, w: planning.Workload, plans: list[Plan],
                client: RecordingClient) -> list[tuple[str, str, Any, Any]]:  # fmt: skip
    writer = KubeWriter(client, BUILTIN, "Reloader")  # type: ignore[arg-type]
    await writer.reload(w, plans, now=NOW)
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


async def test_a_cronjob_is_never_modified_a_job_is_created_from_its_template() -> None:
    w = planning.workload_from_manifest(CRONJOB)
    client = RecordingClient({"CronJob": CRONJOB})
    calls = await write("CronJob", w, plans_for(w), client)
    assert [(c[0], c[1]) for c in calls] == [("get", "cronjobs"), ("create", "jobs")]
    job = calls[1][3]
    assert job["metadata"]["ownerReferences"][0]["kind"] == "CronJob"
    env = job["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env[0]["name"] == "STAKATER_CM_CONFIGMAP"


def test_every_built_in_kind_has_a_strategy_and_its_resource() -> None:
    for spec in BUILTIN:
        assert spec.resource.kind == spec.kind
        assert isinstance(spec.strategy(workload(kind=spec.kind)).name, str)
    assert strategies.rollout(workload(kind="Rollout")) is strategies.CUSTOM_RESOURCE_PATCH
