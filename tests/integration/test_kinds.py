"""Every workload kind and side channel Reloader has, against the real control plane:
CronJob, Job, Argo Rollout (Argo's own CRDs, taken from its Go module; with Argo's controller
running in `test_argo.py`) and DeploymentConfig (custom resources installed from
`tests/data/crds`), Secrets Store CSI (pod statuses written by the test in place of the
driver), the pause period, webhook mode and alerts (received by a local HTTP server)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestServer

from kube_reloader.core import hashing
from kube_reloader.core.strategies import Strategy
from kube_reloader.devcluster.argo import ArgoBuilder, install_crds
from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client, PatchType
from kube_reloader.runtime.options import AlertSettings
from tests import builders
from tests.harness import (
    AUTO,
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
CRDS = Path(__file__).parent.parent / "data" / "crds"


def argo_crds() -> Path:
    """Argo Rollouts' CRDs from its module source (a download on first use, no compile)."""
    return ArgoBuilder(controller=False).ensure().crds


async def ensure_crds(client: Client) -> None:
    """Install the test CRDs (idempotent) and wait until each kind is served."""
    await install_crds(client, argo_crds())
    for path in sorted(CRDS.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        with contextlib.suppress(errors.AlreadyExists):
            await client.create(resources.CUSTOMRESOURCEDEFINITIONS, doc)
    for res in (resources.ROLLOUTS, resources.DEPLOYMENTCONFIGS, resources.SECRETPROVIDERCLASSES,
                resources.SECRETPROVIDERCLASSPODSTATUSES):  # fmt: skip

        async def served(res: resources.Resource = res) -> bool:
            try:
                await client.list(res, limit=1)
            except errors.NotFound:
                return False
            return True

        await eventually(served, what=f"{res} to be served")


def pod_spec(**kw: Any) -> dict[str, Any]:
    return app(labels={"app": "w"}, **kw)


# ------------------------------------------------------------------ CronJob


@pytest.mark.rollout
async def test_a_cronjob_reload_creates_a_job_that_runs_and_leaves_the_cronjob_untouched(
    client: Client, namespace: str
) -> None:
    await client.create(resources.CONFIGMAPS, builders.configmap("c", namespace, {"a": "1"}))
    tmpl = builders.pod_template(
        {"job": "nightly"},
        containers=[builders.container("task", env_from_configmaps=("c",))],
        restart_policy="Never",
    )
    cron = builders.cronjob("nightly", namespace, template=tmpl, annotations=AUTO)
    cron["spec"]["jobTemplate"]["metadata"] = {
        "labels": {"team": "data"},
        "annotations": {"note": "x"},
    }
    created = await client.create(resources.CRONJOBS, cron)
    async with running(client, namespace):
        await update_cm(client, namespace, "c", {"a": "2"})

        async def job() -> dict[str, Any] | None:
            jobs = (await client.list(resources.JOBS, namespace=namespace)).items
            return jobs[0] if jobs else None

        j = await eventually(job, what="a Job created from the CronJob")
    meta = j["metadata"]
    assert meta["name"].startswith("nightly-")
    assert meta["generateName"] == "nightly-"
    assert meta["annotations"]["cronjob.kubernetes.io/instantiate"] == "manual"
    assert meta["annotations"]["note"] == "x"
    assert meta["labels"]["team"] == "data"
    assert meta["ownerReferences"] == [{
        "apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly", "uid": created["metadata"]["uid"],
        "controller": True, "blockOwnerDeletion": True,
    }]  # fmt: skip
    env = j["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env == [{"name": "STAKATER_C_CONFIGMAP", "value": hashing.configmap_hash({"a": "2"})}]
    cron_now = await client.get(resources.CRONJOBS, "nightly", namespace=namespace)
    assert "env" not in cron_now["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert cron_now["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]

    async def succeeded() -> bool:
        job = await client.get(resources.JOBS, meta["name"], namespace=namespace)
        return bool(job.get("status", {}).get("succeeded") == 1)

    await eventually(succeeded, what="the Job to run to completion on kwok", timeout=60)


async def test_a_suspended_cronjob_gets_no_job(client: Client, namespace: str) -> None:
    await client.create(resources.CONFIGMAPS, builders.configmap("c", namespace, {"a": "1"}))
    tmpl = builders.pod_template(
        {"job": "n"},
        containers=[builders.container("t", env_from_configmaps=("c",))],
        restart_policy="Never",
    )
    cron = builders.cronjob("n", namespace, template=tmpl, annotations=AUTO)
    cron["spec"]["suspend"] = True
    await client.create(resources.CRONJOBS, cron)
    async with running(client, namespace) as ctl:
        await update_cm(client, namespace, "c", {"a": "2"})

        async def skipped() -> bool:
            return ctl.stats.skipped.get("skipped", 0) >= 1

        await eventually(skipped, what="the suspended CronJob's change counted as skipped")
    assert (await client.list(resources.JOBS, namespace=namespace)).items == []


# ------------------------------------------------------------------ Job


async def test_a_job_is_deleted_and_recreated_with_its_spec_intact(
    client: Client, namespace: str
) -> None:
    await client.create(resources.CONFIGMAPS, builders.configmap("c", namespace, {"a": "1"}))
    tmpl = builders.pod_template(
        {"job": "once"},
        containers=[builders.container("t", env_from_configmaps=("c",))],
        restart_policy="Never",
    )
    job = builders.job("once", namespace, template=tmpl, annotations=AUTO, labels={"team": "x"})
    job["spec"]["backoffLimit"] = 3
    job["spec"]["activeDeadlineSeconds"] = 600
    old = await client.create(resources.JOBS, job)
    async with running(client, namespace):
        await update_cm(client, namespace, "c", {"a": "2"})

        async def recreated() -> dict[str, Any] | None:
            try:
                j = await client.get(resources.JOBS, "once", namespace=namespace)
            except errors.NotFound:
                return None
            return j if j["metadata"]["uid"] != old["metadata"]["uid"] else None

        new = await eventually(recreated, what="the Job to be recreated", timeout=40)
    assert new["spec"]["backoffLimit"] == 3
    assert new["spec"]["activeDeadlineSeconds"] == 600
    assert new["metadata"]["labels"]["team"] == "x"
    assert "controller-uid" not in new["metadata"]["labels"]
    assert new["metadata"]["annotations"]["reloader.stakater.com/auto"] == "true"
    env = new["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env == [{"name": "STAKATER_C_CONFIGMAP", "value": hashing.configmap_hash({"a": "2"})}]
    # the server generated a fresh selector and labels for the new uid
    assert (
        new["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"]
        == new["metadata"]["uid"]
    )


async def test_jobs_created_by_a_cronjob_are_not_rerun(client: Client, namespace: str) -> None:
    await client.create(resources.CONFIGMAPS, builders.configmap("c", namespace, {"a": "1"}))
    tmpl = builders.pod_template({"job": "child"}, containers=[builders.container("t", env_from_configmaps=("c",))],
                                 restart_policy="Never", annotations=AUTO)  # fmt: skip
    cron = await client.create(
        resources.CRONJOBS, builders.cronjob("parent", namespace, template=tmpl)
    )
    child = builders.job("child", namespace, template=tmpl)
    child["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "parent",
                                             "uid": cron["metadata"]["uid"], "controller": True}]  # fmt: skip
    before = await client.create(resources.JOBS, child)
    async with running(client, namespace):
        await update_cm(client, namespace, "c", {"a": "2"})

        async def new_job() -> list[dict[str, Any]] | None:
            jobs = [j for j in (await client.list(resources.JOBS, namespace=namespace)).items
                    if j["metadata"]["name"].startswith("parent-")]  # fmt: skip
            return jobs or None

        await eventually(new_job, what="the CronJob's new Job")
        await asyncio.sleep(0.5)
    after = await client.get(resources.JOBS, "child", namespace=namespace)
    assert after["metadata"]["uid"] == before["metadata"]["uid"]


# ------------------------------------------------------------------ Argo Rollouts, DeploymentConfigs


def rollout(name: str, namespace: str, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
        "metadata": {"name": name, "namespace": namespace, **meta},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "w"}},
                 "template": pod_spec(env_from_configmaps=("c",))},
    }  # fmt: skip


@pytest.mark.parametrize("strategy", [Strategy.ENV_VARS, Strategy.ANNOTATIONS])
async def test_an_argo_rollout_gets_its_template_changed_without_strategic_merge(
    client: Client, namespace: str, strategy: Strategy
) -> None:
    await ensure_crds(client)
    await client.create(resources.CONFIGMAPS, builders.configmap("c", namespace, {"a": "1"}))
    await client.create(resources.ROLLOUTS, rollout("r", namespace, annotations=AUTO))
    async with running(client, namespace, argo_rollouts=True, strategy=strategy):
        await update_cm(client, namespace, "c", {"a": "2"})
        want = hashing.configmap_hash({"a": "2"})

        async def done() -> bool:
            if strategy is Strategy.ENV_VARS:
                return (await env_of(client, "Rollout", namespace, "r")).get(
                    "STAKATER_C_CONFIGMAP"
                ) == want
            raw = (await template_annotations(client, "Rollout", namespace, "r")).get(
                "reloader.stakater.com/last-reloaded-from"
            )
            return bool(raw) and json.loads(raw)["hash"] == want

        await eventually(done, what=f"the Rollout's template to change ({strategy})")
    r = await client.get(resources.ROLLOUTS, "r", namespace=namespace)
    assert "restartAt" not in r["spec"]


async def test_an_argo_rollout_with_restart_strategy_only_gets_restart_at(
    client: Client, namespace: str
) -> None:
    await ensure_crds(client)
    await client.create(resources.CONFIGMAPS, builders.configmap("c", namespace, {"a": "1"}))
    await client.create(
        resources.ROLLOUTS,
        rollout(
            "r",
            namespace,
            annotations={**AUTO, "reloader.stakater.com/rollout-strategy": "restart"},
        ),
    )
    async with running(client, namespace, argo_rollouts=True):
        await update_cm(client, namespace, "c", {"a": "2"})

        async def restarted() -> str | None:
            r = await client.get(resources.ROLLOUTS, "r", namespace=namespace)
            return r["spec"].get("restartAt")

        stamp = await eventually(restarted, what="spec.restartAt")
    assert dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).tzinfo is not None
    assert await env_of(client, "Rollout", namespace, "r") == {}


async def test_a_workload_ref_rollout_is_restarted_using_its_deployments_template(
    client: Client, namespace: str
) -> None:
    await ensure_crds(client)
    await client.create(resources.CONFIGMAPS, builders.configmap("c", namespace, {"a": "1"}))
    await client.create(
        resources.DEPLOYMENTS,
        builders.deployment(
            "base",
            namespace,
            replicas=0,
            template=app(env_from_configmaps=("c",), labels={"app": "base"}),
        ),
    )
    await client.create(resources.ROLLOUTS, {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
        "metadata": {"name": "ref", "namespace": namespace, "annotations": AUTO},
        "spec": {"replicas": 1, "workloadRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "base"}},
    })  # fmt: skip
    async with running(client, namespace, argo_rollouts=True):
        await update_cm(client, namespace, "c", {"a": "2"})

        async def restarted() -> str | None:
            return (await client.get(resources.ROLLOUTS, "ref", namespace=namespace))["spec"].get(
                "restartAt"
            )

        await eventually(restarted, what="restartAt on the workloadRef Rollout")


async def test_rollouts_are_picked_up_when_their_crd_is_installed_later(
    private_client: Client,
) -> None:
    client = private_client
    with contextlib.suppress(errors.NotFound):
        await client.delete(resources.CUSTOMRESOURCEDEFINITIONS, "rollouts.argoproj.io")
    ns = "late-crd"
    with contextlib.suppress(errors.AlreadyExists):
        await client.create(
            resources.NAMESPACES,
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        )
    await client.create(resources.CONFIGMAPS, builders.configmap("c", ns, {"a": "1"}))
    async with running(client, ns, argo_rollouts=True, discovery_interval=0.3) as ctl:
        await asyncio.sleep(0.5)
        doc = yaml.safe_load((argo_crds() / "rollout-crd.yaml").read_text())
        await client.create(resources.CUSTOMRESOURCEDEFINITIONS, doc)

        async def created() -> bool:
            try:
                await client.create(resources.ROLLOUTS, rollout("r", ns, annotations=AUTO))
            except errors.NotFound:
                return False
            return True

        await eventually(created, what="the Rollout kind to be served")

        async def indexed() -> bool:
            return any(k.kind == "Rollout" for k in ctl.index.workloads)

        await eventually(indexed, what="the controller to watch Rollouts")
        await update_cm(client, ns, "c", {"a": "2"})

        async def done() -> bool:
            return "STAKATER_C_CONFIGMAP" in await env_of(client, "Rollout", ns, "r")

        await eventually(done, what="the late Rollout to be reloaded")


async def test_a_deployment_config_is_found_by_discovery_and_reloaded(
    client: Client, namespace: str
) -> None:
    await ensure_crds(client)
    await client.create(resources.CONFIGMAPS, builders.configmap("c", namespace, {"a": "1"}))
    await client.create(resources.DEPLOYMENTCONFIGS, {
        "apiVersion": "apps.openshift.io/v1", "kind": "DeploymentConfig",
        "metadata": {"name": "dc", "namespace": namespace, "annotations": AUTO},
        "spec": {"replicas": 1, "selector": {"app": "w"},
                 "template": pod_spec(env_from_configmaps=("c",), containers=[
                     {"name": "app", "image": "x", "env": [{"name": "KEEP", "value": "1"}], "envFrom": [{"configMapRef": {"name": "c"}}]}])},
    })  # fmt: skip
    async with running(client, namespace):
        await update_cm(client, namespace, "c", {"a": "2"})

        async def done() -> dict[str, str] | None:
            env = await env_of(client, "DeploymentConfig", namespace, "dc")
            return env if "STAKATER_C_CONFIGMAP" in env else None

        env = await eventually(done, what="the DeploymentConfig to be reloaded")
    assert env == {"KEEP": "1", "STAKATER_C_CONFIGMAP": hashing.configmap_hash({"a": "2"})}


# ------------------------------------------------------------------ CSI


@pytest.mark.parametrize("selector", ["", "reload=yes"], ids=["no selector", "label selector"])
async def test_csi_rotation_reloads_only_workloads_that_mount_that_secret_provider_class(
    client: Client, namespace: str, selector: str
) -> None:
    """Also under --resource-label-selector, on purpose (G-V1-8): Reloader v1 filters the CSI
    driver's SecretProviderClassPodStatuses by it too, and they never carry the user's labels,
    so its CSI reloads silently stop; the selector here filters ConfigMaps and Secrets only."""
    await ensure_crds(client)
    await client.create(resources.SECRETPROVIDERCLASSES, {
        "apiVersion": "secrets-store.csi.x-k8s.io/v1", "kind": "SecretProviderClass",
        "metadata": {"name": "vault-db", "namespace": namespace}, "spec": {"provider": "vault"},
    })  # fmt: skip
    csi_volume = [{"name": "secrets", "csi": {"driver": "secrets-store.csi.k8s.io", "readOnly": True,
                                              "volumeAttributes": {"secretProviderClass": "vault-db"}}}]  # fmt: skip
    spc_auto = {"secretproviderclass.reloader.stakater.com/auto": "true"}
    await client.create(
        resources.DEPLOYMENTS,
        builders.deployment(
            "mounts",
            namespace,
            template=app(volume_mounts=("secrets",), volumes=csi_volume, labels={"app": "mounts"}),
            annotations=spc_auto,
        ),
    )
    await client.create(
        resources.DEPLOYMENTS,
        builders.deployment(
            "other", namespace, template=app(labels={"app": "other"}), annotations=spc_auto
        ),
    )
    status = {
        "apiVersion": "secrets-store.csi.x-k8s.io/v1", "kind": "SecretProviderClassPodStatus",
        "metadata": {"name": "pod-1-vault-db", "namespace": namespace},
        "status": {"podName": "pod-1", "secretProviderClassName": "vault-db", "mounted": True,
                   "objects": [{"id": "secret/data/db", "version": "1"}]},
    }  # fmt: skip
    await client.create(resources.SECRETPROVIDERCLASSPODSTATUSES, status)
    async with running(client, namespace, csi=True, resource_label_selector=selector):
        await client.patch(resources.SECRETPROVIDERCLASSPODSTATUSES, "pod-1-vault-db",
                           {"status": {"objects": [{"id": "secret/data/db", "version": "2"}]}},
                           namespace=namespace, patch_type=PatchType.MERGE)  # fmt: skip
        want = hashing.spc_pod_status_hash([("secret/data/db", "2")], "vault-db")

        async def done() -> bool:
            return (await env_of(client, "Deployment", namespace, "mounts")).get(
                "STAKATER_VAULT_DB_SECRETPROVIDERCLASS"
            ) == want

        await eventually(done, what="the CSI reload")
        await asyncio.sleep(0.3)
    assert await env_of(client, "Deployment", namespace, "other") == {}


# ------------------------------------------------------------------ pause period


async def deployment_state(
    client: Client, namespace: str, name: str
) -> tuple[bool, dict[str, str]]:
    d = await client.get(resources.DEPLOYMENTS, name, namespace=namespace)
    return bool(d["spec"].get("paused")), d["metadata"].get("annotations") or {}


async def test_pause_period_pauses_then_resumes_on_time(client: Client, namespace: str) -> None:
    anns = {**AUTO, "deployment.reloader.stakater.com/pause-period": "2s"}
    await auto_deployment_on_configmap(client, namespace, annotations=anns)
    async with running(client, namespace) as ctl:
        await update_cm(client, namespace, "c", {"a": "2"})

        async def paused() -> dict[str, str] | None:
            p, a = await deployment_state(client, namespace, "w")
            return a if p and "deployment.reloader.stakater.com/paused-at" in a else None

        a = await eventually(paused, what="the Deployment to be paused")
        stamp = dt.datetime.fromisoformat(
            a["deployment.reloader.stakater.com/paused-at"].replace("Z", "+00:00")
        )
        assert abs((dt.datetime.now(dt.UTC) - stamp).total_seconds()) < 10

        # The pause is written first, then the template (as Reloader does): two writes.
        async def reloaded() -> bool:
            return "STAKATER_C_CONFIGMAP" in await env_of(client, "Deployment", namespace, "w")

        await eventually(reloaded, what="the template to carry the hash")

        async def resumed() -> bool:
            p, a = await deployment_state(client, namespace, "w")
            return not p and "deployment.reloader.stakater.com/paused-at" not in a

        await eventually(resumed, what="the Deployment to be resumed", timeout=20)

        # the API server may answer the test's GET before the controller counts its own PATCH
        async def counted() -> tuple[int, int] | None:
            got = (ctl.stats.pauses, ctl.stats.resumes)
            return got if got == (1, 1) else None

        await eventually(counted, what="one pause and one resume counted", timeout=5)


async def test_a_user_paused_deployment_is_left_paused(client: Client, namespace: str) -> None:
    await client.create(resources.CONFIGMAPS, builders.configmap("c", namespace, {"a": "1"}))
    anns = {**AUTO, "deployment.reloader.stakater.com/pause-period": "1s"}
    d = builders.auto_deployment("w", namespace, configmaps=("c",), annotations=anns)
    d["spec"]["paused"] = True
    await client.create(resources.DEPLOYMENTS, d)
    async with running(client, namespace):
        await update_cm(client, namespace, "c", {"a": "2"})

        async def patched() -> bool:
            return "STAKATER_C_CONFIGMAP" in await env_of(client, "Deployment", namespace, "w")

        await eventually(patched, what="the template patch")
        await asyncio.sleep(2.0)
    p, a = await deployment_state(client, namespace, "w")
    assert p is True
    assert "deployment.reloader.stakater.com/paused-at" not in a


async def test_a_pause_survives_a_controller_restart(client: Client, namespace: str) -> None:
    anns = {**AUTO, "deployment.reloader.stakater.com/pause-period": "3s"}
    await auto_deployment_on_configmap(client, namespace, annotations=anns)
    async with running(client, namespace):
        await update_cm(client, namespace, "c", {"a": "2"})

        async def paused() -> bool:
            return (await deployment_state(client, namespace, "w"))[0]

        await eventually(paused, what="the pause")
    # the first controller is gone; a new one must resume the Deployment on time
    assert (await deployment_state(client, namespace, "w"))[0] is True
    async with running(client, namespace) as second:

        async def resumed() -> bool:
            return not (await deployment_state(client, namespace, "w"))[0]

        await eventually(resumed, what="the new controller to resume it", timeout=20)

        async def counted() -> bool:  # counted once its PATCH has returned
            return second.stats.resumes == 1

        await eventually(counted, what="the resume to be counted by the new controller", timeout=5)


async def test_an_invalid_pause_period_reloads_without_pausing_and_warns(
    client: Client, namespace: str
) -> None:
    anns = {**AUTO, "deployment.reloader.stakater.com/pause-period": "5 minutes"}
    await auto_deployment_on_configmap(client, namespace, annotations=anns)
    async with running(client, namespace):
        await update_cm(client, namespace, "c", {"a": "2"})

        async def patched() -> bool:
            return "STAKATER_C_CONFIGMAP" in await env_of(client, "Deployment", namespace, "w")

        await eventually(patched, what="the reload")

        async def warning() -> dict[str, Any] | None:
            return await find_event(
                client,
                namespace,
                lambda e: e["type"] == "Warning" and "is not a duration" in e["message"],
            )

        await eventually(warning, what="a Warning event about the pause period")
    assert (await deployment_state(client, namespace, "w"))[0] is False


# ------------------------------------------------------------------ webhook mode and alerts


class Receiver:
    """A local HTTP endpoint that records requests and answers from a script of statuses."""

    def __init__(self, statuses: list[int] | None = None) -> None:
        self.statuses = statuses or [200]
        self.requests: list[tuple[str, str, bytes]] = []
        self.got = asyncio.Event()

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.requests.append((request.path, request.headers.get("Content-Type", ""), body))
        status = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        if status < 300:
            self.got.set()
        return web.Response(status=status, text="ok")


@contextlib.asynccontextmanager
async def receiver(statuses: list[int] | None = None) -> AsyncIterator[tuple[Receiver, str]]:
    rec = Receiver(statuses)
    app_ = web.Application()
    app_.router.add_post("/{tail:.*}", rec.handle)
    server = TestServer(app_, host="127.0.0.1")
    await server.start_server()
    try:
        yield rec, f"http://127.0.0.1:{server.port}/hook"
    finally:
        await server.close()


async def test_webhook_mode_posts_reloaders_payload_for_every_change_instead_of_reloading(
    client: Client, namespace: str
) -> None:
    """As Reloader v1: every content change of a watched ConfigMap is one POST, whether a
    workload uses it or not, ignore annotation or not; a metadata-only update is none."""
    ignored = builders.configmap("ignored", namespace, {"a": "1"})
    ignored["metadata"]["annotations"] = {"reloader.stakater.com/ignore": "true"}
    for cm in (builders.configmap("c", namespace, {"a": "1"}),
               builders.configmap("unused", namespace, {"a": "1"}), ignored):  # fmt: skip
        await client.create(resources.CONFIGMAPS, cm)
    await client.create(
        resources.DEPLOYMENTS, builders.auto_deployment("w", namespace, configmaps=("c",))
    )
    async with (
        receiver([500, 200]) as (rec, url),
        running(client, namespace, webhook_url=url) as ctl,
    ):
        for name in ("unused", "c", "ignored"):
            await update_cm(client, namespace, name, {"a": "2"})
        await client.patch(resources.CONFIGMAPS, "c", {"metadata": {"labels": {"x": "y"}}},
                           namespace=namespace, patch_type=PatchType.MERGE)  # fmt: skip

        async def all_sent() -> bool:
            return ctl.stats.webhooks == 3

        await eventually(all_sent, what="one webhook per content change")
        await asyncio.sleep(0.3)
        assert ctl.stats.webhooks == 3
        assert ctl.stats.reloads == 0
        assert ctl.metrics.registry.get_sample_value(
            "reloader_reload_executed_total", {"success": "true"}
        ) == 0, "a webhook is not a reload"  # fmt: skip
    # the first POST was answered 500 and retried
    assert [r[2] for r in rec.requests] == [b'{"webhook":"update successful"}'] * 4
    assert all(r[1] == "application/json" for r in rec.requests)
    assert await env_of(client, "Deployment", namespace, "w") == {}


@pytest.mark.parametrize(
    ("sink", "content_type", "body"),
    [
        ("slack", "application/json", '{"attachments":[{"author_name":"Reloader","color":"good","text":"prod : Reloader detected changes in *c* of type *CONFIGMAP* in namespace *NS*. Hence reloaded *w* of type *Deployment* in namespace *NS*"}]}'),
        ("teams", "application/json", '{"text":"prod : Reloader detected changes in *c* of type *CONFIGMAP* in namespace *NS*. Hence reloaded *w* of type *Deployment* in namespace *NS*"}'),
        ("gchat", "application/json", '{"text":"prod : Reloader detected changes in *c* of type *CONFIGMAP* in namespace *NS*. Hence reloaded *w* of type *Deployment* in namespace *NS*"}'),
        ("webhook", "text/plain", "prod : Reloader detected changes in c of type CONFIGMAP in namespace NS. Hence reloaded w of type Deployment in namespace NS"),
    ],
)  # fmt: skip
async def test_alerts_send_reloaders_exact_payload_per_sink(
    client: Client, namespace: str, sink: str, content_type: str, body: str
) -> None:
    await auto_deployment_on_configmap(client, namespace)
    async with receiver() as (rec, url):
        alerts = AlertSettings(url=url, sink=sink, additional_info="prod")
        async with running(client, namespace, alerts=alerts) as ctl:
            await update_cm(client, namespace, "c", {"a": "2"})
            await asyncio.wait_for(rec.got.wait(), 20)
            assert ctl.alerts is not None
    assert len(rec.requests) == 1
    _, got_type, got_body = rec.requests[0]
    assert got_type.split(";")[0] == content_type
    assert got_body.decode() == body.replace("NS", namespace)
    assert "STAKATER_C_CONFIGMAP" in await env_of(client, "Deployment", namespace, "w")


async def test_a_dead_alert_sink_never_delays_reloads(client: Client, namespace: str) -> None:
    await auto_deployment_on_configmap(client, namespace)
    async with (
        receiver([503]) as (_rec, url),
        running(client, namespace, alerts=AlertSettings(url=url, sink="slack")) as ctl,
    ):
        await update_cm(client, namespace, "c", {"a": "2"})

        async def reloaded() -> bool:
            return "STAKATER_C_CONFIGMAP" in await env_of(client, "Deployment", namespace, "w")

        await eventually(reloaded, what="the reload despite the failing sink")
        assert ctl.alerts is not None

        async def counted() -> bool:
            return ctl.alerts is not None and ctl.alerts.stats.failed == 1

        await eventually(counted, what="the failed alert to be counted", timeout=20)


# ------------------------------------------------------------------ modes x strategies for the other kinds

KIND_MODES = {
    "auto": (AUTO, {}, {}, True),
    "typed auto": ({"configmap.reloader.stakater.com/auto": "true"}, {}, {}, True),
    "named": ({"configmap.reloader.stakater.com/reload": "other,c"}, {}, {}, False),
    "search and match": ({"reloader.stakater.com/search": "true"}, {}, {"reloader.stakater.com/match": "true"}, True),
    "pod template fallback": ({}, AUTO, {}, True),
}  # fmt: skip


def _manifest(
    kind: str, namespace: str, wa: dict[str, str], tmpl: dict[str, Any]
) -> dict[str, Any]:
    if kind == "CronJob":
        tmpl["spec"]["restartPolicy"] = "Never"
        return builders.cronjob("w", namespace, template=tmpl, annotations=wa)
    if kind == "Job":
        tmpl["spec"]["restartPolicy"] = "Never"
        tmpl["metadata"]["labels"] = {"job": "w"}
        return builders.job("w", namespace, template=tmpl, annotations=wa)
    if kind == "Rollout":
        r = rollout("w", namespace, annotations=wa)
        r["spec"]["template"] = tmpl
        return r
    return {"apiVersion": "apps.openshift.io/v1", "kind": "DeploymentConfig",
            "metadata": {"name": "w", "namespace": namespace, "annotations": wa},
            "spec": {"replicas": 1, "selector": {"app": "w"}, "template": tmpl}}  # fmt: skip


async def _reloaded_template(
    client: Client, kind: str, namespace: str, old_uid: str
) -> dict[str, Any] | None:
    """The pod template that carries the reload, wherever that kind puts it."""
    if kind == "CronJob":
        jobs = (await client.list(resources.JOBS, namespace=namespace)).items
        return jobs[0]["spec"]["template"] if jobs else None
    res = {
        "Job": resources.JOBS,
        "Rollout": resources.ROLLOUTS,
        "DeploymentConfig": resources.DEPLOYMENTCONFIGS,
    }[kind]
    try:
        obj = await client.get(res, "w", namespace=namespace)
    except errors.NotFound:
        return None
    if kind == "Job" and obj["metadata"]["uid"] == old_uid:
        return None
    return obj["spec"]["template"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("kind", ["CronJob", "Job", "Rollout", "DeploymentConfig"])
@pytest.mark.parametrize("strategy", [Strategy.ENV_VARS, Strategy.ANNOTATIONS])
@pytest.mark.parametrize("mode", list(KIND_MODES))
async def test_every_annotation_mode_and_strategy_reloads_the_other_kinds(
    client: Client, namespace: str, mode: str, strategy: Strategy, kind: str
) -> None:
    if kind in ("Rollout", "DeploymentConfig"):
        await ensure_crds(client)
    wa, pa, ra, referenced = KIND_MODES[mode]
    await client.create(
        resources.CONFIGMAPS, builders.configmap("c", namespace, {"a": "1"}, annotations=ra)
    )
    tmpl = app(
        env_from_configmaps=("c",) if referenced else (),
        labels={"app": "w"},
        template_annotations=pa,
    )
    created = await client.create(
        {"CronJob": resources.CRONJOBS, "Job": resources.JOBS, "Rollout": resources.ROLLOUTS,
         "DeploymentConfig": resources.DEPLOYMENTCONFIGS}[kind],
        _manifest(kind, namespace, wa, tmpl),
    )  # fmt: skip
    want = hashing.configmap_hash({"a": "2"})
    async with running(client, namespace, strategy=strategy, argo_rollouts=True):
        await update_cm(client, namespace, "c", {"a": "2"})

        async def done() -> bool:
            t = await _reloaded_template(client, kind, namespace, created["metadata"]["uid"])
            if not t:
                return False
            if strategy is Strategy.ENV_VARS:
                env = {
                    e["name"]: e.get("value") for e in t["spec"]["containers"][0].get("env") or []
                }
                return env.get("STAKATER_C_CONFIGMAP") == want
            raw = (
                (t.get("metadata") or {})
                .get("annotations", {})
                .get("reloader.stakater.com/last-reloaded-from")
            )
            return bool(raw) and json.loads(raw)["hash"] == want

        await eventually(done, what=f"{mode} reload of a {kind} ({strategy})", timeout=40)
