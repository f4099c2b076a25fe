"""The fan-out: one decision per candidate; reloads go to the coalescer, or a webhook."""

from __future__ import annotations

import dataclasses

import pytest

from kube_reloader.core import planning
from kube_reloader.core.objects import ResourceType
from kube_reloader.kube import resources
from kube_reloader.runtime.coalescing import Coalescer
from kube_reloader.runtime.fanout import FanOut
from kube_reloader.runtime.options import Options
from kube_reloader.runtime.stores import Stores

from .fakes import KEYS, Room, change, optional_reflector, workload


def fanout(room: Room, stores: Stores, co: Coalescer, options: Options | None = None) -> FanOut:
    return FanOut(
        options or Options(coalesce_window=0.3),
        room.clock,
        stores,
        co,
        room.fence,
        room.reports.changes,
        room.reports.queue,
        room.reports.reloads,
        room.reports.webhooks,
        room.reports.problems,
        webhook=None,
    )


async def test_only_the_workloads_that_must_reload_are_queued_after_the_window() -> None:
    room, stores = Room(), Stores(KEYS)
    co = Coalescer(room.clock)
    uses, other = workload("uses", configmap="cm"), workload("other", configmap="x")
    not_auto = workload("manual", configmap="cm", annotations={"unrelated": "1"})
    for w in (uses, other, not_auto):
        stores.index.put(w)
    await fanout(room, stores, co).fan_out(change("cm"), observed=0.0)
    assert uses.key in co
    assert other.key not in co
    assert not_auto.key not in co
    room.clock.advance(0.3)
    assert co.depth == 1
    assert room.sample("reloader_workloads_matched_total", kind="Deployment") == 1


async def test_a_decision_that_raises_costs_that_workload_a_warning_and_nothing_else(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    room, stores = Room(), Stores(KEYS)
    co = Coalescer(room.clock)
    bad, good = workload("bad"), workload("good")
    stores.index.put(bad)
    stores.index.put(good)
    real = planning.plan

    def plan(**kw: object) -> planning.Plan:
        if kw["workload"].name == "bad":  # type: ignore[attr-defined]
            raise RuntimeError("boom")
        return real(**kw)  # type: ignore[arg-type]

    monkeypatch.setattr(planning, "plan", plan)
    await fanout(room, stores, co).fan_out(change("cm"), observed=0.0)
    await room.spawned.run()
    assert good.key in co
    assert bad.key not in co
    assert room.events.reasons() == ["ReloadError"]
    assert room.sample("kube_reloader_object_errors_total", stage="decision") == 1


async def test_two_changes_for_one_workload_are_coalesced_into_one_item() -> None:
    room, stores = Room(), Stores(KEYS)
    co = Coalescer(room.clock)
    w = workload(configmap="a")
    stores.index.put(w)
    f = fanout(room, stores, co)
    await f.fan_out(change("a", "1"), observed=0.0)
    await f.fan_out(change("a", "2"), observed=0.1)
    room.clock.advance(0.3)
    item = await co.get()
    assert item.key == w.key
    assert len(item.changes) == 1
    assert room.sample("kube_reloader_coalesced_total") == 1


AUTO = {"reloader.stakater.com/auto": "true"}
GRACE = [
    # (case, change's type, kind, annotations, the webhook writes key-level hashes, waits)
    ("a Deployment's ConfigMap", ResourceType.CONFIGMAP, "Deployment", AUTO, False, 2.0),
    ("a DaemonSet's ConfigMap", ResourceType.CONFIGMAP, "DaemonSet", AUTO, False, 2.0),
    ("a Secret: never written by the webhook", ResourceType.SECRET, "Deployment",
     {"secret.reloader.stakater.com/reload": "cm"}, False, 0.3),
    ("a Job: not a kind the webhook is sent", ResourceType.CONFIGMAP, "Job", AUTO, False, 0.3),
    ("evicted pods: no template write", ResourceType.CONFIGMAP, "Deployment",
     {**AUTO, "kube-reloader.io/strategy": "evict"}, False, 0.3),
    ("key-level, the caller unproven: left to the controller", ResourceType.CONFIGMAP,
     "Deployment", {**AUTO, "kube-reloader.io/reload-scope": "keys"}, False, 0.3),
    ("key-level, the caller proven", ResourceType.CONFIGMAP, "Deployment",
     {**AUTO, "kube-reloader.io/reload-scope": "keys"}, True, 2.0),
]  # fmt: skip # one case per line


@pytest.mark.parametrize(
    ("case", "rtype", "kind", "annotations", "keys", "waits"), GRACE, ids=[g[0] for g in GRACE]
)
async def test_with_the_webhook_on_a_reload_it_would_have_written_waits_the_grace(
    case: str,
    rtype: ResourceType,
    kind: str,
    annotations: dict[str, str],
    keys: bool,
    waits: float,
) -> None:
    room, stores = Room(), Stores(KEYS)
    co = Coalescer(room.clock)
    w = workload(kind=kind, configmap="cm", annotations=annotations)
    stores.index.put(w)
    options = Options(coalesce_window=0.3, admission_grace=2.0, admission_keys=keys)
    f = fanout(room, stores, co, options)
    await f.fan_out(dataclasses.replace(change("cm"), rtype=rtype), observed=0.0)
    assert w.key in co
    room.clock.advance(waits - 0.01)
    assert co.depth == 0
    room.clock.advance(0.01)
    assert co.depth == 1


@pytest.mark.parametrize(
    ("scopes", "replayed"),
    [
        ([None], ["dc"]),  # one reflector for every namespace
        (["ns"], ["dc"]),  # one per watched namespace: this change's
        (["other"], []),  # another namespace's list ending gives this change to nobody
    ],
)
async def test_a_replay_decides_only_the_workloads_of_the_optional_kind_that_listed(
    scopes: list[str | None], replayed: list[str]
) -> None:
    room, stores = Room(), Stores(KEYS)
    co = Coalescer(room.clock)
    reflectors = [optional_reflector(resources.DEPLOYMENTCONFIGS, ns) for ns in scopes]
    stores.optional.extend(reflectors)
    deploy = workload("web")
    stores.index.put(deploy)
    f = fanout(room, stores, co)
    await f.fan_out(change("cm"), observed=0.0)  # the DeploymentConfig is not listed yet
    dc = workload("dc", kind="DeploymentConfig")
    stores.index.put(dc)
    for r in reflectors:
        r.synced.set()
    await f.replay()
    await f.replay()  # a second list end (a relist) gives nothing again
    assert room.sample("reloader_workloads_matched_total", kind="Deployment") == 1
    assert room.sample("reloader_workloads_matched_total", kind="DeploymentConfig") == len(replayed)
    assert (dc.key in co) == bool(replayed)
    assert deploy.key in co


async def test_a_kind_listed_before_a_change_is_not_given_it_again_when_another_lists() -> None:
    room, stores = Room(), Stores(KEYS)
    co = Coalescer(room.clock)
    rollouts = optional_reflector(resources.ROLLOUTS, None)
    configs = optional_reflector(resources.DEPLOYMENTCONFIGS, None)
    stores.optional.extend([rollouts, configs])
    rollouts.synced.set()  # listed before the change (before readiness: no replay then)
    stores.index.put(workload("ro", kind="Rollout"))
    f = fanout(room, stores, co)
    await f.fan_out(change("cm"), observed=0.0)
    stores.index.put(workload("dc", kind="DeploymentConfig"))
    configs.synced.set()
    await f.replay()
    for kind in ("Rollout", "DeploymentConfig"):
        assert room.sample("reloader_workloads_matched_total", kind=kind) == 1, kind
