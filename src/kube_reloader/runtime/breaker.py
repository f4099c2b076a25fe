"""The circuit breaker (`--halt-after-failures=N`): when N workload rollouts fail with the
same content of one ConfigMap or Secret, reloads for that content stop (the workloads that
still wait for it are held); the resource's next content change lifts the halt, and every
held or failed workload then gets one rollout to the new content.

Failures are level-based where the cluster records them: a workload whose status says its
progress deadline was exceeded, for the generation it runs, whose pod template kube-reloader
wrote last (managedFields), failed with the current content it carries (so a restarted
controller reads them back from the watch). A rollout the
tracker calls stuck (no progress deadline: StatefulSets, DaemonSets) counts from memory."""

from __future__ import annotations

from dataclasses import dataclass, field

from kube_reloader.core import planning, scoping, strategies
from kube_reloader.core.objects import ObjectKey, ResourceType
from kube_reloader.core.planning import Plan
from kube_reloader.core.references import PodTemplate
from kube_reloader.runtime.cache import ConfigEntry
from kube_reloader.runtime.fleetreports import FleetReports
from kube_reloader.runtime.stores import Stores

#: a ConfigMap or Secret: (type, namespace, name)
Resource = tuple[ResourceType, str, str]
#: a resource's content: (resource, hash)
Content = tuple[Resource, str]


def contents(todo: list[Plan]) -> tuple[Content, ...]:
    return tuple(((p.change.rtype, p.change.namespace, p.change.name), p.change.hash) for p in todo)


@dataclass(eq=False, repr=False)  # state, not a value: compared by identity
class Breaker:
    #: failures that halt a content (0: the breaker is off)
    limit: int
    stores: Stores
    fleet: FleetReports
    _failed: dict[Content, set[ObjectKey]] = field(default_factory=dict, init=False)
    _failed_by: dict[ObjectKey, set[Content]] = field(default_factory=dict, init=False)
    #: content the breaker stopped (halted until the resource's content changes)
    halted: dict[Resource, str] = field(default_factory=dict, init=False)

    def holding(self, todo: list[Plan]) -> tuple[str, ...]:
        """The resources of `todo` whose content to write is halted."""
        return tuple(
            str(p.change)
            for p in todo
            if self.halted.get((p.change.rtype, p.change.namespace, p.change.name)) == p.change.hash
        )

    def observe(
        self,
        workload: planning.Workload,
        strategy: strategies.Strategy,
        progressing: bool,
        field_manager: str,
    ) -> None:
        """A workload's status: a failed rollout of a template we wrote last counts against
        the current content it carries (not an image change, not older content); a finished
        one no longer counts."""
        st = workload.status
        if self.limit <= 0 or st is None or st.observed_generation < st.generation:
            return
        if st.progress_deadline_exceeded:
            if workload.template_manager != field_manager:
                return  # someone else's change failed
            for (rtype, name), h in strategies.carried_hashes(workload.template, strategy).items():
                entry = self.stores.config(rtype, workload.namespace, name)
                if (
                    rtype is not ResourceType.SECRETPROVIDERCLASS
                    and entry is not None
                    and _current(workload, entry, h)
                ):
                    self.fail(workload.key, ((rtype, workload.namespace, name), entry.hash))
        elif not progressing:
            self.recovered(workload.key)

    def fail(self, key: ObjectKey, content: Content) -> None:
        if self.limit <= 0:
            return
        workloads = self._failed.setdefault(content, set())
        if key in workloads:
            return
        workloads.add(key)
        self._failed_by.setdefault(key, set()).add(content)
        limit = self.limit
        resource, digest = content
        if limit > 0 and len(workloads) >= limit and self.halted.get(resource) != digest:
            self.halted[resource] = digest
            self._tripped(resource, len(workloads))

    def recovered(self, key: ObjectKey) -> None:
        for content in self._failed_by.pop(key, set()):
            workloads = self._failed.get(content)
            if workloads is not None:
                workloads.discard(key)
                if not workloads:
                    del self._failed[content]

    def resume(self, todo: list[Plan]) -> None:
        """New content of a halted resource (the fix) lifts the halt."""
        for p in todo:
            resource = (p.change.rtype, p.change.namespace, p.change.name)
            halted = self.halted.get(resource)
            if halted is not None and halted != p.change.hash:
                del self.halted[resource]
                self.fleet.halted(_target(self.stores, resource), "", on=False)
                for k in self._failed.pop((resource, halted), set()):
                    self._failed_by.get(k, set()).discard((resource, halted))

    def _tripped(self, resource: Resource, failures: int) -> None:
        rtype, namespace, name = resource
        text = (
            f"Reloads for {rtype.kind} {namespace}/{name} halted: {failures} workload rollouts "
            "failed with its current content (--halt-after-failures); its next content change "
            "resumes them"
        )
        self.fleet.halted(_target(self.stores, resource), text, on=True)


def _target(stores: Stores, resource: Resource) -> planning.Workload:
    """The ConfigMap/Secret as an Event's object (its uid, when it is in the cache)."""
    rtype, namespace, name = resource
    entry = stores.config(rtype, namespace, name)
    uid = "" if entry is None else entry.metadata.uid
    return planning.Workload(rtype.kind, namespace, name, {}, PodTemplate(), uid=uid)


def _current(workload: planning.Workload, entry: ConfigEntry, carried: str) -> bool:
    """Does the carried hash stand for the entry's current content (the object's hash, or
    under `reload-scope: keys` the hash of the keys the workload consumes)?"""
    if carried == entry.hash:
        return True
    if entry.digests is None:
        return False
    keys = scoping.consumed_keys(workload.template, entry.rtype, entry.name)
    return keys is not None and carried == scoping.scoped_hash(entry.digests, keys)
