"""The reverse index: a change finds exactly the workloads it can affect."""

from __future__ import annotations

from kube_reloader.core.annotations import Keys
from kube_reloader.core.objects import ResourceType
from kube_reloader.core.planning import workload_from_manifest
from kube_reloader.runtime.cache import WorkloadIndex

CM = ResourceType.CONFIGMAP


def wl(
    name: str, ns: str = "ns", refs: tuple[str, ...] = (), annotations: dict[str, str] | None = None
) -> object:
    return workload_from_manifest({
        "kind": "Deployment", "metadata": {"name": name, "namespace": ns, "annotations": annotations or {}},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "envFrom": [{"configMapRef": {"name": r}} for r in refs]}]}}},
    })  # fmt: skip


def names(index: WorkloadIndex, ns: str, name: str) -> list[str]:
    return [w.name for w in index.candidates(ns, CM, name)]


def test_candidates_are_referencing_workloads_plus_named_lists_in_the_namespace() -> None:
    index = WorkloadIndex(Keys())
    index.put(wl("uses-a", refs=("a",)))  # type: ignore[arg-type]
    index.put(wl("uses-b", refs=("b",)))  # type: ignore[arg-type]
    index.put(wl("named", annotations={"configmap.reloader.stakater.com/reload": "x-.*"}))  # type: ignore[arg-type]
    index.put(wl("elsewhere", ns="other", refs=("a",)))  # type: ignore[arg-type]
    assert names(index, "ns", "a") == ["named", "uses-a"]
    assert names(index, "ns", "zzz") == ["named"]
    assert names(index, "other", "a") == ["elsewhere"]


def test_updating_or_removing_a_workload_updates_the_index() -> None:
    index = WorkloadIndex(Keys())
    index.put(wl("w", refs=("a",)))  # type: ignore[arg-type]
    index.put(wl("w", refs=("b",)))  # type: ignore[arg-type]
    assert names(index, "ns", "a") == []
    assert names(index, "ns", "b") == ["w"]
    index.remove(index.candidates("ns", CM, "b")[0].key)
    assert names(index, "ns", "b") == []
    assert len(index) == 0


def test_each_namespace_counts_its_workloads_by_kind_through_updates_and_removals() -> None:
    index = WorkloadIndex(Keys())
    a, b = wl("a", refs=("x",)), wl("b")
    index.put(a)  # type: ignore[arg-type]
    index.put(b)  # type: ignore[arg-type]
    index.put(wl("a", refs=("y",)))  # type: ignore[arg-type]  # an update, re-indexed
    index.put(wl("a", refs=("y",)))  # type: ignore[arg-type]  # unchanged: not re-indexed
    index.put(wl("c", ns="other"))  # type: ignore[arg-type]
    assert dict(index.kinds_in("ns")) == {"Deployment": 2}
    assert dict(index.kinds_in("other")) == {"Deployment": 1}
    index.remove(b.key)  # type: ignore[attr-defined]
    index.remove(b.key)  # type: ignore[attr-defined]  # twice: counted once
    assert dict(index.kinds_in("ns")) == {"Deployment": 1}
    index.remove(a.key)  # type: ignore[attr-defined]
    assert dict(index.kinds_in("ns")) == {}
