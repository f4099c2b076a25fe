"""`kube-reloader lint`'s rules for the annotation keys and where they are written: a key
under Reloader's domain that it does not read (KR008), reload annotations on a kind that is
never reloaded (KR011), on the pod template where they are shadowed (KR002), a fallback
(KR001) or never read (KR014), a pause period off a Deployment (KR009), and under a Helm
values file's podAnnotations (KR003)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any

from kube_reloader.core.annotations import (
    CRONJOB_INSTANTIATE,
    JOB_POLICY,
    LAST_RELOADED_FROM,
    MAX_UNAVAILABLE,
    POD_SELECTOR,
    POD_STRATEGY,
    RELOAD_AFTER,
    RELOAD_WINDOW,
    RELOADED_HASHES,
    Keys,
    shadowed_template_keys,
)
from kube_reloader.core.kindtraits import traits
from kube_reloader.core.lintrules import META_ANNOTATIONS, Document, Finding, Path, finding
from kube_reloader.core.objects import ResourceType

#: kinds that carry annotations but are never reloaded
NEVER_RELOADED = {
    "Pod",
    "ReplicaSet",
    "Service",
    "Ingress",
    "ConfigMap",
    "Secret",
    "ReplicationController",
    "HorizontalPodAutoscaler",
    "PodDisruptionBudget",
}
DOMAIN_RE = re.compile(r"(^|\.)reloader\.stakater\.com/")
#: values keys that hold the pod template's annotations in charts
POD_ANNOTATIONS_KEYS = (
    "podAnnotations",
    "podAnnotation",
    "pod_annotations",
    "podTemplateAnnotations",
)
MOVE_FIX = "move {} to metadata.annotations (kube-reloader lint --fix does it)"


def unknown_keys(
    d: Document, base: Path, annotations: Mapping[str, Any], known: set[str], ref: str
) -> list[Finding]:
    """KR008: keys under Reloader's domain that it does not read, with the closest known."""
    out = []
    for key in annotations:
        if DOMAIN_RE.search(str(key)) and key not in known:
            close = difflib.get_close_matches(str(key), sorted(known), n=1, cutoff=0.75)
            hint = f"did you mean {close[0]!r}?" if close else "see docs/annotation-keys.md"
            text = f"{ref}: {key!r} is not an annotation Reloader reads; it is ignored"
            out.append(finding("KR008", d, (*base, key), text, f"fix the key: {hint}", ref))
    return out


def values_file(d: Document, known: set[str]) -> list[Finding]:
    """KR003: Helm values files with reload annotations under a podAnnotations-like key."""
    out: list[Finding] = []
    reload_keys = known - {LAST_RELOADED_FROM, RELOADED_HASHES, CRONJOB_INSTANTIATE}

    def walk(node: Any, path: Path) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                here = (*path, k)
                if isinstance(v, dict) and _is_pod_annotations(path, str(k)):
                    out.extend(_pod_annotations(d, here, v, reload_keys))
                walk(v, here)
        elif isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, (*path, i))

    walk(d.obj, ())
    return out


def _pod_annotations(
    d: Document, here: Path, values: Mapping[Any, Any], reload_keys: set[str]
) -> list[Finding]:
    out = []
    dotted = ".".join(str(p) for p in here)
    for ak in values:
        if ak in reload_keys or DOMAIN_RE.search(str(ak)):
            text = (
                f"values key {dotted} puts {ak!r} on the pod template, not on the workload's "
                "metadata: Reloader reads it only as a fallback, never when the workload has "
                "its own reload annotations"
            )
            fix = (
                "set it through the chart's workload annotations value (e.g. `annotations:` or "
                f"`deploymentAnnotations:`) instead of {dotted}"
            )
            out.append(finding("KR003", d, (*here, ak), text, fix))
    return out


def _is_pod_annotations(parent: Path, key: str) -> bool:
    if key in POD_ANNOTATIONS_KEYS:
        return True
    return (
        key == "annotations"
        and bool(parent)
        and str(parent[-1]) in ("pod", "podTemplate", "template")
    )


def never_reloaded(
    d: Document, kind: str, wa: Mapping[str, str], keys: Keys, ref: str
) -> list[Finding]:
    """KR011: reload annotations on a kind that is never reloaded."""
    reload_keys = {k for k in wa if DOMAIN_RE.search(k)} - {LAST_RELOADED_FROM, RELOADED_HASHES}
    resource_side = keys.resource_keys() | {keys.ignore, keys.match}
    if kind not in NEVER_RELOADED or not reload_keys - resource_side:
        return []
    text = f"{ref}: {kind}s are never reloaded; {', '.join(sorted(reload_keys))} has no effect here"
    fix = "put the annotation on the Deployment/StatefulSet/DaemonSet that uses it"
    return [finding("KR011", d, META_ANNOTATIONS, text, fix, ref)]


def placement(
    d: Document,
    keys: Keys,
    kind: str,
    wa: Mapping[str, str],
    pa: Mapping[str, str],
    pa_path: Path,
    ref: str,
) -> list[Finding]:
    """Pod-template annotations: shadowed (error) or fallback (warning); exclude, pause and
    our workload-only keys never read there; a pause period off a Deployment."""
    out = []
    shadowed = shadowed_template_keys(wa, pa, keys)
    for key in sorted(shadowed):
        text = (
            f"{ref}: {key}={pa[key]!r} is on the pod template, and the workload's own metadata "
            "already has a reload annotation for the same resource type, so Reloader never "
            "reads it: nothing reloads for it"
        )
        out.append(_to_metadata("KR002", d, pa_path, key, text, ref))
    triggers = {k for rtype in ResourceType for k in keys.trigger_keys(rtype)}
    for key in sorted(set(pa) & triggers - set(shadowed)):
        text = (
            f"{ref}: {key}={pa[key]!r} is on the pod template; it works only as a fallback "
            "while the workload's own metadata has no reload annotation, and Reloader releases "
            "older than the fallback ignore it"
        )
        split = {keys.exclude(r) for r in ResourceType if key in keys.trigger_keys(r)} & set(wa)
        if split:  # v1 reads the exclude list from the metadata, v2 where the triggers are
            text += (
                f"; {', '.join(sorted(split))} on the workload's metadata then excludes in "
                "Reloader v1 only (v2 reads the exclude list where it reads this annotation)"
            )
        out.append(_to_metadata("KR001", d, pa_path, key, text, ref))
    for key in sorted(set(pa) & _workload_only(keys)):
        text = f"{ref}: {key} {_template_only_text(keys, key, wa, pa)}"
        out.append(_to_metadata("KR014", d, pa_path, key, text, ref))
    if keys.pause_period in wa and not traits(kind).pausable:
        at = (*META_ANNOTATIONS, keys.pause_period)
        text = f"{ref}: the pause period applies to Deployments only; on a {kind} it is ignored"
        out.append(finding("KR009", d, at, text, "remove it", ref))
    return out


def _template_only_text(keys: Keys, key: str, wa: Mapping[str, str], pa: Mapping[str, str]) -> str:
    """Why a workload-only key on the pod template is not read (an exclude list: by whom)."""
    rtype = next((r for r in ResourceType if keys.exclude(r) == key), None)
    if rtype is None:
        return "is read only from the workload's own metadata; on the pod template it is ignored"
    triggers = keys.trigger_keys(rtype)
    if any(k in wa for k in triggers) or not any(k in pa for k in triggers):
        return (
            "on the pod template is read neither by Reloader v1 nor by v2 here: both read the "
            "exclude list from the workload's own metadata"
        )
    return (
        "on the pod template is never read by Reloader v1 (nor kube-reloader --compat=v1), "
        "and read by v2, which reads it where the reload annotations are (here, the pod "
        "template): the versions decide differently; keep it with the reload annotations on "
        "the workload's own metadata"
    )


def _workload_only(keys: Keys) -> set[str]:
    """Keys read from the workload's own metadata only, never from its pod template (v1's rule
    for excludes; v2 reads them from the annotation set it chose)."""
    excludes = {keys.configmap_exclude, keys.secret_exclude, keys.spc_exclude}
    ours = {POD_STRATEGY, MAX_UNAVAILABLE, POD_SELECTOR, RELOAD_WINDOW, RELOAD_AFTER, JOB_POLICY}
    return excludes | {keys.pause_period} | ours


def _to_metadata(rule: str, d: Document, pa_path: Path, key: str, text: str, ref: str) -> Finding:
    """A finding on pod-template annotation `key` that moving it to the workload's metadata
    resolves (what --fix does)."""
    at = (*pa_path, key)
    moves = ((key, at, META_ANNOTATIONS),)
    return finding(rule, d, at, text, MOVE_FIX.format(key), ref, moves=moves)
