"""The two readers of a workload's pod template agree: the controller's (a watch event decoded
into a projection, `runtime.templateviews` and `runtime.cache`) and the one `explain`, `lint`,
`impact` and the admission webhook use (`planning.workload_from_manifest` over
`core.podtemplates`). The same manifests go through both, and the rules read the same values:
a workload that `explain` says reloads is one the controller reloads."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kube_reloader.core import planning
from kube_reloader.core.annotations import Keys
from kube_reloader.core.references import PodTemplate
from kube_reloader.runtime.cache import workload_entry
from kube_reloader.runtime.kinds import BUILTIN

KEYS = Keys()
KEEP = KEYS.workload_keys()
KINDS = ("Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob")


def through_the_controller(obj: dict[str, Any]) -> planning.Workload:
    """As a watch event reaches the cache: JSON bytes decoded into the kind's projection."""
    spec = BUILTIN[obj["kind"]]
    decoded = msgspec.json.decode(json.dumps(obj).encode(), type=spec.projection)
    return workload_entry(obj["kind"], spec.workload(decoded), KEYS).workload


def through_the_manifest_reader(obj: dict[str, Any]) -> planning.Workload:
    return planning.workload_from_manifest(obj)


def kept(template: PodTemplate) -> PodTemplate:
    """The manifest reader keeps every template annotation; the cache only those the rules
    read. Everything else must be equal as it is."""
    annotations = {k: v for k, v in template.annotations.items() if k in KEEP}
    return PodTemplate(annotations, template.containers, template.init_containers, template.volumes)


def wrap(kind: str, template: dict[str, Any], annotations: dict[str, str]) -> dict[str, Any]:
    meta = {"name": "w", "namespace": "ns", "uid": "u-1", "annotations": annotations}
    if kind == "CronJob":
        spec: dict[str, Any] = {
            "schedule": "* * * * *",
            "jobTemplate": {"spec": {"template": template}},
        }
    else:
        spec = {"template": template}
    return {"apiVersion": "v1", "kind": kind, "metadata": meta, "spec": spec}


def assert_same(obj: dict[str, Any]) -> None:
    ours, theirs = through_the_controller(obj), through_the_manifest_reader(obj)
    assert (ours.kind, ours.namespace, ours.name, ours.uid) == (
        theirs.kind, theirs.namespace, theirs.name, theirs.uid
    )  # fmt: skip # one tuple per reader, side by side
    assert ours.annotations == {k: v for k, v in theirs.annotations.items() if k in KEEP}
    assert ours.template == kept(theirs.template)
    assert ours.template.references() == theirs.template.references()


CONTAINER = {
    "name": "app",
    "env": [
        {"name": "PLAIN", "value": "x"},
        {"name": "STAKATER_CFG_CONFIGMAP", "value": "abc"},
        {"name": "K", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "k"}}},
        {"name": "S", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "s", "optional": True}}},
        {"name": "F", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ],
    "envFrom": [{"configMapRef": {"name": "all"}, "prefix": "P_"}, {"secretRef": {"name": "s2"}}],
    "volumeMounts": [{"name": "v1", "mountPath": "/a"}, {"name": "tls", "mountPath": "/t"}],
}
VOLUMES = [
    {"name": "v1", "configMap": {"name": "files", "items": [{"key": "a", "path": "a"}]}},
    {"name": "tls", "secret": {"secretName": "cert"}},
    {"name": "scratch", "emptyDir": {}},
    {"name": "p", "projected": {"sources": [{"configMap": {"name": "pc"}},
                                            {"secret": {"name": "ps", "items": [{"key": "x", "path": "x"}]}},
                                            {"serviceAccountToken": {"path": "t"}}]}},
    {"name": "csi", "csi": {"driver": "secrets-store.csi.k8s.io",
                            "volumeAttributes": {"secretProviderClass": "spc"}}},
]  # fmt: skip # a manifest, laid out as YAML would be
CASES: dict[str, dict[str, Any]] = {
    "every kind of reference": {
        "metadata": {"annotations": {"reloader.stakater.com/last-reloaded-from": "{}", "x": "y"}},
        "spec": {"containers": [CONTAINER], "initContainers": [{**CONTAINER, "name": "init"}],
                 "volumes": VOLUMES},
    },
    "no containers": {"spec": {}},
    "no template": {},
    "a container without a name": {"spec": {"containers": [{"envFrom": [{"configMapRef": {}}]}]}},
    "names of the wrong type": {
        "spec": {"containers": [{"name": "a", "env": [{"name": "E", "valueFrom": {
            "configMapKeyRef": {"name": "", "key": "k"}}}]}],
                 "volumes": [{"name": "v", "configMap": {}}]},
    },
}  # fmt: skip # manifests, laid out as YAML would be


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", CASES)
def test_the_controllers_reader_and_the_manifest_reader_read_the_same_workload(
    case: str, kind: str
) -> None:
    annotations = {"reloader.stakater.com/auto": "true", "team": "a"}
    assert_same(wrap(kind, CASES[case], annotations))


NAMES = st.sampled_from(["a", "b", "cfg", "tls"])
SOURCE = st.one_of(
    st.builds(lambda n: {"configMapKeyRef": {"name": n, "key": "k"}}, NAMES),
    st.builds(lambda n: {"secretKeyRef": {"name": n, "key": "k"}}, NAMES),
)
ENV = st.one_of(
    st.builds(lambda n, v: {"name": n, "value": v}, st.sampled_from(["X", "STAKATER_A_CONFIGMAP"]),
              st.text(max_size=5)),
    st.builds(lambda n, s: {"name": n, "valueFrom": s}, st.sampled_from(["E", "F"]), SOURCE),
)  # fmt: skip # one alternative per line
ENV_FROM = st.one_of(
    st.builds(lambda n: {"configMapRef": {"name": n}}, NAMES),
    st.builds(lambda n: {"secretRef": {"name": n}}, NAMES),
)
CONTAINERS = st.lists(
    st.fixed_dictionaries(
        {"name": st.sampled_from(["app", "side"]), "env": st.lists(ENV, max_size=3),
         "envFrom": st.lists(ENV_FROM, max_size=2),
         "volumeMounts": st.lists(st.fixed_dictionaries({"name": NAMES, "mountPath": st.just("/m")}),
                                  max_size=2)}
    ),
    max_size=3,
)  # fmt: skip # a manifest's shape, nested as it is
ITEMS = st.lists(st.fixed_dictionaries({"key": NAMES, "path": NAMES}), max_size=2)
VOLUME = st.one_of(
    st.builds(lambda v, n, i: {"name": v, "configMap": {"name": n, "items": i}}, NAMES, NAMES, ITEMS),
    st.builds(lambda v, n: {"name": v, "secret": {"secretName": n}}, NAMES, NAMES),
    st.builds(lambda v: {"name": v, "emptyDir": {}}, NAMES),
    st.builds(lambda v, n, m: {"name": v, "projected": {"sources": [{"configMap": {"name": n}},
                                                                     {"secret": {"name": m}}]}},
              NAMES, NAMES, NAMES),
)  # fmt: skip # one alternative per line


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(KINDS),
    containers=CONTAINERS,
    init=CONTAINERS,
    volumes=st.lists(VOLUME, max_size=4),
)
def test_for_any_pod_template_both_readers_agree(
    kind: str, containers: list[Any], init: list[Any], volumes: list[Any]
) -> None:
    template = {"spec": {"containers": containers, "initContainers": init, "volumes": volumes}}
    assert_same(wrap(kind, template, {"reloader.stakater.com/auto": "true"}))
