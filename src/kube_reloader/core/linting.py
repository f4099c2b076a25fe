"""`kube-reloader lint`: the mistakes that make Reloader silently do nothing, found before they
ship. Every rule reuses the controller's own logic (`annotations`, `references`, `matching`,
`regexes`), so lint and the controller can never disagree about what will happen.

Input is a list of documents (plain data, each with a way to find the line of any path in it);
output is a list of `Finding`s carrying a rule id, a severity, a message that says what will
happen at runtime, and the fix. The rules live by group: the annotation keys and where they
are written (`lintkeys`), their values (`lintvalues`), the named lists (`lintnames`); the
resources a workload uses and its owner are here. The vocabulary is `lintrules`'.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kube_reloader.core import kindtraits, lintkeys, lintnames, lintvalues
from kube_reloader.core import podtemplates as pt
from kube_reloader.core.annotations import (
    CRONJOB_INSTANTIATE,
    LAST_RELOADED_FROM,
    RELOADED_HASHES,
    ROLLOUT_STRATEGY,
    Keys,
)
from kube_reloader.core.kindtraits import traits
from kube_reloader.core.lintrules import (
    META_ANNOTATIONS,
    RULES,
    Document,
    Finding,
    Path,
    Rule,
    Severity,
    finding,
)
from kube_reloader.core.matching import Decision, MatchConfig, decide
from kube_reloader.core.objects import ObjectKey, ResourceType
from kube_reloader.core.references import pod_template_from_manifest

__all__ = ["RULES", "Document", "Finding", "Path", "Rule", "Severity", "lint"]

#: lint reads the built-in workload kinds only (a custom kind's spec.template may be no pod's)
WORKLOAD_KINDS = frozenset(kindtraits.BUILTIN)
CORE_OWNERS = {"Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job", "CronJob"}
Resource = tuple[str, str, str]
Decided = list[tuple[ResourceType, str, Decision]]


def _known_keys(keys: Keys) -> set[str]:
    ours = {LAST_RELOADED_FROM, ROLLOUT_STRATEGY, RELOADED_HASHES, CRONJOB_INSTANTIATE}
    return set(keys.workload_keys()) | keys.resource_keys() | ours


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def lint(
    documents: Sequence[Document],
    *,
    config: MatchConfig | None = None,
    cluster_resources: set[Resource] | None = None,
) -> list[Finding]:
    """Run every rule. `cluster_resources` ((type, namespace, name)) adds live ConfigMaps and
    Secrets to those found in the input, for the missing-resource rule."""
    config = config or MatchConfig()
    keys = config.keys
    known = _known_keys(keys)
    out: list[Finding] = []
    objects = [d for d in documents if isinstance(d.obj, dict) and _is_object(d.obj)]
    values_files = [d for d in documents if isinstance(d.obj, dict) and not _is_object(d.obj)]
    # what the input (and cluster) contains
    present: set[Resource] = set(cluster_resources or ())
    tls: set[tuple[str, str]] = set()
    ignored: dict[Resource, str] = {}
    for d in objects:
        _inventory(d, keys, present, tls, ignored)
    for d in objects:
        out += _lint_object(d, keys, known, config, present, tls, ignored)
    for d in values_files:
        out += lintkeys.values_file(d, known)
    return sorted(out, key=lambda f: (f.source, f.line, f.rule))


def _is_object(obj: Mapping[str, Any]) -> bool:
    """A Kubernetes object (else a Helm values file)."""
    return bool(obj.get("kind") and obj.get("apiVersion"))


def _inventory(
    d: Document,
    keys: Keys,
    present: set[Resource],
    tls: set[tuple[str, str]],
    ignored: dict[Resource, str],
) -> None:
    """What `d` adds to the ConfigMaps and Secrets present, the TLS Secrets (cert-manager's
    Certificates create theirs) and the resources marked ignore."""
    o, m = d.obj, _meta(d.obj)
    ns = str(m.get("namespace") or "default")
    if o["kind"] in ("ConfigMap", "Secret"):
        rtype = "CONFIGMAP" if o["kind"] == "ConfigMap" else "SECRET"
        present.add((rtype, ns, str(m.get("name"))))
        if o["kind"] == "Secret" and o.get("type") == "kubernetes.io/tls":
            tls.add((ns, str(m.get("name"))))
        if pt.mapping(m.get("annotations")).get(keys.ignore) == "true":
            ignored[(rtype, ns, str(m.get("name")))] = d.source
    if o["kind"] == "Certificate" and str(o.get("apiVersion", "")).startswith("cert-manager.io/"):
        name = (o.get("spec") or {}).get("secretName")
        if name:
            tls.add((ns, str(name)))
            present.add(("SECRET", ns, str(name)))  # cert-manager creates it


def _lint_object(
    d: Document,
    keys: Keys,
    known: set[str],
    config: MatchConfig,
    present: set[Resource],
    tls: set[tuple[str, str]],
    ignored: dict[Resource, str],
) -> list[Finding]:
    o = d.obj
    kind = str(o.get("kind"))
    m = _meta(o)
    ns = str(m.get("namespace") or "default")
    name = str(m.get("name") or "")
    ref = f"{kind} {ns}/{name}"
    wa = {str(k): str(v) for k, v in pt.mapping(m.get("annotations")).items()}
    out = lintkeys.unknown_keys(d, META_ANNOTATIONS, wa, known, ref)
    if kind not in WORKLOAD_KINDS:
        return out + lintkeys.never_reloaded(d, kind, wa, keys, ref)
    tpath = pt.template_path(kind)
    template = pt.template_of(o)
    tmpl = pod_template_from_manifest(template)
    pa = {str(k): str(v) for k, v in pt.template_annotations(template).items()}
    pa_path = (*tpath, "metadata", "annotations")
    out += lintkeys.unknown_keys(d, pa_path, pa, known, ref)
    out += lintkeys.placement(d, keys, kind, wa, pa, pa_path, ref)
    out += lintvalues.policies(d, ObjectKey(kind, ns, name), wa, template, tpath, ref)
    for src, base in ((wa, META_ANNOTATIONS), (pa, pa_path)):
        out += lintvalues.values(d, keys, src, base, ref)
        issues = lintnames.named_lists(
            src, base, ref, ns, keys, tmpl.references(), present, ignored
        )
        out += [finding(rule, d, at, text, fix, ref) for rule, at, text, fix in issues]
    concerned = [
        (rtype, rname)
        for rtype, rname in sorted(tmpl.references(), key=lambda r: (r[0].value, r[1]))
        if (rtype.value, ns, rname) in ignored
        or (rtype is ResourceType.SECRET and (ns, rname) in tls)
    ]
    decided = [(t, n, _decide(t, n, kind, wa, pa, config)) for t, n in concerned]
    out += _ignored_references(d, keys, ns, decided, ignored, ref)
    out += _tls_unreloaded(d, ns, decided, tls, ref)
    return out + _owned(d, kind, m, ref)


def _decide(
    rtype: ResourceType,
    name: str,
    kind: str,
    wa: Mapping[str, str],
    pa: Mapping[str, str],
    config: MatchConfig,
) -> Decision:
    """The controller's decision for a change of resource `name` (whatever its annotations)."""
    return decide(
        rtype=rtype,
        name=name,
        resource_annotations={},
        kind=kind,
        workload_annotations=wa,
        template_annotations=pa,
        config=config,
    )


def _ignored_references(
    d: Document,
    keys: Keys,
    ns: str,
    decided: Decided,
    ignored: Mapping[Resource, str],
    ref: str,
) -> list[Finding]:
    """KR012: a resource marked ignore that the workload's annotations ask to reload on."""
    out = []
    for rtype, rname, decision in decided:
        if (rtype.value, ns, rname) in ignored and decision.reload:
            text = (
                f'{ref}: {rtype.kind} {rname!r} is marked {keys.ignore}="true", so changes '
                "to it never reload this workload although its annotations ask for it"
            )
            fix = f"remove {keys.ignore} from {rname}"
            out.append(finding("KR012", d, META_ANNOTATIONS, text, fix, ref))
    return out


def _tls_unreloaded(
    d: Document, ns: str, decided: Decided, tls: set[tuple[str, str]], ref: str
) -> list[Finding]:
    """KR004: a TLS Secret the workload uses that nothing reloads."""
    out = []
    for rtype, rname, decision in decided:
        if rtype is ResourceType.SECRET and (ns, rname) in tls and not decision.reload:
            text = (
                f"{ref} uses TLS Secret {rname!r} but no annotation reloads it: when the "
                "certificate is renewed the pods keep serving the old one"
            )
            fix = f'add secret.reloader.stakater.com/reload: "{rname}" to metadata.annotations'
            out.append(finding("KR004", d, ("metadata", "name"), text, fix, ref))
    return out


def _owned(d: Document, kind: str, m: Mapping[str, Any], ref: str) -> list[Finding]:
    """KR013: a workload controlled by another controller (the first such owner)."""
    for owner in pt.mappings(m.get("ownerReferences")):
        if owner.get("controller") and owner.get("kind") not in CORE_OWNERS:
            what = owner.get("kind")
            text = (
                f"{ref} is controlled by {what} {owner.get('name')!r}; edits to it "
                "(including reload annotations) may be reverted by that controller"
            )
            fix = f"set the reload annotations through the {what}'s own spec or patch mechanism"
            if traits(kind).evictable:
                fix += ", or reload its pods instead (kube-reloader.io/strategy: evict)"
            return [finding("KR013", d, ("metadata", "ownerReferences"), text, fix, ref)]
    return []
