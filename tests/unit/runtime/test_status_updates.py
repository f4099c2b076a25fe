"""A watch event that changes only a workload's status reuses the stored reduction
(`cache.status_entry`, `Reflector(update=...)`) and is not re-indexed (`WorkloadIndex.put`):
whatever it returns must be exactly what the full reduction (`workload_entry`) gives."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from kube_reloader.core.annotations import Keys
from kube_reloader.core.objects import ResourceType, WorkloadKind
from kube_reloader.kube import resources
from kube_reloader.kube.watching import Reflector
from kube_reloader.runtime.cache import WorkloadEntry, WorkloadIndex, status_entry, workload_entry
from kube_reloader.runtime.kinds import BUILTIN

KEYS = Keys()
SPEC = BUILTIN[WorkloadKind.DEPLOYMENT]


def deployment() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "ns", "uid": "u-1", "resourceVersion": "10", "generation": 2,
                     "annotations": {"reloader.stakater.com/auto": "true", "unrelated": "x"},
                     "managedFields": [{"manager": "kubectl", "operation": "Update", "time": "2026-12-01T10:00:00Z",
                                        "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:template": {}}}}]},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "i",
                                                       "envFrom": [{"configMapRef": {"name": "cfg"}}]}]}}},
        "status": {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 1},
    }  # fmt: skip


def decode(manifest: dict[str, Any]) -> Any:
    return SPEC.workload(msgspec.json.decode(msgspec.json.encode(manifest), type=SPEC.projection))


def full(manifest: dict[str, Any]) -> WorkloadEntry:
    return workload_entry(SPEC.kind, decode(manifest), KEYS, SPEC.status)


def status_rolled(m: dict[str, Any]) -> None:
    m["metadata"]["resourceVersion"] = "11"
    m["status"] = {"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "readyReplicas": 2}


def annotated(m: dict[str, Any]) -> None:
    m["metadata"]["annotations"]["configmap.reloader.stakater.com/reload"] = "other"


def reowned(m: dict[str, Any]) -> None:
    m["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Thing", "name": "t", "uid": "o", "controller": True}
    ]


def rewritten_by_another_manager(m: dict[str, Any]) -> None:
    m["metadata"]["managedFields"].append({"manager": "argocd", "operation": "Update", "time": "2026-12-02T10:00:00Z",
                                           "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:template": {}}}})  # fmt: skip


def template_changed(m: dict[str, Any]) -> None:
    m["metadata"]["generation"] = 3
    m["spec"]["template"]["spec"]["containers"][0]["envFrom"] = [
        {"configMapRef": {"name": "other"}}
    ]


def recreated(m: dict[str, Any]) -> None:
    m["metadata"]["uid"] = "u-2"


@pytest.mark.parametrize(
    ("change", "reused"),
    [
        (status_rolled, True),
        (annotated, True),
        (reowned, True),
        (rewritten_by_another_manager, True),
        (template_changed, False),
        (recreated, False),
    ],
)
def test_a_status_update_reuses_the_stored_reduction_and_equals_the_full_one(
    change: Callable[[dict[str, Any]], None], reused: bool
) -> None:
    before = deployment()
    old = full(before)
    after = copy.deepcopy(before)
    change(after)
    got = status_entry(SPEC.kind, decode(after), old, KEYS, SPEC.status)
    if not reused:
        assert got is None
        return
    assert got == full(after)
    assert got is not None
    assert got.workload.template is old.workload.template  # reused, not rebuilt


def test_an_object_without_a_generation_is_always_reduced_in_full() -> None:
    m = deployment()
    del m["metadata"]["generation"]
    old = full(m)
    status_rolled(m)
    assert status_entry(SPEC.kind, decode(m), old, KEYS, SPEC.status) is None


def test_a_cronjob_is_always_reduced_in_full() -> None:
    spec = BUILTIN[WorkloadKind.CRONJOB]
    m = {"metadata": {"name": "c", "namespace": "ns", "uid": "u", "generation": 1},
         "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}}}  # fmt: skip
    obj = msgspec.json.decode(msgspec.json.encode(m), type=spec.projection)
    old = workload_entry(spec.kind, obj, KEYS, spec.status)
    assert status_entry(spec.kind, obj, old, KEYS, spec.status) is None


def test_the_index_replaces_a_status_update_in_place_and_reindexes_anything_else() -> None:
    index = WorkloadIndex(KEYS)
    before = full(deployment()).workload
    index.put(before)
    m = deployment()
    status_rolled(m)
    rolled = full(m).workload
    index.put(rolled)
    assert index.workloads[rolled.key] is rolled
    assert [w.name for w in index.candidates("ns", ResourceType.CONFIGMAP, "cfg")] == ["web"]
    template_changed(m)
    index.put(full(m).workload)
    assert index.candidates("ns", ResourceType.CONFIGMAP, "cfg") == []
    assert [w.name for w in index.candidates("ns", ResourceType.CONFIGMAP, "other")] == ["web"]
    annotated(m)  # a named list of ConfigMaps: every ConfigMap of the namespace is a candidate
    index.put(full(m).workload)
    assert [w.name for w in index.candidates("ns", ResourceType.CONFIGMAP, "zzz")] == ["web"]


def test_the_reflector_asks_for_an_update_only_with_a_stored_reduction_and_survives_its_error() -> (
    None
):
    stored = full(deployment())
    calls: list[Any] = []

    def update(obj: Any, old: WorkloadEntry) -> WorkloadEntry | None:
        calls.append(old)
        if obj.metadata.name == "boom":
            raise ValueError("unreadable")
        return old

    refl: Reflector[WorkloadEntry] = Reflector(
        None,  # type: ignore[arg-type] - no request is made
        resources.DEPLOYMENTS, type=SPEC.projection, update=update, store={("ns", "web"): stored},
    )  # fmt: skip
    assert refl._updated(decode(deployment())) is stored
    other = deployment()
    other["metadata"]["name"] = "unknown"
    assert refl._updated(decode(other)) is None
    boom = deployment()
    boom["metadata"]["name"] = "boom"
    refl.store[("ns", "boom")] = stored
    assert refl._updated(decode(boom)) is None
    assert len(calls) == 2
