"""What each workload kind is, as the rules ask it: one table of per-kind facts (where its pod
template is, whether its pods can be replaced, in which order, whether it runs to completion,
...) for the built-in kinds, and one default for any other kind name (a `--workload-kind`
custom resource with its pod template at `spec.template`). The rules ask `traits(kind).ordered`
instead of comparing kind names; `runtime.kinds` builds its registry on this table.
"""

from __future__ import annotations

from kube_reloader.core.objects import WorkloadKind
from kube_reloader.core.records import record

Path = tuple[str, ...]

#: where a workload keeps its pod template: any kind but CronJob at spec.template
TEMPLATE_PATH: Path = ("spec", "template")
CRONJOB_TEMPLATE_PATH: Path = ("spec", "jobTemplate", "spec", "template")


@record
class KindTraits:
    """The facts about one workload kind that the rules depend on."""

    #: where its pod template is, from the object's root
    template_path: Path = TEMPLATE_PATH
    #: its pods can be replaced (`kube-reloader.io/strategy: evict`, restart-in-place,
    #: signal): its controller re-creates an evicted pod
    evictable: bool = True
    #: its pods are replaced one at a time, the highest ordinal first (StatefulSets)
    ordered: bool = False
    #: its replicas are one per node: a rollout status of 0 replicas has not counted them yet
    #: (DaemonSets)
    per_node: bool = False
    #: its rollout is complete only once its update revision is current (StatefulSets)
    revisions: bool = False
    #: runs to completion: `job-policy` applies, its running pods are counted (Jobs)
    job: bool = False
    #: creates Jobs from its template on a schedule: a reload triggers one (no hash stays on
    #: its template), `spec.suspend` stops it (a suspended one is not reloaded), and the Jobs
    #: it created are not reloaded themselves (CronJobs)
    scheduled: bool = False
    #: honours the pause-period annotation through `spec.paused` (Deployments)
    pausable: bool = False
    #: keeps its pods running and rolls them when its template changes: its rollout is
    #: followed (a write holds a slot until it finishes), its pods are told apart by their
    #: owners, and the staleness audit looks at them
    long_running: bool = False
    #: a reload is a template write that stays, at a generation its cached state tells: a
    #: revert of it is looked for
    reverts_watched: bool = False
    #: an Argo Rollout's `spec.workloadRef` may borrow its pod template (Deployments)
    lends_template: bool = False

    @property
    def catch_up(self) -> bool:
        """The start-up catch-up reloads what it missed (not Jobs and CronJobs: their next
        run reads the current content anyway)."""
        return not (self.job or self.scheduled)

    @property
    def pause_field(self) -> str:
        """The spec field that pauses it: `suspend` (CronJobs) or `paused`."""
        return "suspend" if self.scheduled else "paused"


BUILTIN: dict[str, KindTraits] = {
    WorkloadKind.DEPLOYMENT: KindTraits(
        long_running=True, reverts_watched=True, pausable=True, lends_template=True
    ),
    WorkloadKind.DAEMONSET: KindTraits(long_running=True, reverts_watched=True, per_node=True),
    WorkloadKind.STATEFULSET: KindTraits(
        long_running=True, reverts_watched=True, ordered=True, revisions=True
    ),
    WorkloadKind.CRONJOB: KindTraits(
        template_path=CRONJOB_TEMPLATE_PATH, evictable=False, scheduled=True
    ),
    WorkloadKind.JOB: KindTraits(evictable=False, job=True),
    WorkloadKind.ROLLOUT: KindTraits(evictable=False, long_running=True),
    WorkloadKind.DEPLOYMENTCONFIG: KindTraits(evictable=False),
}
#: any other kind name: a `--workload-kind` custom resource (its pods replaceable)
CUSTOM = KindTraits()
#: the built-in kinds whose pods can be replaced
EVICTABLE = frozenset(kind for kind, t in BUILTIN.items() if t.evictable)


def traits(kind: str) -> KindTraits:
    """The traits of a kind name: a built-in kind's, else the custom kinds' default."""
    return BUILTIN.get(kind, CUSTOM)
