"""One rollout per apply: the admission webhook, called by the dev cluster's real
kube-apiserver (a MutatingWebhookConfiguration with a 127.0.0.1 URL, scoped to the test's
namespace), next to the controller, and Reloader v1 measured on the same writes."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import json
import logging
import secrets
import socket
import ssl
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest

from kube_reloader.cli.flags import parse
from kube_reloader.core import hashing
from kube_reloader.kube import admissioncerts, config, errors, resources
from kube_reloader.kube.client import Client, PatchType
from kube_reloader.metrics import Recorder
from kube_reloader.runtime.admitsettings import AdmissionSettings
from kube_reloader.runtime.clock import Clock
from kube_reloader.runtime.controller import Controller
from kube_reloader.runtime.manager import Manager, ManagerSettings
from kube_reloader.runtime.options import Options
from tests import builders
from tests.harness import bearer_connection, env_of, service_account_token, update_cm
from tests.integration.test_chart import KINDS, _apply, render
from tests.peers import free_port, start_peer
from tests.waiting import eventually

# serial: a MutatingWebhookConfiguration is cluster-scoped
pytestmark = [pytest.mark.cluster, pytest.mark.serial]

ENV = "STAKATER_CFG_CONFIGMAP"
IMAGE_2 = "registry.local/app:2"


def webhook_config(name: str, namespace: str, port: int) -> dict[str, Any]:
    """The chart's MutatingWebhookConfiguration, with a URL instead of a Service."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": "reload.kube-reloader.io",
            "clientConfig": {"url": f"https://127.0.0.1:{port}/mutate"},
            "rules": [{
                "apiGroups": ["apps"], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["deployments", "statefulsets", "daemonsets"],
            }],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "failurePolicy": "Ignore",
            "sideEffects": "None",
            "timeoutSeconds": 2,
            "admissionReviewVersions": ["v1"],
        }],
    }  # fmt: skip


@contextlib.asynccontextmanager
async def registered(client: Client, namespace: str, port: int) -> AsyncIterator[str]:
    """The webhook registered (cluster-wide object, removed afterwards) for `namespace`."""
    name = f"kube-reloader-{namespace}"
    await client.create(admissioncerts.MUTATING_WEBHOOKS, webhook_config(name, namespace, port))
    try:
        yield name
    finally:
        with contextlib.suppress(errors.NotFound):
            await client.delete(admissioncerts.MUTATING_WEBHOOKS, name)


@dataclass
class Running:
    manager: Manager
    controller: Controller
    admission: AdmissionSettings | None

    @property
    def admitter(self) -> Any:
        assert self.manager.admission is not None
        return self.manager.admission.admitter


@contextlib.asynccontextmanager
async def running(
    connection: config.ConnectionConfig, namespace: str, admission: AdmissionSettings | None,
    options: Options | None = None, *, serving: bool = True,
) -> AsyncIterator[Running]:  # fmt: skip
    """The whole process (manager, controller, webhook) in this event loop."""
    made: list[Controller] = []

    def new_controller(
        client: Client, options: Options, /, *, clock: Clock, metrics: Recorder
    ) -> Controller:
        made.append(Controller(client, options, clock=clock, metrics=metrics))
        return made[0]

    options = options or Options(namespaces=(namespace,))
    settings = ManagerSettings(options=options, metrics_addr="127.0.0.1:0", admission=admission)
    manager = Manager(settings, new_controller=new_controller)
    stop = asyncio.Event()
    task = asyncio.create_task(manager.run(connection, stop))

    async def ready() -> bool:
        if task.done():
            raise AssertionError(f"the process stopped: {task.result()}")
        return (
            bool(made)
            and made[0].ready.is_set()
            and (
                admission is None
                or not serving
                or bool(manager.admission and manager.admission.serving)
            )
        )

    await eventually(ready, what="the controller ready")
    try:
        yield Running(manager, made[0], admission)
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 30) == 0


def settings_for(namespace: str, port: int, **extra: Any) -> AdmissionSettings:
    return AdmissionSettings(
        addr=f"127.0.0.1:{port}", namespace=namespace, ca_secret="admission-ca",
        webhook_config=f"kube-reloader-{namespace}", **extra,
    )  # fmt: skip


async def replicasets(client: Client, namespace: str, name: str) -> list[dict[str, Any]]:
    listed = await client.list(resources.REPLICASETS, namespace=namespace)
    return [
        rs for rs in listed.items
        if any(o.get("name") == name for o in rs["metadata"].get("ownerReferences") or [])
    ]  # fmt: skip


async def setup_workload(client: Client, namespace: str) -> None:
    await client.create(resources.CONFIGMAPS, builders.configmap("cfg", namespace, {"v": "0"}))
    await client.create(
        resources.DEPLOYMENTS, builders.auto_deployment("w", namespace, configmaps=("cfg",))
    )

    async def first_rs() -> bool:
        return len(await replicasets(client, namespace, "w")) == 1

    await eventually(first_rs, what="the first ReplicaSet")


async def apply_both(client: Client, namespace: str) -> None:
    """What `kubectl apply -f` of a List (ConfigMap, Deployment) sends: the ConfigMap's
    patch, then at once the Deployment's."""
    await update_cm(client, namespace, "cfg", {"v": "1"})
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": IMAGE_2}]}}}}
    await client.patch(resources.DEPLOYMENTS, "w", patch, namespace=namespace)


@dataclass(frozen=True)
class Rollouts:
    """What one apply cost: template revisions (the Deployment's generation went up by this
    much; each is a rollout) and ReplicaSets made (the Deployment controller may fold two
    revisions written faster than it syncs into one ReplicaSet)."""

    revisions: int
    replicasets: int


async def settled(
    client: Client, namespace: str, generation: int, seen_change: Callable[[], bool]
) -> Rollouts:
    """Once the Deployment carries the new hash and image, the reloader has seen the
    ConfigMap's change and had its coalescing window to answer, and the Deployment
    controller has caught up: what the apply cost."""
    want = hashing.configmap_hash({"v": "1"})

    async def current() -> bool:
        env = await env_of(client, "Deployment", namespace, "w")
        obj = await client.get(resources.DEPLOYMENTS, "w", namespace=namespace)
        image = obj["spec"]["template"]["spec"]["containers"][0]["image"]
        return env.get(ENV) == want and image == IMAGE_2 and seen_change()

    await eventually(current, what="the new hash and image on the Deployment")
    await asyncio.sleep(3)  # the reloader's answer (a patch, or none) is written by then

    async def observed() -> dict[str, Any] | None:
        d = await client.get(resources.DEPLOYMENTS, "w", namespace=namespace)
        synced = d.get("status", {}).get("observedGeneration") == d["metadata"]["generation"]
        return d if synced else None

    d = await eventually(observed, what="the Deployment controller caught up")
    return Rollouts(
        d["metadata"]["generation"] - generation,
        len(await replicasets(client, namespace, "w")) - 1,
    )


async def generation_of(client: Client, namespace: str) -> int:
    obj = await client.get(resources.DEPLOYMENTS, "w", namespace=namespace)
    return int(obj["metadata"]["generation"])


async def test_one_apply_of_a_configmap_and_a_new_image_rolls_once_with_one_new_replicaset(
    client: Client, connection: config.ConnectionConfig, namespace: str
) -> None:
    port = free_port()
    await setup_workload(client, namespace)
    admission = settings_for(namespace, port)
    async with (
        registered(client, namespace, port),
        running(connection, namespace, admission) as ctl,
    ):
        seen, generation = ctl.controller.stats.changes, await generation_of(client, namespace)
        await apply_both(client, namespace)
        cost = await settled(
            client, namespace, generation, lambda: ctl.controller.stats.changes > seen
        )
        print(f"kube-reloader + webhook, one apply: {cost}")
        assert cost == Rollouts(revisions=1, replicasets=1)
        assert ctl.admitter.mutated >= 1


async def test_reloader_v1_rolls_twice_for_the_same_apply(
    client: Client, kubeconfig_path: Path, namespace: str, tmp_path: Path
) -> None:
    await setup_workload(client, namespace)
    with start_peer("reloader-v1", kubeconfig_path, namespace, tmp_path, ha=False) as peer:
        await peer.wait_ready(client)
        generation = await generation_of(client, namespace)
        await apply_both(client, namespace)
        cost = await settled(client, namespace, generation, lambda: True)
        print(f"Reloader v1, one apply: {cost}")
        assert cost.revisions == 2
        assert cost.replicasets in (1, 2)


async def test_without_the_webhook_kube_reloader_also_rolls_twice(
    client: Client, connection: config.ConnectionConfig, namespace: str
) -> None:
    await setup_workload(client, namespace)
    async with running(connection, namespace, None) as ctl:
        seen, generation = ctl.controller.stats.changes, await generation_of(client, namespace)
        await apply_both(client, namespace)
        cost = await settled(
            client, namespace, generation, lambda: ctl.controller.stats.changes > seen
        )
        print(f"kube-reloader without the webhook, one apply: {cost}")
        assert cost.revisions == 2
        assert cost.replicasets in (1, 2)


async def test_with_the_webhook_down_writes_are_admitted_and_the_controller_still_reloads(
    client: Client, connection: config.ConnectionConfig, namespace: str
) -> None:
    port = free_port()  # registered, but nothing listens there
    await setup_workload(client, namespace)
    async with registered(client, namespace, port), running(connection, namespace, None):
        patch = {"spec": {"template": {"metadata": {"labels": {"rev": "2"}}}}}
        got = await client.patch(resources.DEPLOYMENTS, "w", patch, namespace=namespace)
        assert got["spec"]["template"]["metadata"]["labels"]["rev"] == "2"
        await update_cm(client, namespace, "cfg", {"v": "1"})
        want = hashing.configmap_hash({"v": "1"})

        async def reloaded() -> bool:
            return (await env_of(client, "Deployment", namespace, "w")).get(ENV) == want

        await eventually(reloaded, what="the controller's reload")


async def test_with_an_unreadable_ca_secret_the_controller_runs_and_reloads_without_admission(
    client: Client, connection: config.ConnectionConfig, namespace: str
) -> None:
    port = free_port()
    await setup_workload(client, namespace)
    junk = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "admission-ca"},
            "data": {"ca.crt": base64.b64encode(b"not a certificate").decode()}}  # fmt: skip
    await client.create(resources.SECRETS, junk, namespace=namespace)
    admission = settings_for(namespace, port)
    async with (
        registered(client, namespace, port),
        running(connection, namespace, admission, serving=False) as ctl,
    ):
        assert ctl.manager.admission is not None
        running_admission = ctl.manager.admission

        async def failed_twice() -> bool:
            return running_admission.failures >= 2

        await eventually(failed_twice, what="two failed admission starts")
        assert not running_admission.serving
        assert ctl.controller.supervisor.unhealthy() == []
        await update_cm(client, namespace, "cfg", {"v": "1"})
        want = hashing.configmap_hash({"v": "1"})

        async def reloaded() -> bool:
            return (await env_of(client, "Deployment", namespace, "w")).get(ENV) == want

        await eventually(reloaded, what="the controller's reload without the webhook")


def served_serial(port: int, ca_pem: bytes) -> int:
    """The serial of the certificate the webhook presents now (verified against its CA)."""
    ctx = ssl.create_default_context(cadata=ca_pem.decode())
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return admissioncerts.serial(ssl.DER_cert_to_PEM_cert(der).encode())


async def test_the_webhook_rotates_its_certificate_and_the_api_server_keeps_calling_it(
    client: Client, connection: config.ConnectionConfig, namespace: str
) -> None:
    port = free_port()
    await client.create(resources.CONFIGMAPS, builders.configmap("cfg", namespace, {"v": "0"}))
    admission = settings_for(namespace, port, cert_validity=20.0)
    async with (
        registered(client, namespace, port) as webhook,
        running(connection, namespace, admission) as ctl,
    ):
        assert ctl.manager.admission is not None
        keeper = ctl.manager.admission.keeper
        assert keeper.ca is not None
        hook = await client.get(admissioncerts.MUTATING_WEBHOOKS, webhook)
        bundle = base64.b64decode(hook["webhooks"][0]["clientConfig"]["caBundle"])
        assert bundle == keeper.ca.bundle_pem
        first = await asyncio.to_thread(served_serial, port, bundle)
        want = hashing.configmap_hash({"v": "0"})
        for i in range(3):  # before, between and after rotations
            name = f"w{i}"
            made = await client.create(
                resources.DEPLOYMENTS,
                builders.auto_deployment(name, namespace, configmaps=("cfg",), replicas=0),
            )
            env = made["spec"]["template"]["spec"]["containers"][0].get("env") or []
            assert {"name": ENV, "value": want} in env, (i, env)
            issued = keeper.issued

            async def rotated(issued: int = issued) -> bool:
                return keeper.issued > issued

            await eventually(rotated, timeout=40, what="a new serving certificate")
        last = await asyncio.to_thread(served_serial, port, bundle)
        assert last != first
        assert last == admissioncerts.serial(keeper.cert_pem)


def post(port: int, ca_pem: bytes, body: bytes) -> tuple[int, bytes]:
    ctx = ssl.create_default_context(cadata=ca_pem.decode())
    req = urllib.request.Request(
        f"https://127.0.0.1:{port}/mutate", data=body, method="POST",
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:  # noqa: S310
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except (urllib.error.URLError, ConnectionError):  # the connection was closed on us
        return 0, b""


async def test_hostile_reviews_are_admitted_unchanged_with_a_logged_reason(
    client: Client, connection: config.ConnectionConfig, namespace: str,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    port = free_port()
    await client.create(resources.CONFIGMAPS, builders.configmap("cfg", namespace, {"v": "0"}))
    async with (
        registered(client, namespace, port),
        running(connection, namespace, settings_for(namespace, port)) as ctl,
    ):
        assert ctl.manager.admission is not None
        assert ctl.manager.admission.keeper.ca is not None
        ca = ctl.manager.admission.keeper.ca.bundle_pem
        caplog.set_level(logging.INFO)
        status, answer = await asyncio.to_thread(post, port, ca, b"{not json")
        assert status == 200
        assert json.loads(answer)["response"]["allowed"] is True
        assert "patch" not in json.loads(answer)["response"]
        assert any("not valid JSON" in str(getattr(r, "reason", "")) for r in caplog.records)
        status, answer = await asyncio.to_thread(post, port, ca, b" " * (4 * 1024 * 1024))
        # refused before it is read: allowed without a uid or a patch, or the connection
        # closed while it was still being sent; the API server then admits unchanged
        # (failurePolicy: Ignore)
        assert status in (0, 200)
        assert status == 0 or "patch" not in json.loads(answer)["response"]
        # a large object through the API server: admitted, with the current hash written
        big = builders.auto_deployment("big", namespace, configmaps=("cfg",), replicas=0)
        filler = {"name": "FILLER", "value": "x" * 900_000}
        big["spec"]["template"]["spec"]["containers"][0]["env"] = [filler]
        made = await client.create(resources.DEPLOYMENTS, big)
        env = made["spec"]["template"]["spec"]["containers"][0].get("env") or []
        assert {"name": ENV, "value": hashing.configmap_hash({"v": "0"})} in env
        # a workload the rules do not reload: admitted unchanged
        plain = builders.auto_deployment("plain", namespace, configmaps=("cfg",), annotations={})
        made = await client.create(resources.DEPLOYMENTS, plain)
        assert not made["spec"]["template"]["spec"]["containers"][0].get("env")


async def test_the_charts_rbac_lets_the_webhook_keep_its_ca_and_bundle_and_nothing_more(
    client: Client, kubeconfig_path: Path, namespace: str
) -> None:
    release = f"r{secrets.token_hex(3)}"
    values = {"reloader": {"admission": {"enabled": True, "namespaceSelector": {
        "matchLabels": {"kubernetes.io/metadata.name": namespace}}}}}  # fmt: skip
    docs = render(values, release=release, namespace=namespace)
    port = free_port()
    for doc in docs:
        if doc["kind"] == "MutatingWebhookConfiguration":  # no Service network here: its URL
            doc["webhooks"][0]["clientConfig"] = {"url": f"https://127.0.0.1:{port}/mutate"}
    await _apply(client, docs)
    cluster_objects = [
        (d["kind"], d["metadata"]["name"]) for d in docs
        if d["kind"].startswith("Cluster") or d["kind"] == "MutatingWebhookConfiguration"
    ]  # fmt: skip
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    parsed = parse(args, env={"POD_NAMESPACE": namespace})
    assert parsed.admission is not None
    admission = msgspec.structs.replace(parsed.admission, addr=f"127.0.0.1:{port}")
    try:
        token = await service_account_token(client, namespace, f"{release}-reloader")
        as_sa = bearer_connection(config.load_kubeconfig([kubeconfig_path]), token)
        await client.create(resources.CONFIGMAPS, builders.configmap("cfg", namespace, {"v": "0"}))
        options = dataclasses.replace(parsed.options, deployment_configs=False)
        async with running(as_sa, namespace, admission, options):
            secret = await client.get(
                resources.SECRETS, f"{release}-reloader-admission-ca", namespace=namespace
            )
            assert set(secret["data"]) == {"ca.crt", "ca.key", "bundle.crt"}
            hook = await client.get(admissioncerts.MUTATING_WEBHOOKS, f"{release}-reloader")
            assert hook["webhooks"][0]["clientConfig"].get("caBundle")
            made = await client.create(
                resources.DEPLOYMENTS,
                builders.auto_deployment("w", namespace, configmaps=("cfg",), replicas=0),
            )
            env = made["spec"]["template"]["spec"]["containers"][0].get("env") or []
            assert {"name": ENV, "value": hashing.configmap_hash({"v": "0"})} in env
            async with Client(as_sa) as sa:
                other = webhook_config(f"other-{namespace}", namespace, port)
                await client.create(admissioncerts.MUTATING_WEBHOOKS, other)
                try:
                    with pytest.raises(errors.Forbidden):
                        await sa.patch(
                            admissioncerts.MUTATING_WEBHOOKS, f"other-{namespace}",
                            {"metadata": {"labels": {"x": "y"}}}, patch_type=PatchType.MERGE,
                        )  # fmt: skip
                finally:
                    await client.delete(admissioncerts.MUTATING_WEBHOOKS, f"other-{namespace}")
                await client.create(resources.SECRETS, builders.secret("s", namespace, {"k": "v"}))
                with pytest.raises(errors.Forbidden):
                    await sa.get(resources.SECRETS, "s", namespace=namespace)
    finally:
        for kind, name in cluster_objects:
            with contextlib.suppress(errors.NotFound):
                await client.delete(KINDS[kind], name)
