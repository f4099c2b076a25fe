"""What a reload writes: patches built from values, never by mutating the workload.

`env-vars` (default) sets `STAKATER_<NAME>_<TYPE>=<hash>` on one container; `annotations`
sets `reloader.stakater.com/last-reloaded-from` on the pod template (compat-spec §4). Both
return `None` when the workload already carries the hash: that is what makes a reload
idempotent, and what lets a restarted controller skip work already done.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any

from kube_reloader.core import gojson, hashing, mutating, parsing
from kube_reloader.core.annotations import LAST_RELOADED_FROM, RELOADED_HASHES
from kube_reloader.core.objects import ResourceType
from kube_reloader.core.records import record
from kube_reloader.core.references import ENV_PREFIX, PodTemplate


class Strategy(StrEnum):
    ENV_VARS = "env-vars"
    ANNOTATIONS = "annotations"


class Compat(StrEnum):
    """Whose wire format kube-reloader writes (`--compat`): Stakater Reloader v1.4.x's or
    v2's. Both formats are read in either mode."""

    V1 = "v1"
    V2 = "v2"

    @property
    def field_manager(self) -> str:
        return "Reloader" if self is Compat.V1 else "reloader"


class PatchType(StrEnum):
    STRATEGIC = "strategic"
    MERGE = "merge"
    JSON = "json"


@record
class Patch:
    type: PatchType
    body: Any
    summary: str


def env_var_name(resource_name: str, rtype: ResourceType) -> str:
    """`STAKATER_` + upper-cased name with runs of non-alphanumerics as one `_` + `_<TYPE>`."""
    out: list[str] = []
    last_valid = False
    for ch in resource_name.upper():
        if "A" <= ch <= "Z" or "0" <= ch <= "9":
            out.append(ch)
            last_valid = True
        else:
            if last_valid:
                out.append("_")
            last_valid = False
    return f"STAKATER_{''.join(out)}_{rtype.value}"


def env_patch(
    template: PodTemplate, container: str, env_name: str, value: str
) -> dict[str, Any] | None:
    """Strategic-merge body setting one env var on one container; None if already set."""
    found = template.container(container)
    if found is not None and found[1].env_value(env_name) == value:
        return None
    return {
        "spec": {
            "template": {
                "spec": {
                    "containers": [{"name": container, "env": [{"name": env_name, "value": value}]}]
                }
            }
        }
    }


ANNOTATIONS_PATH = "/spec/template/metadata/annotations"


def annotation_op(template: PodTemplate, key: str, value: str) -> dict[str, Any] | None:
    """JSON-patch op setting one pod-template annotation, when the template is known to have an
    annotations map (it carries one of Reloader's keys; the cache keeps no others): an `add`
    of the whole map could erase annotations the cache does not keep, and an `add` under a map
    that is not there would fail the patch. None otherwise."""
    if not template.annotations:
        return None
    return {"op": "add", "path": f"{ANNOTATIONS_PATH}/{mutating.pointer(key)}", "value": value}


def annotations_set_by(ops: list[dict[str, Any]]) -> dict[str, str]:
    """The pod-template annotations a JSON patch of ours sets (`annotation_op`)."""
    out = {}
    for op in ops:
        path = str(op.get("path", ""))
        if op.get("op") == "add" and path.startswith(ANNOTATIONS_PATH + "/"):
            key = path.removeprefix(ANNOTATIONS_PATH + "/").replace("~1", "/").replace("~0", "~")
            out[key] = str(op.get("value"))
    return out


def env_remove_patch(
    template: PodTemplate, container: str, env_name: str
) -> list[dict[str, Any]] | None:
    """JSON patch removing the env var (on delete). A `test` op guards the index, so a
    concurrent edit of the env list fails the patch instead of removing the wrong entry."""
    found = template.container(container)
    if found is None:
        return None
    ci, c = found
    ei = c.env_index(env_name)
    if ei is None:
        return None
    path = f"/spec/template/spec/containers/{ci}/env/{ei}"
    return [
        {"op": "test", "path": f"{path}/name", "value": env_name},
        {"op": "remove", "path": path},
    ]


def annotation_value(
    *, rtype: ResourceType, name: str, namespace: str, hash: str, container: str, observed_at: int
) -> str:
    """v1's compact JSON, fields in Go's order."""
    doc = {
        "type": rtype.value,
        "name": name,
        "namespace": namespace,
        "hash": hash,
        "containerRefs": [container],
        "observedAt": observed_at,
    }
    return gojson.marshal(doc)


def annotation_value_v2(
    *, rtype: ResourceType, name: str, namespace: str, hash: str, container: str, at: str
) -> str:
    """Reloader v2's compact JSON (its field names and order; `at` is RFC 3339, UTC)."""
    doc = {
        "kind": rtype.value.lower(),
        "name": name,
        "namespace": namespace,
        "hash": hash,
        "containers": [container],
        "reloadedAt": at,
    }
    return gojson.marshal(doc)


def last_reloaded(template: PodTemplate) -> tuple[ResourceType, str, str | None, str] | None:
    """The resource and hash the pod template's last-reloaded-from records, in v1's shape
    (`type`, `name`, `namespace`, `hash`) or v2's (`kind`, `name`, `namespace`, `hash`);
    None when absent or unreadable. The namespace is None when the value has none."""
    raw = template.annotations.get(LAST_RELOADED_FROM)
    doc = parsing.json_object(raw) if raw else None
    if doc is None:
        return None
    token, name, content = doc.get("type"), doc.get("name"), doc.get("hash")
    if token is None and isinstance(doc.get("kind"), str):
        token = str(doc["kind"]).upper()
    namespace = doc.get("namespace")
    if not (isinstance(token, str) and isinstance(name, str) and isinstance(content, str)):
        return None
    try:
        rtype = ResourceType(token)
    except ValueError:
        return None
    return rtype, name, namespace if isinstance(namespace, str) else None, content


def records(template: PodTemplate) -> dict[str, str]:
    """Every resource's hash as the pod template records it: our record, with Reloader's
    last-reloaded-from (v1's shape or v2's) over it for the resource it names. kube-reloader
    writes both in one patch, so when they disagree Reloader wrote last-reloaded-from later
    (a switch to Reloader and back). v2's empty hash (a delete) is v1's delete marker."""
    out = recorded_hashes(template)
    last = last_reloaded(template)
    if last is not None:
        out[record_key(last[0], last[1])] = last[3] or hashing.DELETE_MARKER_HASH
    return out


def record_key(rtype: ResourceType, name: str) -> str:
    return f"{rtype.value}/{name}"


def recorded_hashes(template: PodTemplate) -> dict[str, str]:
    """Our per-config record (annotations strategy); {} when absent or unreadable."""
    doc = parsing.json_object(template.annotations.get(RELOADED_HASHES) or "{}")
    return {str(k): str(v) for k, v in doc.items()} if doc is not None else {}


def annotation_patch(value: str, record: dict[str, str] | None = None) -> dict[str, Any]:
    annotations = {LAST_RELOADED_FROM: value}
    if record is not None:
        annotations[RELOADED_HASHES] = json.dumps(record, separators=(",", ":"), sort_keys=True)
    return {"spec": {"template": {"metadata": {"annotations": annotations}}}}


def merge_strategic(bodies: list[dict[str, Any]]) -> dict[str, Any]:
    """Combine several strategic-merge bodies of the shapes above into one patch."""
    containers: dict[str, dict[str, str]] = {}
    annotations: dict[str, str] = {}
    for body in bodies:
        tmpl = body["spec"]["template"]
        for c in (tmpl.get("spec") or {}).get("containers", ()):
            env = containers.setdefault(c["name"], {})
            for var in c["env"]:
                env[var["name"]] = var["value"]
        for key, value in ((tmpl.get("metadata") or {}).get("annotations") or {}).items():
            if key == RELOADED_HASHES and key in annotations:
                merged = {**json.loads(annotations[key]), **json.loads(value)}
                value = json.dumps(merged, separators=(",", ":"), sort_keys=True)
            annotations[key] = value
    template: dict[str, Any] = {}
    if annotations:
        template["metadata"] = {"annotations": annotations}
    if containers:
        template["spec"] = {
            "containers": [
                {"name": n, "env": [{"name": k, "value": v} for k, v in env.items()]}
                for n, env in containers.items()
            ]
        }
    return {"spec": {"template": template}}


def carries_reload(template: PodTemplate) -> bool:
    """Whether a pod template was ever reloaded (a `STAKATER_*` env var, or either strategy's
    annotation): a rollout of it in flight is counted as a reload's."""
    if LAST_RELOADED_FROM in template.annotations or RELOADED_HASHES in template.annotations:
        return True
    return any(
        v.name.startswith(ENV_PREFIX) and v.value is not None
        for c in (*template.containers, *template.init_containers)
        for v in c.env
    )


def carried_value(
    tmpl: PodTemplate, strategy: Strategy, container: str, rtype: ResourceType, name: str
) -> str | None:
    """The hash the template carries for one resource (`container`'s env var, or the
    record), or None."""
    if strategy is Strategy.ENV_VARS:
        found = tmpl.container(container)
        return None if found is None else found[1].env_value(env_var_name(name, rtype))
    return records(tmpl).get(record_key(rtype, name))


def carried_hashes(tmpl: PodTemplate, strategy: Strategy) -> dict[tuple[ResourceType, str], str]:
    """Every hash the pod template carries, by the resource it was written for."""
    out: dict[tuple[ResourceType, str], str] = {}
    record = records(tmpl)
    for rtype, name in tmpl.references():
        if strategy is Strategy.ENV_VARS:
            env_name = env_var_name(name, rtype)
            for c in (*tmpl.containers, *tmpl.init_containers):
                value = c.env_value(env_name)
                if value is not None:
                    out[(rtype, name)] = value
                    break
        else:
            value = record.get(record_key(rtype, name))
            if value is not None:
                out[(rtype, name)] = value
    return out
