"""Reference discovery and v1's target-container choice (compat-spec §2.1)."""

from __future__ import annotations

from typing import Any

import pytest

from kube_reloader.core.objects import ResourceType
from kube_reloader.core.references import pod_template_from_manifest, target_container

CM, SECRET, SPC = ResourceType.CONFIGMAP, ResourceType.SECRET, ResourceType.SECRETPROVIDERCLASS


def tmpl(containers: list[dict[str, Any]], volumes: list[dict[str, Any]] | None = None,
         init: list[dict[str, Any]] | None = None) -> Any:  # fmt: skip
    spec: dict[str, Any] = {"containers": containers}
    if volumes:
        spec["volumes"] = volumes
    if init:
        spec["initContainers"] = init
    return pod_template_from_manifest({"spec": spec})


def c(name: str, **kw: Any) -> dict[str, Any]:
    return {"name": name, **kw}


MOUNT = {"volumeMounts": [{"name": "v", "mountPath": "/etc/v"}]}
CASES = [
    ("configMap volume mounted by the second container",
     tmpl([c("a"), c("b", **MOUNT)], [{"name": "v", "configMap": {"name": "cm"}}]), CM, "cm", True, "b"),
    ("projected configMap source",
     tmpl([c("a", **MOUNT)], [{"name": "v", "projected": {"sources": [{"configMap": {"name": "cm"}}]}}]), CM, "cm", True, "a"),
    ("secret volume uses secretName",
     tmpl([c("a", **MOUNT)], [{"name": "v", "secret": {"secretName": "s"}}]), SECRET, "s", True, "a"),
    ("projected secret source",
     tmpl([c("a", **MOUNT)], [{"name": "v", "projected": {"sources": [{"secret": {"name": "s"}}]}}]), SECRET, "s", True, "a"),
    ("volume mounted only by an init container goes to the first container",
     tmpl([c("a"), c("b")], [{"name": "v", "configMap": {"name": "cm"}}], init=[c("i", **MOUNT)]), CM, "cm", True, "a"),
    ("declared but unmounted volume counts as nothing for auto",
     tmpl([c("a")], [{"name": "v", "configMap": {"name": "cm"}}]), CM, "cm", True, None),
    ("unmounted volume falls back to an env reference",
     tmpl([c("a"), c("b", envFrom=[{"configMapRef": {"name": "cm"}}])], [{"name": "v", "configMap": {"name": "cm"}}]), CM, "cm", True, "b"),
    ("env valueFrom configMapKeyRef",
     tmpl([c("a"), c("b", env=[{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}}])]), CM, "cm", True, "b"),
    ("env valueFrom secretKeyRef",
     tmpl([c("a", env=[{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}])]), SECRET, "s", True, "a"),
    ("envFrom secretRef",
     tmpl([c("a"), c("b", envFrom=[{"secretRef": {"name": "s"}}])]), SECRET, "s", True, "b"),
    ("first referencing container wins",
     tmpl([c("a", envFrom=[{"configMapRef": {"name": "cm"}}]), c("b", envFrom=[{"configMapRef": {"name": "cm"}}])]), CM, "cm", True, "a"),
    ("init container env reference goes to the first container",
     tmpl([c("a"), c("b")], init=[c("i", envFrom=[{"configMapRef": {"name": "cm"}}])]), CM, "cm", True, "a"),
    ("named match without reference uses the first container",
     tmpl([c("sidecar"), c("app")]), CM, "cm", False, "sidecar"),
    ("named match prefers the referencing container (v1, not v2)",
     tmpl([c("sidecar"), c("app", envFrom=[{"configMapRef": {"name": "cm"}}])]), CM, "cm", False, "app"),
    ("auto without any reference finds nothing", tmpl([c("a")]), CM, "cm", True, None),
    ("a configmap reference is not a secret reference",
     tmpl([c("a", envFrom=[{"configMapRef": {"name": "x"}}])]), SECRET, "x", True, None),
    ("csi volume names the SecretProviderClass",
     tmpl([c("a"), c("b", **MOUNT)], [{"name": "v", "csi": {"driver": "d", "volumeAttributes": {"secretProviderClass": "spc"}}}]), SPC, "spc", True, "b"),
    ("no containers at all", tmpl([]), CM, "cm", False, None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("template", "rtype", "name", "auto", "expected"),
    [x[1:] for x in CASES],
    ids=[x[0] for x in CASES],
)
def test_target_container(
    template: Any, rtype: ResourceType, name: str, auto: bool, expected: str | None
) -> None:
    target = target_container(template, rtype, name, auto=auto)
    assert target.container == expected
    assert target.how


def test_references_cover_every_method_including_init_containers_and_unmounted_volumes() -> None:
    t = tmpl(
        [c("a", env=[{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cm-env"}}},
                     {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s-env"}}}],
           envFrom=[{"configMapRef": {"name": "cm-from"}}, {"secretRef": {"name": "s-from"}}])],
        [{"name": "v1", "configMap": {"name": "cm-vol"}},
         {"name": "v2", "secret": {"secretName": "s-vol"}},
         {"name": "v3", "projected": {"sources": [{"configMap": {"name": "cm-proj"}}, {"secret": {"name": "s-proj"}},
                                                  {"downwardAPI": {}}, {"serviceAccountToken": {"path": "t"}}]}},
         {"name": "v4", "csi": {"driver": "x", "volumeAttributes": {"secretProviderClass": "spc"}}},
         {"name": "v5", "emptyDir": {}}],
        init=[c("i", envFrom=[{"configMapRef": {"name": "cm-init"}}])],
    )  # fmt: skip
    assert t.references() == {
        (CM, "cm-env"), (SECRET, "s-env"), (CM, "cm-from"), (SECRET, "s-from"), (CM, "cm-vol"),
        (SECRET, "s-vol"), (CM, "cm-proj"), (SECRET, "s-proj"), (SPC, "spc"), (CM, "cm-init"),
    }  # fmt: skip


def test_only_stakater_env_values_are_kept() -> None:
    t = tmpl(
        [
            c(
                "a",
                env=[
                    {"name": "PASSWORD", "value": "hunter2"},
                    {"name": "STAKATER_X_CONFIGMAP", "value": "h"},
                ],
            )
        ]
    )
    assert [(v.name, v.value) for v in t.containers[0].env] == [
        ("PASSWORD", None),
        ("STAKATER_X_CONFIGMAP", "h"),
    ]


def test_an_empty_template_is_fine() -> None:
    t = pod_template_from_manifest(None)
    assert t.containers == ()
    assert t.references() == frozenset()
