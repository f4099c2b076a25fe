"""The one entry point of the core: given a resource change and a workload, what to write and why.

`plan()` chains the decision (`matching`), the target container (`references`) and the
strategy's edit of the pod template (`templateedits`) into a `Plan` whose `outcome` and
`message` explain the result, so the controller, `explain` and `lint` all say the same thing
for the same inputs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import field
from enum import StrEnum
from typing import Any, NamedTuple

from kube_reloader.core import (
    evicting,
    matching,
    podtemplates,
    rollouts,
    scheduling,
    scoping,
    strategies,
    templateedits,
)
from kube_reloader.core.kindtraits import traits
from kube_reloader.core.objects import ObjectKey, ResourceType, parse_workload_kind
from kube_reloader.core.records import record
from kube_reloader.core.references import (
    PodTemplate,
    Target,
    pod_template_from_manifest,
    target_container,
)


class Event(StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    DELETED = "deleted"


class Outcome(StrEnum):
    RELOAD = "reload"  # a patch must be written
    UP_TO_DATE = "up_to_date"  # the workload already carries this hash
    SKIPPED = "skipped"  # the rules say no
    NO_CONTAINER = "no_container"  # matched (auto/search) but nothing references the resource


class Before(NamedTuple):
    """A config's content before a change: its hash and its per-key digests."""

    hash: str
    digests: bytes


@record
class Change:
    """A resource whose content changed (or appeared, or went away)."""

    rtype: ResourceType
    namespace: str
    name: str
    hash: str
    event: Event = Event.UPDATED
    annotations: Mapping[str, str] = field(default_factory=dict)
    #: per-key digests of the content (`core.scoping`), when a `keys` workload reads it
    digests: bytes | None = field(default=None, compare=False)
    #: a TLS Secret (`--reload-tls-secrets`)
    tls: bool = False
    #: the content before this change, when known: a `keys` workload whose consumed keys
    #: are the same in both has nothing to reload
    previous: Before | None = field(default=None, compare=False)

    def since(self, earlier: Change) -> Change:
        """This change, as seen from before `earlier` (both of one resource, coalesced)."""
        if self.previous is earlier.previous:
            return self  # (an unknown earlier content leaves it unknown)
        return dataclasses.replace(self, previous=earlier.previous)

    def __str__(self) -> str:
        return f"{self.rtype.kind} {self.namespace}/{self.name}"


@record
class Workload:
    #: a `WorkloadKind` value for the built-in kinds; any other name is a custom kind whose
    #: pod template is at spec.template
    kind: str
    namespace: str
    name: str
    annotations: Mapping[str, str]
    template: PodTemplate
    uid: str = ""
    #: Deployment `spec.paused`; CronJob `spec.suspend`
    paused: bool = False
    #: kind of the controlling owner (e.g. "CronJob" for a Job a CronJob created)
    owner_kind: str = ""
    #: an Argo Rollout's `spec.workloadRef` Deployment name (its template lives there)
    workload_ref: str = ""
    #: epoch seconds of the last write to the pod template (from managedFields), if known
    template_changed_at: float | None = None
    #: rollout progress (Deployments, StatefulSets, DaemonSets)
    status: rollouts.Status | None = None
    #: the field manager of the last write to the pod template (from managedFields)
    template_manager: str = ""
    #: a Job's running pods (`status.active`), or 1 while it is finishing (its success or
    #: failure recorded, `Complete`/`Failed` not yet)
    active: int = 0
    #: `kind namespace/name`, made once: it is read many times per event and per decision
    #: (a field outside equality and init: `fields()`/`asdict()` list it too)
    key: ObjectKey = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", ObjectKey(str(self.kind), self.namespace, self.name))


@record
class Config:
    match: matching.MatchConfig = field(default_factory=matching.MatchConfig)
    strategy: strategies.Strategy = strategies.Strategy.ENV_VARS
    #: whose wire format is written (`--compat`); both are read
    compat: strategies.Compat = strategies.Compat.V1
    #: `--reload-scope`: the default of `kube-reloader.io/reload-scope`
    scope: scoping.Scope = scoping.Scope.OBJECT
    #: `--default-strategy`: how a workload without `kube-reloader.io/strategy` is reloaded
    default_strategy: evicting.PodStrategy = evicting.PodStrategy.PATCH
    #: the kinds whose pods can be replaced (a registered `--workload-kind` too)
    evictable: frozenset[str] = evicting.EVICTABLE_KINDS


@record
class Plan:
    workload: ObjectKey
    change: Change
    decision: matching.Decision
    outcome: Outcome
    message: str
    target: Target | None = None
    patch_type: strategies.PatchType | None = None
    patch: Any = None
    env_name: str | None = None
    #: the hash this workload records for the change: the content's, or under
    #: `reload-scope: keys` the hash of the keys it consumes
    written: str = ""
    #: False when `written` is the object's hash only because the per-key digests a `keys`
    #: workload needs are not known: a carried hash can then not be compared
    exact: bool = True
    #: how the workload is reloaded, whatever the outcome (`mode_of`)
    mode: evicting.Mode = field(default_factory=evicting.Mode)


def plan(*, change: Change, workload: Workload, config: Config, now: float) -> Plan:
    """Decide and build the patch for one (change, workload) pair. `now` is Unix seconds (v1's
    observedAt keeps the whole ones, v2's reloadedAt the microseconds)."""
    key, mode = workload.key, mode_of(workload, config)
    decision, scope = _decide(change, workload, config)
    refusal = _refusal(decision, workload)
    if refusal is not None:
        return Plan(key, change, decision, Outcome.SKIPPED, refusal, written=change.hash, mode=mode)
    v2 = config.compat is strategies.Compat.V2
    target = _target(change, workload, decision, v2=v2)
    if target.container is None:
        message = f"{decision.message}, but {target.how}"
        outcome = Outcome.NO_CONTAINER
        return Plan(key, change, decision, outcome, message, target, written=change.hash, mode=mode)
    container = target.container
    keys, (written, why, exact) = _value(change, workload, scope)
    if why:
        decision = dataclasses.replace(decision, message=f"{decision.message} ({why})")
    if _keys_unchanged(change, workload.template, config.strategy, container, keys, written):
        message = f"{decision.message}; the keys it consumes did not change"
        return Plan(
            key,
            change,
            decision,
            Outcome.UP_TO_DATE,
            message,
            target,
            written=written,
            exact=exact,
            mode=mode,
        )
    env_name = strategies.env_var_name(change.name, change.rtype)
    content = templateedits.Content(
        change.rtype, change.namespace, change.name, written, change.event is Event.DELETED
    )
    edit = templateedits.edit(
        workload.template, config.strategy, container, content, env_name, v2=v2, now=now
    )
    if edit.body is None:
        message = f"{decision.message}; {edit.done}"
        outcome, patch_type = Outcome.UP_TO_DATE, None
    else:
        message = f"{decision.message}; {edit.todo} ({target.how})"
        outcome, patch_type = Outcome.RELOAD, edit.patch_type
    return Plan(
        key,
        change,
        decision,
        outcome,
        message,
        target,
        patch_type,
        edit.body,
        env_name,
        written,
        exact,
        mode,
    )


def mode_of(workload: Workload, config: Config) -> evicting.Mode:
    """How `workload` is reloaded: its template written, its pods acted on, or not at all (an
    unreadable strategy). The one rule: in every plan, and for what has no plan at hand."""
    evictable = workload.kind in config.evictable
    policy, warnings = evicting.policy_of(
        workload.kind, workload.annotations, config.default_strategy, evictable=evictable
    )
    return evicting.Mode(policy, warnings)


def _decide(
    change: Change, workload: Workload, config: Config
) -> tuple[matching.Decision, scoping.Scope]:
    """The rules' decision for the pair and the workload's reload scope; a warning about the
    scope (a bad annotation, `keys` on a Rollout with workloadRef) joins the decision's."""
    decision = matching.decide(
        rtype=change.rtype,
        name=change.name,
        resource_annotations=change.annotations,
        kind=workload.kind,
        workload_annotations=workload.annotations,
        template_annotations=workload.template.annotations,
        config=config.match,
        resource_tls=change.tls,
    )
    scope, scope_warning = scoping.scope_of(
        workload.annotations, workload.template.annotations, config.scope
    )
    if workload.workload_ref and scope is scoping.Scope.KEYS:  # its template is borrowed
        scope = scoping.Scope.OBJECT
        scope_warning = (
            f"{scoping.SCOPE_ANNOTATION}: keys is not supported for a Rollout "
            "with workloadRef; object used"
        )
    if scope_warning is not None:
        decision = dataclasses.replace(decision, warnings=(*decision.warnings, scope_warning))
    return decision, scope


def _value(
    change: Change, workload: Workload, scope: scoping.Scope
) -> tuple[frozenset[str] | None, tuple[str, str, bool]]:
    """The keys a `keys` workload consumes (None: the object's every key) and what it records
    for the change (`scoping.value_for`)."""
    keys = (
        scoping.consumed_keys(workload.template, change.rtype, change.name)
        if scope is scoping.Scope.KEYS
        else None
    )
    return keys, scoping.value_for(
        keys=keys, object_hash=change.hash, packed=change.digests, scope=scope
    )


def _refusal(decision: matching.Decision, workload: Workload) -> str | None:
    """Why the workload is not reloaded (the rules' no, a suspended CronJob, a CronJob's Job, a
    Job with job-policy: never), or None when it is."""
    if not decision.reload:
        return decision.message
    kind = traits(workload.kind)
    if kind.scheduled and workload.paused:
        return f"{decision.message}, but the CronJob is suspended"
    if kind.job and traits(workload.owner_kind).scheduled:
        return (
            f"{decision.message}, but this Job was created by a CronJob: the CronJob is "
            "reloaded instead of re-running its past Jobs"
        )
    if kind.job:
        policy, _ = scheduling.job_policy(workload.annotations)
        if policy is scheduling.JobPolicy.NEVER:
            return f"{decision.message}, but the Job says job-policy: never"
    return None


def _target(change: Change, workload: Workload, decision: matching.Decision, *, v2: bool) -> Target:
    """The container the reload is for (under v2, a named reload is the first container's)."""
    target = target_container(workload.template, change.rtype, change.name, auto=decision.auto)
    if v2 and not decision.auto and workload.template.containers:
        first = workload.template.containers[0].name  # v2: a named reload is the first's
        target = Target(first, "named in a reload annotation; first container (v2)")
    return target


def _keys_unchanged(
    change: Change,
    tmpl: PodTemplate,
    strategy: strategies.Strategy,
    container: str,
    keys: frozenset[str] | None,
    written: str,
) -> bool:
    """Whether a `keys` workload has nothing to reload: the keys it consumes hash the same
    before and after this update, and it carries the hash of before (or none)."""
    before = change.previous
    if written == change.hash or keys is None or before is None:
        return False
    if before.digests == scoping.OVERFLOW or change.event is not Event.UPDATED:
        return False
    held = strategies.carried_value(tmpl, strategy, container, change.rtype, change.name)
    same = scoping.scoped_hash(before.digests, keys) == written
    return same and held in (None, before.hash)  # it missed nothing before this change


def combine(plans: list[Plan]) -> list[tuple[strategies.PatchType, Any]]:
    """The writes for several reloading plans of one workload: all strategic-merge bodies
    become one patch (one rollout); JSON patches (env removal on delete) stay separate,
    applied one at a time because each one's indexes refer to the object before it."""
    strategic = [
        p.patch
        for p in plans
        if p.outcome is Outcome.RELOAD and p.patch_type is strategies.PatchType.STRATEGIC
    ]
    out: list[tuple[strategies.PatchType, Any]] = []
    if strategic:
        out.append((strategies.PatchType.STRATEGIC, strategies.merge_strategic(strategic)))
    out += [
        (p.patch_type, p.patch)
        for p in plans
        if p.outcome is Outcome.RELOAD and p.patch_type is strategies.PatchType.JSON
    ]
    return out


def workload_from_manifest(obj: Mapping[str, Any]) -> Workload:
    """A workload manifest (any kind: a built-in one, or a custom kind with its pod template at
    spec.template) as a `Workload` value. An object without a usable `kind` raises
    `ValueError` with a one-line reason (`parse_workload_kind` says it without raising)."""
    parsed = parse_workload_kind(obj.get("kind"))
    if parsed.error is not None:
        raise ValueError(parsed.error)
    meta = podtemplates.mapping(obj.get("metadata"))
    return Workload(
        kind=parsed.kind,
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        annotations=dict(meta.get("annotations") or {}),
        template=pod_template_from_manifest(podtemplates.template_of(obj)),
        uid=str(meta.get("uid") or ""),
    )
