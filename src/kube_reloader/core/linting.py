"""`kube-reloader lint`: the mistakes that make Reloader silently do nothing, found before they
ship. Every rule reuses the controller's own logic (`annotations`, `references`, `matching`,
`regexes`), so lint and the controller can never disagree about what will happen.

Input is a list of documents (plain data, each with a way to find the line of any path in it);
output is a list of `Finding`s carrying a rule id, a severity, a message that says what will
happen at runtime, and the fix.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from kube_reloader.core import evicting, inplacelint, lintnames, scheduling
from kube_reloader.core import podtemplates as pt
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
    ROLLOUT_STRATEGY,
    Keys,
)
from kube_reloader.core.matching import MatchConfig, decide, shadowed_template_keys
from kube_reloader.core.objects import ObjectKey, ResourceType, WorkloadKind
from kube_reloader.core.references import pod_template_from_manifest

#: lint reads the built-in workload kinds only (a custom kind's spec.template may be no pod's)
WORKLOAD_KINDS = {k.value for k in WorkloadKind}
NEVER_RELOADED = {"Pod", "ReplicaSet", "Service", "Ingress", "ConfigMap", "Secret",
                  "ReplicationController", "HorizontalPodAutoscaler", "PodDisruptionBudget"}  # fmt: skip
CORE_OWNERS = {"Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job", "CronJob"}
POD_ANNOTATION_VALUE_KEYS = re.compile(
    r"^(pod|podAnnotations|podAnnotation|pod_annotations|podTemplateAnnotations)$"
)
DOMAIN_RE = re.compile(r"(^|\.)reloader\.stakater\.com/")


class Severity(IntEnum):
    INFO = 1
    WARNING = 2
    ERROR = 3

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    name: str
    severity: Severity
    summary: str


RULES = {
    r.id: r
    for r in (
        Rule("KR000", "invalid-yaml", Severity.ERROR, "A YAML document cannot be parsed"),
        Rule("KR001", "pod-template-annotation", Severity.WARNING, "Reload annotation on the pod template"),
        Rule("KR002", "shadowed-pod-template-annotation", Severity.ERROR, "Pod-template reload annotation that can never be read"),
        Rule("KR003", "values-pod-annotations", Severity.ERROR, "Helm values put reload annotations under podAnnotations"),
        Rule("KR004", "tls-secret-without-reload", Severity.WARNING, "A TLS Secret is used but nothing reloads on its renewal"),
        Rule("KR005", "named-resource-missing", Severity.WARNING, "A named reload list names a resource that does not exist"),
        Rule("KR006", "named-resource-unreferenced", Severity.INFO, "A named reload list names a resource the workload does not use"),
        Rule("KR007", "invalid-regex", Severity.ERROR, "A named reload list entry cannot be used as a regular expression"),
        Rule("KR008", "unknown-annotation", Severity.ERROR, "Unknown key under the reloader.stakater.com domain"),
        Rule("KR009", "invalid-value", Severity.WARNING, "An annotation value Reloader does not treat as intended"),
        Rule("KR010", "auto-and-search", Severity.WARNING, "auto and search on the same workload"),
        Rule("KR011", "unreloaded-kind", Severity.WARNING, "Reload annotations on a kind that is never reloaded"),
        Rule("KR012", "ignored-resource-named", Severity.WARNING, "A workload names a resource marked ignore"),
        Rule("KR013", "owned-workload", Severity.INFO, "Workload owned by another controller"),
        Rule("KR014", "misplaced-workload-only-annotation", Severity.ERROR, "exclude/pause annotations on the pod template are never read"),
        Rule("KR015", "in-place-pod-spec", Severity.ERROR, "An in-place strategy's pod spec lacks what its agent needs"),
    )
}  # fmt: skip

Path = tuple[str | int, ...]


@dataclass(frozen=True)
class Document:
    obj: Any
    source: str
    line_of: Callable[[Path], int]


@dataclass(frozen=True, slots=True)
class Finding:
    rule: str
    severity: Severity
    message: str
    fix: str
    source: str
    line: int
    object: str = ""
    #: for --fix: (annotation key, from path, to path) moves that resolve this finding
    moves: tuple[tuple[str, Path, Path], ...] = field(default=())

    @property
    def name(self) -> str:
        return RULES[self.rule].name


def _known_keys(keys: Keys) -> set[str]:
    return set(keys.workload_keys()) | keys.resource_keys() | {
        LAST_RELOADED_FROM, ROLLOUT_STRATEGY, RELOADED_HASHES, CRONJOB_INSTANTIATE,
    }  # fmt: skip


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def lint(documents: Sequence[Document], *, config: MatchConfig | None = None,
         cluster_resources: set[tuple[str, str, str]] | None = None) -> list[Finding]:  # fmt: skip
    """Run every rule. `cluster_resources` ((type, namespace, name)) adds live ConfigMaps and
    Secrets to those found in the input, for the missing-resource rule."""
    config = config or MatchConfig()
    keys = config.keys
    known = _known_keys(keys)
    out: list[Finding] = []
    objects = [
        d
        for d in documents
        if isinstance(d.obj, dict) and d.obj.get("kind") and d.obj.get("apiVersion")
    ]
    values_files = [
        d
        for d in documents
        if isinstance(d.obj, dict) and not (d.obj.get("kind") and d.obj.get("apiVersion"))
    ]
    # what the input (and cluster) contains
    present: set[tuple[str, str, str]] = set(cluster_resources or ())
    tls: set[tuple[str, str]] = set()
    ignored: dict[tuple[str, str, str], str] = {}
    for d in objects:
        o, m = d.obj, _meta(d.obj)
        ns = str(m.get("namespace") or "default")
        if o["kind"] in ("ConfigMap", "Secret"):
            rtype = "CONFIGMAP" if o["kind"] == "ConfigMap" else "SECRET"
            present.add((rtype, ns, str(m.get("name"))))
            if o["kind"] == "Secret" and o.get("type") == "kubernetes.io/tls":
                tls.add((ns, str(m.get("name"))))
            if pt.mapping(m.get("annotations")).get(keys.ignore) == "true":
                ignored[(rtype, ns, str(m.get("name")))] = d.source
        if o["kind"] == "Certificate" and str(o.get("apiVersion", "")).startswith(
            "cert-manager.io/"
        ):
            name = (o.get("spec") or {}).get("secretName")
            if name:
                tls.add((ns, str(name)))
                present.add(("SECRET", ns, str(name)))  # cert-manager creates it
    for d in objects:
        out += _lint_object(d, keys, known, config, present, tls, ignored)
    for d in values_files:
        out += _lint_values(d, keys, known)
    return sorted(out, key=lambda f: (f.source, f.line, f.rule))


def _finding(rule: str, d: Document, path: Path, message: str, fix: str, obj: str = "",
             severity: Severity | None = None, moves: tuple[tuple[str, Path, Path], ...] = ()) -> Finding:  # fmt: skip
    return Finding(
        rule, severity or RULES[rule].severity, message, fix, d.source, d.line_of(path), obj, moves
    )


def _lint_keys(
    d: Document, base: Path, annotations: Mapping[str, Any], known: set[str], ref: str
) -> list[Finding]:
    out = []
    for key in annotations:
        if DOMAIN_RE.search(str(key)) and key not in known:
            close = difflib.get_close_matches(str(key), sorted(known), n=1, cutoff=0.75)
            hint = f"did you mean {close[0]!r}?" if close else "see docs/annotation-keys.md"
            out.append(_finding("KR008", d, (*base, key), f"{ref}: {key!r} is not an annotation Reloader reads; it is ignored",
                                f"fix the key: {hint}", ref))  # fmt: skip
    return out


def _lint_values(d: Document, keys: Keys, known: set[str]) -> list[Finding]:
    """Helm values files: reload annotations under a podAnnotations-like key."""
    out: list[Finding] = []
    reload_keys = known - {LAST_RELOADED_FROM, RELOADED_HASHES, CRONJOB_INSTANTIATE}

    def walk(node: Any, path: Path) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                here = (*path, k)
                if isinstance(v, dict) and _is_pod_annotations(path, str(k)):
                    for ak in v:
                        if ak in reload_keys or DOMAIN_RE.search(str(ak)):
                            dotted = ".".join(str(p) for p in here)
                            out.append(_finding(
                                "KR003", d, (*here, ak),
                                f"values key {dotted} puts {ak!r} on the pod template, not on the workload's metadata: "
                                "Reloader reads it only as a fallback, never when the workload has its own reload annotations",
                                f"set it through the chart's workload annotations value (e.g. `annotations:` or "
                                f"`deploymentAnnotations:`) instead of {dotted}",
                            ))  # fmt: skip
                walk(v, here)
        elif isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, (*path, i))

    walk(d.obj, ())
    return out


def _is_pod_annotations(parent: Path, key: str) -> bool:
    if key in ("podAnnotations", "podAnnotation", "pod_annotations", "podTemplateAnnotations"):
        return True
    return (
        key == "annotations"
        and bool(parent)
        and str(parent[-1]) in ("pod", "podTemplate", "template")
    )


def _lint_object(d: Document, keys: Keys, known: set[str], config: MatchConfig,
                 present: set[tuple[str, str, str]], tls: set[tuple[str, str]],
                 ignored: dict[tuple[str, str, str], str]) -> list[Finding]:  # fmt: skip
    o = d.obj
    kind = str(o.get("kind"))
    m = _meta(o)
    ns = str(m.get("namespace") or "default")
    name = str(m.get("name") or "")
    ref = f"{kind} {ns}/{name}"
    wa = {str(k): str(v) for k, v in pt.mapping(m.get("annotations")).items()}
    out = _lint_keys(d, META_ANNOTATIONS, wa, known, ref)
    if kind not in WORKLOAD_KINDS:
        return out + _never_reloaded(d, kind, wa, keys, ref)
    tpath = pt.template_path(kind)
    template = pt.template_of(o)
    tmpl = pod_template_from_manifest(template)
    pa = {str(k): str(v) for k, v in pt.template_annotations(template).items()}
    pa_path = (*tpath, "metadata", "annotations")
    out += _lint_keys(d, pa_path, pa, known, ref)
    out += _placement(d, keys, kind, wa, pa, pa_path, ref)
    out += _policies(d, ObjectKey(kind, ns, name), wa, template, tpath, ref)
    for src, base in ((wa, META_ANNOTATIONS), (pa, pa_path)):
        out += _values(d, keys, src, base, ref)
        issues = lintnames.named_lists(
            src, base, ref, ns, keys, tmpl.references(), present, ignored
        )
        out += [_finding(rule, d, at, text, fix, ref) for rule, at, text, fix in issues]
    decided = [
        (rtype, rname, decide(rtype=rtype, name=rname, resource_annotations={}, kind=kind,
                              workload_annotations=wa, template_annotations=pa, config=config))
        for rtype, rname in sorted(tmpl.references(), key=lambda r: (r[0].value, r[1]))
        if (rtype.value, ns, rname) in ignored
        or (rtype is ResourceType.SECRET and (ns, rname) in tls)
    ]  # fmt: skip
    out += _ignored_references(d, keys, ns, decided, ignored, ref)
    out += _tls_unreloaded(d, ns, decided, tls, ref)
    return out + _owned(d, kind, m, ref)


META_ANNOTATIONS: Path = ("metadata", "annotations")


def _never_reloaded(d: Document, kind: str, wa: Mapping[str, str], keys: Keys, ref: str
                    ) -> list[Finding]:  # fmt: skip
    """KR011: reload annotations on a kind that is never reloaded."""
    reload_keys = {k for k in wa if DOMAIN_RE.search(k)} - {LAST_RELOADED_FROM, RELOADED_HASHES}
    if kind not in NEVER_RELOADED or not reload_keys - keys.resource_keys() - {
        keys.ignore,
        keys.match,
    }:
        return []
    return [_finding("KR011", d, META_ANNOTATIONS,
                     f"{ref}: {kind}s are never reloaded; {', '.join(sorted(reload_keys))} has no effect here",
                     "put the annotation on the Deployment/StatefulSet/DaemonSet that uses it", ref)]  # fmt: skip


def _placement(d: Document, keys: Keys, kind: str, wa: Mapping[str, str], pa: Mapping[str, str],
               pa_path: Path, ref: str) -> list[Finding]:  # fmt: skip
    """Pod-template annotations: shadowed (error) or fallback (warning); exclude, pause and
    our workload-only keys never read there; a pause period off a Deployment."""
    out = []
    shadowed = shadowed_template_keys(wa, pa, keys)
    for key in sorted(shadowed):
        out.append(_finding("KR002", d, (*pa_path, key),
            f"{ref}: {key}={pa[key]!r} is on the pod template, and the workload's own metadata already has a reload "
            "annotation for the same resource type, so Reloader never reads it: nothing reloads for it",
            f"move {key} to metadata.annotations (kube-reloader lint --fix does it)", ref,
            moves=((key, (*pa_path, key), META_ANNOTATIONS),)))  # fmt: skip
    triggers = {k for rtype in ResourceType for k in keys.trigger_keys(rtype)}
    for key in sorted(set(pa) & triggers - set(shadowed)):
        out.append(_finding("KR001", d, (*pa_path, key),
            f"{ref}: {key}={pa[key]!r} is on the pod template; it works only as a fallback while the workload's own "
            "metadata has no reload annotation, and Reloader releases older than the fallback ignore it",
            f"move {key} to metadata.annotations (kube-reloader lint --fix does it)", ref,
            moves=((key, (*pa_path, key), META_ANNOTATIONS),)))  # fmt: skip
    workload_only = {
        keys.configmap_exclude,
        keys.secret_exclude,
        keys.spc_exclude,
        keys.pause_period,
        POD_STRATEGY, MAX_UNAVAILABLE, POD_SELECTOR, RELOAD_WINDOW, RELOAD_AFTER, JOB_POLICY,
    }  # fmt: skip
    for key in sorted(set(pa) & workload_only):
        out.append(_finding("KR014", d, (*pa_path, key),
            f"{ref}: {key} is read only from the workload's own metadata; on the pod template it is ignored",
            f"move {key} to metadata.annotations (kube-reloader lint --fix does it)", ref,
            moves=((key, (*pa_path, key), META_ANNOTATIONS),)))  # fmt: skip
    if keys.pause_period in wa and kind != "Deployment":
        out.append(_finding("KR009", d, (*META_ANNOTATIONS, keys.pause_period),
            f"{ref}: the pause period applies to Deployments only; on a {kind} it is ignored", "remove it", ref))  # fmt: skip
    return out


def _policies(d: Document, key: ObjectKey, wa: Mapping[str, str], template: Mapping[str, Any],
              tpath: Path, ref: str) -> list[Finding]:  # fmt: skip
    """The pod-level strategy (KR009), what in-place reloads need (KR015), and the fleet rules:
    window, order, Job policy (KR009)."""
    policy, problems = evicting.policy_of(key.kind, wa)
    out = [_finding("KR009", d, (*META_ANNOTATIONS, POD_STRATEGY), f"{ref}: {text}",
                    "see kube-reloader.io/strategy in docs/strategies.md", ref)
           for text in problems]  # fmt: skip
    for at, text, fix, error in inplacelint.check(policy, template, tpath):
        out.append(_finding("KR015", d, at, f"{ref}: {text}", fix, ref,
                            None if error else Severity.WARNING))  # fmt: skip
    for text in scheduling.rules_of(key, wa, {})[1]:
        out.append(_finding("KR009", d, META_ANNOTATIONS, f"{ref}: {text}",
                            "see docs/fleet.md (fleet-safe rotations)", ref))  # fmt: skip
    return out


def _values(d: Document, keys: Keys, src: Mapping[str, str], path_base: Path, ref: str
            ) -> list[Finding]:  # fmt: skip
    """Values Reloader does not read as written (KR009), auto with search (KR010)."""
    out = []
    for key in (keys.auto, keys.configmap_auto, keys.secret_auto, keys.spc_auto):
        value = src.get(key)
        if value is not None and value not in ("true", "false"):
            meaning = "true" if value in ("1", "t", "T", "TRUE", "True") else "false"
            out.append(_finding("KR009", d, (*path_base, key),
                f"{ref}: {key}={value!r} is read as {meaning} (Go's ParseBool) by Reloader v1 and as false by v2",
                'use "true" or "false"', ref))  # fmt: skip
    value = src.get(keys.search)
    if value is not None and value not in ("true", "false"):
        out.append(_finding("KR009", d, (*path_base, keys.search),
            f"{ref}: {keys.search}={value!r} counts only when exactly \"true\"; this value disables search",
            'use "true"', ref))  # fmt: skip
    auto_on = any(src.get(k) == "true" for k in (keys.auto, keys.configmap_auto, keys.secret_auto))
    if auto_on and src.get(keys.search) == "true":
        out.append(_finding("KR010", d, (*path_base, keys.search),
            f"{ref}: auto reloads on every referenced resource, so search + match adds nothing and hides intent",
            "keep either auto or search", ref))  # fmt: skip
    return out


Decided = list[tuple[ResourceType, str, Any]]


def _ignored_references(d: Document, keys: Keys, ns: str, decided: Decided,
                        ignored: Mapping[tuple[str, str, str], str], ref: str) -> list[Finding]:  # fmt: skip
    """KR012: a resource marked ignore that the workload's annotations ask to reload on."""
    return [_finding("KR012", d, META_ANNOTATIONS,
                f"{ref}: {rtype.kind} {rname!r} is marked {keys.ignore}=\"true\", so changes to it never reload "
                "this workload although its annotations ask for it", f"remove {keys.ignore} from {rname}", ref)
            for rtype, rname, decision in decided
            if (rtype.value, ns, rname) in ignored and decision.reload]  # fmt: skip


def _tls_unreloaded(d: Document, ns: str, decided: Decided, tls: set[tuple[str, str]], ref: str
                    ) -> list[Finding]:  # fmt: skip
    """KR004: a TLS Secret the workload uses that nothing reloads."""
    return [_finding("KR004", d, ("metadata", "name"),
                f"{ref} uses TLS Secret {rname!r} but no annotation reloads it: when the certificate is renewed "
                "the pods keep serving the old one", f'add secret.reloader.stakater.com/reload: "{rname}" to metadata.annotations',
                ref)
            for rtype, rname, decision in decided
            if rtype is ResourceType.SECRET and (ns, rname) in tls and not decision.reload]  # fmt: skip


def _owned(d: Document, kind: str, m: Mapping[str, Any], ref: str) -> list[Finding]:
    """KR013: a workload controlled by another controller (the first such owner)."""
    for owner in pt.mappings(m.get("ownerReferences")):
        if owner.get("controller") and owner.get("kind") not in CORE_OWNERS:
            return [_finding("KR013", d, ("metadata", "ownerReferences"),
                f"{ref} is controlled by {owner.get('kind')} {owner.get('name')!r}; edits to it (including reload "
                "annotations) may be reverted by that controller",
                f"set the reload annotations through the {owner.get('kind')}'s own spec or patch mechanism"
                + (", or reload its pods instead (kube-reloader.io/strategy: evict)"
                   if kind in evicting.EVICTABLE_KINDS else ""), ref)]  # fmt: skip
    return []
