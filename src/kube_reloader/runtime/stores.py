"""The watch caches as the rooms read them: the workload index, the config reflectors'
stores, the SecretProviderClass annotations. Intake fills them; everyone else reads."""

from __future__ import annotations

import dataclasses
from typing import Any

import msgspec

from kube_reloader.core import matching, planning, regexes, scoping
from kube_reloader.core.annotations import Keys
from kube_reloader.core.objects import ObjectKey, ResourceType, WorkloadKind
from kube_reloader.kube import projections
from kube_reloader.kube.watching import Reflector
from kube_reloader.runtime.cache import ConfigEntry, WorkloadEntry, WorkloadIndex

#: an optional kind's reflector: (kind, namespace; None for every namespace)
Listing = tuple[str, str | None]


class Stores:
    def __init__(self, keys: Keys, scope: scoping.Scope = scoping.Scope.OBJECT) -> None:
        self.keys = keys
        self.index = WorkloadIndex(keys, scope)
        self.configs: list[Reflector[ConfigEntry]] = []
        self.workloads: list[Reflector[WorkloadEntry]] = []
        #: optional kinds (Argo, DeploymentConfig): watched when served, never awaited for
        #: readiness
        self.optional: list[Reflector[WorkloadEntry]] = []
        self.spcs: list[Reflector[projections.Object]] = []
        self.namespaces: Reflector[projections.Object] | None = None
        #: the namespaces decide what is watched (`--namespace-selector`): their list gates
        #: readiness; watched only for their policies (freeze, windows), it waits for the list
        #: or for RBAC to forbid it (`Intake.synced`)
        self.namespaces_select = False

    def all_reflectors(self) -> list[Reflector[Any]]:
        out: list[Reflector[Any]] = [*self.workloads, *self.configs, *self.optional, *self.spcs]
        if self.namespaces is not None:
            out.append(self.namespaces)
        return out

    def required(self) -> list[Reflector[Any]]:
        """The reflectors whose initial list gates readiness."""
        out: list[Reflector[Any]] = [*self.workloads, *self.configs]
        if self.namespaces is not None and self.namespaces_select:
            out.append(self.namespaces)
        return out

    def optional_synced(self) -> bool:
        return all(r.synced.is_set() for r in self.optional)

    def optional_listed(self) -> frozenset[Listing]:
        """(kind, namespace; None for every namespace) of each optional kind's reflector
        whose list has ended."""
        return frozenset((r.resource.kind, r.namespace) for r in self.optional if r.synced.is_set())

    def of_type(self, rtype: ResourceType) -> list[Reflector[ConfigEntry]]:
        plural = "configmaps" if rtype is ResourceType.CONFIGMAP else "secrets"
        return [r for r in self.configs if r.resource.plural == plural]

    def config(self, rtype: ResourceType, namespace: str, name: str) -> ConfigEntry | None:
        for refl in self.of_type(rtype):
            entry = refl.store.get((namespace, name))
            if entry is not None:
                return entry
        return None

    def spc_annotations(self, namespace: str, name: str) -> dict[str, str]:
        for refl in self.spcs:
            obj = refl.store.get((namespace, name))
            if obj is not None:
                return dict(obj.metadata.annotations)
        return {}

    def namespace_annotations(self, namespace: str) -> dict[str, str]:
        """A namespace's annotations ({} when namespaces are not watched or it is unknown)."""
        if self.namespaces is None:
            return {}
        obj = self.namespaces.store.get(("", namespace))
        return {} if obj is None else obj.metadata.annotations

    def workloads_listed(self) -> None:
        """Once every workload is listed, which configs are read by key is known: configs
        decoded from now on keep digests only when wanted (`settle` prunes the others)."""
        if all(r.synced.is_set() for r in self.workloads):  # an optional kind may never list
            self.index.warming = False

    def settle(self) -> int:
        """Every workload is listed: per-key digests are kept from now on only for the
        configs some `keys`-scope workload reads; drop the others. Returns how many."""
        self.index.warming = False
        dropped = 0
        for refl in self.configs:
            for k, entry in refl.store.items():
                wanted = self.index.wants_keys(entry.metadata.namespace, entry.rtype, entry.name)
                if entry.digests is not None and not wanted:
                    refl.store[k] = msgspec.structs.replace(entry, digests=None)
                    dropped += 1
        return dropped

    def version(self, key: ObjectKey) -> str:
        """Workload `key`'s resourceVersion as last listed or watched ("" when not cached)."""
        for refl in (*self.workloads, *self.optional):
            if refl.resource.kind == key.kind:
                entry = refl.store.get((key.namespace, key.name))
                if entry is not None:
                    return entry.metadata.resourceVersion
        return ""

    def current(self, change: planning.Change) -> planning.Change:
        """The change with its resource's content as cached now: a change that waited (a
        window, a freeze, a slot) and was reverted meanwhile writes nothing."""
        if change.event is not planning.Event.UPDATED:
            return change
        if change.rtype is ResourceType.SECRETPROVIDERCLASS:
            return change
        entry = self.config(change.rtype, change.namespace, change.name)
        if entry is None or entry.hash == change.hash:
            return change
        return entry.change(change.event, previous=change.previous)

    def changed_at(self, change: planning.Change) -> float | None:
        """When the config's content was last written (the API server's whole seconds)."""
        entry = self.config(change.rtype, change.namespace, change.name)
        return None if entry is None else entry.changed_at

    def workload(self, key: ObjectKey) -> planning.Workload | None:
        return self.index.workloads.get(key)

    def resolve(self, workload: planning.Workload) -> planning.Workload:
        """A workloadRef Rollout's pod template is its referenced Deployment's."""
        if not workload.workload_ref:
            return workload
        ref = self.index.workloads.get(
            ObjectKey(WorkloadKind.DEPLOYMENT, workload.namespace, workload.workload_ref)
        )
        if ref is None:
            return workload
        return dataclasses.replace(
            workload, template=ref.template, template_changed_at=ref.template_changed_at
        )

    def wanted(
        self, workload: planning.Workload, names: Names | None = None
    ) -> set[tuple[ResourceType, str]]:
        """The ConfigMaps/Secrets a workload may reload for: its references, plus those of
        its namespace its named list matches (`names`: one walk's memo of them)."""
        wanted = {
            r
            for r in workload.template.references()
            if r[0] is not ResourceType.SECRETPROVIDERCLASS
        }
        names = names or Names(self)
        tmpl = workload.template.annotations
        for rtype in (ResourceType.CONFIGMAP, ResourceType.SECRET):
            named = matching.named_list(self.keys, rtype, workload.annotations, tmpl)
            if named:
                wanted.update((rtype, n) for n in names.matched(rtype, workload.namespace, named))
        return wanted


class Names:
    """One walk's memo of the configs a named list can concern: the names of each namespace's
    ConfigMaps or Secrets (one pass over the caches, made on first use), and per (type,
    namespace, list) those the list matches, so thousands of workloads with the same list
    cost one match per config, not one scan of the whole cache each."""

    def __init__(self, stores: Stores) -> None:
        self.stores = stores
        self._by_namespace: dict[ResourceType, dict[str, list[str]]] = {}
        self._matched: dict[tuple[ResourceType, str, str], tuple[str, ...]] = {}

    def in_namespace(self, rtype: ResourceType, namespace: str) -> list[str]:
        by_ns = self._by_namespace.get(rtype)
        if by_ns is None:
            by_ns = self._by_namespace[rtype] = {}
            for refl in self.stores.of_type(rtype):
                for ns, name in refl.store:
                    by_ns.setdefault(ns, []).append(name)
        return by_ns.get(namespace, [])

    def matched(self, rtype: ResourceType, namespace: str, named: str) -> tuple[str, ...]:
        key = (rtype, namespace, named)
        found = self._matched.get(key)
        if found is None:
            compiled = regexes.compile_list(named)
            candidates = self.in_namespace(rtype, namespace)
            found = (
                ()
                if compiled.refused is not None
                else tuple(n for n in candidates if compiled.first_match(n) is not None)
            )
            self._matched[key] = found
        return found
