"""Per-key digests are kept only while some `keys`-scope workload reads the config."""

from __future__ import annotations

import asyncio

import msgspec

from kube_reloader.core import scoping
from kube_reloader.core.objects import ResourceType
from kube_reloader.core.planning import Event, Workload, workload_from_manifest
from kube_reloader.kube.contents import ConfigMapContent
from kube_reloader.runtime.cache import WorkloadIndex
from kube_reloader.runtime.sources import config_transform
from kube_reloader.runtime.stores import Stores

from .fakes import KEYS

CM = ResourceType.CONFIGMAP


def workload(name: str, env: list[dict[str, object]], scope: str | None = "keys") -> Workload:
    annotations = {"reloader.stakater.com/auto": "true"}
    if scope is not None:
        annotations[scoping.SCOPE_ANNOTATION] = scope
    return workload_from_manifest({
        "kind": "Deployment", "metadata": {"name": name, "namespace": "ns",
                                           "annotations": annotations},
        "spec": {"template": {"spec": {"containers": [{"name": "app", "env": env}]}}},
    })  # fmt: skip


KEY_REF: list[dict[str, object]] = [
    {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "a"}}}
]


def decoded(name: str, data: dict[str, str]) -> ConfigMapContent:
    raw = msgspec.json.encode({"metadata": {"name": name, "namespace": "ns"}, "data": data})
    return msgspec.json.decode(raw, type=ConfigMapContent)


def test_a_keys_workload_makes_its_map_keep_digests_and_removing_it_stops_that() -> None:
    index = WorkloadIndex(KEYS)
    index.warming = False
    assert not index.wants_keys("ns", CM, "cm")
    w = workload("w", KEY_REF)
    index.put(w)
    assert index.wants_keys("ns", CM, "cm")
    assert not index.wants_keys("ns", CM, "other")
    index.remove(w.key)
    assert not index.wants_keys("ns", CM, "cm")


def test_object_scope_or_a_whole_map_consumer_keeps_no_digests() -> None:
    index = WorkloadIndex(KEYS)
    index.warming = False
    index.put(workload("object", KEY_REF, scope=None))
    index.put(workload("whole", [], scope="keys"))
    assert not index.wants_keys("ns", CM, "cm")


def test_the_global_keys_scope_keeps_digests_for_maps_read_by_key_only() -> None:
    index = WorkloadIndex(KEYS, scoping.Scope.KEYS)
    index.warming = False
    index.put(workload("unannotated", KEY_REF, scope=None))
    index.put(workload("opted-out", [{"name": "B", "valueFrom": {"configMapKeyRef": {
        "name": "other", "key": "b"}}}], scope="object"))  # fmt: skip
    assert index.wants_keys("ns", CM, "cm")
    assert not index.wants_keys("ns", CM, "other")
    assert not index.wants_keys("ns", CM, "anything")


def test_the_transform_digests_only_what_is_wanted() -> None:
    wanted = config_transform(CM, KEYS, None, lambda _ns, _t, name: name == "cm")
    kept = wanted(decoded("cm", {"a": "1", "b": "2"}))
    dropped = wanted(decoded("other", {"a": "1"}))
    assert kept.digests is not None
    assert len(kept.digests) == 2 * 28
    assert dropped.digests is None
    assert kept.change(Event.UPDATED).digests == kept.digests


def test_settling_drops_the_digests_of_maps_no_keys_workload_reads() -> None:
    class Store:
        def __init__(self) -> None:
            self.store: dict[tuple[str, str], object] = {}
            self.resource = type("R", (), {"plural": "configmaps"})()

    stores = Stores(KEYS)
    refl = Store()
    transform = config_transform(CM, KEYS, None, stores.index.wants_keys)
    for name in ("cm", "other"):  # listed while warming: both digested
        refl.store[("ns", name)] = transform(decoded(name, {"a": "1"}))
    stores.configs.append(refl)  # type: ignore[arg-type]
    stores.index.put(workload("w", KEY_REF))
    assert stores.settle() == 1
    assert stores.config(CM, "ns", "cm").digests is not None  # type: ignore[union-attr]
    assert stores.config(CM, "ns", "other").digests is None  # type: ignore[union-attr]
    assert transform(decoded("other", {"a": "2"})).digests is None


def test_warming_ends_once_every_workload_reflector_has_listed() -> None:
    class Listed:
        def __init__(self, done: bool) -> None:
            self.synced = asyncio.Event()
            if done:
                self.synced.set()

    stores = Stores(KEYS)
    stores.workloads = [Listed(True), Listed(False)]  # type: ignore[list-item]
    stores.workloads_listed()
    assert stores.index.warming
    stores.workloads[1].synced.set()
    stores.workloads_listed()
    assert not stores.index.warming
