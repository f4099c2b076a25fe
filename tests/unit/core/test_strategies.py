"""Env-var names, patch bodies and idempotence (compat-spec §4)."""

from __future__ import annotations

import json

import pytest

from kube_reloader.core import strategies
from kube_reloader.core.objects import ResourceType
from kube_reloader.core.references import pod_template_from_manifest


@pytest.mark.parametrize(
    ("name", "rtype", "expected"),
    [
        ("app-config", ResourceType.CONFIGMAP, "STAKATER_APP_CONFIG_CONFIGMAP"),
        ("app.config-v2", ResourceType.CONFIGMAP, "STAKATER_APP_CONFIG_V2_CONFIGMAP"),
        ("a--b", ResourceType.CONFIGMAP, "STAKATER_A_B_CONFIGMAP"),
        ("a.-b", ResourceType.CONFIGMAP, "STAKATER_A_B_CONFIGMAP"),
        ("db", ResourceType.SECRET, "STAKATER_DB_SECRET"),
        ("vault-spc", ResourceType.SECRETPROVIDERCLASS, "STAKATER_VAULT_SPC_SECRETPROVIDERCLASS"),
        ("-lead", ResourceType.CONFIGMAP, "STAKATER_LEAD_CONFIGMAP"),
        ("trail-", ResourceType.CONFIGMAP, "STAKATER_TRAIL__CONFIGMAP"),
        ("x_y", ResourceType.SECRET, "STAKATER_X_Y_SECRET"),
        ("cm1", ResourceType.CONFIGMAP, "STAKATER_CM1_CONFIGMAP"),
    ],
)
def test_env_var_names(name: str, rtype: ResourceType, expected: str) -> None:
    assert strategies.env_var_name(name, rtype) == expected


def template(env: list[dict[str, str]] | None = None):  # type: ignore[no-untyped-def]
    return pod_template_from_manifest(
        {"spec": {"containers": [{"name": "side"}, {"name": "app", "env": env or []}]}}
    )


def test_env_patch_has_v1s_exact_shape() -> None:
    body = strategies.env_patch(template(), "app", "STAKATER_CM_CONFIGMAP", "abc")
    assert json.dumps(body, separators=(",", ":")) == (
        '{"spec":{"template":{"spec":{"containers":[{"name":"app","env":'
        '[{"name":"STAKATER_CM_CONFIGMAP","value":"abc"}]}]}}}}'
    )


def test_env_patch_is_none_when_the_hash_is_already_there() -> None:
    t = template([{"name": "STAKATER_CM_CONFIGMAP", "value": "abc"}])
    assert strategies.env_patch(t, "app", "STAKATER_CM_CONFIGMAP", "abc") is None
    assert strategies.env_patch(t, "app", "STAKATER_CM_CONFIGMAP", "new") is not None


def test_env_remove_patch_guards_the_index_with_a_test_op() -> None:
    t = template([{"name": "A", "value": "1"}, {"name": "STAKATER_CM_CONFIGMAP", "value": "abc"}])
    assert strategies.env_remove_patch(t, "app", "STAKATER_CM_CONFIGMAP") == [
        {
            "op": "test",
            "path": "/spec/template/spec/containers/1/env/1/name",
            "value": "STAKATER_CM_CONFIGMAP",
        },
        {"op": "remove", "path": "/spec/template/spec/containers/1/env/1"},
    ]
    assert strategies.env_remove_patch(t, "app", "STAKATER_OTHER_CONFIGMAP") is None
    assert strategies.env_remove_patch(t, "missing", "STAKATER_CM_CONFIGMAP") is None


def test_annotation_value_is_v1s_compact_json_in_go_field_order() -> None:
    value = strategies.annotation_value(
        rtype=ResourceType.CONFIGMAP, name="app-config", namespace="default",
        hash="f83e99e324ba68ccc373a58ef1eb42f8ab88646a", container="app", observed_at=1714564800,
    )  # fmt: skip
    assert value == (
        '{"type":"CONFIGMAP","name":"app-config","namespace":"default",'
        '"hash":"f83e99e324ba68ccc373a58ef1eb42f8ab88646a","containerRefs":["app"],"observedAt":1714564800}'
    )


def test_the_record_of_a_resource_is_last_reloaded_froms_when_it_names_that_resource() -> None:
    value = strategies.annotation_value(
        rtype=ResourceType.SECRET, name="s", namespace="ns", hash="h", container="c", observed_at=1
    )
    ours = '{"SECRET/s":"older","CONFIGMAP/c":"c1"}'
    t = pod_template_from_manifest({"metadata": {"annotations": {
        "reloader.stakater.com/last-reloaded-from": value, "kube-reloader.io/reloaded-hashes": ours,
    }}})  # fmt: skip
    assert strategies.records(t) == {"SECRET/s": "h", "CONFIGMAP/c": "c1"}
    broken = pod_template_from_manifest({"metadata": {"annotations": {
        "reloader.stakater.com/last-reloaded-from": "{not json",
        "kube-reloader.io/reloaded-hashes": ours,
    }}})  # fmt: skip
    assert strategies.records(broken) == {"SECRET/s": "older", "CONFIGMAP/c": "c1"}


def test_merging_patches_gives_one_body_with_every_env_var() -> None:
    a = strategies.env_patch(template(), "app", "STAKATER_A_CONFIGMAP", "1")
    b = strategies.env_patch(template(), "app", "STAKATER_B_SECRET", "2")
    c = strategies.env_patch(template(), "side", "STAKATER_C_CONFIGMAP", "3")
    assert a
    assert b
    assert c
    merged = strategies.merge_strategic([a, b, c])
    assert merged == {"spec": {"template": {"spec": {"containers": [
        {"name": "app", "env": [{"name": "STAKATER_A_CONFIGMAP", "value": "1"}, {"name": "STAKATER_B_SECRET", "value": "2"}]},
        {"name": "side", "env": [{"name": "STAKATER_C_CONFIGMAP", "value": "3"}]},
    ]}}}}  # fmt: skip
