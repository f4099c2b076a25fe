"""Reconciling one work item: re-plan on the latest state, limits, write, retry rules."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from kube_reloader.core.objects import ObjectKey
from kube_reloader.kube import errors, resources
from kube_reloader.kube.projections import ObjectMeta
from kube_reloader.runtime.cache import WorkloadEntry
from kube_reloader.runtime.coalescing import Coalescer, WorkItem
from kube_reloader.runtime.kinds import BUILTIN
from kube_reloader.runtime.options import Options
from kube_reloader.runtime.pauses import Pauses
from kube_reloader.runtime.reconciling import Reconciler
from kube_reloader.runtime.reverts import Reverts
from kube_reloader.runtime.rotations import Rotations
from kube_reloader.runtime.scheduler import Scheduler
from kube_reloader.runtime.stores import Stores
from kube_reloader.runtime.supervisor import Supervisor
from kube_reloader.runtime.throttling import Throttle
from kube_reloader.runtime.tracking import RolloutTracker

from .fakes import KEYS, FakeWriter, Room, change, optional_reflector, workload


@dataclasses.dataclass
class Rig:
    room: Room
    writer: FakeWriter
    stores: Stores
    coalescer: Coalescer
    reconciler: Reconciler


def rig(*, min_interval: float = 0.0, writer: FakeWriter | None = None, v2: bool = False) -> Rig:
    room = Room(v2=v2)
    writer = writer or FakeWriter()
    opts = Options(min_interval=min_interval)
    stores = Stores(KEYS)
    co = Coalescer(room.clock)
    throttle = Throttle(room.clock, min_interval=min_interval, rate=0, burst=0)
    pauses = Pauses(
        room.clock,
        KEYS,
        writer,
        room.fence,
        room.reports.rollouts,
        room.reports.problems,
        room.spawned,
        v2=v2,
    )
    scheduler = Scheduler(opts, room.clock, stores, co, room.reports.fleet, room.reports.problems)
    tracker = RolloutTracker(room.clock, room.reports.rollouts, stores.workload, scheduler.finished)
    sup = Supervisor()
    rotations = Rotations(room.clock, writer, room.fence, room.reports.rollouts, room.reports.problems, sup, stores.workload,
                          scheduler.rotation_done)  # fmt: skip
    rec = Reconciler(opts, BUILTIN, room.clock, stores, co, throttle, pauses, tracker, writer,
                     room.fence, room.reports.queue, room.reports.reloads, room.reports.problems, sup, rotations,
                     Reverts(room.clock, room.reports.reloads, opts.plan.strategy),
                     scheduler)  # fmt: skip
    return Rig(room, writer, stores, co, rec)


def item(key: ObjectKey, *names: str) -> WorkItem:
    it = WorkItem(key)
    for n in names:
        c = change(n)
        it.changes[(c.rtype, c.name)] = c
        it.observed[(c.rtype, c.name)] = 0.0
    return it


async def test_a_workload_is_written_once_for_all_its_changes_and_each_is_reported() -> None:
    r = rig()
    w = workload(configmap="a")
    r.stores.index.put(w)
    r.room.clock.advance(2.0)
    await r.reconciler.handle(item(w.key, "a"))
    await r.room.spawned.run()
    assert r.writer.reloads == [(w.key, ["a"])]
    assert r.room.events.reasons() == ["Reloaded"]
    assert r.room.sample("reloader_reload_executed_total", success="true") == 1
    assert r.room.sample("kube_reloader_reload_latency_seconds_sum",
                         workload_kind="Deployment") == 2.0  # fmt: skip


@pytest.mark.parametrize("v2", [False, True])
async def test_a_pause_is_its_own_write_before_the_reload_in_v1_and_part_of_it_in_v2(
    v2: bool,
) -> None:
    r = rig(v2=v2)
    w = workload(configmap="a", annotations={"reloader.stakater.com/auto": "true",
                                             KEYS.pause_period: "30s"})  # fmt: skip
    r.stores.index.put(w)
    await r.reconciler.handle(item(w.key, "a"))
    assert r.writer.reloads == [(w.key, ["a"])]
    assert r.writer.pauses == ([] if v2 else [w.key])
    [pause] = r.writer.paused_with
    assert (pause is not None) is v2
    assert r.room.clock.pending() == [30.0], "its resume, either way"
    r.room.spawned.close()


async def test_a_change_the_workload_already_carries_writes_nothing() -> None:
    r = rig()
    w = workload(configmap="a")
    r.stores.index.put(w)
    await r.reconciler.handle(item(w.key, "other"))  # not referenced: nothing to reload
    assert r.writer.reloads == []
    assert len(r.coalescer) == 0


async def test_a_gone_workload_drops_its_changes() -> None:
    r = rig()
    await r.reconciler.handle(item(ObjectKey("Deployment", "ns", "gone"), "a"))
    assert r.writer.reloads == []
    assert len(r.coalescer) == 0


@pytest.mark.parametrize("failures", [1, 2, 3, 10])
async def test_a_transient_failure_keeps_the_changes_and_backs_off_exponentially(
    failures: int,
) -> None:
    r = rig(writer=FakeWriter(fail=[errors.ConnectionFailed("down")] * failures))
    w = workload(configmap="a")
    r.stores.index.put(w)
    for _ in range(failures):
        await r.reconciler.handle(item(w.key, "a"))
    assert w.key in r.coalescer, "the changes wait"
    assert r.room.clock.pending() == [pytest.approx(min(60.0, 0.2 * 2 ** (failures - 1)))]
    assert r.reconciler.failures[w.key] == failures
    assert r.room.sample("reloader_retries_total") == failures


async def test_the_backoff_doubles_per_consecutive_failure_up_to_a_minute() -> None:
    r = rig(writer=FakeWriter(fail=[errors.ConnectionFailed("down")] * 12))
    w = workload(configmap="a")
    r.stores.index.put(w)
    delays = []
    for _ in range(12):
        await r.reconciler.handle(item(w.key, "a"))
        delays.append(r.room.clock.pending()[0])
        r.room.clock.advance(delays[-1])
        await r.coalescer.get()
    assert delays == pytest.approx([0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 51.2, 60, 60, 60])


async def test_a_conflict_re_reads_the_workload_and_queues_it_again_at_once() -> None:
    w = workload(configmap="a")
    writer = FakeWriter(fail=[errors.Conflict(409, "changed")])
    writer.objects[w.key] = {
        "kind": "Deployment", "metadata": {"name": "web", "namespace": "ns"},
        "spec": {"template": {"spec": {"containers": [{"name": "app"}]}}},
    }  # fmt: skip
    r = rig(writer=writer)
    r.stores.index.put(w)
    await r.reconciler.handle(item(w.key, "a"))
    assert writer.reads == [w.key]
    assert r.coalescer.depth == 1
    assert w.key in r.coalescer
    assert r.stores.index.workloads[w.key].template.containers[0].env_from_configmaps == ()


async def test_a_permanent_failure_is_reported_once_and_not_retried() -> None:
    r = rig(writer=FakeWriter(fail=[errors.Forbidden(403, "no")]))
    w = workload(configmap="a")
    r.stores.index.put(w)
    await r.reconciler.handle(item(w.key, "a"))
    await r.room.spawned.run()
    assert r.room.events.reasons() == ["ReloadFail"]
    assert w.key not in r.coalescer
    assert r.room.clock.pending() == []


async def test_a_second_reload_inside_the_minimum_interval_is_deferred_with_its_changes() -> None:
    r = rig(min_interval=5.0)
    w = workload(configmap="a")
    r.stores.index.put(w)
    await r.reconciler.handle(item(w.key, "a"))
    r.room.clock.advance(1.0)
    await r.reconciler.handle(item(w.key, "a"))
    await r.room.spawned.run()
    assert len(r.writer.reloads) == 1
    assert w.key in r.coalescer
    assert r.room.clock.pending() == [4.0]
    assert r.room.events.reasons() == ["Reloaded", "ReloadDeferred"]


async def test_a_standby_never_writes_and_keeps_the_changes() -> None:
    r = rig()
    w = workload(configmap="a")
    r.stores.index.put(w)
    r.room.fence.stop_leading()
    await r.reconciler.handle(item(w.key, "a"))
    assert r.writer.reloads == []
    assert w.key in r.coalescer


async def test_a_bug_in_a_write_is_counted_warned_and_retried() -> None:
    r = rig(writer=FakeWriter(fail=[ZeroDivisionError()]))
    w = workload(configmap="a")
    r.stores.index.put(w)
    await r.reconciler.handle(item(w.key, "a"))
    await r.room.spawned.run()
    assert r.room.events.reasons() == ["ReloadError"]
    assert w.key in r.coalescer
    assert r.room.clock.pending() == [0.2]
    assert r.room.sample("kube_reloader_object_errors_total", stage="reconcile") == 1


async def test_a_write_cancelled_before_its_first_step_keeps_its_changes() -> None:
    r = rig()
    w = workload(configmap="a")
    r.stores.index.put(w)
    handled = asyncio.ensure_future(r.reconciler.handle(item(w.key, "a")))
    await asyncio.sleep(0)  # the write task exists, and has not run yet
    r.room.fence.stop_leading()
    await handled
    assert r.writer.reloads == []
    assert w.key in r.coalescer, "the changes wait for the next leader"
    assert r.room.sample("reloader_reconcile_total", result="cancelled") == 1


async def test_a_new_change_during_a_retry_backoff_is_written_after_its_window() -> None:
    r = rig(writer=FakeWriter(fail=[errors.ConnectionFailed("down")] * 8))
    w = workload(configmap="a")
    r.stores.index.put(w)
    for _ in range(8):
        await r.reconciler.handle(item(w.key, "a"))
    r.coalescer.add(w.key, change("a", "2"), observed=None, delay=0.3)
    r.room.clock.advance(0.3)
    assert r.coalescer.depth == 1, "not held back by the 25.6 s backoff"


def test_a_writes_answer_with_managed_fields_refreshes_the_cache_at_once() -> None:
    """The API server's answer carries managedFields (raw JSON in the projection): it is
    decoded as a watch event is, so the index holds the written object before its event."""
    r = rig()
    w = workload(configmap="a")
    r.stores.index.put(w)
    r.reconciler.refresh("Deployment", {
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "ns", "generation": 2, "managedFields": [
            {"manager": "Reloader", "operation": "Update", "time": "2026-12-01T10:00:00Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:template": {}}}}]},
        "spec": {"template": {"spec": {"containers": [
            {"name": "app", "env": [{"name": "STAKATER_A_CONFIGMAP", "value": "h2"}]}]}}},
    })  # fmt: skip
    fresh = r.stores.index.workloads[w.key]
    assert fresh.template.containers[0].env_value("STAKATER_A_CONFIGMAP") == "h2"
    assert fresh.template_changed_at is not None


@pytest.mark.parametrize(
    ("v2", "answer_uid", "versions"),
    [
        (True, "", ["41", "43"]),  # v2 updates the object it holds: the answer's version
        (False, "", ["41", "41"]),  # v1 keeps the object it read
        (True, "new-uid", ["41", "41"]),  # a Job made anew: v2 names the one it deleted
    ],
    ids=["v2", "v1", "v2-job-made-anew"],
)
async def test_a_reloads_event_regards_the_workload_at_the_version_each_peer_names(
    v2: bool, answer_uid: str, versions: list[str]
) -> None:
    answer = {"kind": "Deployment", "metadata": {"name": "web", "namespace": "ns",
              "uid": answer_uid, "resourceVersion": "43", "generation": 2}}  # fmt: skip
    r = rig(writer=FakeWriter(answer=answer, fail=[errors.Forbidden(403, "no")]), v2=v2)
    w = workload(configmap="a")
    r.stores.index.put(w)
    cached = WorkloadEntry(ObjectMeta(name="web", namespace="ns", resourceVersion="41"), w)
    reflector = optional_reflector(resources.DEPLOYMENTS)
    reflector.store[("ns", "web")] = cached
    r.stores.workloads.append(reflector)
    await r.reconciler.handle(item(w.key, "a"))  # refused
    await r.reconciler.handle(item(w.key, "a"))  # written
    await r.room.spawned.run()
    assert r.room.events.reasons() == (
        ["ReloadFailed", "Reloaded"] if v2 else ["ReloadFail", "Reloaded"]
    )
    assert r.room.events.versions == versions
