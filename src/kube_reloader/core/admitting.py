"""One rollout per apply: what the mutating admission webhook writes into a workload.

An AdmissionReview (raw bytes from the API server, hostile: a tenant wrote the object) goes
in; JSONPatch operations and the reasons for them come out. The value written is exactly what
the controller would write for the referenced ConfigMaps' and Secrets' current content: every
(change, workload) pair goes through `planning.plan`, so the controller's next look at the
workload finds it up to date (`Outcome.UP_TO_DATE`) and writes nothing.

Only a workload that rolls anyway is touched: a CREATE, or an UPDATE whose pod template
changes. An UPDATE that leaves the template alone (a scale, a label) is left to the
controller, whose pauses, windows and rate limits then decide as they always do.

Everything is total: a review that cannot be read, or an object of the wrong shape, is
admitted unchanged with a one-line reason; nothing here raises on input.

What an answer may reveal is decided by the runtime (`runtime.admitter`): key-level hashes
(`key_scoped`) only to an authenticated API server; `answer_budget` is how long a review may
wait and be looked at before the API server gives up on it.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from kube_reloader.core import (
    evicting,
    parsing,
    pausing,
    planning,
    podtemplates,
    scoping,
    strategies,
)
from kube_reloader.core.kindtraits import traits
from kube_reloader.core.objects import ResourceType, WorkloadKind
from kube_reloader.core.records import record

#: bytes of AdmissionReview read (an object is at most ~1.5 MiB in etcd; a review holds the
#: object and the old object); larger: admitted unchanged, never read whole
MAX_REVIEW_BYTES = 3584 * 1024
#: brackets deep (a workload with managedFields is ~20 deep)
MAX_REVIEW_DEPTH = 100
#: the references of one workload looked at (more: admitted unchanged, left to the controller)
MAX_REFERENCES = 64
REVIEW_API_VERSION = "admission.k8s.io/v1"
#: seconds the API server waits for a webhook that names no timeout (its default)
DEFAULT_TIMEOUT = 10.0
#: seconds of the API server's timeout kept for the answer's way back
TIMEOUT_MARGIN = 0.5
#: seconds a review may take here at most, whatever its timeout: the webhook listener's
#: header timeout (5 s, `serving.Limits`) runs from a body's first byte to the answer
MAX_BUDGET = 4.0
MIN_BUDGET = 0.1
#: the kinds the chart's MutatingWebhookConfiguration sends the webhook
MUTATED_KINDS = frozenset(
    (
        WorkloadKind.DEPLOYMENT,
        WorkloadKind.STATEFULSET,
        WorkloadKind.DAEMONSET,
        WorkloadKind.CRONJOB,
    )
)

Reference = tuple[ResourceType, str]

#: a namespace's name (an RFC 1123 label) and a ConfigMap's (an RFC 1123 subdomain), as the
#: API server accepts them: nothing else is ever put into a lookup's path or field selector
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


@record
class Review:
    """The parts of an admission request the webhook reads."""

    uid: str
    operation: str
    namespace: str
    obj: Mapping[str, Any]
    old: Mapping[str, Any] | None = None
    dry_run: bool = False


@record
class ParsedReview:
    """A review, or why there is none (`uid` is still set when the request carried one)."""

    review: Review | None = None
    uid: str = ""
    error: str | None = None


@record
class Admission:
    """What to write (JSONPatch operations, possibly none) and why."""

    ops: list[dict[str, Any]]
    reasons: list[str]


def parse_review(body: bytes) -> ParsedReview:
    """An AdmissionReview v1 request, or a one-line reason why it cannot be read."""
    if len(body) > MAX_REVIEW_BYTES:
        return ParsedReview(error=f"review of {len(body)} bytes is over {MAX_REVIEW_BYTES}")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return ParsedReview(error="review is not UTF-8")
    parsed = parsing.json_value(text, max_bytes=MAX_REVIEW_BYTES, max_depth=MAX_REVIEW_DEPTH)
    if parsed.error is not None:
        return ParsedReview(error=f"review: {parsed.error}")
    return review_of(parsed.value)


def review_of(value: Any) -> ParsedReview:
    """The review in a decoded AdmissionReview document (any value), or why there is none."""
    doc = podtemplates.mapping(value)
    request = podtemplates.mapping(doc.get("request"))
    uid = request.get("uid")
    uid = uid if isinstance(uid, str) and 0 < len(uid) <= 128 else ""
    if doc.get("apiVersion") != REVIEW_API_VERSION or doc.get("kind") != "AdmissionReview":
        return ParsedReview(uid=uid, error=f"not an {REVIEW_API_VERSION} AdmissionReview")
    if not uid:
        return ParsedReview(error="the review's request has no uid")
    operation = request.get("operation")
    if operation not in ("CREATE", "UPDATE"):
        return ParsedReview(uid=uid, error=f"operation {parsing.quote(str(operation))} ignored")
    obj = request.get("object")
    if not isinstance(obj, Mapping):
        return ParsedReview(uid=uid, error="the request carries no object")
    old = request.get("oldObject")
    meta = obj.get("metadata")
    if meta is not None and not isinstance(meta, Mapping):
        return ParsedReview(uid=uid, error="the object's metadata is not a mapping")
    own = podtemplates.mapping(meta).get("namespace")
    namespace = request.get("namespace")
    if not isinstance(namespace, str) or not namespace:
        return ParsedReview(uid=uid, error="the request names no namespace")
    if not _LABEL.fullmatch(namespace):
        return ParsedReview(uid=uid, error="the request's namespace is not a namespace name")
    if own not in (None, "", namespace):
        return ParsedReview(uid=uid, error="the object's namespace is not the request's")
    return ParsedReview(
        Review(
            uid=uid,
            operation=str(operation),
            namespace=namespace,
            obj=obj,
            old=old if isinstance(old, Mapping) else None,
            dry_run=request.get("dryRun") is True,
        ),
        uid=uid,
    )


def answer_budget(timeout: str | None) -> float:
    """Seconds a review may wait and be answered in, from its URL's `?timeout=` (the API
    server's deadline for the call: the webhook's `timeoutSeconds` rounded up to whole
    seconds, as a Go duration, e.g. `2s`) minus `TIMEOUT_MARGIN`, at most `MAX_BUDGET`.
    Absent or unreadable: `DEFAULT_TIMEOUT`, the API server's default. Total."""
    seconds = DEFAULT_TIMEOUT
    try:
        given = pausing.parse_duration(timeout) if timeout else 0.0
    except pausing.DurationError:
        given = 0.0
    if given > 0:
        seconds = given
    return max(MIN_BUDGET, min(seconds - TIMEOUT_MARGIN, MAX_BUDGET))


def writes_hashes(config: planning.Config) -> bool:
    """Whether the webhook writes anything under these settings: only where the value the
    controller writes is the hash alone (`env-vars`, v1); under the annotations strategy or
    `--compat=v2` it carries the reload's time, which the controller's own write would not
    repeat."""
    return config.strategy is strategies.Strategy.ENV_VARS and (
        config.compat is not strategies.Compat.V2
    )


def would_write(
    p: planning.Plan, workload: planning.Workload, config: planning.Config, *, keys: bool
) -> bool:
    """Whether the webhook, at the admission of `workload`, writes the hash this plan would
    have the controller write (`keys`: it writes key-level hashes, its caller being
    authenticated). Only then is an apply's own write of the workload worth waiting for
    (`--admission-grace`): a ConfigMap's change, a kind the webhook is sent, a template write
    (`PATCH`, not a pod-level strategy), under settings whose value is the hash alone."""
    return (
        writes_hashes(config)
        and p.change.rtype is ResourceType.CONFIGMAP
        and workload.kind in MUTATED_KINDS
        and p.mode.policy is not None
        and p.mode.policy.strategy is evicting.PodStrategy.PATCH
        and (keys or not key_scoped(workload, config))
    )


def key_scoped(workload: planning.Workload, config: planning.Config) -> bool:
    """Whether the controller writes key-level hashes for `workload` (`reload-scope: keys`
    on it or its template, else `--reload-scope`): the value written is then a hash of only
    the keys it consumes, one key's value when it consumes one."""
    scope, _ = scoping.scope_of(workload.annotations, workload.template.annotations, config.scope)
    return scope is scoping.Scope.KEYS and not workload.workload_ref


def workload_of(review: Review) -> planning.Workload | str:
    """The review's object as the rules read it, or why it cannot be one."""
    try:
        workload = planning.workload_from_manifest(review.obj)
    except (ValueError, TypeError, AttributeError) as exc:
        return f"not a workload: {exc}"
    spec = podtemplates.mapping(review.obj.get("spec"))
    meta = podtemplates.mapping(review.obj.get("metadata"))
    owners = podtemplates.mappings(meta.get("ownerReferences"))
    owner = next((str(o.get("kind") or "") for o in owners if o.get("controller") is True), "")
    paused = spec.get(traits(workload.kind).pause_field) is True
    return planning.Workload(
        kind=workload.kind,
        namespace=review.namespace,
        name=workload.name,
        annotations={str(k): str(v) for k, v in workload.annotations.items()},
        template=workload.template,
        uid=workload.uid,
        paused=paused,
        owner_kind=owner,
    )


def rolls_anyway(review: Review) -> tuple[bool, str]:
    """A CREATE, or an UPDATE that changes the pod template: pods start with this write."""
    if review.operation == "CREATE":
        return True, "a new workload"
    if review.old is None:
        return False, "an update without the old object"
    kind = str(review.obj.get("kind") or "")
    if podtemplates.template_of(review.obj) != podtemplates.template_of(
        {**review.old, "kind": kind}
    ):
        return True, "the update changes the pod template"
    return False, "the update leaves the pod template alone; the controller decides"


def references(workload: planning.Workload) -> list[Reference]:
    """The ConfigMaps whose current hashes the webhook needs: those the pod template names
    (valid names only), sorted. Never Secrets: an answer carries the hashes it writes to
    whoever sent the review, so Secrets are left to the controller."""
    return sorted(
        r
        for r in workload.template.references()
        if r[0] is ResourceType.CONFIGMAP and _SUBDOMAIN.fullmatch(r[1])
    )


def admit(
    *,
    workload: planning.Workload,
    obj: Mapping[str, Any],
    changes: Mapping[Reference, planning.Change],
    config: planning.Config,
    now: int,
) -> Admission:
    """The operations writing, into `obj` (the review's object, which `workload` was read
    from), what the controller would write for each found reference's current content
    (`changes`: as the controller's cache would describe it, see `cache.ConfigEntry.change`)."""
    policy = planning.mode_of(workload, config).policy
    if policy is None or policy.strategy is not evicting.PodStrategy.PATCH:
        return Admission([], ["the workload is not reloaded by patching its pod template"])
    plans = [
        planning.plan(change=change, workload=workload, config=config, now=now)
        for _, change in sorted(changes.items())
    ]
    reasons = [f"{p.change}: {p.message}" for p in plans]
    ops: list[dict[str, Any]] = []
    for ptype, body in planning.combine(plans):
        if ptype is strategies.PatchType.STRATEGIC and isinstance(body, Mapping):
            more, why = json_patch(obj, podtemplates.template_path(workload.kind), body)
            ops += more
            reasons += why
    return Admission(ops, reasons)


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def json_patch(
    obj: Mapping[str, Any], path: Sequence[str], body: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], list[str]]:
    """A strategic-merge body of `strategies`' shapes (template annotations; env vars of
    containers by name), rooted at the pod template, as JSONPatch operations on `obj`."""
    template = podtemplates.template_of(obj)
    if not template:
        return [], ["the object has no pod template"]
    base = "/" + "/".join(_escape(p) for p in path)
    tbody = podtemplates.mapping(podtemplates.mapping(body.get("spec")).get("template"))
    wanted = podtemplates.mapping(podtemplates.mapping(tbody.get("metadata")).get("annotations"))
    ops = _annotation_ops(template, base, wanted) if wanted else []
    reasons: list[str] = []
    spec = podtemplates.pod_spec(template)
    raw = spec.get("containers")
    raw_containers = raw if isinstance(raw, list) else []
    for c in podtemplates.mappings(podtemplates.pod_spec(tbody).get("containers")):
        name = c.get("name")
        index = _index_of(raw_containers, name)
        if index is None:
            reasons.append(f"container {parsing.quote(str(name))} not found; nothing set")
            continue
        cpath = f"{base}/spec/containers/{index}/env"
        variables = [
            {"name": str(v.get("name")), "value": str(v.get("value"))}
            for v in podtemplates.mappings(c.get("env"))
        ]
        env = raw_containers[index].get("env")
        if not isinstance(env, list):
            ops.append({"op": "add", "path": cpath, "value": variables})
            continue
        for var in variables:
            at = _index_of(env, var["name"])
            if at is None:
                ops.append({"op": "add", "path": f"{cpath}/-", "value": var})
            else:
                ops.append({"op": "replace", "path": f"{cpath}/{at}", "value": var})
    return ops, reasons


def _annotation_ops(
    template: Mapping[str, Any], base: str, wanted: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The pod template's annotations `wanted`, added to what the template has: its
    metadata, its annotations, or each annotation."""
    values = {str(k): str(v) for k, v in wanted.items()}
    meta = template.get("metadata")
    if not isinstance(meta, Mapping):
        return [{"op": "add", "path": f"{base}/metadata", "value": {"annotations": values}}]
    at = f"{base}/metadata/annotations"
    if not isinstance(meta.get("annotations"), Mapping):
        return [{"op": "add", "path": at, "value": values}]
    return [{"op": "add", "path": f"{at}/{_escape(k)}", "value": v} for k, v in values.items()]


def _index_of(items: Sequence[Any], name: object) -> int | None:
    """The index of the first mapping in `items` whose `name` is `name`."""
    found = (i for i, e in enumerate(items) if isinstance(e, Mapping) and e.get("name") == name)
    return next(found, None)


def response(uid: str, ops: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The AdmissionReview answer: always allowed; the operations as a JSONPatch, if any."""
    answer: dict[str, Any] = {"uid": uid, "allowed": True}
    if ops:
        patch = json.dumps(list(ops), separators=(",", ":")).encode()
        answer["patchType"] = "JSONPatch"
        answer["patch"] = base64.b64encode(patch).decode()
    return {"apiVersion": REVIEW_API_VERSION, "kind": "AdmissionReview", "response": answer}
