"""The reload engine end to end against the real control plane, one namespace per test.

The controller runs in-process, scoped to the test's namespace (`--namespaces`), and every
assertion is about what lands on the API server: env vars, annotations, Events.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from kube_reloader.core import hashing
from kube_reloader.core.matching import MatchConfig
from kube_reloader.core.objects import ResourceType, WorkloadKind
from kube_reloader.core.strategies import Strategy
from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client, PatchType
from kube_reloader.runtime.controller import Controller
from kube_reloader.runtime.options import Options
from tests import builders
from tests.harness import (
    AUTO,
    BUILDERS,
    KIND_RESOURCE,
    app,
    auto_deployment_on_configmap,
    env_of,
    find_event,
    running,
    template_annotations,
    update_cm,
)
from tests.waiting import eventually

pytestmark = pytest.mark.cluster


# ------------------------------------------------------------------ kinds x strategies


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet", "DaemonSet"])
@pytest.mark.parametrize("strategy", [Strategy.ENV_VARS, Strategy.ANNOTATIONS])
async def test_auto_annotated_workload_reloads_with_reloaders_exact_hash(
    client: Client, namespace: str, kind: str, strategy: Strategy
) -> None:
    await client.create(
        resources.CONFIGMAPS, builders.configmap("app-config", namespace, {"a": "1"})
    )
    tmpl = app(env_from_configmaps=("app-config",), labels={"app": "w"})
    await client.create(
        KIND_RESOURCE[kind], BUILDERS[kind]("w", namespace, template=tmpl, annotations=AUTO)
    )
    async with running(client, namespace, strategy=strategy):
        await update_cm(client, namespace, "app-config", {"a": "1", "b": "2"})
        expected = "f83e99e324ba68ccc373a58ef1eb42f8ab88646a"  # Reloader's hash of a=1;b=2
        if strategy is Strategy.ENV_VARS:

            async def has_env() -> bool:
                return (await env_of(client, kind, namespace, "w")).get(
                    "STAKATER_APP_CONFIG_CONFIGMAP"
                ) == expected

            await eventually(has_env, what="the env var with the new hash")
        else:

            async def has_annotation() -> dict[str, Any] | None:
                raw = (await template_annotations(client, kind, namespace, "w")).get(
                    "reloader.stakater.com/last-reloaded-from"
                )
                return json.loads(raw) if raw else None

            doc = await eventually(has_annotation, what="last-reloaded-from")
            assert list(doc) == ["type", "name", "namespace", "hash", "containerRefs", "observedAt"]
            assert (doc["type"], doc["name"], doc["namespace"], doc["hash"], doc["containerRefs"]) == (
                "CONFIGMAP", "app-config", namespace, expected, ["app"],
            )  # fmt: skip
            assert await env_of(client, kind, namespace, "w") == {}


# ------------------------------------------------------------------ reference methods


REFERENCES = {
    "envFrom configMapRef": lambda: app(env_from_configmaps=("cfg",), labels={"app": "w"}),
    "env valueFrom configMapKeyRef": lambda: app(
        containers=[{"name": "app", "image": "x", "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "a"}}}]}],
        labels={"app": "w"}),
    "configMap volume": lambda: app(volume_mounts=("v",), volumes=[{"name": "v", "configMap": {"name": "cfg"}}], labels={"app": "w"}),
    "projected volume": lambda: app(volume_mounts=("v",), volumes=[{"name": "v", "projected": {"sources": [{"configMap": {"name": "cfg"}}]}}], labels={"app": "w"}),
    "init container envFrom": lambda: app(init=[builders.container("init", env_from_configmaps=("cfg",))], labels={"app": "w"}),
}  # fmt: skip


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet", "DaemonSet"])
@pytest.mark.parametrize("method", list(REFERENCES))
async def test_every_reference_method_triggers_auto_reload(
    client: Client, namespace: str, method: str, kind: str
) -> None:
    await client.create(resources.CONFIGMAPS, builders.configmap("cfg", namespace, {"a": "1"}))
    await client.create(
        KIND_RESOURCE[kind],
        BUILDERS[kind]("w", namespace, template=REFERENCES[method](), annotations=AUTO),
    )
    async with running(client, namespace):
        await update_cm(client, namespace, "cfg", {"a": "2"})
        want = hashing.configmap_hash({"a": "2"})

        async def done() -> bool:
            env = await env_of(client, kind, namespace, "w")
            return env.get("STAKATER_CFG_CONFIGMAP") == want

        await eventually(done, what=f"reload through {method}")


MODES = {
    # name: (workload annotations, template annotations, configmap annotations, referenced?)
    "auto": (AUTO, {}, {}, True),
    "typed auto": ({"configmap.reloader.stakater.com/auto": "true"}, {}, {}, True),
    "named": ({"configmap.reloader.stakater.com/reload": "other,cfg"}, {}, {}, False),
    "named regex": ({"configmap.reloader.stakater.com/reload": "c.g"}, {}, {}, False),
    "search and match": (
        {"reloader.stakater.com/search": "true"}, {}, {"reloader.stakater.com/match": "true"}, True,
    ),
    "pod template fallback": ({}, AUTO, {}, True),
}  # fmt: skip


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet", "DaemonSet"])
@pytest.mark.parametrize("strategy", [Strategy.ENV_VARS, Strategy.ANNOTATIONS])
@pytest.mark.parametrize("mode", list(MODES))
async def test_every_annotation_mode_reloads_every_kind_with_both_strategies(
    client: Client, namespace: str, mode: str, strategy: Strategy, kind: str
) -> None:
    wa, pa, ra, referenced = MODES[mode]
    await client.create(
        resources.CONFIGMAPS, builders.configmap("cfg", namespace, {"a": "1"}, annotations=ra)
    )
    refs = ("cfg",) if referenced else ()
    tmpl = app(env_from_configmaps=refs, labels={"app": "w"}, template_annotations=pa)
    await client.create(
        KIND_RESOURCE[kind], BUILDERS[kind]("w", namespace, template=tmpl, annotations=wa)
    )
    async with running(client, namespace, strategy=strategy):
        await update_cm(client, namespace, "cfg", {"a": "2"})
        want = hashing.configmap_hash({"a": "2"})

        async def done() -> bool:
            if strategy is Strategy.ENV_VARS:
                env = await env_of(client, kind, namespace, "w")
                return env.get("STAKATER_CFG_CONFIGMAP") == want
            annotations = await template_annotations(client, kind, namespace, "w")
            raw = annotations.get("reloader.stakater.com/last-reloaded-from")
            return bool(raw) and json.loads(raw)["hash"] == want

        await eventually(done, what=f"{mode} reload of a {kind} ({strategy})")


# ------------------------------------------------------------------ annotation modes


async def test_secret_named_reload_list_with_a_regex(client: Client, namespace: str) -> None:
    await client.create(resources.SECRETS, builders.secret("db-pass", namespace, {"p": "1"}))
    await client.create(resources.DEPLOYMENTS, builders.deployment(
        "w", namespace, template=app(labels={"app": "w"}),
        annotations={"secret.reloader.stakater.com/reload": "db-.*"}))  # fmt: skip
    async with running(client, namespace):
        await client.patch(
            resources.SECRETS,
            "db-pass",
            {"stringData": {"p": "2"}},
            namespace=namespace,
            patch_type=PatchType.MERGE,
        )
        want = hashing.secret_hash({"p": b"2"})

        async def done() -> bool:
            return (await env_of(client, "Deployment", namespace, "w")).get(
                "STAKATER_DB_PASS_SECRET"
            ) == want

        await eventually(done, what="named secret reload on containers[0]")


async def test_search_and_match_reload_only_matching_resources(
    client: Client, namespace: str
) -> None:
    await client.create(
        resources.CONFIGMAPS,
        builders.configmap(
            "m", namespace, {"a": "1"}, annotations={"reloader.stakater.com/match": "true"}
        ),
    )
    await client.create(resources.CONFIGMAPS, builders.configmap("n", namespace, {"a": "1"}))
    tmpl = app(env_from_configmaps=("m", "n"), labels={"app": "w"})
    await client.create(
        resources.DEPLOYMENTS,
        builders.deployment(
            "w", namespace, template=tmpl, annotations={"reloader.stakater.com/search": "true"}
        ),
    )
    async with running(client, namespace) as ctl:
        await update_cm(client, namespace, "n", {"a": "2"})
        await update_cm(client, namespace, "m", {"a": "2"})

        async def done() -> dict[str, str] | None:
            env = await env_of(client, "Deployment", namespace, "w")
            return env if "STAKATER_M_CONFIGMAP" in env else None

        env = await eventually(done, what="search/match reload")
        await asyncio.sleep(0.3)
        assert "STAKATER_N_CONFIGMAP" not in await env_of(client, "Deployment", namespace, "w")
        assert ctl.stats.skipped.get("skipped", 0) >= 1
        assert env["STAKATER_M_CONFIGMAP"] == hashing.configmap_hash({"a": "2"})


async def test_exclude_ignore_and_unannotated_workloads_are_left_alone(
    client: Client, namespace: str
) -> None:
    await client.create(resources.CONFIGMAPS, builders.configmap("c", namespace, {"a": "1"}))
    await client.create(
        resources.CONFIGMAPS,
        builders.configmap(
            "ign", namespace, {"a": "1"}, annotations={"reloader.stakater.com/ignore": "true"}
        ),
    )
    both = ("c", "ign")
    await client.create(resources.DEPLOYMENTS, builders.auto_deployment("excluded", namespace, configmaps=both,
                        annotations={**AUTO, "configmaps.exclude.reloader.stakater.com/reload": "c"}))  # fmt: skip
    await client.create(
        resources.DEPLOYMENTS,
        builders.deployment(
            "plain", namespace, template=app(env_from_configmaps=both, labels={"app": "plain"})
        ),
    )
    await client.create(
        resources.DEPLOYMENTS, builders.auto_deployment("auto", namespace, configmaps=both)
    )
    async with running(client, namespace):
        await update_cm(client, namespace, "ign", {"a": "2"})
        await update_cm(client, namespace, "c", {"a": "2"})

        async def auto_done() -> bool:
            return "STAKATER_C_CONFIGMAP" in await env_of(client, "Deployment", namespace, "auto")

        await eventually(auto_done, what="the auto workload to reload")
        await asyncio.sleep(0.3)
        assert list(await env_of(client, "Deployment", namespace, "auto")) == [
            "STAKATER_C_CONFIGMAP"
        ]
        assert await env_of(client, "Deployment", namespace, "excluded") == {}
        assert await env_of(client, "Deployment", namespace, "plain") == {}


async def test_pod_template_annotation_is_a_fallback(client: Client, namespace: str) -> None:
    await client.create(resources.CONFIGMAPS, builders.configmap("c", namespace, {"a": "1"}))
    tmpl = app(env_from_configmaps=("c",), labels={"app": "w"}, template_annotations=AUTO)
    await client.create(resources.DEPLOYMENTS, builders.deployment("w", namespace, template=tmpl))
    async with running(client, namespace):
        await update_cm(client, namespace, "c", {"a": "2"})

        async def done() -> bool:
            return "STAKATER_C_CONFIGMAP" in await env_of(client, "Deployment", namespace, "w")

        await eventually(done, what="reload through the pod-template annotation")


async def test_auto_reload_all_reloads_unannotated_workloads_unless_they_opt_out(
    client: Client, namespace: str
) -> None:
    await client.create(resources.CONFIGMAPS, builders.configmap("c", namespace, {"a": "1"}))
    await client.create(
        resources.DEPLOYMENTS,
        builders.deployment(
            "in", namespace, template=app(env_from_configmaps=("c",), labels={"app": "in"})
        ),
    )
    await client.create(resources.DEPLOYMENTS, builders.deployment("out", namespace, template=app(env_from_configmaps=("c",), labels={"app": "out"}),
                        annotations={"reloader.stakater.com/auto": "false"}))  # fmt: skip
    async with running(client, namespace, match=MatchConfig(auto_reload_all=True)):
        await update_cm(client, namespace, "c", {"a": "2"})

        async def done() -> bool:
            return "STAKATER_C_CONFIGMAP" in await env_of(client, "Deployment", namespace, "in")

        await eventually(done, what="auto-reload-all")
        await asyncio.sleep(0.3)
        assert await env_of(client, "Deployment", namespace, "out") == {}


# ------------------------------------------------------------------ event semantics


async def test_metadata_only_updates_and_preexisting_objects_do_nothing(
    client: Client, namespace: str
) -> None:
    await auto_deployment_on_configmap(client, namespace)
    async with running(client, namespace, reload_on_create=True) as ctl:
        await client.patch(
            resources.CONFIGMAPS,
            "c",
            {"metadata": {"labels": {"x": "y"}}},
            namespace=namespace,
            patch_type=PatchType.MERGE,
        )
        await asyncio.sleep(1.0)
        assert ctl.stats.changes == 0
        assert ctl.stats.patches == 0
    assert await env_of(client, "Deployment", namespace, "w") == {}


async def test_reload_on_create_and_on_delete(client: Client, namespace: str) -> None:
    await client.create(
        resources.DEPLOYMENTS, builders.auto_deployment("w", namespace, configmaps=("late",))
    )
    async with running(client, namespace, reload_on_create=True, reload_on_delete=True):
        await client.create(resources.CONFIGMAPS, builders.configmap("late", namespace, {"a": "1"}))

        async def created() -> bool:
            return (await env_of(client, "Deployment", namespace, "w")).get(
                "STAKATER_LATE_CONFIGMAP"
            ) == hashing.configmap_hash({"a": "1"})

        await eventually(created, what="reload on create")
        await client.delete(resources.CONFIGMAPS, "late", namespace=namespace)

        async def removed() -> bool:
            return "STAKATER_LATE_CONFIGMAP" not in await env_of(
                client, "Deployment", namespace, "w"
            )

        await eventually(removed, what="env var removed on delete")


async def test_reloaded_event_has_v1s_message_and_source(client: Client, namespace: str) -> None:
    await auto_deployment_on_configmap(client, namespace)
    async with running(client, namespace):
        await update_cm(client, namespace, "c", {"a": "2"})

        async def event() -> dict[str, Any] | None:
            return await find_event(client, namespace, lambda e: e["reason"] == "Reloaded")

        e = await eventually(event, what="a Reloaded event")
    assert e["type"] == "Normal"
    assert e["message"] == (
        f"Changes detected in 'c' of type 'CONFIGMAP' in namespace '{namespace}', "
        f"Updated 'w' of type 'Deployment' in namespace '{namespace}'"
    )
    assert e["source"]["component"] == "reloader-configmaps"
    assert (e["involvedObject"]["kind"], e["involvedObject"]["name"]) == ("Deployment", "w")


async def test_the_patch_is_written_with_field_manager_reloader(
    client: Client, namespace: str
) -> None:
    await auto_deployment_on_configmap(client, namespace)
    async with running(client, namespace):
        await update_cm(client, namespace, "c", {"a": "2"})

        async def managed() -> bool:
            d = await client.get(resources.DEPLOYMENTS, "w", namespace=namespace)
            return any(m["manager"] == "Reloader" for m in d["metadata"].get("managedFields", []))

        await eventually(managed, what="managedFields entry of Reloader")


async def test_an_invalid_regex_warns_on_its_workload_and_others_still_reload(
    client: Client, namespace: str
) -> None:
    await client.create(resources.CONFIGMAPS, builders.configmap("c", namespace, {"a": "1"}))
    await client.create(resources.DEPLOYMENTS, builders.deployment("bad", namespace, template=app(labels={"app": "bad"}),
                        annotations={"configmap.reloader.stakater.com/reload": "[unclosed"}))  # fmt: skip
    await client.create(
        resources.DEPLOYMENTS, builders.auto_deployment("good", namespace, configmaps=("c",))
    )
    async with running(client, namespace):
        await update_cm(client, namespace, "c", {"a": "2"})

        async def good() -> bool:
            return "STAKATER_C_CONFIGMAP" in await env_of(client, "Deployment", namespace, "good")

        await eventually(good, what="the good workload to reload")

        async def warning() -> dict[str, Any] | None:
            return await find_event(
                client,
                namespace,
                lambda e: e["type"] == "Warning" and e["involvedObject"]["name"] == "bad",
            )

        e = await eventually(warning, what="a Warning event on the bad workload")
    assert "invalid regular expression '[unclosed'" in e["message"]
    assert "configmap.reloader.stakater.com/reload" in e["message"]


async def test_resources_to_ignore_secrets_watches_configmaps_only(
    client: Client, namespace: str
) -> None:
    await client.create(resources.SECRETS, builders.secret("s", namespace, {"k": "1"}))
    await client.create(resources.CONFIGMAPS, builders.configmap("c", namespace, {"a": "1"}))
    await client.create(
        resources.DEPLOYMENTS,
        builders.auto_deployment("w", namespace, configmaps=("c",), secrets=("s",)),
    )
    async with running(client, namespace, resources=(ResourceType.CONFIGMAP,)):
        await client.patch(
            resources.SECRETS,
            "s",
            {"stringData": {"k": "2"}},
            namespace=namespace,
            patch_type=PatchType.MERGE,
        )
        await update_cm(client, namespace, "c", {"a": "2"})

        async def done() -> bool:
            return "STAKATER_C_CONFIGMAP" in await env_of(client, "Deployment", namespace, "w")

        await eventually(done, what="configmap reload")
        await asyncio.sleep(0.3)
        assert "STAKATER_S_SECRET" not in await env_of(client, "Deployment", namespace, "w")


async def test_resource_label_selector_filters_configs(client: Client, namespace: str) -> None:
    await client.create(
        resources.CONFIGMAPS,
        builders.configmap("yes", namespace, {"a": "1"}, labels={"reload": "on"}),
    )
    await client.create(resources.CONFIGMAPS, builders.configmap("no", namespace, {"a": "1"}))
    await client.create(
        resources.DEPLOYMENTS, builders.auto_deployment("w", namespace, configmaps=("yes", "no"))
    )
    async with running(client, namespace, resource_label_selector="reload=on"):
        await update_cm(client, namespace, "no", {"a": "2"})
        await update_cm(client, namespace, "yes", {"a": "2"})

        async def done() -> bool:
            return "STAKATER_YES_CONFIGMAP" in await env_of(client, "Deployment", namespace, "w")

        await eventually(done, what="selected configmap reload")
        await asyncio.sleep(0.3)
        assert "STAKATER_NO_CONFIGMAP" not in await env_of(client, "Deployment", namespace, "w")


async def test_a_burst_of_updates_ends_with_the_latest_hash_and_bounded_patches(
    client: Client, namespace: str
) -> None:
    await auto_deployment_on_configmap(client, namespace, data={"v": "0"})
    async with running(client, namespace) as ctl:
        for i in range(1, 21):
            await update_cm(client, namespace, "c", {"v": str(i)})
        want = hashing.configmap_hash({"v": "20"})

        async def latest() -> bool:
            env = await env_of(client, "Deployment", namespace, "w")
            # the controller counts a patch once its answer is back: the Deployment can show
            # the hash a moment before the count (the same event loop serves this test)
            return env.get("STAKATER_C_CONFIGMAP") == want and ctl.stats.patches >= 1

        await eventually(latest, what="the latest hash, its patch counted")
        assert 1 <= ctl.stats.patches <= 20


@pytest.mark.rollout
async def test_a_configmap_change_really_replaces_the_pods(client: Client, namespace: str) -> None:
    await auto_deployment_on_configmap(client, namespace, replicas=2)

    async def pods() -> set[str]:
        listed = await client.list(resources.PODS, namespace=namespace, label_selector="app=w")
        return {p["metadata"]["name"] for p in listed.items
                if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")}  # fmt: skip

    async def two() -> set[str] | None:
        names = await pods()
        return names if len(names) == 2 else None

    before = await eventually(two, what="2 running pods", timeout=60)
    async with running(client, namespace):
        await update_cm(client, namespace, "c", {"a": "2"})

        async def replaced() -> set[str] | None:
            names = await pods()
            return names if len(names) == 2 and not names & before else None

        after = await eventually(replaced, what="both pods replaced", timeout=60)
    assert after.isdisjoint(before)
    assert WorkloadKind.DEPLOYMENT.value == "Deployment"


# ------------------------------------------------------------------ namespace filters (global mode)


async def _global_namespace(client: Client, labels: dict[str, str]) -> str:
    import secrets as _secrets

    name = f"g-{_secrets.token_hex(4)}"
    await client.create(
        resources.NAMESPACES,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}},
    )
    await auto_deployment_on_configmap(client, name)
    return name


async def test_namespace_selector_and_namespaces_to_ignore_in_all_namespaces_mode(
    client: Client,
) -> None:
    selected = await _global_namespace(client, {"reload": "yes"})
    unselected = await _global_namespace(client, {})
    ignored = await _global_namespace(client, {"reload": "yes"})
    try:
        opts = Options(
            namespaces=None,
            namespace_selector="reload=yes",
            namespaces_to_ignore=frozenset({ignored}),
        )
        controller = Controller(client, opts)
        stop = asyncio.Event()
        task = asyncio.create_task(controller.run(stop))
        await asyncio.wait_for(controller.ready.wait(), 30)
        try:
            for ns in (unselected, ignored, selected):
                await update_cm(client, ns, "c", {"a": "2"})

            async def done() -> bool:
                return "STAKATER_C_CONFIGMAP" in await env_of(client, "Deployment", selected, "w")

            await eventually(done, what="reload in the selected namespace")
            await asyncio.sleep(0.3)
            assert await env_of(client, "Deployment", unselected, "w") == {}
            assert await env_of(client, "Deployment", ignored, "w") == {}
        finally:
            stop.set()
            await asyncio.wait_for(task, 30)
    finally:
        for ns in (selected, unselected, ignored):
            await client.delete(resources.NAMESPACES, ns)


# ------------------------------------------------------------------ bad and big input


async def test_big_and_binary_configs_reload_with_reloaders_hash(
    client: Client, namespace: str
) -> None:
    import base64

    big = {"blob": "x" * (1000 * 1024)}  # close to the 1 MiB object limit
    many = {f"k{i:05d}": f"v{i}" for i in range(10_000)}
    binary = {"bin": base64.b64encode(bytes(range(256))).decode()}
    await client.create(
        resources.CONFIGMAPS, builders.configmap("big", namespace, {"blob": "small"})
    )
    await client.create(resources.SECRETS, builders.secret("many", namespace, {"k": "v"}))
    await client.create(resources.CONFIGMAPS, builders.configmap("bin", namespace, {}))
    await client.create(
        resources.DEPLOYMENTS,
        builders.auto_deployment("w", namespace, configmaps=("big", "bin"), secrets=("many",)),
    )
    async with running(client, namespace):
        await update_cm(client, namespace, "big", big)
        await client.patch(
            resources.SECRETS,
            "many",
            {"stringData": many},
            namespace=namespace,
            patch_type=PatchType.MERGE,
        )
        await client.patch(
            resources.CONFIGMAPS,
            "bin",
            {"binaryData": binary},
            namespace=namespace,
            patch_type=PatchType.MERGE,
        )
        want = {
            "STAKATER_BIG_CONFIGMAP": hashing.configmap_hash(big),
            "STAKATER_MANY_SECRET": hashing.secret_hash(
                {"k": b"v", **{k: v.encode() for k, v in many.items()}}
            ),
            "STAKATER_BIN_CONFIGMAP": hashing.configmap_hash({}, {"bin": bytes(range(256))}),
        }

        async def done() -> dict[str, str] | None:
            env = await env_of(client, "Deployment", namespace, "w")
            return env if all(env.get(k) == v for k, v in want.items()) else None

        await eventually(done, what="all three reloads with Reloader's hashes", timeout=60)


async def test_a_non_boolean_auto_value_gets_a_warning_event(
    client: Client, namespace: str
) -> None:
    await auto_deployment_on_configmap(
        client, namespace, annotations={"reloader.stakater.com/auto": "yes"}
    )
    async with running(client, namespace):
        await update_cm(client, namespace, "c", {"a": "2"})

        async def warning() -> dict[str, Any] | None:
            return await find_event(
                client,
                namespace,
                lambda e: e["type"] == "Warning" and e["involvedObject"]["name"] == "w",
            )

        e = await eventually(warning, what="a Warning event")
    assert "reloader.stakater.com/auto='yes'" in e["message"]
    assert "not a boolean" in e["message"]
    assert await env_of(client, "Deployment", namespace, "w") == {}


async def test_a_rejected_patch_records_reload_fail_and_other_workloads_still_reload(
    client: Client, namespace: str
) -> None:
    policy = f"deny-frozen-{namespace}"
    await client.create(
        resources.Resource("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy", namespaced=False),
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": policy},
         "spec": {"failurePolicy": "Fail",
                  "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["deployments"]}]},
                  "validations": [{"expression": "!has(object.metadata.labels) || !('frozen' in object.metadata.labels)",
                                   "message": "frozen deployments cannot change"}]}},
    )  # fmt: skip
    binding_res = resources.Resource(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicybindings",
        "ValidatingAdmissionPolicyBinding",
        namespaced=False,
    )
    await client.create(binding_res, {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": policy},
        "spec": {"policyName": policy, "validationActions": ["Deny"],
                 "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}}},
    })  # fmt: skip
    try:
        await auto_deployment_on_configmap(
            client, namespace, name="frozen", labels={"frozen": "yes"}
        )
        await client.create(
            resources.DEPLOYMENTS, builders.auto_deployment("free", namespace, configmaps=("c",))
        )

        async def denied() -> bool:  # the policy takes effect a moment after it is created
            try:
                await client.patch(resources.DEPLOYMENTS, "frozen", {"metadata": {"annotations": {"probe": str(asyncio.get_running_loop().time())}}},
                                   namespace=namespace, patch_type=PatchType.MERGE)  # fmt: skip
            except errors.KubeError:
                return True
            return False

        await eventually(denied, what="the admission policy to be active")
        async with running(client, namespace) as ctl:
            await update_cm(client, namespace, "c", {"a": "2"})

            async def free_done() -> bool:
                return "STAKATER_C_CONFIGMAP" in await env_of(
                    client, "Deployment", namespace, "free"
                )

            await eventually(free_done, what="the free workload to reload")

            async def fail_event() -> dict[str, Any] | None:
                return await find_event(client, namespace, lambda e: e["reason"] == "ReloadFail")

            e = await eventually(fail_event, what="a ReloadFail event")
            assert ctl.stats.failures == 1
        assert e["type"] == "Warning"
        assert e["message"].startswith(
            f"Update for 'frozen' of type 'Deployment' in namespace '{namespace}' failed with error "
        )
        assert "frozen deployments cannot change" in e["message"]
        assert await env_of(client, "Deployment", namespace, "frozen") == {}
    finally:
        await client.delete(binding_res, policy)
        await client.delete(
            resources.Resource(
                "admissionregistration.k8s.io",
                "v1",
                "validatingadmissionpolicies",
                "ValidatingAdmissionPolicy",
                namespaced=False,
            ),
            policy,
        )


async def test_a_reload_is_counted_in_reloaders_and_our_metrics(
    client: Client, namespace: str
) -> None:
    await auto_deployment_on_configmap(client, namespace)
    await client.create(
        resources.DEPLOYMENTS,
        builders.deployment("x", namespace, template=app(labels={"app": "x"})),
    )
    async with running(client, namespace) as ctl:
        await update_cm(client, namespace, "c", {"a": "2"})

        async def counted() -> str | None:
            text = ctl.metrics.exposition().decode()
            return text if 'reloader_reload_executed_total{success="true"} 1.0' in text else None

        text = await eventually(counted, what="the reload to be counted")
    assert 'reloader_action_total{result="success",workload_kind="Deployment"} 1.0' in text
    assert 'kube_reloader_reload_latency_seconds_count{workload_kind="Deployment"} 1.0' in text
    assert (
        'reloader_events_received_total{event_type="update",resource_type="configmaps"} 1.0' in text
    )
    assert 'reloader_workloads_matched_total{kind="Deployment"} 1.0' in text
    assert 'kube_reloader_decisions_total{outcome="reload",reason="auto"} 1.0' in text
    assert 'kube_reloader_cache_objects{resource="deployments.apps"} 2.0' in text
