"""The one pod-template reader: where a workload keeps its template, and what it names."""

from __future__ import annotations

from typing import Any

import pytest

from kube_reloader.core import podtemplates as pt
from kube_reloader.core.annotations import Keys
from kube_reloader.core.matching import carries_named_list
from kube_reloader.core.objects import ResourceType

CM, SECRET, SPC = ResourceType.CONFIGMAP, ResourceType.SECRET, ResourceType.SECRETPROVIDERCLASS
TEMPLATE = {"metadata": {"annotations": {"a": "1"}}, "spec": {"containers": [{"name": "app"}]}}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        ({"kind": "Deployment", "spec": {"template": TEMPLATE}}, TEMPLATE),
        ({"kind": "ReloadTestApp", "spec": {"template": TEMPLATE}}, TEMPLATE),
        ({"kind": "CronJob", "spec": {"jobTemplate": {"spec": {"template": TEMPLATE}}}}, TEMPLATE),
        ({"kind": "CronJob", "spec": {"template": TEMPLATE}}, {}),
        ({"kind": "Deployment", "spec": {"template": ["not", "a", "template"]}}, {}),
        ({"kind": "Deployment", "spec": None}, {}),
        ({"kind": "Deployment"}, {}),
        ("not an object", {}),
    ],
)
def test_the_pod_template_is_found_by_kind_or_is_empty(obj: Any, expected: Any) -> None:
    assert pt.template_of(obj) == expected


@pytest.mark.parametrize(
    ("volume", "expected"),
    [
        ({"configMap": {"name": "c"}}, [(CM, "c", "configMap")]),
        ({"secret": {"secretName": "s"}}, [(SECRET, "s", "secret")]),
        ({"secret": {"name": "s"}}, []),
        ({"projected": {"sources": [{"secret": {"name": "s"}}, {"configMap": {"name": "c"}}, "x"]}},
         [(SECRET, "s", "projected"), (CM, "c", "projected")]),
        ({"csi": {"volumeAttributes": {"secretProviderClass": "p"}}}, [(SPC, "p", "csi")]),
        ({"configMap": {"name": ""}, "secret": None, "projected": []}, []),
        ({"configMap": {"name": 7}}, [(CM, "7", "configMap")]),
    ],
)  # fmt: skip
def test_a_volume_names_its_sources_in_order(volume: Any, expected: Any) -> None:
    assert [(s.rtype, s.name, s.field) for s in pt.volume_sources(volume)] == expected


@pytest.mark.parametrize(
    ("container", "expected"),
    [
        ({"env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}]},
         [(CM, "c", "env[A].valueFrom.configMapKeyRef")]),
        ({"env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s"}}}, {"name": "B", "value": "v"}]},
         [(SECRET, "s", "env[A].valueFrom.secretKeyRef")]),
        ({"envFrom": [{"secretRef": {"name": "s"}}, {"configMapRef": {"name": "c"}}]},
         [(SECRET, "s", "envFrom.secretRef"), (CM, "c", "envFrom.configMapRef")]),
        ({"env": "not a list", "envFrom": [None, 3]}, []),
    ],
)  # fmt: skip
def test_a_container_names_what_its_env_and_env_from_read(container: Any, expected: Any) -> None:
    sources = [s for var in pt.env(container) for s in pt.env_sources(var)]
    sources += pt.env_from_sources(container)
    assert [(s.rtype, s.name, s.field) for s in sources] == expected


def test_entries_of_the_wrong_shape_in_a_pod_spec_are_skipped() -> None:
    template = {"spec": {"containers": [{"name": "a"}, "b", None], "volumes": {"x": 1}}}
    assert [c["name"] for c in pt.containers(template)] == ["a"]
    assert pt.volumes(template) == ()
    assert pt.init_containers(template) == ()


NAMED = Keys().named(CM)


@pytest.mark.parametrize(
    ("workload", "template", "rtype", "expected"),
    [
        ({NAMED: "a"}, {}, CM, True),
        ({}, {NAMED: "a"}, CM, True),
        ({NAMED: ""}, {}, CM, True),
        ({}, {}, CM, False),
        ({NAMED: "a"}, {}, SECRET, False),
    ],
)
def test_a_named_list_on_the_workload_or_its_template_counts(
    workload: dict[str, str], template: dict[str, str], rtype: ResourceType, expected: bool
) -> None:
    assert carries_named_list(Keys(), rtype, workload, template) is expected
