"""`kube-reloader explain`: why a workload would (or would not) reload, as a value.

The same rules the controller runs — `references`, `matching`, `planning`, `pausing` — applied
to one workload and the resources it references, with every step's reason kept: which
annotations are in effect and where they were read from, which are shadowed, each reference
with its container and field, each resource's decision, and whether the workload is stale.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from kube_reloader.core import pausing, planning
from kube_reloader.core.objects import ResourceType, WorkloadKind

TYPES = (ResourceType.CONFIGMAP, ResourceType.SECRET)


@dataclass(frozen=True, slots=True)
class Reference:
    rtype: str
    name: str
    container: str
    field: str


@dataclass(frozen=True, slots=True)
class ResourceVerdict:
    rtype: str
    name: str
    exists: bool
    reload: bool
    outcome: str
    reason: str
    target_container: str | None = None
    env_name: str | None = None
    current_hash: str | None = None
    carried_hash: str | None = None
    stale: bool | None = None
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class AnnotationSource:
    rtype: str
    read_from: str
    keys: dict[str, str]
    shadowed: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Explanation:
    kind: str
    namespace: str
    name: str
    annotations: tuple[AnnotationSource, ...]
    references: tuple[Reference, ...]
    verdicts: tuple[ResourceVerdict, ...]
    pause: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def references_with_fields(template: Mapping[str, Any]) -> list[Reference]:
    """Every reference, with the container and the field it comes through."""
    spec = (template or {}).get("spec") or {}
    out: list[Reference] = []
    volumes = {v.get("name"): v for v in spec.get("volumes") or ()}
    groups = (("containers", ""), ("initContainers", "init container "))
    for group, prefix in groups:
        for c in spec.get(group) or ():
            cname = f"{prefix}{c.get('name')}"
            for m in c.get("volumeMounts") or ():
                vol = volumes.get(m.get("name")) or {}
                path = f"volumeMounts[{m.get('name')}] -> volume"
                if (vol.get("configMap") or {}).get("name"):
                    out.append(
                        Reference("CONFIGMAP", vol["configMap"]["name"], cname, f"{path}.configMap")
                    )
                if (vol.get("secret") or {}).get("secretName"):
                    out.append(
                        Reference("SECRET", vol["secret"]["secretName"], cname, f"{path}.secret")
                    )
                for src in (vol.get("projected") or {}).get("sources") or ():
                    if (src.get("configMap") or {}).get("name"):
                        out.append(
                            Reference(
                                "CONFIGMAP", src["configMap"]["name"], cname, f"{path}.projected"
                            )
                        )
                    if (src.get("secret") or {}).get("name"):
                        out.append(
                            Reference("SECRET", src["secret"]["name"], cname, f"{path}.projected")
                        )
            for e in c.get("env") or ():
                vf = e.get("valueFrom") or {}
                if (vf.get("configMapKeyRef") or {}).get("name"):
                    out.append(
                        Reference(
                            "CONFIGMAP",
                            vf["configMapKeyRef"]["name"],
                            cname,
                            f"env[{e.get('name')}].valueFrom.configMapKeyRef",
                        )
                    )
                if (vf.get("secretKeyRef") or {}).get("name"):
                    out.append(
                        Reference(
                            "SECRET",
                            vf["secretKeyRef"]["name"],
                            cname,
                            f"env[{e.get('name')}].valueFrom.secretKeyRef",
                        )
                    )
            for e in c.get("envFrom") or ():
                if (e.get("configMapRef") or {}).get("name"):
                    out.append(
                        Reference(
                            "CONFIGMAP", e["configMapRef"]["name"], cname, "envFrom.configMapRef"
                        )
                    )
                if (e.get("secretRef") or {}).get("name"):
                    out.append(
                        Reference("SECRET", e["secretRef"]["name"], cname, "envFrom.secretRef")
                    )
    mounted = {
        m.get("name") for c in spec.get("containers") or () for m in c.get("volumeMounts") or ()
    }
    mounted |= {
        m.get("name") for c in spec.get("initContainers") or () for m in c.get("volumeMounts") or ()
    }
    for vname, vol in volumes.items():
        if vname in mounted:
            continue
        if (vol.get("configMap") or {}).get("name"):
            out.append(
                Reference(
                    "CONFIGMAP", vol["configMap"]["name"], "(none)", f"volume {vname} (not mounted)"
                )
            )
        if (vol.get("secret") or {}).get("secretName"):
            out.append(
                Reference(
                    "SECRET", vol["secret"]["secretName"], "(none)", f"volume {vname} (not mounted)"
                )
            )
    return out


def explain(
    *,
    workload: Mapping[str, Any],
    resources: Mapping[tuple[ResourceType, str], tuple[str, Mapping[str, str]] | None],
    config: planning.Config,
    now: float,
    only: tuple[ResourceType, str] | None = None,
) -> Explanation:
    """`resources` maps (type, name) to (current hash, annotations), or None if it does not
    exist; it should hold every referenced resource (and, for named lists, the namespace's)."""
    w = planning.workload_from_manifest(workload)
    keys = config.match.keys
    sources = []
    for rtype in TYPES:
        triggers = keys.trigger_keys(rtype)
        on_wa = {k: w.annotations[k] for k in triggers if k in w.annotations}
        on_pa = {k: w.template.annotations[k] for k in triggers if k in w.template.annotations}
        if on_wa:
            sources.append(AnnotationSource(rtype.value, "workload metadata", on_wa, on_pa))
        elif on_pa:
            sources.append(AnnotationSource(rtype.value, "pod template (fallback)", on_pa))
        else:
            sources.append(AnnotationSource(rtype.value, "none", {}))
    template = _template_of(workload)
    refs = references_with_fields(template)
    referenced = {(ResourceType(r.rtype), r.name) for r in refs}
    named = {key for key in resources if _named(w, key[0], config)}
    wanted = [only] if only else sorted(referenced | named)
    verdicts = []
    for rtype, name in wanted:
        found = resources.get((rtype, name))
        current, anns = found if found is not None else ("", {})
        change = planning.Change(
            rtype, w.namespace, name, current, planning.Event.UPDATED, dict(anns)
        )
        p = planning.plan(change=change, workload=w, config=config, now=int(now))
        carried = planning.carried(p, w, config.strategy) if p.target else None
        stale = None
        if found is not None and p.decision.reload and p.target and p.target.container:
            stale = carried is not None and carried != current
        reason = p.message
        if rtype is ResourceType.SECRET:
            # a Secret's unsalted hash can give a short value away: show a prefix only
            for full in {h for h in (current, carried) if h}:
                reason = reason.replace(full, secret_hash_prefix(full))
            current = secret_hash_prefix(current) if current else current
            carried = secret_hash_prefix(carried) if carried else carried
        verdicts.append(
            ResourceVerdict(
                rtype=rtype.value,
                name=name,
                exists=found is not None,
                reload=p.outcome in (planning.Outcome.RELOAD, planning.Outcome.UP_TO_DATE),
                outcome=p.outcome.value,
                reason=reason,
                target_container=p.target.container if p.target else None,
                env_name=p.env_name,
                current_hash=current or None,
                carried_hash=carried,
                stale=stale,
                warnings=p.decision.warnings,
            )
        )
    return Explanation(
        kind=w.kind.value, namespace=w.namespace, name=w.name, annotations=tuple(sources),
        references=tuple(refs), verdicts=tuple(verdicts), pause=_pause(workload, w, config, now),
    )  # fmt: skip


def secret_hash_prefix(digest: str) -> str:
    """The first 8 hex digits of a Secret's hash, enough to tell stale from current."""
    return digest[:8] + "..."


def _named(w: planning.Workload, rtype: ResourceType, config: planning.Config) -> bool:
    key = config.match.keys.named(rtype)
    return key in w.annotations or key in w.template.annotations


def _template_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec") or {}
    if obj.get("kind") == WorkloadKind.CRONJOB.value:
        return ((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}
    return spec.get("template") or {}


def _pause(
    obj: Mapping[str, Any], w: planning.Workload, config: planning.Config, now: float
) -> str:
    keys = config.match.keys
    if w.kind is not WorkloadKind.DEPLOYMENT or keys.pause_period not in w.annotations:
        return "no pause period"
    paused = bool((obj.get("spec") or {}).get("paused"))
    due, when = pausing.resume_due(
        annotations=dict(w.annotations), paused=paused, now=dt.datetime.fromtimestamp(now, dt.UTC),
        period_key=keys.pause_period, paused_at_key=keys.paused_at,
    )  # fmt: skip
    period = w.annotations[keys.pause_period]
    if when is None:
        return f"pause period {period}; " + ("paused by someone else" if paused else "not paused")
    return f"paused by kube-reloader; resumes at {pausing.format_time(when)}" + (
        " (due now)" if due else ""
    )


def render_text(e: Explanation) -> str:
    lines = [f"{e.kind} {e.namespace}/{e.name}", "", "Annotations in effect:"]
    for src in e.annotations:
        found = ", ".join(f"{k}={val!r}" for k, val in src.keys.items()) or "-"
        lines.append(f"  {src.rtype:<10} read from {src.read_from}: {found}")
        for k, val in src.shadowed.items():
            lines.append(f"  {'':<10} SHADOWED on the pod template (never read): {k}={val!r}")
    lines += ["", "References:"]
    lines += [
        f"  {r.rtype:<10} {r.name:<30} container {r.container}, {r.field}" for r in e.references
    ] or ["  (none)"]
    lines += ["", "Decisions:"]
    for v in e.verdicts:
        head = {
            "reload": "RELOAD NOW (the workload does not carry the current content)",
            "up_to_date": "reloads on change; up to date now",
        }.get(v.outcome, "never reloads")
        lines.append(f"  {v.rtype} {v.name}: {head} [{v.outcome}]")
        lines.append(f"    why: {v.reason}")
        if not v.exists:
            lines.append("    note: this resource does not exist")
        if v.env_name and v.reload:
            state = "stale" if v.stale else ("current" if v.carried_hash else "no hash carried yet")
            lines.append(
                f"    carries {v.env_name}={v.carried_hash or '-'}; "
                f"current {v.current_hash or '-'} ({state})"
            )
        for warning in v.warnings:
            lines.append(f"    warning: {warning}")
    if not e.verdicts:
        lines.append("  (no referenced resource and no named list)")
    lines += ["", f"Pause: {e.pause}"]
    lines.append(
        "Limits: a running controller merges changes arriving within --reload-coalesce-window "
        "(300ms) and reloads a workload at most once per --reload-min-interval (5s); deferrals "
        "show as ReloadDeferred Events and kube_reloader_deferred_total"
    )
    return "\n".join(lines) + "\n"
