"""Least privilege, proven: the chart's RBAC is applied to the dev cluster, a ServiceAccount
bound to it gets a token, and the controller runs in this process under that identity, started
by the CLI's own `_run` with the args the chart renders, through every reload path (Deployment,
StatefulSet, DaemonSet, Secret, pause then resume, Job recreation, a CronJob's Job on create,
Argo Rollout, DeploymentConfig, Secrets Store CSI, Events, the HA lease).

Every request the controller sends is recorded as (API group, resource, verb). The test fails
when one is refused (a verb the chart forgot; the controller would otherwise fall back to
polling or drop an Event and still reload), and when the chart grants a verb that no path used
(except the GETs that only re-read a workload after a write conflict)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import secrets
import signal
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import msgspec
import pytest

from kube_reloader.cli import run as cli_run
from kube_reloader.cli.flags import parse
from kube_reloader.core import hashing
from kube_reloader.kube import config, errors, resources
from kube_reloader.kube.client import Client, PatchType
from kube_reloader.kube.transport import Transport
from kube_reloader.runtime.controller import Controller
from tests import builders
from tests.harness import (
    AUTO,
    KIND_RESOURCE,
    app,
    auto_deployment_on_configmap,
    bearer_connection,
    env_of,
    service_account_token,
    update_cm,
)
from tests.integration.test_chart import KINDS, render
from tests.integration.test_kinds import ensure_crds
from tests.waiting import eventually, next_second

# serial: ClusterRoles and CRDs
pytestmark = [pytest.mark.cluster, pytest.mark.serial]

RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
PAUSE = "deployment.reloader.stakater.com/pause-period"
PAUSED_AT = "deployment.reloader.stakater.com/paused-at"
POD = "kube-reloader-rbac-test"
#: granted on purpose, used only to re-read a workload whose write met a 409 Conflict
CONFLICT_ONLY = {
    ("apps", "statefulsets", "get"),
    ("apps", "daemonsets", "get"),
    ("argoproj.io", "rollouts", "get"),
    ("apps.openshift.io", "deploymentconfigs", "get"),
}
Verb = tuple[str, str, str]  # (API group, resource, verb)


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    watch: bool
    status: int

    def verb(self) -> Verb | None:
        """Kubernetes' RequestInfo for a resource request; None for discovery and the like."""
        parts = [unquote(p) for p in self.path.strip("/").split("/")]
        if parts[:1] == ["api"] and len(parts) > 2:
            group, rest = "", parts[2:]
        elif parts[:1] == ["apis"] and len(parts) > 3:
            group, rest = parts[1], parts[3:]
        else:
            return None
        if rest[0] == "namespaces" and len(rest) > 2:
            rest = rest[2:]
        resource = rest[0] if len(rest) < 3 else f"{rest[0]}/{rest[2]}"
        named = len(rest) > 1
        verb = {
            "POST": "create",
            "PUT": "update",
            "PATCH": "patch",
            "DELETE": "delete" if named else "deletecollection",
        }.get(self.method)
        if verb is None:
            verb = "watch" if self.watch else "get" if named else "list"
        return group, resource, verb


def recording_client(calls: list[Call]) -> Callable[..., Client]:
    """Builds Clients whose transport appends every request it sends, with the answer's
    status, to `calls`."""

    class Recording(Transport):
        @contextlib.asynccontextmanager
        async def open(
            self, method: str, path: str, *, params: Mapping[str, str] | None = None, **kw: Any
        ) -> AsyncIterator[Any]:
            watch = (params or {}).get("watch") in ("true", "1")
            entered = False
            try:
                async with super().open(method, path, params=params, **kw) as resp:
                    entered = True
                    calls.append(Call(method, path, watch, resp.status))
                    yield resp
            except errors.ApiError as exc:
                if not entered:
                    calls.append(Call(method, path, watch, exc.code))
                raise

    def new_client(conn: config.ConnectionConfig, **options: Any) -> Client:
        return Client.over(Recording(conn, **options))

    return new_client


def granted(docs: list[dict[str, Any]]) -> set[Verb]:
    out: set[Verb] = set()
    for doc in docs:
        if doc["kind"] not in ("ClusterRole", "Role"):
            continue
        for rule in doc["rules"]:
            for g in rule["apiGroups"]:
                for r in rule["resources"]:
                    out.update((g, r, v) for v in rule["verbs"])
    return out


def chart_settings(docs: list[dict[str, Any]], namespace: str) -> Any:
    """The controller's settings from the rendered Deployment: its args, and its env as the
    kubelet would fill it in for a pod named POD in `namespace`."""
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    env: dict[str, str] = {}
    for e in container.get("env", []):
        field = str(((e.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath"))
        env[e["name"]] = (
            e.get("value") or {"metadata.namespace": namespace, "metadata.name": POD}[field]
        )
    settings = parse(container["args"], env=env)
    return msgspec.structs.replace(settings, metrics_addr="127.0.0.1:0", pprof_addr=None)


async def as_service_account(
    client: Client, kubeconfig_path: Path, docs: list[dict[str, Any]], namespace: str
) -> config.ConnectionConfig:
    """Apply the chart's ServiceAccount and RBAC; the connection of that ServiceAccount."""
    for doc in docs:
        if doc["kind"] in RBAC_KINDS:
            await client.patch(
                KINDS[doc["kind"]], doc["metadata"]["name"], doc, namespace=doc["metadata"].get("namespace"),
                patch_type=PatchType.APPLY, field_manager="kube-reloader-rbac-test", force=True,
            )  # fmt: skip
    sa = next(d for d in docs if d["kind"] == "ServiceAccount")["metadata"]["name"]
    token = await service_account_token(client, namespace, sa)
    conn = bearer_connection(config.load_kubeconfig([kubeconfig_path]), token)

    async def bound() -> bool:  # RBAC changes take a moment to reach the authorizer
        async with Client(conn) as probe:
            try:
                await probe.list(resources.DEPLOYMENTS, namespace=namespace, limit=1)
            except errors.Forbidden:
                return False
        return True

    await eventually(bound, what="the chart's bindings to take effect")
    return conn


@contextlib.asynccontextmanager
async def chart_controller(
    monkeypatch: pytest.MonkeyPatch, conn: config.ConnectionConfig, settings: Any, calls: list[Call]
) -> AsyncIterator[Controller]:
    """`kube-reloader` as the chart runs it (the CLI's `_run`: controller, lease, HTTP servers),
    in this process; SIGTERM ends it as it ends a pod."""
    started: list[Controller] = []

    class Captured(Controller):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            started.append(self)

    monkeypatch.setattr(cli_run, "Client", recording_client(calls))
    monkeypatch.setattr(cli_run, "Controller", Captured)
    task = asyncio.create_task(cli_run._run(conn, settings))

    async def controller() -> Controller | None:
        if task.done():
            raise AssertionError(f"kube-reloader stopped at start: {task.result()}")
        return started[0] if started else None

    ctl = await eventually(controller, what="the controller to start")
    try:
        await asyncio.wait_for(ctl.ready.wait(), 30)
        await asyncio.wait_for(ctl.leading.wait(), 30)
        yield ctl
    finally:
        signal.raise_signal(signal.SIGTERM)  # `_run`'s handler: stop as a pod does
        code = await asyncio.wait_for(task, 30)
    assert code == 0, "kube-reloader exited with an error"


def check_calls(calls: list[Call], rules: set[Verb], *, all_used: bool) -> set[Verb]:
    refused = sorted({f"{c.verb()} ({c.method} {c.path})" for c in calls if c.status in (401, 403)})
    assert not refused, f"the chart's RBAC refused the controller: {refused}"
    used = {v for c in calls if (v := c.verb()) is not None}
    print("verbs used:", ", ".join(f"{r}.{g or 'core'}:{v}" for g, r, v in sorted(used)))
    assert used <= rules, f"used but not granted (impossible without a 403): {used - rules}"
    if all_used:
        unused = rules - used - CONFLICT_ONLY
        assert not unused, f"the chart grants verbs that no reload path used: {sorted(unused)}"
    return used


async def reloaded(
    client: Client, kind: str, namespace: str, name: str, var: str, want: str
) -> bool:
    return (await env_of(client, kind, namespace, name)).get(var) == want


async def events_for(client: Client, namespace: str) -> set[tuple[str, str]]:
    return {
        (e["involvedObject"]["kind"], e["involvedObject"]["name"])
        for e in (await client.list(resources.EVENTS, namespace=namespace)).items
        if e["reason"] == "Reloaded"
    }


async def cronjob_job(client: Client, namespace: str, cron: str) -> dict[str, Any] | None:
    for job in (await client.list(resources.JOBS, namespace=namespace)).items:
        if job["metadata"]["name"].startswith(f"{cron}-"):
            return job
    return None


async def test_every_reload_path_works_with_exactly_the_verbs_the_cluster_wide_chart_grants(
    client: Client, namespace: str, kubeconfig_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await ensure_crds(client)
    release = f"r{secrets.token_hex(3)}"
    selector = f"kube-reloader-rbac={release}"
    values = {"reloader": {
        "enableHA": True, "reloadOnCreate": True, "isArgoRollouts": True, "isOpenshift": True,
        "enableCSIIntegration": True, "namespaceSelector": selector,
    }}  # fmt: skip
    docs = render(values, release=release, namespace=namespace)
    rules = granted(docs)
    await client.patch(
        resources.NAMESPACES, namespace, {"metadata": {"labels": {"kube-reloader-rbac": release}}},
        patch_type=PatchType.MERGE,
    )  # fmt: skip
    # ---- the workloads, one per path
    await client.create(resources.CONFIGMAPS, builders.configmap("c", namespace, {"a": "1"}))
    await client.create(resources.SECRETS, builders.secret("s", namespace, {"k": "1"}))
    on_c: dict[str, Any] = {"env_from_configmaps": ("c",)}
    for kind, name, meta, tmpl in (
        ("Deployment", "deploy", AUTO, on_c),
        ("StatefulSet", "sts", AUTO, on_c),
        ("DaemonSet", "ds", AUTO, on_c),
        ("Deployment", "secret-user", AUTO, {"env_from_secrets": ("s",)}),
        ("Deployment", "paused", {**AUTO, PAUSE: "2s"}, on_c),
    ):
        build = {"Deployment": builders.deployment, "StatefulSet": builders.statefulset,
                 "DaemonSet": builders.daemonset}[kind]  # fmt: skip
        body = build(name, namespace, template=app(labels={"app": name}, **tmpl), annotations=meta)
        if kind != "DaemonSet":
            body["spec"]["replicas"] = 0
        await client.create(KIND_RESOURCE[kind], body)
    job_tmpl = builders.pod_template({"job": "job"}, containers=[builders.container("t", env_from_configmaps=("c",))],
                                     restart_policy="Never")  # fmt: skip
    old_job = await client.create(
        resources.JOBS, builders.job("job", namespace, template=job_tmpl, annotations=AUTO)
    )
    cron_tmpl = builders.pod_template({"job": "cron"}, containers=[builders.container("t", env_from_configmaps=("late",))],
                                      restart_policy="Never")  # fmt: skip
    await client.create(
        resources.CRONJOBS,
        builders.cronjob("cron", namespace, template=cron_tmpl, annotations=AUTO),
    )
    await client.create(resources.ROLLOUTS, {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
        "metadata": {"name": "rollout", "namespace": namespace, "annotations": AUTO},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "rollout"}},
                 "template": app(labels={"app": "rollout"}, **on_c)},
    })  # fmt: skip
    await client.create(resources.DEPLOYMENTCONFIGS, {
        "apiVersion": "apps.openshift.io/v1", "kind": "DeploymentConfig",
        "metadata": {"name": "dc", "namespace": namespace, "annotations": AUTO},
        "spec": {"replicas": 0, "selector": {"app": "dc"}, "template": app(labels={"app": "dc"}, **on_c)},
    })  # fmt: skip
    await client.create(resources.SECRETPROVIDERCLASSES, {
        "apiVersion": "secrets-store.csi.x-k8s.io/v1", "kind": "SecretProviderClass",
        "metadata": {"name": "vault-db", "namespace": namespace}, "spec": {"provider": "vault"},
    })  # fmt: skip
    csi = [{"name": "secrets", "csi": {"driver": "secrets-store.csi.k8s.io", "readOnly": True,
                                       "volumeAttributes": {"secretProviderClass": "vault-db"}}}]  # fmt: skip
    await client.create(resources.DEPLOYMENTS, builders.deployment(
        "mounts", namespace, replicas=0,
        template=app(volume_mounts=("secrets",), volumes=csi, labels={"app": "mounts"}),
        annotations={"secretproviderclass.reloader.stakater.com/auto": "true"},
    ))  # fmt: skip
    await client.create(resources.SECRETPROVIDERCLASSPODSTATUSES, {
        "apiVersion": "secrets-store.csi.x-k8s.io/v1", "kind": "SecretProviderClassPodStatus",
        "metadata": {"name": "pod-1-vault-db", "namespace": namespace},
        "status": {"podName": "pod-1", "secretProviderClassName": "vault-db", "mounted": True,
                   "objects": [{"id": "secret/data/db", "version": "1"}]},
    })  # fmt: skip

    # changed while no controller ran, on a workload that carries no hash: the start-up
    # catch-up lists its pods (they predate the change) before rolling it
    await client.create(resources.CONFIGMAPS, builders.configmap("before", namespace, {"v": "1"}))
    await client.create(resources.DEPLOYMENTS, builders.deployment(
        "stale", namespace, replicas=1, annotations=AUTO,
        template=app(labels={"app": "stale"}, env_from_configmaps=("before",)),
    ))  # fmt: skip

    async def stale_pod() -> bool:
        listed = await client.list(resources.PODS, namespace=namespace, label_selector="app=stale")
        return len(listed.items) == 1

    await eventually(stale_pod, what="the stale Deployment's pod")
    await next_second()  # managedFields and creation times have whole seconds
    await update_cm(client, namespace, "before", {"v": "2"})
    cluster_objects = [
        (d["kind"], d["metadata"]["name"]) for d in docs if d["kind"].startswith("Cluster")
    ]
    calls: list[Call] = []
    try:
        conn = await as_service_account(client, kubeconfig_path, docs, namespace)
        settings = chart_settings(docs, namespace)
        assert settings.ha is not None
        assert settings.options.namespace_selector == selector
        async with chart_controller(monkeypatch, conn, settings, calls):
            lease = await client.get(
                resources.LEASES, "stakater-reloader-lock", namespace=namespace
            )
            assert lease["spec"]["holderIdentity"] == POD
            await update_cm(client, namespace, "c", {"a": "2"})
            await client.patch(resources.SECRETS, "s", {"stringData": {"k": "2"}}, namespace=namespace,
                               patch_type=PatchType.MERGE)  # fmt: skip
            await client.create(
                resources.CONFIGMAPS, builders.configmap("late", namespace, {"b": "1"})
            )
            await client.patch(resources.SECRETPROVIDERCLASSPODSTATUSES, "pod-1-vault-db",
                               {"status": {"objects": [{"id": "secret/data/db", "version": "2"}]}},
                               namespace=namespace, patch_type=PatchType.MERGE)  # fmt: skip
            c2 = hashing.configmap_hash({"a": "2"})
            for kind, name in (("Deployment", "deploy"), ("StatefulSet", "sts"), ("DaemonSet", "ds"),
                               ("Deployment", "paused"), ("Rollout", "rollout"), ("DeploymentConfig", "dc")):  # fmt: skip

                async def done(kind: str = kind, name: str = name) -> bool:
                    return await reloaded(client, kind, namespace, name, "STAKATER_C_CONFIGMAP", c2)

                await eventually(done, what=f"the {kind} {name} reloaded")
            s2 = hashing.secret_hash({"k": b"2"})

            async def secret_done() -> bool:
                env = await env_of(client, "Deployment", namespace, "secret-user")
                return env.get("STAKATER_S_SECRET") == s2

            await eventually(secret_done, what="the Secret's Deployment reloaded")

            async def csi_done() -> bool:
                return "STAKATER_VAULT_DB_SECRETPROVIDERCLASS" in await env_of(
                    client, "Deployment", namespace, "mounts"
                )

            await eventually(csi_done, what="the CSI rotation's Deployment reloaded")

            async def job_recreated() -> bool:
                try:
                    job = await client.get(resources.JOBS, "job", namespace=namespace)
                except errors.NotFound:
                    return False
                return bool(job["metadata"]["uid"] != old_job["metadata"]["uid"])

            await eventually(job_recreated, what="the Job deleted and recreated", timeout=40)

            async def cron_job() -> dict[str, Any] | None:
                return await cronjob_job(client, namespace, "cron")

            await eventually(cron_job, what="the CronJob's Job on the ConfigMap's creation")

            async def resumed() -> bool:
                d = await client.get(resources.DEPLOYMENTS, "paused", namespace=namespace)
                return not d["spec"].get("paused") and PAUSED_AT not in d["metadata"].get(
                    "annotations", {}
                )

            await eventually(resumed, what="the paused Deployment resumed", timeout=20)
            wanted = {("Deployment", "deploy"), ("StatefulSet", "sts"), ("DaemonSet", "ds"),
                      ("Deployment", "secret-user"), ("Deployment", "paused"), ("Job", "job"),
                      ("CronJob", "cron"), ("Rollout", "rollout"), ("DeploymentConfig", "dc"),
                      ("Deployment", "mounts"), ("Deployment", "stale")}  # fmt: skip

            async def all_events() -> bool:
                return wanted <= await events_for(client, namespace)

            await eventually(all_events, what="a Reloaded Event for every workload")
            # the same change again (another Secret content, the same Event text): the
            # Event about it is counted, not duplicated (a PATCH of its count)
            await client.patch(resources.SECRETS, "s", {"stringData": {"k": "3"}}, namespace=namespace,
                               patch_type=PatchType.MERGE)  # fmt: skip

            async def counted() -> bool:
                listed = (await client.list(resources.EVENTS, namespace=namespace)).items
                return any(e["reason"] == "Reloaded" and e["involvedObject"]["name"] == "secret-user"
                           and e.get("count", 1) >= 2 for e in listed)  # fmt: skip

            await eventually(counted, what="the repeated Reloaded Event counted", timeout=30)
        lease = await client.get(resources.LEASES, "stakater-reloader-lock", namespace=namespace)
        assert lease["spec"].get("holderIdentity", "") == "", "SIGTERM released the lease"
    finally:
        for kind, name in cluster_objects:
            await client.delete(KINDS[kind], name)
    used = check_calls(calls, rules, all_used=True)
    assert ("", "namespaces", "watch") in used
    assert ("", "pods", "list") in used
    assert ("", "events", "patch") in used
    assert ("coordination.k8s.io", "leases", "update") in used
    # discovery of the optional APIs is a non-resource GET every authenticated user may do
    assert any(c.path == "/apis/argoproj.io/v1alpha1" and c.status == 200 for c in calls)


async def test_a_one_namespace_chart_without_jobs_grants_only_create_on_jobs_and_suffices(
    client: Client, namespace: str, kubeconfig_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """watchGlobally: false renders a Role; ignoreJobs leaves only the CronJob's Job creation."""
    release = f"r{secrets.token_hex(3)}"
    docs = render({"reloader": {"watchGlobally": False, "ignoreJobs": True, "reloadOnCreate": True}},
                  release=release, namespace=namespace)  # fmt: skip
    assert not any(d["kind"].startswith("Cluster") for d in docs)
    rules = granted(docs)
    assert {v for g, r, v in rules if r == "jobs"} == {"create"}
    await auto_deployment_on_configmap(client, namespace, name="deploy", replicas=0)
    cron_tmpl = builders.pod_template({"job": "cron"}, containers=[builders.container("t", env_from_configmaps=("late",))],
                                      restart_policy="Never")  # fmt: skip
    await client.create(
        resources.CRONJOBS,
        builders.cronjob("cron", namespace, template=cron_tmpl, annotations=AUTO),
    )
    conn = await as_service_account(client, kubeconfig_path, docs, namespace)
    settings = chart_settings(docs, namespace)
    assert settings.options.namespaces == (namespace,)
    calls: list[Call] = []
    async with chart_controller(monkeypatch, conn, settings, calls):
        await update_cm(client, namespace, "c", {"a": "2"})
        await client.create(resources.CONFIGMAPS, builders.configmap("late", namespace, {"b": "1"}))
        c2 = hashing.configmap_hash({"a": "2"})

        async def done() -> bool:
            return await reloaded(
                client, "Deployment", namespace, "deploy", "STAKATER_C_CONFIGMAP", c2
            )

        await eventually(done, what="the Deployment reloaded under the Role")

        async def cron_job() -> dict[str, Any] | None:
            return await cronjob_job(client, namespace, "cron")

        await eventually(cron_job, what="the CronJob's Job under the Role")

        async def both_events() -> bool:
            return {("Deployment", "deploy"), ("CronJob", "cron")} <= await events_for(
                client, namespace
            )

        await eventually(both_events, what="the Reloaded Events under the Role")
    used = check_calls(calls, rules, all_used=False)
    assert {v for g, r, v in used if r == "jobs"} == {"create"}


async def test_hmac_hashing_needs_only_get_on_its_key_secret_and_create_in_its_namespace(
    client: Client, namespace: str, kubeconfig_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """hashAlgorithm: hmac-sha256 adds a Role for the key Secret; the controller creates the
    key on its first start, reads it on the next, and reloads with keyed hashes."""
    release = f"r{secrets.token_hex(3)}"
    docs = render({"reloader": {"watchGlobally": False, "hashAlgorithm": "hmac-sha256"}},
                  release=release, namespace=namespace)  # fmt: skip
    rules = granted(docs)
    assert {v for g, r, v in rules if r == "secrets"} == {"create", "get", "list", "watch"}
    await auto_deployment_on_configmap(client, namespace, name="deploy", replicas=0)
    conn = await as_service_account(client, kubeconfig_path, docs, namespace)
    settings = chart_settings(docs, namespace)
    assert settings.hash_key is not None
    for version in ("2", "3"):  # the first start creates the key, the second reads it
        calls: list[Call] = []
        async with chart_controller(monkeypatch, conn, settings, calls):
            await update_cm(client, namespace, "c", {"a": version})
            key_secret = await client.get(
                resources.SECRETS, settings.hash_key.secret, namespace=namespace
            )
            key = base64.b64decode(key_secret["data"]["key"])
            want = hmac.new(key, f"a={version}".encode(), hashlib.sha256).hexdigest()

            async def done(want: str = want) -> bool:
                return await reloaded(
                    client, "Deployment", namespace, "deploy", "STAKATER_C_CONFIGMAP", want
                )

            await eventually(done, what="the keyed reload under the chart's Role")
        check_calls(calls, rules, all_used=False)


async def test_pod_reloads_need_only_pods_list_and_eviction_create_which_the_chart_grants_when_asked(
    client: Client, namespace: str, kubeconfig_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pod_verbs = {("", "pods", "list"), ("", "pods/eviction", "create")}
    plain = granted(render({}, release="plain", namespace=namespace))
    assert ("", "pods", "list") in plain, "the start-up catch-up looks at pods"
    assert ("", "pods/eviction", "create") not in plain
    assert pod_verbs <= granted(render({"reloader": {"podReloads": True}}, release="p",
                                       namespace=namespace))  # fmt: skip
    docs = render({"reloader": {"watchGlobally": False, "defaultStrategy": "evict"}},
                  release=f"r{secrets.token_hex(3)}", namespace=namespace)  # fmt: skip
    rules = granted(docs)
    assert pod_verbs <= rules
    await auto_deployment_on_configmap(client, namespace, name="evicted", replicas=1)

    async def pod_uids() -> set[str] | None:
        listed = await client.list(
            resources.PODS, namespace=namespace, label_selector="app=evicted"
        )
        uids = {p["metadata"]["uid"] for p in listed.items
                if not p["metadata"].get("deletionTimestamp")
                and any(c["type"] == "Ready" and c["status"] == "True"
                        for c in p.get("status", {}).get("conditions", []))}  # fmt: skip
        return uids or None

    first = await eventually(pod_uids, what="the pod Ready", timeout=60)
    conn = await as_service_account(client, kubeconfig_path, docs, namespace)
    settings = chart_settings(docs, namespace)
    assert settings.options.default_strategy.value == "evict"
    calls: list[Call] = []
    async with chart_controller(monkeypatch, conn, settings, calls):
        await update_cm(client, namespace, "c", {"a": "2"})

        async def replaced() -> bool:
            now = await pod_uids()
            return bool(now) and not (now or set()) & first

        await eventually(replaced, what="the pod replaced under the Role", timeout=60)
    used = check_calls(calls, rules, all_used=False)
    assert pod_verbs <= used
    assert not {v for g, r, v in used if r == "deployments" and v == "patch"}, "no template write"
