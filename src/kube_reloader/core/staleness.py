"""Staleness: workloads whose running pods started before the last content change of a
ConfigMap or Secret they consume, and that no rule will reload.

The rules are the controller's own: each consumed resource is planned with `planning.plan`
and the controller's `planning.Config` (so `--auto-reload-all`, renamed annotation keys and
every later rule count here as they count there). A pair the rules reload (or already
carry) is not stale: it is, or was, reloaded. What the controller does not watch at all (an
ignored namespace, an ignored resource type, a resource outside `--resource-label-selector`
or `--namespace-selector`) is said by the caller with `Consumed.unwatched`.

Pods are given as start times: per pod, the start of its oldest running container (env
values are resolved at container start), else the pod's `status.startTime`; ended pods
(Failed, Succeeded) and terminating ones are left out by the caller.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import field
from enum import StrEnum

from kube_reloader.core import matching, planning, references
from kube_reloader.core.annotations import Keys, shadowed_template_keys
from kube_reloader.core.objects import ObjectKey, ResourceType
from kube_reloader.core.records import record
from kube_reloader.core.x509 import Validity, iso

#: a pod that started less than this long before the change counts as current: the kubelet's
#: and the API server's clocks may be a little apart, and both times are whole seconds
MARGIN = 2.0


class Reason(StrEnum):
    """Why no rule reloads the workload (a label value and part of every finding)."""

    NO_ANNOTATION = "no_annotation"
    POD_TEMPLATE_ANNOTATION = "pod_template_annotation"
    IGNORED = "ignored"
    EXCLUDED = "excluded"
    SKIPPED = "skipped"


@record
class Unwatched:
    """The controller never sees this resource: why, as a reason and one line."""

    reason: Reason
    message: str


@record
class Consumed:
    """A ConfigMap or Secret a workload's pod template references, as it is now."""

    rtype: ResourceType
    name: str
    #: epoch seconds of the last write to its content (managedFields; else its creation)
    changed_at: float | None
    annotations: Mapping[str, str] = field(default_factory=dict)
    #: a TLS Secret (type kubernetes.io/tls, or cert-manager's annotation)
    tls: bool = False
    #: its current certificate's validity (TLS Secrets whose tls.crt could be read)
    validity: Validity | None = None
    unwatched: Unwatched | None = None


@record
class Finding:
    workload: ObjectKey
    rtype: ResourceType
    name: str
    reason: Reason
    message: str
    changed_at: float
    #: the earliest start among the workload's live pods, and how many started before
    oldest_pod: float
    pods_before: int
    pods: int
    tls: bool = False
    validity: Validity | None = None

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "namespace": self.workload.namespace,
            "kind": self.workload.kind,
            "name": self.workload.name,
            "resource": f"{self.rtype.kind}/{self.name}",
            "reason": self.reason.value,
            "message": self.message,
            "changedAt": iso(self.changed_at),
            "oldestPodStartedAt": iso(self.oldest_pod),
            "podsBeforeChange": self.pods_before,
            "pods": self.pods,
            "tls": self.tls,
        }
        if self.validity is not None:
            out["certificate"] = self.validity.to_dict()
        return out


def is_tls(secret_type: str, annotations: Mapping[str, str]) -> bool:
    """A TLS Secret, as `--reload-tls-secrets` tells one (`matching.is_tls_secret`)."""
    return matching.is_tls_secret(secret_type, annotations)


def unwatched(
    *,
    namespace: str,
    rtype: ResourceType,
    namespaces: Sequence[str] | None,
    namespaces_to_ignore: Iterable[str],
    resources: Sequence[ResourceType],
    outside_selector: str | None = None,
) -> Unwatched | None:
    """Whether the controller's scope leaves this resource out (None: it is watched).
    `outside_selector` names the selector flag that leaves it out, when one does."""
    if namespace in set(namespaces_to_ignore):
        return Unwatched(Reason.IGNORED, f"namespace {namespace!r} is in --namespaces-to-ignore")
    if namespaces is not None and namespace not in namespaces:
        return Unwatched(Reason.IGNORED, f"namespace {namespace!r} is not in --namespaces")
    if rtype not in resources:
        return Unwatched(Reason.IGNORED, f"{rtype.kind}s are in --resources-to-ignore")
    if outside_selector:
        return Unwatched(Reason.EXCLUDED, f"the {rtype.kind} does not match {outside_selector}")
    return None


def _why(plan: planning.Plan, workload: planning.Workload, keys: Keys) -> Reason:
    reason = plan.decision.reason
    if plan.outcome is planning.Outcome.SKIPPED and plan.decision.reload:
        return Reason.SKIPPED  # matched, but a suspended CronJob, a Job's job-policy...
    if reason in (matching.Reason.RESOURCE_IGNORED, matching.Reason.WORKLOAD_TYPE_IGNORED):
        return Reason.IGNORED
    if reason is matching.Reason.EXCLUDED:
        return Reason.EXCLUDED
    if plan.change.tls and "opts out of --reload-tls-secrets" in plan.decision.message:
        return Reason.IGNORED  # the workload says no (auto "false", kube-reloader.io/ignore-tls)
    shadowed = shadowed_template_keys(workload.annotations, workload.template.annotations, keys)
    if any(k in shadowed for k in keys.trigger_keys(plan.change.rtype)):
        return Reason.POD_TEMPLATE_ANNOTATION
    return Reason.NO_ANNOTATION


@record
class Candidate:
    """A consumed resource with a known change time that no rule will reload for: stale
    when some live pod of the workload started before `consumed.changed_at`."""

    consumed: Consumed
    reason: Reason
    message: str


def unreloaded(
    *,
    workload: planning.Workload,
    consumed: Sequence[Consumed],
    config: planning.Config,
    now: int,
) -> list[Candidate]:
    """The consumed resources (with a known change time) no rule will reload for, and why;
    pods need to be read only for workloads with one."""
    out: list[Candidate] = []
    for c in consumed:
        if c.changed_at is None:
            continue
        target = references.target_container(workload.template, c.rtype, c.name, auto=True)
        if target.container is None:
            continue  # a volume no container mounts, nothing in env: no container reads it
        if c.unwatched is not None:
            out.append(Candidate(c, c.unwatched.reason, c.unwatched.message))
            continue
        change = planning.Change(
            c.rtype, workload.namespace, c.name, "", annotations=c.annotations, tls=c.tls
        )
        p = planning.plan(change=change, workload=workload, config=config, now=now)
        if p.outcome in (planning.Outcome.RELOAD, planning.Outcome.UP_TO_DATE):
            continue  # the rules reload it: reloaded, or about to be
        if p.outcome is planning.Outcome.NO_CONTAINER:
            continue  # referenced by a volume no container mounts: nothing reads it
        out.append(Candidate(c, _why(p, workload, config.match.keys), p.message))
    return out


def judge(
    workload: planning.Workload, candidates: Sequence[Candidate], pod_starts: Sequence[float]
) -> list[Finding]:
    """The candidates some live pod (its start time in `pod_starts`) predates by more than
    `MARGIN` seconds. Nothing while the workload rolls out (`rolling_out`), nor a resource
    that changed at or before the workload's template was last written: its rollout replaces
    the old pods (Helm's checksum annotation changes the config and the template together)."""
    if not pod_starts or rolling_out(workload):
        return []
    oldest = min(pod_starts)
    written = workload.template_changed_at
    out: list[Finding] = []
    for cand in candidates:
        c = cand.consumed
        if c.changed_at is None or oldest >= c.changed_at - MARGIN:
            continue
        if written is not None and written >= c.changed_at:
            continue
        before = sum(1 for t in pod_starts if t < c.changed_at - MARGIN)
        out.append(
            Finding(
                workload.key,
                c.rtype,
                c.name,
                cand.reason,
                cand.message,
                c.changed_at,
                oldest,
                before,
                len(pod_starts),
                c.tls,
                c.validity,
            )
        )
    return out


def rolling_out(workload: planning.Workload) -> bool:
    """Its status shows a rollout in progress: the spec is not yet observed, or fewer pods
    are updated than wanted, or pods of an older template remain."""
    s = workload.status
    if s is None:
        return False
    return s.observed_generation != s.generation or s.updated < s.replicas or s.outdated > 0


def stale(
    *,
    workload: planning.Workload,
    consumed: Sequence[Consumed],
    pod_starts: Sequence[float],
    config: planning.Config,
    now: int,
) -> list[Finding]:
    """The stale (workload, resource) pairs: pods started before the resource's content
    last changed, and the rules (or the controller's scope) will not reload for it."""
    if not pod_starts:
        return []
    found = unreloaded(workload=workload, consumed=consumed, config=config, now=now)
    return judge(workload, found, pod_starts)


def consumed_names(workload: planning.Workload) -> list[tuple[ResourceType, str]]:
    """The ConfigMaps and Secrets the workload's pod template references, in order."""
    return sorted(
        {r for r in workload.template.references() if r[0] is not ResourceType.SECRETPROVIDERCLASS}
    )
