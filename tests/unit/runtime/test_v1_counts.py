"""Reloader v1's counts, label for label: what is skipped and why, what is processed or
dropped, what an error is, and what webhook mode counts (a webhook is never a reload)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pytest

from kube_reloader.core import planning
from kube_reloader.core.alerting import WEBHOOK_BODY
from kube_reloader.core.objects import ResourceType
from kube_reloader.core.strategies import Compat
from kube_reloader.kube import errors, resources
from kube_reloader.kube.projections import ObjectMeta
from kube_reloader.kube.watching import EventType, ReflectorEvent
from kube_reloader.metrics import Recorder
from kube_reloader.runtime.cache import ConfigEntry
from kube_reloader.runtime.coalescing import Coalescer
from kube_reloader.runtime.fanout import FanOut
from kube_reloader.runtime.intake import Intake
from kube_reloader.runtime.options import Options
from kube_reloader.runtime.stores import Stores
from kube_reloader.runtime.supervisor import Supervisor

from .fakes import (
    AUTO,
    KEYS,
    FakeWriter,
    Room,
    change,
    intake_ports,
    optional_reflector,
    workload,
)
from .test_reconciling import item, rig

IGNORED = frozenset({"kube-system"})


def config_event(
    kind: EventType, new: str, old: str | None = None, *, namespace: str = "ns",
    rtype: ResourceType = ResourceType.CONFIGMAP, synthesized: bool = False,
) -> ReflectorEvent[ConfigEntry]:  # fmt: skip
    meta = ObjectMeta(name="cm", namespace=namespace)
    return ReflectorEvent(
        kind, (namespace, "cm"), ConfigEntry(meta, rtype, new),
        None if old is None else ConfigEntry(meta, rtype, old), synthesized,
    )  # fmt: skip


def label_values(metrics: Recorder, family: str, label: str) -> set[str]:
    return {
        s.labels[label]
        for m in metrics.registry.collect()
        if m.name == family
        for s in m.samples
        if s.value and label in s.labels
    }


# (what, event, options, initial, skipped reason or None, processed here, a change)
INTAKE = [
    ("a content change is a change, processed by its fan-out",
     config_event(EventType.MODIFIED, "h2", "h1"), {}, False, None, 0, True),
    ("an update without a data change is skipped and processed",
     config_event(EventType.MODIFIED, "h1", "h1"), {}, False, "no_data_change", 1, False),
    ("an update in an ignored namespace is not selected",
     config_event(EventType.MODIFIED, "h2", "h1", namespace="kube-system"),
     {"namespaces_to_ignore": IGNORED}, False, "ignored_or_not_selected", 0, False),
    ("a metadata-only update in an ignored namespace is not selected either",
     config_event(EventType.MODIFIED, "h1", "h1", namespace="kube-system"),
     {"namespaces_to_ignore": IGNORED}, False, "ignored_or_not_selected", 0, False),
    ("a creation without --reload-on-create is not counted",
     config_event(EventType.ADDED, "h1"), {}, False, None, 0, False),
    ("a creation in an ignored namespace is not selected",
     config_event(EventType.ADDED, "h1", namespace="kube-system"),
     {"reload_on_create": True, "namespaces_to_ignore": IGNORED}, False,
     "ignored_or_not_selected", 0, False),
    ("a creation listed at start is not selected (v1's start guard)",
     config_event(EventType.ADDED, "h1"), {"reload_on_create": True}, True,
     "ignored_or_not_selected", 0, False),
    ("a creation missed while not watching is a change",
     config_event(EventType.ADDED, "h1", synthesized=True), {"reload_on_create": True}, True,
     None, 0, True),
    ("a deletion without --reload-on-delete is not counted",
     config_event(EventType.DELETED, "h1"), {}, False, None, 0, False),
    ("a deletion in an ignored namespace is not selected",
     config_event(EventType.DELETED, "h1", namespace="kube-system"),
     {"reload_on_delete": True, "namespaces_to_ignore": IGNORED}, False,
     "ignored_or_not_selected", 0, False),
    ("a CSI pod status created is not counted",
     config_event(EventType.ADDED, "h1", rtype=ResourceType.SECRETPROVIDERCLASS),
     {"reload_on_create": True}, False, None, 0, False),
    ("a CSI pod status updated without a change is skipped and processed",
     config_event(EventType.MODIFIED, "h1", "h1", rtype=ResourceType.SECRETPROVIDERCLASS), {},
     False, "no_data_change", 1, False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("what", "ev", "options", "initial", "skipped", "processed", "is_change"), INTAKE,
    ids=[c[0] for c in INTAKE],
)  # fmt: skip
async def test_a_watch_event_is_skipped_or_processed_with_reloaders_reason(
    what: str, ev: ReflectorEvent[ConfigEntry], options: dict[str, object], initial: bool,
    skipped: str | None, processed: int, is_change: bool,
) -> None:  # fmt: skip
    room = Room()
    opts = dataclasses.replace(Options(), **options)  # type: ignore[arg-type]
    delivered: list[object] = []

    async def fan_out(c: object, observed: float) -> None:
        delivered.append(c)

    intake = Intake(opts, room.clock, Stores(KEYS), room.reports.changes, room.reports.problems, Supervisor(), asyncio.Event(),
                    **intake_ports(fan_out))  # fmt: skip
    intake.ready.set()
    assert ev.object is not None
    resource_type = ev.object.rtype.plural
    await intake.on_config(ev, resource_type, initial=initial)
    await intake.drained()
    reasons = label_values(room.metrics, "reloader_skipped", "reason")
    assert reasons == ({skipped} if skipped else set()), what
    if skipped:
        assert room.sample("reloader_skipped_total", reason=skipped) == 1
    assert room.sample("reloader_events_processed_total", event_type="unknown",
                       resource_type=resource_type, result="success") == processed  # fmt: skip
    assert bool(delivered) is is_change
    assert room.sample("reloader_events_received_total", resource_type=resource_type,
                       event_type={"ADDED": "add", "MODIFIED": "update",
                                   "DELETED": "delete"}[ev.type]) == 1  # fmt: skip


def fanout(room: Room, stores: Stores, *, webhook: Any = None,
           compat: Compat = Compat.V1) -> FanOut:  # fmt: skip
    options = Options(coalesce_window=0.3, plan=planning.Config(compat=compat))
    return FanOut(options, room.clock, stores, Coalescer(room.clock), room.fence, room.reports.changes, room.reports.queue, room.reports.reloads, room.reports.webhooks, room.reports.problems,
                  webhook)  # fmt: skip


async def test_a_fanned_out_change_is_processed_once_and_a_replay_does_not_count_it_again() -> None:
    room, stores = Room(), Stores(KEYS)
    stores.optional = [optional_reflector(resources.DEPLOYMENTCONFIGS)]
    stores.index.put(workload("uses", configmap="cm"))
    f = fanout(room, stores)
    await f.fan_out(change("cm"), observed=0.0)
    stores.optional[0].synced.set()
    await f.replay()
    labels = {"event_type": "unknown", "resource_type": "configmaps"}
    assert room.sample("reloader_events_processed_total", **labels, result="success") == 1
    assert room.sample("reloader_workloads_scanned_total", kind="Deployment") == 1


@pytest.mark.parametrize(("argo", "kinds"), [
    (False, {"Deployment", "CronJob", "Job", "DaemonSet", "StatefulSet"}),
    (True, {"Deployment", "CronJob", "Job", "DaemonSet", "StatefulSet", "Rollout"}),
])  # fmt: skip
async def test_every_kind_v1_lists_has_its_scanned_and_matched_series_after_a_change(
    argo: bool, kinds: set[str]
) -> None:
    room, stores = Room(), Stores(KEYS)
    f = fanout(room, stores)
    f.options = dataclasses.replace(f.options, argo_rollouts=argo)
    await f.fan_out(change("cm"), observed=0.0)
    for family in ("reloader_workloads_scanned", "reloader_workloads_matched"):
        labelled = {
            s.labels["kind"] for m in room.metrics.registry.collect() if m.name == family
            for s in m.samples
        }  # fmt: skip
        assert labelled == kinds, family


def carrying(value: str) -> planning.Workload:
    """An auto Deployment reading ConfigMap `cm` whose container carries `value` as its hash."""
    return planning.workload_from_manifest({
        "kind": "Deployment",
        "metadata": {"name": "w", "namespace": "ns", "annotations": AUTO},
        "spec": {"template": {"spec": {"containers": [
            {"name": "app", "envFrom": [{"configMapRef": {"name": "cm"}}],
             "env": [{"name": "STAKATER_CM_CONFIGMAP", "value": value}]}]}}},
    })  # fmt: skip


@pytest.mark.parametrize(
    ("what", "candidate", "skipped"),
    [
        ("a workload the rules say no to is not counted as skipped",
         workload("w", annotations={"unrelated": "1"}), set()),
        ("a workload that already carries the hash is strategy_not_updated",
         carrying(change("cm").hash), {"strategy_not_updated"}),
        ("a workload that must reload is not skipped", carrying("old"), set()),
    ],
)  # fmt: skip
async def test_a_decision_not_to_reload_counts_only_reloaders_skip_reason(
    what: str, candidate: planning.Workload, skipped: set[str]
) -> None:
    room, stores = Room(), Stores(KEYS)
    stores.index.put(candidate)
    await fanout(room, stores).fan_out(change("cm"), observed=0.0)
    assert room.sample("reloader_workloads_scanned_total", kind="Deployment") == 1
    assert label_values(room.metrics, "reloader_skipped", "reason") == skipped, what


async def test_a_permanent_write_failure_is_a_handler_error_and_drops_the_change() -> None:
    forbidden = errors.from_status(
        403,
        b'{"kind":"Status","status":"Failure","reason":"Forbidden","message":"deployments.apps '
        b'\\"web\\" is forbidden: User \\"r\\" cannot patch resource \\"deployments\\""}',
        method="PATCH", path="/apis/apps/v1/namespaces/ns/deployments/web",
    )  # fmt: skip
    r = rig(writer=FakeWriter(fail=[forbidden]))
    w = workload(configmap="a")
    r.stores.index.put(w)
    await r.reconciler.handle(item(w.key, "a"))
    await r.room.spawned.run()
    [(_key, reason, message)] = r.room.events.sent
    assert (reason, message) == ("ReloadFail", (
        "Update for 'web' of type 'Deployment' in namespace 'ns' failed with error "
        'deployments.apps "web" is forbidden: User "r" cannot patch resource "deployments"'
    ))  # fmt: skip
    assert label_values(r.room.metrics, "reloader_errors", "type") == {"handler_error"}
    assert r.room.sample("reloader_errors_total", type="handler_error") == 1
    assert r.room.sample("reloader_events_processed_total", event_type="unknown",
                         resource_type="configmaps", result="dropped") == 1  # fmt: skip
    assert r.room.sample("reloader_reload_executed_total", success="false") == 1


@pytest.mark.parametrize(
    "failure",
    [errors.ConnectionFailed("down"), errors.ServerError(503, "busy"), KeyError("x")],
    ids=["unreachable", "5xx", "a bug"],
)
async def test_every_failed_attempt_that_is_retried_is_one_handler_error_and_one_retry(
    failure: BaseException,
) -> None:
    r = rig(writer=FakeWriter(fail=[failure] * 3))
    w = workload(configmap="a")
    r.stores.index.put(w)
    for _ in range(3):
        await r.reconciler.handle(item(w.key, "a"))
    await r.room.spawned.run()
    assert r.room.sample("reloader_errors_total", type="handler_error") == 3
    assert r.room.sample("reloader_retries_total") == 3
    assert label_values(r.room.metrics, "reloader_errors", "type") == {"handler_error"}


# ---------------------------------------------------------------------- webhook mode


class FakeWebhook:
    """A notifier whose deliveries fail as scripted (each entry: the errors before success,
    or None: every attempt fails)."""

    def __init__(self, script: list[list[str] | None], max_queue: int = 100) -> None:
        self.script = script
        self.max_queue = max_queue
        self.queue: list[object] = []
        self.arrived = asyncio.Event()

    def enqueue(self, item: object) -> object | None:
        self.queue.append(item)
        self.arrived.set()
        return self.queue.pop(0) if len(self.queue) > self.max_queue else None

    async def next(self) -> object:
        while not self.queue:
            self.arrived.clear()
            await self.arrived.wait()
        return self.queue.pop(0)

    async def notify(
        self, retrying: Callable[[str], None] | None = None, body: bytes = b""
    ) -> bool:
        errors_before = self.script.pop(0)
        for error in ["HTTP 500: no"] * 2 if errors_before is None else errors_before:
            assert retrying is not None
            retrying(error)
        return errors_before is not None


async def test_webhook_mode_notifies_every_change_even_one_no_workload_uses() -> None:
    room, stores = Room(), Stores(KEYS)
    stores.index.put(workload("ignores-it", annotations={"unrelated": "1"}))
    hook = FakeWebhook([])
    f = fanout(room, stores, webhook=hook)
    for name in ("used-by-none", "cm"):
        await f.fan_out(change(name), observed=0.0)
    assert hook.queue == [(change("used-by-none"), WEBHOOK_BODY), (change("cm"), WEBHOOK_BODY)]
    assert room.sample("reloader_workloads_scanned_total", kind="Deployment") == 0, (
        "nothing is decided in webhook mode"
    )


async def test_in_v2_mode_a_webhook_names_the_matching_workloads_and_none_is_sent_without(
) -> None:  # fmt: skip
    room, stores = Room(), Stores(KEYS)
    stores.index.put(workload("web"))
    stores.index.put(workload("ignores-it", annotations={"unrelated": "1"}))
    hook = FakeWebhook([])
    f = fanout(room, stores, webhook=hook, compat=Compat.V2)
    await f.fan_out(change("used-by-none"), observed=0.0)
    assert hook.queue == [], "v2 sends nothing when no workload matches"
    await f.fan_out(change("cm"), observed=0.0)
    [(sent, body)] = hook.queue  # type: ignore[misc]
    assert sent == change("cm")
    doc = json.loads(body)
    assert list(doc) == ["kind", "namespace", "resourceName", "resourceType", "hash",
                         "timestamp", "workloads"]  # fmt: skip
    assert (doc["kind"], doc["resourceType"], doc["resourceName"]) == ("configmap",) * 2 + ("cm",)
    assert doc["hash"] == change("cm").hash
    assert doc["workloads"] == [{"kind": "Deployment", "name": "web", "namespace": "ns"}]
    assert doc["timestamp"].endswith("Z")


async def test_a_standby_sends_no_webhook() -> None:
    room, stores = Room(), Stores(KEYS)
    room.fence.stop_leading()
    hook = FakeWebhook([])
    await fanout(room, stores, webhook=hook).fan_out(change("cm"), observed=0.0)
    assert hook.queue == []


async def test_a_webhook_dropped_from_a_full_queue_is_a_dropped_change() -> None:
    room, stores = Room(), Stores(KEYS)
    f = fanout(room, stores, webhook=FakeWebhook([], max_queue=1))
    for name in ("a", "b", "c"):
        await f.fan_out(change(name), observed=0.0)
    assert room.sample("reloader_events_processed_total", event_type="unknown",
                       resource_type="configmaps", result="dropped") == 2  # fmt: skip


@pytest.mark.parametrize(
    ("what", "script", "counts"),
    [
        ("a delivered webhook is processed, never a reload", [[]],
         {"success": 1, "dropped": 0, "handler_error": 0, "retries": 0, "reconcile": "success"}),
        ("a webhook delivered on its third attempt", [["HTTP 502: x", "timeout"]],
         {"success": 1, "dropped": 0, "handler_error": 2, "retries": 2, "reconcile": "success"}),
        ("a webhook every attempt of which failed is dropped", [None],
         {"success": 0, "dropped": 1, "handler_error": 3, "retries": 2, "reconcile": "error"}),
    ],
)  # fmt: skip
async def test_a_webhook_is_counted_as_reloader_counts_its_handler(
    what: str, script: list[list[str] | None], counts: dict[str, Any]
) -> None:
    room, stores = Room(), Stores(KEYS)
    hook = FakeWebhook(script)
    f = fanout(room, stores, webhook=hook)
    await f.fan_out(change("cm"), observed=0.0)
    sender = asyncio.create_task(f.send_webhooks())
    for _ in range(50):
        await asyncio.sleep(0)
    sender.cancel()
    labels = {"event_type": "unknown", "resource_type": "configmaps"}
    got = {
        "success": room.sample("reloader_events_processed_total", **labels, result="success"),
        "dropped": room.sample("reloader_events_processed_total", **labels, result="dropped"),
        "handler_error": room.sample("reloader_errors_total", type="handler_error"),
        "retries": room.sample("reloader_retries_total"),
        "reconcile": next(iter(label_values(room.metrics, "reloader_reconcile", "result"))),
    }
    assert got == counts, what
    assert room.sample("reloader_reload_executed_total", success="true") == 0
    assert label_values(room.metrics, "reloader_action", "workload_kind") == set()
    assert room.reports.sink.stats.webhooks == counts["success"]
