"""Reloader v2's counts under `--compat=v2`, label for label: a reconcile per change fanned out
(not per watch event), `no_match` when no workload matches, `no_change` for a workload that
already carries the hash, `update_workload` and `webhook_send` errors, the webhook as an
action, and controller-runtime's families: the intake's lanes as its work queues, the
fan-out as its reconciles, the pauses as its `deployment` controller."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from kube_reloader import metrics
from kube_reloader.core import planning
from kube_reloader.core.objects import ResourceType
from kube_reloader.core.strategies import Compat
from kube_reloader.ctrlmetrics import VersionTwo
from kube_reloader.kube import errors
from kube_reloader.kube.watching import EventType, ReflectorEvent
from kube_reloader.runtime.cache import ConfigEntry
from kube_reloader.runtime.intake import Intake
from kube_reloader.runtime.options import Options
from kube_reloader.runtime.stores import Stores
from kube_reloader.runtime.supervisor import Supervisor

from .fakes import KEYS, V2_CONTROLLERS, FakeWriter, Room, change, intake_ports, workload
from .test_intake import NamespaceList
from .test_reconciling import item, rig
from .test_v1_counts import FakeWebhook, carrying, config_event, fanout, label_values


def queue(room: Room, family: str, controller: str = "configmap", **extra: str) -> float | None:
    """A sample of a work-queue family (whose `name` label `Room.sample` cannot take); None
    when the series does not exist."""
    labels = {"controller": controller, "name": controller, **extra}
    return room.metrics.registry.get_sample_value(family, labels)


def families(recorder: metrics.Recorder) -> set[str]:
    """The families with at least one sample of a non-zero value."""
    return {m.name for m in recorder.registry.collect() if any(s.value for s in m.samples)}


async def test_watch_events_are_not_counted_only_the_reconciles_they_cause() -> None:
    room = Room(v2=True)
    delivered: list[planning.Change] = []

    async def fan_out(c: planning.Change, observed: float) -> None:
        delivered.append(c)

    intake = Intake(Options(), room.clock, Stores(KEYS), room.reports.changes,
                    room.reports.problems, Supervisor(), asyncio.Event(),
                    **intake_ports(fan_out))  # fmt: skip
    intake.ready.set()
    for ev in (config_event(EventType.MODIFIED, "h1", "h1"),  # no data change
               config_event(EventType.ADDED, "h1"),  # a create, --reload-on-create off
               config_event(EventType.MODIFIED, "h2", "h1")):  # a change  # fmt: skip
        await intake.on_config(ev, "configmaps", initial=False)
    await intake.drained()
    assert len(delivered) == 1
    for family in ("reloader_events_received", "reloader_skipped", "reloader_events_processed"):
        assert label_values(room.metrics, family, "event_type") == set(), family
        assert label_values(room.metrics, family, "reason") == set(), family
    assert queue(room, "workqueue_adds_total") == 1
    assert queue(room, "workqueue_queue_duration_seconds_count") == 1
    assert queue(room, "workqueue_depth", priority="0") == 0  # made by the add, emptied


# (what, event, the namespace it is in, reconciled and skipped by v2)
UNSELECTED = [
    ("a change in a namespace the selector leaves out",
     config_event(EventType.MODIFIED, "h2", "h1", namespace="team-b"), True),
    ("an update without a data change there (v2's predicate drops it)",
     config_event(EventType.MODIFIED, "h1", "h1", namespace="team-b"), False),
    ("a change in an ignored namespace (v2's predicate drops it)",
     config_event(EventType.MODIFIED, "h2", "h1", namespace="kube-system"), False),
    ("a change in a selected namespace (reconciled, not skipped)",
     config_event(EventType.MODIFIED, "h2", "h1", namespace="team-a"), False),
]  # fmt: skip


@pytest.mark.parametrize(("what", "ev", "skipped"), UNSELECTED, ids=[c[0] for c in UNSELECTED])
async def test_a_change_the_namespace_selector_leaves_out_is_a_reconcile_v2_skips(
    what: str, ev: ReflectorEvent[ConfigEntry], skipped: bool
) -> None:
    room = Room(v2=True)
    options = dataclasses.replace(
        Options(), namespace_selector="team=a", namespaces_to_ignore=frozenset({"kube-system"}),
        plan=planning.Config(compat=Compat.V2),
    )  # fmt: skip
    stores = Stores(KEYS)
    stores.namespaces = NamespaceList(forbidden=False)  # type: ignore[assignment]
    intake = Intake(options, room.clock, stores, room.reports.changes, room.reports.problems,
                    Supervisor(), asyncio.Event(), **intake_ports())  # fmt: skip
    intake._selected_namespaces.add("team-a")
    intake.ready.set()
    await intake.on_config(ev, "configmaps", initial=False)
    await intake.drained()
    assert room.sample("reloader_skipped_total", reason="namespace_selector") == skipped, what
    assert room.sample("reloader_events_received_total", event_type="reconcile",
                       resource_type="configmap") == skipped, what  # fmt: skip
    assert queue(room, "workqueue_adds_total") == skipped + (ev.key[0] == "team-a"), what


async def test_a_change_waiting_in_its_lane_is_one_add_however_often_it_changes() -> None:
    room, entered, seen = Room(v2=True), asyncio.Event(), asyncio.Event()

    async def fan_out(c: planning.Change, observed: float) -> None:
        entered.set()
        await seen.wait()

    intake = Intake(Options(), room.clock, Stores(KEYS), room.reports.changes,
                    room.reports.problems, Supervisor(), asyncio.Event(),
                    **intake_ports(fan_out))  # fmt: skip
    intake.ready.set()
    first = config_event(EventType.MODIFIED, "h2", "h1")
    await intake.on_config(first, "configmaps", initial=False)
    await entered.wait()  # taken: in a worker
    for new, old in (("h3", "h2"), ("h4", "h3")):  # waits, the second joining the first
        await intake.on_config(config_event(EventType.MODIFIED, new, old), "configmaps",
                               initial=False)  # fmt: skip
    assert queue(room, "workqueue_adds_total") == 2
    assert queue(room, "workqueue_depth", priority="0") == 1
    seen.set()
    await intake.drained()
    assert queue(room, "workqueue_depth", priority="0") == 0


# (what, candidates, matched kinds, action results, skipped reasons)
FAN_OUTS = [
    ("a change no workload uses is a reconcile with no match",
     [workload("w", annotations={"unrelated": "1"})], set(), set(), {"no_match"}),
    ("a workload to reload is matched, its write not yet counted",
     [carrying("old")], {"Deployment"}, set(), set()),
    ("a workload that already carries the hash is matched, and no change",
     [carrying(change("cm").hash)], {"Deployment"}, {"no_change"}, set()),
]  # fmt: skip


@pytest.mark.parametrize(
    ("what", "candidates", "matched", "actions", "skipped"), FAN_OUTS,
    ids=[c[0] for c in FAN_OUTS],
)  # fmt: skip
async def test_a_fan_out_is_one_reconcile_counted_as_v2_counts_its_decisions(
    what: str, candidates: list[planning.Workload], matched: set[str], actions: set[str],
    skipped: set[str],
) -> None:  # fmt: skip
    room, stores = Room(v2=True), Stores(KEYS)
    for w in candidates:
        stores.index.put(w)
    await fanout(room, stores, compat=Compat.V2).fan_out(change("cm"), observed=0.0)
    assert room.sample("reloader_events_received_total", event_type="reconcile",
                       resource_type="configmap") == 1  # fmt: skip
    assert room.sample("reloader_reconcile_total", result="success") == 1
    assert room.sample("controller_runtime_reconcile_total", controller="configmap",
                       result="success") == 1  # fmt: skip
    assert label_values(room.metrics, "reloader_workloads_matched", "kind") == matched, what
    assert label_values(room.metrics, "reloader_action", "result") == actions, what
    assert label_values(room.metrics, "reloader_skipped", "reason") == skipped, what
    assert "reloader_events_processed" not in families(room.metrics)
    scanned = {s.labels["kind"] for m in room.metrics.registry.collect()
               if m.name == "reloader_workloads_scanned" for s in m.samples}  # fmt: skip
    assert scanned == {"Deployment"}, "v2 counts the kinds it found, never an empty list"


async def test_v2_counts_every_workload_of_the_namespace_as_scanned_and_the_candidates_matched(
) -> None:  # fmt: skip
    room, stores = Room(v2=True), Stores(KEYS)
    stores.index.put(carrying("old"))
    stores.index.put(workload("daemon", kind="DaemonSet", configmap="unrelated"))
    stores.index.put(workload("custom", kind="Widget", configmap="unrelated"))  # ours only
    stores.index.put(workload("d2", configmap="unrelated"))
    await fanout(room, stores, compat=Compat.V2).fan_out(change("cm"), observed=0.0)
    scanned = {k: room.sample("reloader_workloads_scanned_total", kind=k)
               for k in ("Deployment", "DaemonSet", "Widget")}  # fmt: skip
    assert scanned == {"Deployment": 2, "DaemonSet": 1, "Widget": 0}
    assert label_values(room.metrics, "reloader_workloads_matched", "kind") == {"Deployment"}


async def test_a_delete_is_a_reconcile_and_a_delete_of_its_singular_resource_type() -> None:
    room, stores = Room(v2=True), Stores(KEYS)
    gone = dataclasses.replace(change("cm"), rtype=ResourceType.SECRET, hash="",
                               event=planning.Event.DELETED)  # fmt: skip
    await fanout(room, stores, compat=Compat.V2).fan_out(gone, observed=0.0)
    for event_type in ("reconcile", "delete"):
        assert room.sample("reloader_events_received_total", event_type=event_type,
                           resource_type="secret") == 1  # fmt: skip
    assert room.sample("controller_runtime_reconcile_total", controller="secret",
                       result="success") == 1  # fmt: skip


async def test_a_fan_out_that_crashes_is_a_reconcile_error_and_a_panic() -> None:
    room, stores = Room(v2=True), Stores(KEYS)
    f = fanout(room, stores, compat=Compat.V2)

    async def broken(*_args: object, **_kw: object) -> int:
        raise KeyError("a bug")

    f._decide_all = broken  # type: ignore[method-assign]
    with pytest.raises(KeyError):
        await f.fan_out(change("cm"), observed=0.0)
    assert room.sample("reloader_reconcile_total", result="error") == 1
    for family in ("controller_runtime_reconcile_errors_total",
                   "controller_runtime_reconcile_panics_total"):  # fmt: skip
        assert room.sample(family, controller="configmap") == 1, family
    assert label_values(room.metrics, "reloader_skipped", "reason") == set()


async def test_a_write_given_up_is_an_update_workload_error_and_its_retries_are_not_errors(
) -> None:  # fmt: skip
    forbidden = errors.Forbidden(403, "no", reason="Forbidden", text="no")
    r = rig(writer=FakeWriter(fail=[errors.ServerError(503, "busy"), forbidden]), v2=True)
    w = workload(configmap="a")
    r.stores.index.put(w)
    for _ in range(2):
        await r.reconciler.handle(item(w.key, "a"))
    await r.room.spawned.run()
    assert label_values(r.room.metrics, "reloader_errors", "type") == {"update_workload"}
    assert r.room.sample("reloader_retries_total") == 1
    assert r.room.sample("reloader_action_total", workload_kind="Deployment", result="error") == 1
    assert r.room.sample("reloader_reload_executed_total", success="false") == 1
    assert "reloader_events_processed" not in families(r.room.metrics)


class IdleWebhook(FakeWebhook):
    """`idle` set once the sender asks for more with nothing queued: all it sent is told."""

    def __init__(self, script: list[list[str] | None]) -> None:
        super().__init__(script)
        self.idle = asyncio.Event()

    async def next(self) -> object:
        if not self.queue:
            self.idle.set()
        return await super().next()


async def test_a_webhook_send_is_an_action_and_a_reload_and_a_failed_attempt_an_error() -> None:
    room, stores = Room(v2=True), Stores(KEYS)
    stores.index.put(workload("web"))
    hook = IdleWebhook([["HTTP 500: no"]])
    f = fanout(room, stores, webhook=hook, compat=Compat.V2)
    await f.fan_out(change("used-by-none"), observed=0.0)
    await f.fan_out(change("cm"), observed=0.0)
    assert room.sample("reloader_skipped_total", reason="no_match") == 1
    assert room.sample("reloader_workloads_matched_total", kind="Deployment") == 1
    sender = asyncio.ensure_future(f.send_webhooks())
    await hook.idle.wait()
    sender.cancel()
    with pytest.raises(asyncio.CancelledError):
        await sender
    assert room.sample("reloader_action_total", workload_kind="webhook", result="error") == 1
    # the matching change's reconcile is its send: an attempt that failed (queued again),
    # then the one that succeeded; the change no workload matched, a reconcile at once
    assert room.sample("reloader_reconcile_total", result="error") == 1
    assert room.sample("reloader_reconcile_total", result="success") == 2
    assert queue(room, "workqueue_retries_total") == 1
    assert room.sample("controller_runtime_reconcile_panics_total", controller="configmap") == 0
    assert label_values(room.metrics, "reloader_errors", "type") == {"webhook_send"}
    assert room.sample("reloader_reload_executed_total", success="true") == 1
    assert room.sample("reloader_reload_executed_total", success="false") == 1


PAUSED = {"reloader.stakater.com/auto": "true", KEYS.pause_period: "30s"}


async def test_a_pause_requeues_the_deployment_controller_and_its_resume_reconciles_it() -> None:
    r = rig(v2=True)
    w = workload(configmap="a", annotations=PAUSED)
    r.stores.index.put(w)
    await r.reconciler.handle(item(w.key, "a"))
    assert r.room.sample("controller_runtime_reconcile_total", controller="deployment",
                         result="requeue_after") == 1  # fmt: skip
    assert queue(r.room, "workqueue_retries_total", "deployment") == 1
    r.writer.objects[w.key] = {"metadata": {"annotations": {KEYS.paused_at: "2026-01-01T00:00:00Z"}},
                               "spec": {"paused": True}}  # fmt: skip
    r.room.clock.advance(30.0)
    assert f"resume/{w.key}" in await r.room.spawned.run()
    assert r.room.sample("controller_runtime_reconcile_total", controller="deployment",
                         result="success") == 1  # fmt: skip
    assert queue(r.room, "workqueue_adds_total", "deployment") == 2, "each follows an add"
    assert queue(r.room, "workqueue_depth", "deployment", priority="0") == 0


async def test_a_pause_in_a_write_that_failed_is_not_counted_until_one_is_accepted() -> None:
    r = rig(writer=FakeWriter(fail=[errors.ServerError(503, "busy")]), v2=True)
    w = workload(configmap="a", annotations=PAUSED)
    r.stores.index.put(w)
    await r.reconciler.handle(item(w.key, "a"))
    assert r.room.sample("controller_runtime_reconcile_total", controller="deployment",
                         result="requeue_after") == 0  # fmt: skip
    assert r.room.sample("kube_reloader_pauses_total", action="pause") == 0
    await r.reconciler.handle(item(w.key, "a"))
    assert r.room.sample("kube_reloader_pauses_total", action="pause") == 1
    r.room.spawned.close()


async def test_a_standby_counts_nothing_v2_counts_and_has_no_controller_until_it_leads() -> None:
    recorder = metrics.Recorder(by_namespace=False, v2=VersionTwo(V2_CONTROLLERS, "lease"))
    room, stores = Room(v2=True, metrics=recorder), Stores(KEYS)
    room.fence.stop_leading()
    stores.index.put(carrying("old"))
    await fanout(room, stores, compat=Compat.V2).fan_out(change("cm"), observed=0.0)
    for family in ("reloader_events_received", "reloader_reconcile", "reloader_workloads_scanned",
                   "controller_runtime_reconcile"):  # fmt: skip
        assert family not in families(recorder), family
    made = [s for m in recorder.registry.collect() if m.name.startswith(("controller_runtime_",
            "workqueue_")) for s in m.samples]  # fmt: skip
    assert made == [], "a standby starts no controller: no series"
    recorder.set_leader(True)
    room.fence.start_leading()
    await fanout(room, stores, compat=Compat.V2).fan_out(change("cm", "v2"), observed=0.0)
    assert room.sample("controller_runtime_reconcile_total", controller="configmap",
                       result="success") == 1  # fmt: skip


def test_v1_mode_has_no_controller_runtime_family_and_v2_has_no_request_latency() -> None:
    v1, v2 = metrics.Recorder(by_namespace=False), Room(v2=True).metrics
    names = set(metrics.names(v1))
    assert not {n for n in names if n.startswith(("controller_runtime_", "workqueue_"))}
    assert "rest_client_request_duration_seconds" in names
    v2_names = set(metrics.names(v2))
    assert "rest_client_request_duration_seconds" not in v2_names
    assert {"controller_runtime_reconcile_total", "workqueue_depth"} <= v2_names
    controllers = {
        s.labels["controller"]
        for m in v2.registry.collect()
        if m.name == "controller_runtime_reconcile"
        for s in m.samples
    }
    assert controllers == set(V2_CONTROLLERS)


@pytest.mark.parametrize(("resources", "csi", "selector", "controllers"), [
    (["CONFIGMAP", "SECRET"], False, False, ("configmap", "secret", "deployment")),
    (["SECRET"], False, False, ("secret", "deployment")),
    (["CONFIGMAP", "SECRET"], True, True,
     ("namespace", "configmap", "secret", "secretproviderclasspodstatus", "deployment")),
])  # fmt: skip
def test_v2_runs_a_controller_per_watched_type_and_one_for_its_pauses(
    resources: list[str], csi: bool, selector: bool, controllers: tuple[str, ...]
) -> None:
    two = VersionTwo.of(resources, csi=csi, selector=selector, lease=None)
    assert two.controllers == controllers


@pytest.mark.parametrize("lease", [None, "stakater-reloader-lock"])
def test_the_leader_family_is_there_only_with_an_election_and_follows_leadership(
    lease: str | None,
) -> None:
    recorder = metrics.Recorder(by_namespace=False, v2=VersionTwo(V2_CONTROLLERS, lease))
    recorder.set_leader(True)
    value = recorder.registry.get_sample_value(
        "leader_election_master_status", {"name": lease or ""}
    )
    assert value == (1 if lease else None)
    recorder.set_leader(False)
    if lease:
        assert (
            recorder.registry.get_sample_value("leader_election_master_status", {"name": lease})
            == 0
        )
