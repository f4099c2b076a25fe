"""How each workload kind is written once the core has planned its reload (compat-spec §5).

* Deployment, DaemonSet, StatefulSet: one strategic-merge PATCH (field manager `Reloader`);
  JSON patches for env removal on delete.
* CronJob: never modified; a Job is created from its job template with the reload applied.
* Job: deleted (background propagation) and recreated with the reload applied.
* Argo Rollout, DeploymentConfig (custom resources reject strategic merge): env vars by JSON
  patch guarded with `test` ops, annotations by JSON merge patch; a Rollout with
  `reloader.stakater.com/rollout-strategy: restart` (or one whose template lives in a
  `workloadRef` Deployment) gets only `spec.restartAt`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from typing import Any

from kube_reloader.core import mutating, planning, strategies
from kube_reloader.core.annotations import ROLLOUT_STRATEGY
from kube_reloader.core.objects import WorkloadKind
from kube_reloader.core.pausing import format_time
from kube_reloader.core.planning import Outcome, Plan
from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client, PatchType
from kube_reloader.kube.resources import Resource

RESOURCES: dict[WorkloadKind, Resource] = {
    WorkloadKind.DEPLOYMENT: resources.DEPLOYMENTS,
    WorkloadKind.DAEMONSET: resources.DAEMONSETS,
    WorkloadKind.STATEFULSET: resources.STATEFULSETS,
    WorkloadKind.CRONJOB: resources.CRONJOBS,
    WorkloadKind.JOB: resources.JOBS,
    WorkloadKind.ROLLOUT: resources.ROLLOUTS,
    WorkloadKind.DEPLOYMENTCONFIG: resources.DEPLOYMENTCONFIGS,
}
_WIRE = {
    strategies.PatchType.STRATEGIC: PatchType.STRATEGIC,
    strategies.PatchType.MERGE: PatchType.MERGE,
    strategies.PatchType.JSON: PatchType.JSON,
}
JOB_RECREATE_SECONDS = 30.0


async def write(
    client: Client,
    workload: planning.Workload,
    plans: list[Plan],
    *,
    field_manager: str,
    now: dt.datetime,
    committed: Callable[[], None] | None = None,
) -> dict[str, Any] | None:
    """Apply the reloading plans; returns the written object when the answer is the workload
    itself (so the cache can be refreshed before its watch event arrives). `committed` is
    called once the write can no longer be abandoned half-way (a Job deleted, not yet
    re-created): from then on the caller must let it finish."""
    todo = [p for p in plans if p.outcome is Outcome.RELOAD]
    kind = workload.kind
    res = RESOURCES[kind]
    ns, name = workload.namespace, workload.name
    if kind in (WorkloadKind.DEPLOYMENT, WorkloadKind.DAEMONSET, WorkloadKind.STATEFULSET):
        answer = None
        for ptype, body in planning.combine(todo):
            answer = await client.patch(
                res, name, body, namespace=ns, patch_type=_WIRE[ptype], field_manager=field_manager
            )
        return answer
    if kind is WorkloadKind.CRONJOB:
        cronjob = await client.get(res, name, namespace=ns)
        template = ((cronjob["spec"]["jobTemplate"].get("spec") or {}).get("template")) or {}
        job = mutating.job_from_cronjob(cronjob, _apply(template, todo))
        await client.create(resources.JOBS, job, namespace=ns, field_manager=field_manager)
        return None
    if kind is WorkloadKind.JOB:
        job = await client.get(res, name, namespace=ns)
        fresh = mutating.recreated_job(job, _apply(job["spec"].get("template") or {}, todo))
        await client.delete(
            res, name, namespace=ns, propagation_policy="Background",
            preconditions_uid=job["metadata"].get("uid"),
        )  # fmt: skip
        if committed is not None:
            committed()
        return await _create_when_gone(client, res, fresh, field_manager)
    # custom-resource kinds: Rollout, DeploymentConfig
    restart = kind is WorkloadKind.ROLLOUT and (
        workload.annotations.get(ROLLOUT_STRATEGY) == "restart" or bool(workload.workload_ref)
    )
    if restart:
        return await client.patch(
            res, name, {"spec": {"restartAt": format_time(now)}}, namespace=ns,
            patch_type=PatchType.MERGE, field_manager=field_manager,
        )  # fmt: skip
    answer = None
    json_ops: list[dict[str, Any]] = []
    for p in todo:
        if p.patch_type is strategies.PatchType.JSON:  # env removal on delete
            json_ops += p.patch
            continue
        tmpl_anns = p.patch["spec"]["template"].get("metadata", {}).get("annotations")
        if tmpl_anns:
            answer = await client.patch(
                res, name, {"spec": {"template": {"metadata": {"annotations": tmpl_anns}}}},
                namespace=ns, patch_type=PatchType.MERGE, field_manager=field_manager,
            )  # fmt: skip
        for c in p.patch["spec"]["template"].get("spec", {}).get("containers", ()):
            for var in c["env"]:
                ops = mutating.env_json_patch(
                    workload.template, c["name"], var["name"], var["value"]
                )
                json_ops += ops or []
    if json_ops:
        answer = await client.patch(
            res,
            name,
            json_ops,
            namespace=ns,
            patch_type=PatchType.JSON,
            field_manager=field_manager,
        )
    return answer


def _apply(template: dict[str, Any], plans: list[Plan]) -> dict[str, Any]:
    out = template
    for p in plans:
        if p.patch_type is strategies.PatchType.JSON and p.target and p.env_name:
            out = mutating.remove_env(out, p.target.container or "", p.env_name)
        elif p.patch is not None:
            out = mutating.apply_strategic(out, p.patch)
    return out


async def _create_when_gone(
    client: Client, res: Resource, body: dict[str, Any], field_manager: str
) -> dict[str, Any]:
    """The old Job is deleted in the background; its name frees up shortly after."""
    deadline = asyncio.get_running_loop().time() + JOB_RECREATE_SECONDS
    while True:
        try:
            return await client.create(res, body, field_manager=field_manager)
        except errors.AlreadyExists:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.2)
