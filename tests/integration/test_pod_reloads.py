"""Pod-level reloads (`kube-reloader.io/strategy: evict`) on the real control plane: the
ReplicaSet, StatefulSet and disruption controllers of kube-controller-manager re-create and
account for the pods, kwok makes them Ready. The template is never written; each pod older
than the change is evicted once; a disruption budget is honoured; an OnDelete StatefulSet is
replaced from its highest ordinal, one pod at a time."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from kube_reloader.core import evicting
from kube_reloader.kube import pods, resources
from kube_reloader.kube.client import Client, PatchType
from kube_reloader.kube.resources import Resource
from kube_reloader.runtime import podviews
from kube_reloader.runtime.controller import Controller
from tests import builders
from tests.adversarial.tenant import ControllerProcess, controller
from tests.exposition import scalar
from tests.harness import find_event, reverting_operator, running, update_cm
from tests.integration.test_custom_kind import APPS, GROUP, install
from tests.waiting import eventually, next_second

# serial: rotations killed mid-way and evictions timed against whole-second content times
pytestmark = [
    pytest.mark.cluster,
    pytest.mark.rollout,
    pytest.mark.timeout(240),
    pytest.mark.serial,
]
PDBS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
EVICT = {"reloader.stakater.com/auto": "true", "kube-reloader.io/strategy": "evict"}


async def config_first(client: Client, resource: Resource, manifest: dict[str, Any]) -> None:
    """Create a ConfigMap or Secret, then wait for the next second of the clock: the workload
    created after it has pods newer than the config's creation (a pod created in its second
    counts as older, and a controller starting then replaces it once: docs/known-limits.md)."""
    created = await client.create(resource, manifest)
    await next_second()
    assert created["metadata"]["name"] == manifest["metadata"]["name"]


def app_template(name: str, configmap: str) -> dict[str, Any]:
    return builders.pod_template(
        {"app": name},
        containers=[builders.container(env_from_configmaps=(configmap,))],
    )


async def live_pods(client: Client, namespace: str, app: str) -> list[evicting.Pod]:
    listed = await client.list(resources.PODS, namespace=namespace, label_selector=f"app={app}",
                               type=pods.PodObject)  # fmt: skip
    return [v for v in map(podviews.view, listed.items) if not v.terminating]


async def ready(client: Client, namespace: str, app: str, n: int) -> list[evicting.Pod]:
    async def probe() -> list[evicting.Pod] | None:
        live = await live_pods(client, namespace, app)
        return live if len(live) == n and all(p.ready for p in live) else None

    return await eventually(probe, what=f"{n} Ready pods of {app}", timeout=90)


async def event_of(client: Client, namespace: str, name: str, reason: str) -> dict[str, Any] | None:
    return await find_event(client, namespace, lambda e: e.get("reason") == reason
                            and e["involvedObject"]["name"] == name)  # fmt: skip


async def evicted_total(proc: ControllerProcess, want: int) -> bool:
    """Whether the controller process counted `want` evictions (its own /metrics)."""
    text = (await proc.probe("/metrics")).body
    return f'kube_reloader_evictions_total{{result="evicted"}} {float(want)}' in text


def evicted(controller: Controller) -> float:
    value = controller.metrics.registry.get_sample_value(
        "kube_reloader_evictions_total", {"result": "evicted"}
    )
    return value or 0.0


@contextlib.asynccontextmanager
async def sampling(
    client: Client, namespace: str, app: str, every: float = 0.1
) -> AsyncIterator[list[int]]:
    """Ready pods of `app`, sampled every `every` seconds while the block runs."""
    samples: list[int] = []

    async def sample() -> None:
        while True:
            samples.append(sum(p.ready for p in await live_pods(client, namespace, app)))
            await asyncio.sleep(every)

    task = asyncio.create_task(sample())
    try:
        yield samples
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_an_operator_owned_deployment_has_each_pod_replaced_once_and_its_template_untouched(
    client: Client, namespace: str
) -> None:
    await config_first(
        client, resources.CONFIGMAPS, builders.configmap("settings", namespace, {"v": "0"})
    )
    await client.create(resources.DEPLOYMENTS, builders.deployment(
        "op", namespace, replicas=3, template=app_template("op", "settings"), annotations=EVICT))  # fmt: skip
    before = {p.uid for p in await ready(client, namespace, "op", 3)}
    async with (
        reverting_operator(client, resources.DEPLOYMENTS, namespace, "op") as reverted,
        running(client, namespace, min_interval=0.0) as controller,
    ):
        changed = time.time()
        await update_cm(client, namespace, "settings", {"v": "1"})
        after = await eventually(
            lambda: _replaced(client, namespace, "op", 3, before), what="every pod replaced",
            timeout=90,
        )  # fmt: skip
        took = time.time() - changed
        # the rotation has ended (its Reloaded Event): nothing of it evicts after that
        event = await eventually(lambda: event_of(client, namespace, "op", "Reloaded"),
                                 what="the Reloaded Event")  # fmt: skip
        assert evicted(controller) == 3, "each old pod evicted once"
    d = await client.get(resources.DEPLOYMENTS, "op", namespace=namespace)
    print(f"evict: 3 pods replaced {took:.1f}s after the change")
    assert d["metadata"]["generation"] == 1, "the template was never written"
    assert reverted == [], "nothing for the operator to revert"
    assert not before & {p.uid for p in after}
    assert "replaced 3 pods of 'op'" in event["message"]


async def _replaced(
    client: Client, namespace: str, app: str, n: int, old: set[str]
) -> list[evicting.Pod] | None:
    live = await live_pods(client, namespace, app)
    fresh = [p for p in live if p.uid not in old and p.ready]
    return fresh if len(fresh) == n and len(live) == n else None


async def test_a_disruption_budget_of_one_is_never_exceeded_and_refusals_are_retried(
    client: Client, namespace: str
) -> None:
    await config_first(
        client, resources.CONFIGMAPS, builders.configmap("db-config", namespace, {"v": "0"})
    )
    annotations = {**EVICT, "kube-reloader.io/max-unavailable": "100%"}  # the budget is the cap
    await client.create(resources.DEPLOYMENTS, builders.deployment(
        "db", namespace, replicas=5, template=app_template("db", "db-config"),
        annotations=annotations))  # fmt: skip
    # the budget starts closed (no disruption allowed): the first evictions are refused for
    # certain, whatever the timing; then it opens to one at a time
    await client.create(PDBS, {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "db", "namespace": namespace},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "db"}}},
    })  # fmt: skip
    before = {p.uid for p in await ready(client, namespace, "db", 5)}

    def allowing(n: int) -> Callable[[], Awaitable[bool]]:
        async def seen() -> bool:
            pdb = await client.get(PDBS, "db", namespace=namespace)
            status = pdb.get("status", {})
            return bool(status.get("observedGeneration") == pdb["metadata"]["generation"]
                        and status.get("disruptionsAllowed") == n)  # fmt: skip

        return seen

    await eventually(allowing(0), what="the disruption controller's status")
    async with (
        running(client, namespace, min_interval=0.0) as controller,
        sampling(client, namespace, "db") as samples,
    ):
        await update_cm(client, namespace, "db-config", {"v": "1"})

        async def refused_once() -> bool:
            return bool(refused_total(controller))

        await eventually(refused_once, what="an eviction refused by the closed budget")
        assert evicted(controller) == 0, "a refused eviction is never forced"
        await client.patch(PDBS, "db", {"spec": {"maxUnavailable": 1}}, namespace=namespace,
                           patch_type=PatchType.MERGE)  # fmt: skip
        await eventually(allowing(1), what="the budget opened to one")
        await eventually(lambda: _replaced(client, namespace, "db", 5, before),
                         what="every pod replaced", timeout=120)  # fmt: skip
        refused = refused_total(controller)
        assert evicted(controller) == 5
    print(f"PDB maxUnavailable 0 then 1: fewest Ready of 5 while rotating {min(samples)}, "
          f"{len(samples)} samples, {refused:.0f} evictions refused and retried")  # fmt: skip
    assert min(samples) >= 4, "never more than 1 pod unavailable"
    assert refused >= 1, "the budget refused evictions, and they were retried, not forced"


def refused_total(controller: Controller) -> float:
    value = controller.metrics.registry.get_sample_value(
        "kube_reloader_evictions_total", {"result": "refused"}
    )
    return value or 0.0


async def test_an_ondelete_statefulset_is_replaced_from_its_highest_ordinal_one_at_a_time(
    client: Client, namespace: str
) -> None:
    await config_first(
        client, resources.CONFIGMAPS, builders.configmap("sts-config", namespace, {"v": "0"})
    )
    sts = builders.statefulset("sts", namespace, replicas=3,
                               template=app_template("sts", "sts-config"), annotations=EVICT)  # fmt: skip
    sts["spec"]["updateStrategy"] = {"type": "OnDelete"}
    await client.create(resources.STATEFULSETS, sts)
    before = await ready(client, namespace, "sts", 3)
    old = {p.uid for p in before}
    order: list[str] = []
    async with (
        running(client, namespace, min_interval=0.0),
        sampling(client, namespace, "sts") as samples,
    ):
        await update_cm(client, namespace, "sts-config", {"v": "1"})

        async def progress() -> bool:
            for p in await live_pods(client, namespace, "sts"):
                if p.uid not in old and p.name not in order:
                    order.append(p.name)
            return len(order) == 3

        await eventually(progress, what="3 replacements", timeout=120, interval=0.05)
        await ready(client, namespace, "sts", 3)
        await eventually(lambda: event_of(client, namespace, "sts", "Reloaded"),
                         what="the Reloaded Event")  # fmt: skip
    s = await client.get(resources.STATEFULSETS, "sts", namespace=namespace)
    print(f"OnDelete StatefulSet: replaced in order {order}; fewest Ready {min(samples)} of 3")
    assert order == ["sts-2", "sts-1", "sts-0"]
    assert min(samples) >= 2, "one pod at a time"
    assert s["metadata"]["generation"] == 1, "the template was never written"
    for reason in ("ReloadRolloutStuck", "ReloadRolloutFailed"):
        assert await event_of(client, namespace, "sts", reason) is None, "not called stuck"


async def test_a_controller_killed_mid_rotation_is_followed_by_one_that_evicts_only_the_rest(
    client: Client, namespace: str, kubeconfig_path: Path
) -> None:
    await config_first(
        client, resources.CONFIGMAPS, builders.configmap("kill-config", namespace, {"v": "0"})
    )
    await client.create(resources.DEPLOYMENTS, builders.deployment(
        "kill", namespace, replicas=5, template=app_template("kill", "kill-config"),
        annotations=EVICT))  # fmt: skip
    first_pods = await ready(client, namespace, "kill", 5)
    old = {p.uid for p in first_pods}
    # every pod ever seen live (one evicted before the first look below is one of these)
    seen: dict[str, evicting.Pod] = {p.uid: p for p in first_pods}

    async def look() -> tuple[set[str], set[str]]:
        """(old pods gone, new pods gone) so far."""
        live = {p.uid: p for p in await live_pods(client, namespace, "kill")}
        seen.update(live)
        gone = set(seen) - set(live)
        return gone & old, gone - old

    flags = ("--reload-min-interval=0", "--reload-coalesce-window=0")
    async with controller(kubeconfig_path, [namespace], *flags) as first:
        await update_cm(client, namespace, "kill-config", {"v": "1"})
        while len((await look())[0]) < 2:
            assert first.alive()
            await asyncio.sleep(0.05)
        first.proc.send_signal(signal.SIGKILL)
        await asyncio.to_thread(first.proc.wait, 10)
    old_gone, new_gone = await look()
    killed_after = len(old_gone)
    async with controller(kubeconfig_path, [namespace], *flags) as second:
        await eventually(lambda: _replaced(client, namespace, "kill", 5, old),
                         what="the rest replaced by the next controller", timeout=90)  # fmt: skip
        # its rotation has ended (counted as one reload): it evicts nothing more after that
        await eventually(lambda: reloads_done(second), what="the next controller's rotation done",
                         timeout=60)  # fmt: skip
        old_gone, new_gone = await look()
        text = (await second.probe("/metrics")).body
    evicted_by_second = scalar(text, 'kube_reloader_evictions_total{result="evicted"}') or 0.0
    print(f"SIGKILL after {killed_after} of 5 evictions: the next controller evicted "
          f"{evicted_by_second:.0f}; replacements seen evicted: {len(new_gone)}")  # fmt: skip
    assert 2 <= killed_after < 5
    assert old_gone == old, "every old pod replaced"
    assert new_gone == set(), "no pod started after the change was ever evicted"
    # exact: the pods the first left, no replacement (one evicted between two looks included)
    assert evicted_by_second == 5 - killed_after


async def reloads_done(proc: ControllerProcess) -> bool:
    text = (await proc.probe("/metrics")).body
    return (scalar(text, 'reloader_reload_executed_total{success="true"}') or 0.0) >= 1.0


async def test_a_template_reload_that_an_operator_reverts_is_reported_as_reverted(
    client: Client, namespace: str
) -> None:
    await client.create(
        resources.CONFIGMAPS, builders.configmap("owned-config", namespace, {"v": "0"})
    )
    await client.create(resources.DEPLOYMENTS, builders.deployment(
        "owned", namespace, replicas=1, template=app_template("owned", "owned-config"),
        annotations={"reloader.stakater.com/auto": "true"}))  # fmt: skip
    async with (
        reverting_operator(client, resources.DEPLOYMENTS, namespace, "owned") as reverted,
        running(client, namespace, min_interval=0.0) as controller,
    ):
        await update_cm(client, namespace, "owned-config", {"v": "1"})
        event = await eventually(lambda: event_of(client, namespace, "owned", "ReloadReverted"),
                                 what="the ReloadReverted Event")  # fmt: skip
        count = controller.metrics.registry.get_sample_value(
            "kube_reloader_reverted_total", {"workload_kind": "Deployment"}
        )
    assert reverted, "the operator did revert our template write"
    assert count == 1
    assert "kube-reloader.io/strategy: evict" in event["message"]


async def test_a_daemonset_owned_by_a_custom_resource_has_each_pod_replaced_on_a_certificate_change(
    client: Client, namespace: str
) -> None:
    """The Piraeus case: the DaemonSet belongs to an operator's custom resource; the reload
    annotation reaches it through the operator, and its pods are replaced, template untouched."""
    await install(client)
    owner = await client.create(APPS, {
        "apiVersion": f"{GROUP}/v1", "kind": "ReloadTestApp",
        "metadata": {"name": "satellite-operator", "namespace": namespace}, "spec": {},
    }, namespace=namespace)  # fmt: skip
    await config_first(client, resources.SECRETS, builders.secret(
        "node-tls", namespace, {"tls.crt": "cert-1", "tls.key": "key-1"}, type="kubernetes.io/tls"))  # fmt: skip
    template = builders.pod_template(
        {"app": "satellite"}, containers=[builders.container(volume_mounts=("tls",))],
        volumes=[{"name": "tls", "secret": {"secretName": "node-tls"}}],
    )  # fmt: skip
    ds = builders.daemonset("satellite", namespace, template=template, annotations={
        "secret.reloader.stakater.com/reload": "node-tls", "kube-reloader.io/strategy": "evict"})  # fmt: skip
    ds["metadata"]["ownerReferences"] = [{
        "apiVersion": f"{GROUP}/v1", "kind": "ReloadTestApp", "name": "satellite-operator",
        "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": False}]  # fmt: skip
    await client.create(resources.DAEMONSETS, ds)
    before = {p.uid for p in await ready(client, namespace, "satellite", 1)}
    async with running(client, namespace, min_interval=0.0) as controller:
        await client.patch(resources.SECRETS, "node-tls", {"stringData": {"tls.crt": "cert-2"}},
                           namespace=namespace, patch_type=PatchType.MERGE)  # fmt: skip
        after = await eventually(lambda: _replaced(client, namespace, "satellite", 1, before),
                                 what="the node's pod replaced", timeout=90)  # fmt: skip
        await eventually(lambda: event_of(client, namespace, "satellite", "Reloaded"),
                         what="the Reloaded Event")  # fmt: skip
        assert evicted(controller) == 1
    d = await client.get(resources.DAEMONSETS, "satellite", namespace=namespace)
    assert d["metadata"]["generation"] == 1, "the template was never written"
    assert d["metadata"]["ownerReferences"][0]["kind"] == "ReloadTestApp"
    assert not before & {p.uid for p in after}
