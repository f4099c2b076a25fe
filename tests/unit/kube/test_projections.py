"""Workload projections decode what real controllers write, and never fail on one object."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from kube_reloader.kube import projections as p
from kube_reloader.kube.paging import ListPage

#: a Rollout's status exactly as Argo Rollouts v1.10.1 wrote it on the dev cluster (the Rollout
#: of tests/integration/test_argo.py: canary, one replica, fully promoted)
ARGO_STATUS: dict[str, Any] = {
    "HPAReplicas": 1,
    "availableReplicas": 1,
    "blueGreen": {},
    "canary": {},
    "conditions": [
        {"lastTransitionTime": "2026-12-01T05:26:42Z", "lastUpdateTime": "2026-12-01T05:26:42Z",
         "message": "RolloutCompleted", "reason": "RolloutCompleted", "status": "True",
         "type": "Completed"},
        {"lastTransitionTime": "2026-12-01T05:26:42Z", "lastUpdateTime": "2026-12-01T05:26:42Z",
         "message": "Rollout is healthy", "reason": "RolloutHealthy", "status": "True",
         "type": "Healthy"},
        {"lastTransitionTime": "2026-12-01T05:26:42Z", "lastUpdateTime": "2026-12-01T05:26:42Z",
         "message": "ReplicaSet \"r-7dbb84c774\" has successfully progressed.",
         "reason": "NewReplicaSetAvailable", "status": "True", "type": "Progressing"},
        {"lastTransitionTime": "2026-12-01T05:26:42Z", "lastUpdateTime": "2026-12-01T05:26:42Z",
         "message": "Rollout has minimum availability", "reason": "AvailableReason",
         "status": "True", "type": "Available"},
    ],
    "currentPodHash": "7dbb84c774",
    "currentStepHash": "5ffbfbbd64",
    "observedGeneration": "2",
    "phase": "Healthy",
    "readyReplicas": 1,
    "replicas": 1,
    "selector": "app=r",
    "stableRS": "7dbb84c774",
    "updatedReplicas": 1,
}  # fmt: skip


def workload(name: str, kind: str = "Rollout", **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1" if kind == "Rollout" else "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": "ns", "generation": 1},
        "spec": {
            "replicas": 1,
            "template": {"spec": {"containers": [
                {"name": "app", "envFrom": [{"configMapRef": {"name": "c"}}]},
            ]}},
        },
        **extra,
    }  # fmt: skip


def decode(obj: dict[str, Any]) -> p.Workload:
    return msgspec.json.decode(json.dumps(obj).encode(), type=p.Workload)


def test_argos_status_with_its_string_observed_generation_decodes() -> None:
    status = decode(workload("r", status=ARGO_STATUS)).status
    assert status.observedGeneration == 2
    assert (status.replicas, status.updatedReplicas, status.availableReplicas) == (1, 1, 1)
    assert [c.type for c in status.conditions] == [
        "Completed",
        "Healthy",
        "Progressing",
        "Available",
    ]


def test_a_list_page_with_argo_status_among_deployments_decodes_every_item() -> None:
    page = {
        "metadata": {"resourceVersion": "7"},
        "items": [
            workload("d", kind="Deployment", status={"observedGeneration": 1, "replicas": 1}),
            workload("r", status=ARGO_STATUS),
        ],
    }
    decoded = msgspec.json.decode(json.dumps(page).encode(), type=ListPage[p.Workload])
    assert decoded.items is not None
    assert [w.metadata.name for w in decoded.items] == ["d", "r"]
    assert [w.spec.template.spec.containers[0].envFrom[0].configMapRef for w in decoded.items if w.spec.template] == [
        p.NameRef("c"), p.NameRef("c"),
    ]  # fmt: skip


def test_an_observed_generation_hash_from_an_old_argo_release_becomes_zero() -> None:
    status = decode(workload("r", status={**ARGO_STATUS, "observedGeneration": "7d9c6f5b4"})).status
    assert status.observedGeneration == 0
    assert status.replicas == 1, "the other fields are kept"


@pytest.mark.parametrize(
    ("field", "value", "default"),
    [
        ("replicas", "many", 0),
        ("replicas", {"n": 1}, 0),
        ("currentRevision", 5, ""),
        ("conditions", "Healthy", ()),
        ("observedGeneration", None, 0),
    ],
)
def test_a_status_field_of_an_unexpected_type_takes_its_default_and_keeps_the_rest(
    field: str, value: Any, default: Any
) -> None:
    status = decode(workload("r", status={**ARGO_STATUS, field: value})).status
    assert getattr(status, field) == default
    assert status.availableReplicas == 1


def test_a_condition_that_does_not_fit_is_left_out_and_the_others_are_kept() -> None:
    conditions = [*ARGO_STATUS["conditions"][:2], "garbage", {"type": ["x"], "status": "True"}]
    status = decode(workload("r", status={**ARGO_STATUS, "conditions": conditions})).status
    assert [c.type for c in status.conditions] == ["Completed", "Healthy", ""]
    assert status.conditions[2].status == "True"


def test_a_status_that_is_not_an_object_is_the_empty_status() -> None:
    assert decode(workload("r", status=["not", "an", "object"])).status == p.WorkloadStatus()
    assert decode(workload("r")).status == p.WorkloadStatus()


def test_argos_untyped_volumes_keep_every_reference_that_fits() -> None:
    obj = workload("r")
    obj["spec"]["template"]["spec"]["volumes"] = [
        {"name": "a", "configMap": {"name": "cm"}},
        {"name": "b", "configMap": {"name": 5}},
        "not a volume",
        {"name": "c", "secret": {"secretName": "s"}, "projected": {"sources": [{"configMap": {"name": "p"}}, 7]}},
    ]  # fmt: skip
    template = decode(obj).spec.template
    assert template is not None
    volumes = template.spec.volumes
    assert [v.name for v in volumes] == ["a", "b", "c"]
    assert volumes[0].configMap == p.NameRef("cm")
    assert volumes[1].configMap == p.NameRef("")
    assert volumes[2].secret == p.SecretVolumeRef("s")
    assert volumes[2].projected == p.Projected((p.ProjectedSource(configMap=p.NameRef("p")),))


def test_a_workload_converted_from_a_write_answer_equals_the_decoded_one() -> None:
    obj = workload("r", status=ARGO_STATUS)
    obj["spec"]["template"]["spec"]["volumes"] = [{"name": "a", "configMap": {"name": "cm"}}]
    converted = msgspec.convert(obj, p.Workload)
    decoded = decode(obj)
    assert converted.status == decoded.status
    assert converted.status.observedGeneration == 2
    assert converted.spec == decoded.spec
    assert converted.spec.template is not None
    assert converted.spec.template.spec.volumes == (p.Volume("a", configMap=p.NameRef("cm")),)


def test_lenient_leaves_out_map_entries_that_do_not_fit_and_falls_back_to_the_default() -> None:
    assert p.lenient({"a": "1", "b": 2, "c": "3"}, dict[str, str], {}) == {"a": "1", "c": "3"}
    assert p.lenient("x", p.NameRef, p.NameRef("fallback")) == p.NameRef("fallback")
    assert p.lenient(None, tuple[p.Volume, ...], ()) == ()
    assert p.lenient("12", int, 0) == 12


def managed(manager: str, time: str, fields: dict[str, Any], subresource: str = "") -> Any:
    entry = {"manager": manager, "operation": "Update", "time": time, "fieldsV1": fields}
    return {**entry, "subresource": subresource} if subresource else entry


TEMPLATE = {"f:spec": {"f:template": {"f:spec": {}}}}
REPLICAS = {"f:spec": {"f:replicas": {}}}
STATUS = {"f:status": {"f:replicas": {}}}
CREATED = "2026-01-01T00:00:00Z"
T0, T1 = "2026-01-01T00:00:05Z", "2026-01-01T00:00:09Z"


@pytest.mark.parametrize(
    ("entries", "when", "writer"),
    [
        ([], CREATED, ""),
        ([managed("kubectl", T0, REPLICAS)], CREATED, ""),
        ([managed("kubectl", T0, TEMPLATE)], T0, "kubectl"),
        ([managed("a", T0, TEMPLATE), managed("b", T1, TEMPLATE)], T1, "b"),
        ([managed("b", T1, TEMPLATE), managed("a", T0, TEMPLATE)], T1, "b"),
        ([managed("a", T1, TEMPLATE), managed("b", T1, TEMPLATE)], T1, "b"),
        ([managed("a", T0, TEMPLATE), managed("ctl", T1, TEMPLATE, "status")], T0, "a"),
        ([managed("a", T0, TEMPLATE), managed("b", T1, STATUS)], T0, "a"),
        ([managed("a", "not a time", TEMPLATE)], CREATED, "a"),
    ],
)
def test_the_last_template_write_is_the_latest_entry_that_touched_it_with_its_manager(
    entries: list[Any], when: str, writer: str
) -> None:
    meta = msgspec.json.decode(
        json.dumps({"name": "w", "creationTimestamp": CREATED, "managedFields": entries}),
        type=p.ObjectMeta,
    )
    fields = (b'"f:template"', b'"f:jobTemplate"')
    assert p.last_write_by(meta, *fields) == (p.epoch(when), writer)
    assert p.last_write(meta, *fields) == p.epoch(when)


def test_a_timestamp_parses_the_same_from_the_cache_as_the_first_time() -> None:
    assert p.epoch("2026-01-01T00:00:05Z") == 1767225605.0
    assert p.epoch("2026-01-01T00:00:05Z") == 1767225605.0
    assert p.epoch("2026-01-01T00:00:05") == 1767225605.0
    assert p.epoch("2026-01-01T01:00:05+01:00") == 1767225605.0
    assert p.epoch("x" * 65) is None
    assert p.epoch("") is None
    assert p.epoch(None) is None
