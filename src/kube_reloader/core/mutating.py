"""Apply a plan to full manifests, for kinds that are written whole rather than patched.

A CronJob reload creates a new Job from the CronJob's job template; a Job reload deletes
and recreates the Job; both need the reload (env var or annotation) applied to a complete pod
template. Custom-resource kinds (Argo Rollouts, DeploymentConfigs) reject strategic-merge
patches, so their env changes are written as JSON patches guarded by `test` operations.
Everything here is pure: inputs are never mutated, new dicts are returned.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from kube_reloader.core.annotations import CRONJOB_INSTANTIATE, LAST_RELOADED_FROM
from kube_reloader.core.references import PodTemplate

JOB_CONTROLLER_LABELS = (
    "controller-uid",
    "batch.kubernetes.io/controller-uid",
    "batch.kubernetes.io/job-name",
    "job-name",
)
#: a Job's metadata the API server sets: dropped from the copy a re-created Job is made of
JOB_SERVER_FIELDS = (
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "managedFields",
    "generation",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)


def apply_strategic(template: Mapping[str, Any], body: Mapping[str, Any]) -> dict[str, Any]:
    """Apply one of our strategic-merge bodies (`{"spec":{"template":...}}`) to a pod template:
    env vars merged by name into containers merged by name, annotations merged by key."""
    out = copy.deepcopy(dict(template))
    patch_tmpl = body["spec"]["template"]
    annotations = (patch_tmpl.get("metadata") or {}).get("annotations") or {}
    if annotations:
        meta = out.setdefault("metadata", {})
        meta.setdefault("annotations", {})
        if meta["annotations"] is None:
            meta["annotations"] = {}
        meta["annotations"].update(annotations)
    for pc in (patch_tmpl.get("spec") or {}).get("containers") or ():
        for c in (out.get("spec") or {}).get("containers") or ():
            if c.get("name") != pc["name"]:
                continue
            env = c.get("env")
            if env is None:
                env = c["env"] = []
            for var in pc["env"]:
                for existing in env:
                    if existing.get("name") == var["name"]:
                        existing.pop("valueFrom", None)
                        existing["value"] = var["value"]
                        break
                else:
                    env.append({"name": var["name"], "value": var["value"]})
    return out


def remove_env(template: Mapping[str, Any], container: str, env_name: str) -> dict[str, Any]:
    out = copy.deepcopy(dict(template))
    for c in (out.get("spec") or {}).get("containers") or ():
        if c.get("name") == container and c.get("env"):
            c["env"] = [e for e in c["env"] if e.get("name") != env_name]
    return out


def job_from_cronjob(cronjob: Mapping[str, Any], template: Mapping[str, Any]) -> dict[str, Any]:
    """The Job Reloader creates for a CronJob (compat-spec §5.3); the CronJob is untouched."""
    meta = cronjob.get("metadata") or {}
    job_template = (cronjob.get("spec") or {}).get("jobTemplate") or {}
    jt_meta = job_template.get("metadata") or {}
    annotations = {CRONJOB_INSTANTIATE: "manual", **(jt_meta.get("annotations") or {})}
    job_meta: dict[str, Any] = {
        "generateName": f"{meta.get('name')}-",
        "namespace": meta.get("namespace"),
        "annotations": annotations,
        "ownerReferences": [
            {
                "apiVersion": "batch/v1",
                "kind": "CronJob",
                "name": meta.get("name"),
                "uid": meta.get("uid"),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    if jt_meta.get("labels"):
        job_meta["labels"] = dict(jt_meta["labels"])
    spec = copy.deepcopy(dict(job_template.get("spec") or {}))
    spec["template"] = copy.deepcopy(dict(template))
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": job_meta, "spec": spec}


def recreated_job(job: Mapping[str, Any], template: Mapping[str, Any]) -> dict[str, Any]:
    """The Job to create after deleting the old one (compat-spec §5.4), with server-populated
    fields and controller-generated labels/selector stripped so the API server accepts it.

    Unlike v1, the stale controller-uid labels are removed from the Job's own labels too
    (v1 keeps them, which leaves the new Job labelled with the old Job's uid)."""
    out = copy.deepcopy(dict(job))
    meta = out.setdefault("metadata", {})
    for key in JOB_SERVER_FIELDS:
        meta.pop(key, None)
    if meta.get("labels"):
        meta["labels"] = {k: v for k, v in meta["labels"].items() if k not in JOB_CONTROLLER_LABELS}
    out.pop("status", None)
    spec = out.setdefault("spec", {})
    spec.pop("selector", None)
    if not (spec.get("manualSelector")):
        spec.pop("manualSelector", None)
    tmpl = copy.deepcopy(dict(template))
    labels = (tmpl.get("metadata") or {}).get("labels")
    if labels:
        tmpl["metadata"]["labels"] = {
            k: v for k, v in labels.items() if k not in JOB_CONTROLLER_LABELS
        }
    spec["template"] = tmpl
    return out


def env_json_patch(
    template: PodTemplate,
    container: str,
    env_name: str,
    value: str,
    *,
    base: str = "/spec/template",
) -> list[dict[str, Any]] | None:
    """JSON patch setting one env var, guarded by `test` ops on the container's and the
    variable's names, so a concurrent reorder fails the patch instead of hitting the wrong
    entry. None when the value is already set."""
    found = template.container(container)
    if found is None:
        return None
    ci, c = found
    cpath = f"{base}/spec/containers/{ci}"
    ops: list[dict[str, Any]] = [{"op": "test", "path": f"{cpath}/name", "value": container}]
    ei = c.env_index(env_name)
    if ei is not None:
        if c.env[ei].value == value:
            return None
        epath = f"{cpath}/env/{ei}"
        ops += [
            {"op": "test", "path": f"{epath}/name", "value": env_name},
            {"op": "replace", "path": epath, "value": {"name": env_name, "value": value}},
        ]
    elif c.env:
        ops.append(
            {"op": "add", "path": f"{cpath}/env/-", "value": {"name": env_name, "value": value}}
        )
    else:
        ops.append(
            {"op": "add", "path": f"{cpath}/env", "value": [{"name": env_name, "value": value}]}
        )
    return ops


def pointer(key: str) -> str:
    """`key` as one JSON Pointer segment (RFC 6901: `~` and `/` escaped)."""
    return key.replace("~", "~0").replace("/", "~1")


def annotation_json_ops(
    annotations: Mapping[str, str], *, metadata: Mapping[str, Any] | None, base: str
) -> list[dict[str, Any]]:
    """JSON patch ops setting `annotations` on the pod template at `base`, given the
    template's current `metadata` (None when it has none): the map is added whole where it is
    missing, key by key where it exists (so other annotations and the labels are kept)."""
    if metadata is None:
        return [
            {"op": "add", "path": f"{base}/metadata", "value": {"annotations": dict(annotations)}}
        ]
    if not isinstance(metadata.get("annotations"), dict):
        return [{"op": "add", "path": f"{base}/metadata/annotations", "value": dict(annotations)}]
    return [
        {"op": "add", "path": f"{base}/metadata/annotations/{pointer(k)}", "value": v}
        for k, v in annotations.items()
    ]


def annotation_merge_patch(value: str, *, restart_at: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "spec": {"template": {"metadata": {"annotations": {LAST_RELOADED_FROM: value}}}}
    }
    if restart_at is not None:
        body["spec"]["restartAt"] = restart_at
    return body
