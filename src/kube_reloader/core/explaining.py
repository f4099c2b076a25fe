"""`kube-reloader explain`: why a workload would (or would not) reload, as a value.

The same rules the controller runs — `references`, `matching`, `planning`, `pausing` — applied
to one workload and the resources it references, with every step's reason kept: which
annotations are in effect and where they were read from, which are shadowed, each reference
with its container and field, each resource's decision, and whether the workload is stale.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from dataclasses import asdict, field
from typing import Any, NamedTuple

from kube_reloader.core import catchup, evicting, pausing, planning, scheduling, scoping
from kube_reloader.core import podtemplates as pt
from kube_reloader.core.kindtraits import traits
from kube_reloader.core.matching import carries_named_list
from kube_reloader.core.objects import ResourceType
from kube_reloader.core.records import record
from kube_reloader.core.references import Reference, references_with_fields

TYPES = (ResourceType.CONFIGMAP, ResourceType.SECRET)


class Found(NamedTuple):
    """A resource as `explain` needs it: its hash and annotations; its per-key digests
    (`core.scoping`, for `reload-scope: keys`), whether it is a TLS Secret, and when its
    content was last written (epoch seconds, from managedFields; None: unknown)."""

    hash: str
    annotations: Mapping[str, str]
    digests: bytes | None = None
    tls: bool = False
    changed_at: float | None = None


@record
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
    #: `object` or `keys` (kube-reloader.io/reload-scope, else --reload-scope)
    scope: str = "object"
    #: the keys the workload consumes (None: every key)
    consumed_keys: tuple[str, ...] | None = None
    #: a reload is due now: the controller, starting now, would reload it for this resource
    #: (`catchup.due_at_start`, its own rule: an older hash carried, or none and the
    #: content written after the pod template; reloaded at the pod level, a write time
    #: known); else it reloads on the next change
    due: bool = False
    #: why it is or is not due at controller start, in words
    at_start: str = ""


@record
class AnnotationSource:
    rtype: str
    read_from: str
    keys: dict[str, str]
    shadowed: dict[str, str] = field(default_factory=dict)


@record
class Explanation:
    kind: str
    namespace: str
    name: str
    annotations: tuple[AnnotationSource, ...]
    references: tuple[Reference, ...]
    verdicts: tuple[ResourceVerdict, ...]
    pause: str
    #: how a reload is done: the template written, or the pods replaced
    reload_by: str = ""
    #: when a reload may be written (fleet-safe rotations: window, order, Job policy)
    schedule: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def explain(
    *,
    workload: Mapping[str, Any],
    resources: Mapping[tuple[ResourceType, str], Found | tuple[str, Mapping[str, str]] | None],
    config: planning.Config,
    now: float,
    only: tuple[ResourceType, str] | None = None,
    template_changed_at: float | None = None,
    reconcile_on_start: bool = True,
) -> Explanation:
    """`resources` maps (type, name) to (current hash, annotations), or None if it does not
    exist; it should hold every referenced resource (and, for named lists, the namespace's).
    `template_changed_at` (the last write to the pod template, from managedFields) and each
    resource's `changed_at` are what the controller compares at start, when known."""
    w = planning.workload_from_manifest(workload)
    w = dataclasses.replace(w, template_changed_at=template_changed_at)
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
    refs = references_with_fields(pt.template_of(workload))
    referenced = {(ResourceType(r.rtype), r.name) for r in refs}
    named = {
        key
        for key in resources
        if carries_named_list(keys, key[0], w.annotations, w.template.annotations)
    }
    wanted = [only] if only else sorted(referenced | named)
    verdicts = [
        _verdict(
            w,
            rtype,
            name,
            resources.get((rtype, name)),
            config,
            now,
            reconcile_on_start,
        )
        for rtype, name in wanted
    ]
    return Explanation(
        kind=str(w.kind),
        namespace=w.namespace,
        name=w.name,
        annotations=tuple(sources),
        references=tuple(refs),
        verdicts=tuple(verdicts),
        pause=_pause(workload, w, config, now),
        reload_by=_reload_by(w, config),
        schedule=schedule(w, now),
    )


def _verdict(
    w: planning.Workload,
    rtype: ResourceType,
    name: str,
    raw: Found | tuple[str, Mapping[str, str]] | None,
    config: planning.Config,
    now: float,
    reconcile_on_start: bool = True,
) -> ResourceVerdict:
    """One resource's decision for the workload, as the controller would plan a change of it
    to the content it has now, and whether the controller would reload it at start."""
    found = None if raw is None else Found(*raw)
    got = found if found is not None else Found("", {})
    change = planning.Change(
        rtype,
        w.namespace,
        name,
        got.hash,
        planning.Event.UPDATED,
        dict(got.annotations),
        digests=got.digests,
        tls=got.tls,
    )
    p = planning.plan(change=change, workload=w, config=config, now=int(now))
    current = p.written or got.hash
    scope, _ = scoping.scope_of(w.annotations, w.template.annotations, config.scope)
    consumed = scoping.consumed_keys(w.template, rtype, name)
    carried = catchup.carried(p, w, config.strategy) if p.target else None
    stale = None
    if found is not None and p.decision.reload and p.target and p.target.container:
        stale = carried is not None and carried not in (current, got.hash)
    due, at_start = _at_start(p, w, found, carried, reconcile_on_start)
    reason = p.message
    if rtype is ResourceType.SECRET:
        # a Secret's unsalted hash can give a short value away: show a prefix only
        for full in {h for h in (current, carried, got.hash) if h}:
            reason = reason.replace(full, secret_hash_prefix(full))
            at_start = at_start.replace(full, secret_hash_prefix(full))
        current = secret_hash_prefix(current) if current else current
        carried = secret_hash_prefix(carried) if carried else carried
    return ResourceVerdict(
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
        scope=scope.value,
        consumed_keys=None if consumed is None else tuple(sorted(consumed)),
        due=due,
        at_start=at_start,
    )


def _at_start(
    p: planning.Plan,
    w: planning.Workload,
    found: Found | None,
    carried: str | None,
    reconcile_on_start: bool,
) -> tuple[bool, str]:
    """Would the controller, starting now, reload the workload for this resource? Its own
    rule (`catchup.due_at_start`), with the write times when they are known; the
    reason in words (empty unless the plan is a reload)."""
    if p.outcome is not planning.Outcome.RELOAD:
        return False, ""
    what = str(p.change)
    if found is None:
        return False, f"not due at controller start: {what} does not exist"
    if not reconcile_on_start:
        return False, "not due at controller start: --reconcile-on-start=false catches nothing up"
    due, why = catchup.due_at_start(
        plan=p,
        carried_hash=carried,
        config_changed_at=found.changed_at,
        template_changed_at=w.template_changed_at,
    )
    if due:
        return True, why
    if carried is None and None in (found.changed_at, w.template_changed_at):
        return False, (
            f"at controller start it reloads now only if {what} was written after the pod "
            "template (no write times here to compare)"
        )
    return False, f"not due at controller start: {why}"


def schedule(w: planning.Workload, now: float) -> str:
    """The workload's own fleet-safety rules, in words (its namespace's are not read here:
    `kube-reloader impact` reads them)."""
    rules, warnings = scheduling.rules_of(w.key, w.annotations, {})
    parts = []
    if rules.window is not None:
        state = "open now" if rules.window.is_open(now) else "closed now"
        opens = rules.window.next_open(now)
        if opens is not None and not rules.window.is_open(now):
            when = dt.datetime.fromtimestamp(opens, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            state += f", opens {when}"
        parts.append(f"window {rules.window.source!r} ({state})")
    if rules.after:
        parts.append("after " + ", ".join(f"{k.kind}/{k.name}" for k in rules.after))
    if traits(w.kind).job:
        parts.append(f"job-policy {rules.job_policy.value}")
    parts += [f"warning: {text}" for text in warnings]
    return "; ".join(parts) or "written as soon as planned (no window, order or Job policy)"


def _reload_by(w: planning.Workload, config: planning.Config) -> str:
    mode = planning.mode_of(w, config)
    policy, problems = mode.policy, mode.warnings
    if policy is None:
        return f"not reloaded: {'; '.join(problems)}"
    if policy.strategy is evicting.PodStrategy.PATCH:
        return "patch: the pod template is written (Reloader's way)"
    warn = "".join(f"; warning: {p}" for p in problems)
    if policy.strategy is evicting.PodStrategy.RESTART_IN_PLACE:
        how = (
            "restart-in-place: its pods' containers are restarted in place by the "
            "kube-reloader agent sidecar (same pods, UIDs and IPs; no new ReplicaSet), one "
            "pod at a time, waiting for Ready; pods whose containers started after the "
            "change are skipped"
        )
    elif policy.strategy is evicting.PodStrategy.SIGNAL:
        how = (
            f"signal: the kube-reloader agent sidecar sends {policy.signal} to the "
            "application once the mounted files carry the new content (no restart), one "
            "pod at a time"
        )
    else:
        pace = f"at most {policy.max_unavailable} unavailable"
        if traits(w.kind).ordered:
            pace = "one pod at a time, highest ordinal first"
        pods = f"pods matching {policy.pod_selector!r}" if policy.pod_selector else "its pods"
        how = (
            f"evict: {pods} older than the change are evicted ({pace}; disruption budgets "
            "honoured); the template is never written"
        )
    return how + warn


def secret_hash_prefix(digest: str) -> str:
    """The first 8 hex digits of a Secret's hash, enough to tell stale from current."""
    return digest[:8] + "..."


def _pause(
    obj: Mapping[str, Any], w: planning.Workload, config: planning.Config, now: float
) -> str:
    keys = config.match.keys
    if not traits(w.kind).pausable or keys.pause_period not in w.annotations:
        return "no pause period"
    paused = bool((obj.get("spec") or {}).get("paused"))
    at = dt.datetime.fromtimestamp(now, dt.UTC)
    due, when = pausing.resume_due(
        annotations=w.annotations,
        paused=paused,
        now=at,
        period_key=keys.pause_period,
        paused_at_key=keys.paused_at,
    )
    period = w.annotations[keys.pause_period]
    if when is None:
        return f"pause period {period}; " + ("paused by someone else" if paused else "not paused")
    due_now = " (due now)" if due else ""
    return f"paused by kube-reloader; resumes at {pausing.format_time(when)}{due_now}"


def _head(v: ResourceVerdict) -> str:
    if v.outcome == "up_to_date":
        return "reloads on change; up to date now"
    if v.outcome != "reload":
        return "never reloads"
    if v.due:
        return f"RELOAD DUE NOW (the controller reloads it at start: {v.at_start})"
    return f"reloads on the next change; {v.at_start}"


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
        lines.append(f"  {v.rtype} {v.name}: {_head(v)} [{v.outcome}]")
        lines.append(f"    why: {v.reason}")
        if not v.exists:
            lines.append("    note: this resource does not exist")
        if v.scope == "keys" and v.rtype != ResourceType.SECRETPROVIDERCLASS.value:
            shown = "every key" if v.consumed_keys is None else ", ".join(v.consumed_keys)
            lines.append(f"    reload-scope keys: consumes {shown}")
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
    lines += ["", f"Reload by: {e.reload_by}", f"Schedule: {e.schedule}", f"Pause: {e.pause}"]
    lines.append(
        "Limits: a running controller merges changes arriving within --reload-coalesce-window "
        "(300ms) and reloads a workload at most once per --reload-min-interval (5s); deferrals "
        "show as ReloadDeferred Events and kube_reloader_deferred_total"
    )
    return "\n".join(lines) + "\n"
