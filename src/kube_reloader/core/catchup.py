"""The start-up catch-up's rule: did a workload miss a change of a ConfigMap or Secret while
nobody watched (at start, or on winning the lease)?

Level-based, from what the workload carries and from write times alone, so that a restarted
controller decides as the one before it would have, and a restart never rolls a workload
that is current. The controller's catch-up (`runtime.resyncing`) and `explain`'s "at
controller start" (`explaining`) both ask `due_at_start`.

Times have whole seconds, and when they are all there is, doubt rolls: a pod created in the
second of a config's last write counts as older (one restart too many, never a pod left on
older content). A config created after its workload and never written since is caught up
too: its creation and a write in the same second cannot be told apart
(docs/known-limits.md).
"""

from __future__ import annotations

from kube_reloader.core import strategies
from kube_reloader.core.planning import Outcome, Plan, Workload


def carried(plan: Plan, workload: Workload, strategy: strategies.Strategy) -> str | None:
    """The hash this workload carries for the plan's resource, or None if it carries none."""
    change = plan.change
    if strategy is strategies.Strategy.ENV_VARS:
        if plan.target is None or plan.target.container is None or plan.env_name is None:
            return None
        found = workload.template.container(plan.target.container)
        return None if found is None else found[1].env_value(plan.env_name)
    return strategies.records(workload.template).get(
        strategies.record_key(change.rtype, change.name)
    )


def due_at_start(
    *,
    plan: Plan,
    carried_hash: str | None,
    config_changed_at: float | None,
    template_changed_at: float | None,
) -> tuple[bool, str]:
    """The catch-up's decision for one (resource, workload) pair, and why. A workload reloaded
    at the pod level (evict, restart-in-place, signal) carries nothing in its template: its
    rotation compares its pods with the content's last write. Any other goes by
    `missed_while_away`."""
    pod_level = plan.outcome is Outcome.RELOAD and plan.mode.pod_level
    if not pod_level or config_changed_at is None:
        return missed_while_away(
            plan=plan,
            carried_hash=carried_hash,
            config_changed_at=config_changed_at,
            template_changed_at=template_changed_at,
        )
    return True, f"{plan.change}: pods older than its last write are replaced"


def missed_while_away(
    *,
    plan: Plan,
    carried_hash: str | None,
    config_changed_at: float | None,
    template_changed_at: float | None,
) -> tuple[bool, str]:
    """Did this resource change while nobody watched, for a workload whose template records
    its reloads?

    Evidence, strongest first: the workload carries an older hash for it (it was reloaded
    before, for older content); or it carries none, and the resource's content was written
    after the workload's pod template last was (its pods started with older content).
    Anything else is left alone: a restart must not roll workloads that are current.
    """
    if plan.outcome is not Outcome.RELOAD:
        return False, plan.message
    what = str(plan.change)
    if carried_hash in (plan.written, plan.change.hash):  # (the object's hash: every key)
        return False, f"{what}: the workload already carries this content"
    if carried_hash is not None and not plan.exact:
        why = "the per-key digests of the keys it reads are not known until its next change"
        return False, f"{what}: {why}; left alone"
    keyed = plan.written != plan.change.hash
    newer = (
        config_changed_at is not None
        and template_changed_at is not None
        and template_changed_at >= config_changed_at
    )
    if keyed and carried_hash is not None and newer:  # e.g. it now reads one more key
        return False, f"{what}: the pod template is newer than its last write; current"
    if carried_hash is not None:
        return True, f"{what} changed while kube-reloader was not watching (carried {carried_hash})"
    if config_changed_at is None or template_changed_at is None:
        return False, f"{what}: no record and no timestamps to compare; left alone"
    if config_changed_at > template_changed_at:
        return True, f"{what} was written after the pod template; its pods have older content"
    return False, f"{what} is older than the pod template; its pods already have this content"
