"""The strategy seam: how a workload is reloaded once the core has planned it (compat-spec §5).

Every way of reloading is a `Strategy`; a workload kind names the one it uses (`kinds`). Today:

* `TemplatePatch` — Deployment, DaemonSet, StatefulSet: the plan's strategic-merge PATCH (the
  env var or the annotation, per `--reload-strategy`); JSON patches for env removal on delete.
* `CustomResourcePatch` — Argo Rollout, DeploymentConfig, any pod-template custom resource
  (they reject strategic merge): env vars by JSON patch guarded with `test` ops, annotations
  by JSON merge patch, both in one JSON patch when a reload has both (one revision).
* `ArgoRestart` — a Rollout with `rollout-strategy: restart` (or a `workloadRef` template):
  only `spec.restartAt`.
* `JobRecreate` — a Job is deleted (background) and re-created with the reload applied.
* `CronJobTrigger` — a CronJob is never modified; a Job is created from its job template.

A strategy only writes; whether and when to write is decided before it is called.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from typing import Any, Protocol

import msgspec

from kube_reloader.core import mutating, planning, strategies
from kube_reloader.core.annotations import ROLLOUT_STRATEGY
from kube_reloader.core.pausing import format_time
from kube_reloader.core.planning import Outcome, Plan
from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client, PatchType
from kube_reloader.kube.resources import Resource

_WIRE = {
    strategies.PatchType.STRATEGIC: PatchType.STRATEGIC,
    strategies.PatchType.MERGE: PatchType.MERGE,
    strategies.PatchType.JSON: PatchType.JSON,
}
JOB_RECREATE_SECONDS = 30.0


class Target(msgspec.Struct, frozen=True):
    """What a strategy writes to: the workload as planned, its API resource, and how."""

    workload: planning.Workload
    resource: Resource
    field_manager: str
    now: dt.datetime
    #: called once the write can no longer be abandoned half-way (see `JobRecreate`)
    committed: Callable[[], None] | None = None
    #: a Deployment's pause (`pausing.pause_patch`), written with the reload (`TemplatePatch`)
    pause: dict[str, Any] | None = None
    #: Reloader v2's writes (`--compat=v2`; `ArgoRestart`)
    v2: bool = False


class Strategy(Protocol):
    name: str

    async def apply(
        self, client: Client, target: Target, plans: list[Plan]
    ) -> dict[str, Any] | None:
        """Write the reloading `plans`; return the written object when the answer is the
        workload itself (so the cache is refreshed before its watch event)."""
        ...


def reloading(plans: list[Plan]) -> list[Plan]:
    return [p for p in plans if p.outcome is Outcome.RELOAD]


class TemplatePatch:
    name = "template-patch"

    async def apply(
        self, client: Client, target: Target, plans: list[Plan]
    ) -> dict[str, Any] | None:
        w = target.workload
        answer = None
        writes = planning.combine(reloading(plans))
        if target.pause is not None and writes:  # into the first write (v2: one update)
            writes[0] = (writes[0][0], with_pause(*writes[0], target.pause))
        for ptype, body in writes:
            answer = await client.patch(
                target.resource,
                w.name,
                body,
                namespace=w.namespace,
                patch_type=_WIRE[ptype],
                field_manager=target.field_manager,
            )
        return answer


def with_pause(ptype: strategies.PatchType, body: Any, pause: dict[str, Any]) -> Any:
    """A reload's write with a Deployment's pause in it: merged into a strategic-merge body,
    or as JSON-patch ops (the metadata's annotations hold the pause period: they exist)."""
    if ptype is strategies.PatchType.STRATEGIC:
        return {**body, "metadata": pause["metadata"], "spec": {**body["spec"], **pause["spec"]}}
    ops = [{"op": "add", "path": "/spec/paused", "value": pause["spec"]["paused"]}]
    for key, value in pause["metadata"]["annotations"].items():
        ops.append(
            {"op": "add", "path": f"/metadata/annotations/{mutating.pointer(key)}", "value": value}
        )
    return [*body, *ops]


class CustomResourcePatch:
    """A custom resource's template at `path` (`spec.template` by default): env vars by JSON
    patch guarded with `test` ops (a merge patch would replace the whole containers list),
    annotations by JSON merge patch."""

    name = "custom-resource-patch"

    def __init__(self, path: tuple[str, ...] = ("spec", "template")) -> None:
        self.path = path
        self.base = "/" + "/".join(path)

    def _nested(self, value: dict[str, Any]) -> dict[str, Any]:
        for segment in reversed(self.path):
            value = {segment: value}
        return value

    async def apply(
        self, client: Client, target: Target, plans: list[Plan]
    ) -> dict[str, Any] | None:
        """One write per reload (one revision): the annotations alone as one merge patch;
        with env changes, everything as one JSON patch."""
        write = await self.write(client, target, plans)
        if write is None:
            return None
        w = target.workload
        return await client.patch(
            target.resource,
            w.name,
            write[1],
            namespace=w.namespace,
            patch_type=write[0],
            field_manager=target.field_manager,
        )

    async def write(
        self, client: Client, target: Target, plans: list[Plan]
    ) -> tuple[PatchType, Any] | None:
        """The one write `apply` sends (its patch type and body), None for none."""
        w = target.workload
        annotations: dict[str, str] = {}
        json_ops: list[dict[str, Any]] = []
        for p in reloading(plans):
            if p.patch_type is strategies.PatchType.JSON:  # env removal on delete
                json_ops += [
                    {**op, "path": self.base + op["path"].removeprefix("/spec/template")}
                    for op in p.patch
                ]
                continue
            annotations.update(
                p.patch["spec"]["template"].get("metadata", {}).get("annotations") or {}
            )
            for c in p.patch["spec"]["template"].get("spec", {}).get("containers", ()):
                for var in c["env"]:
                    ops = mutating.env_json_patch(
                        w.template, c["name"], var["name"], var["value"], base=self.base
                    )
                    json_ops += ops or []
        if annotations and not json_ops:
            return PatchType.MERGE, self._nested({"metadata": {"annotations": annotations}})
        if annotations:
            json_ops = await self._annotation_ops(client, target, annotations) + json_ops
        return (PatchType.JSON, json_ops) if json_ops else None

    async def _annotation_ops(
        self, client: Client, target: Target, annotations: dict[str, str]
    ) -> list[dict[str, Any]]:
        """The annotations as JSON patch ops. A template the cache shows with annotations has
        the map; otherwise the object is read to see what exists, and the patch is tied to
        that read (a `test` of its resourceVersion), so a map created meanwhile is not
        replaced."""
        w = target.workload
        if w.template.annotations:
            return mutating.annotation_json_ops(
                annotations, metadata={"annotations": {}}, base=self.base
            )
        obj = await client.get(target.resource, w.name, namespace=w.namespace)
        node: Any = obj
        for segment in self.path:
            node = node.get(segment) if isinstance(node, dict) else None
        meta = node.get("metadata") if isinstance(node, dict) else None
        version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        guard = [{"op": "test", "path": "/metadata/resourceVersion", "value": version}]
        found = meta if isinstance(meta, dict) else None
        return guard + mutating.annotation_json_ops(annotations, metadata=found, base=self.base)


class ArgoRestart:
    """`restartAt` set: Argo restarts the Rollout's pods. Under `--compat=v2`, as Reloader v2
    does, its template records the change in the same write (a new revision too), unless the
    template is borrowed (`workloadRef`)."""

    name = "argo-restart"

    async def apply(
        self, client: Client, target: Target, plans: list[Plan]
    ) -> dict[str, Any] | None:
        w, at = target.workload, format_time(target.now)
        ptype: PatchType = PatchType.MERGE
        body: Any = {"spec": {"restartAt": at}}
        if target.v2 and not w.workload_ref:
            write = await CUSTOM_RESOURCE_PATCH.write(client, target, plans)
            if write is not None and write[0] is PatchType.MERGE:
                body = {"spec": {**write[1]["spec"], "restartAt": at}}
            elif write is not None:
                ptype = write[0]
                body = [*write[1], {"op": "add", "path": "/spec/restartAt", "value": at}]
        return await client.patch(
            target.resource,
            w.name,
            body,
            namespace=w.namespace,
            patch_type=ptype,
            field_manager=target.field_manager,
        )


class JobRecreate:
    name = "job-recreate"

    async def apply(
        self, client: Client, target: Target, plans: list[Plan]
    ) -> dict[str, Any] | None:
        w, res = target.workload, target.resource
        job = await client.get(res, w.name, namespace=w.namespace)
        fresh = mutating.recreated_job(
            job, _apply(job["spec"].get("template") or {}, reloading(plans))
        )
        await client.delete(
            res,
            w.name,
            namespace=w.namespace,
            propagation_policy="Background",
            preconditions_uid=job["metadata"].get("uid"),
        )
        if target.committed is not None:
            target.committed()
        return await _create_when_gone(client, res, fresh, target.field_manager)


class CronJobTrigger:
    name = "cronjob-trigger"

    async def apply(
        self, client: Client, target: Target, plans: list[Plan]
    ) -> dict[str, Any] | None:
        w = target.workload
        cronjob = await client.get(target.resource, w.name, namespace=w.namespace)
        template = ((cronjob["spec"]["jobTemplate"].get("spec") or {}).get("template")) or {}
        job = mutating.job_from_cronjob(cronjob, _apply(template, reloading(plans)))
        await client.create(
            resources.JOBS, job, namespace=w.namespace, field_manager=target.field_manager
        )
        return None


TEMPLATE_PATCH = TemplatePatch()
CUSTOM_RESOURCE_PATCH = CustomResourcePatch()
ARGO_RESTART = ArgoRestart()
JOB_RECREATE = JobRecreate()
CRONJOB_TRIGGER = CronJobTrigger()


def fixed(strategy: Strategy) -> Callable[[planning.Workload], Strategy]:
    """A kind that is always reloaded the same way."""
    return lambda _workload: strategy


def rollout(workload: planning.Workload) -> Strategy:
    """An Argo Rollout restarts when asked to (or when its template is borrowed)."""
    if workload.annotations.get(ROLLOUT_STRATEGY) == "restart" or workload.workload_ref:
        return ARGO_RESTART
    return CUSTOM_RESOURCE_PATCH


def _apply(template: dict[str, Any], plans: list[Plan]) -> dict[str, Any]:
    out = template
    for p in plans:
        if p.patch_type is strategies.PatchType.JSON and p.target and p.env_name:
            out = mutating.remove_env(out, p.target.container or "", p.env_name)
            if annotations := strategies.annotations_set_by(p.patch or []):
                body = {"spec": {"template": {"metadata": {"annotations": annotations}}}}
                out = mutating.apply_strategic(out, body)
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
