"""The scheduling room, through the reconciler: rollout slots and their line, the circuit
breaker, maintenance windows, freeze, ordering and running Jobs (fake clock, fake writer that
answers like the API server; rollout progress arrives as watch events would bring it)."""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import logging
from pathlib import Path
from typing import Any

import msgspec
import pytest

from kube_reloader.core import hashing, planning
from kube_reloader.core.objects import ObjectKey, ResourceType
from kube_reloader.core.planning import Change, Plan
from kube_reloader.kube import errors
from kube_reloader.kube.projections import ObjectMeta
from kube_reloader.runtime import scheduler as scheduler_module
from kube_reloader.runtime.cache import ConfigEntry, workload_entry
from kube_reloader.runtime.coalescing import Coalescer
from kube_reloader.runtime.kinds import BUILTIN
from kube_reloader.runtime.options import Options
from kube_reloader.runtime.pauses import Pauses
from kube_reloader.runtime.reconciling import Reconciler
from kube_reloader.runtime.reverts import Reverts
from kube_reloader.runtime.rotations import Rotations
from kube_reloader.runtime.scheduler import SLOT_SECONDS, Scheduler
from kube_reloader.runtime.stores import Stores
from kube_reloader.runtime.supervisor import Supervisor
from kube_reloader.runtime.throttling import Throttle
from kube_reloader.runtime.tracking import RolloutTracker

from .fakes import EPOCH, KEYS, FakeWriter, Room

Manifest = dict[str, Any]


def manifest(name: str, *, kind: str = "Deployment", annotations: dict[str, str] | None = None,
             secret: str = "db", namespace: str = "ns") -> Manifest:  # fmt: skip
    return {
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "generation": 1,
                     "annotations": {"reloader.stakater.com/auto": "true", **(annotations or {})}},
        "spec": {"replicas": 2, "progressDeadlineSeconds": 60, "template": {"spec": {
            "containers": [{"name": "app", "envFrom": [{"secretRef": {"name": secret}}]}]}}},
        "status": {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2,
                   "availableReplicas": 2},
    }  # fmt: skip


class ApiWriter(FakeWriter):
    """Writes like the API server: the env var set on the template, generation + 1, the
    rollout not yet observed; answers the new object."""

    def __init__(self, rig: Rig) -> None:
        super().__init__()
        self.rig = rig

    async def reload(self, workload: planning.Workload, plans: list[Plan], **kw: Any) -> Any:
        await super().reload(workload, plans, **kw)
        m = self.rig.manifests[workload.key]
        container = m["spec"]["template"]["spec"]["containers"][0]
        env = {e["name"]: e for e in container.get("env", [])}
        for plan in plans:
            assert plan.env_name is not None
            env[plan.env_name] = {"name": plan.env_name, "value": plan.change.hash}
        container["env"] = list(env.values())
        m["metadata"]["generation"] += 1
        return copy.deepcopy(m)


@dataclasses.dataclass
class Rig:
    room: Room
    options: Options
    stores: Stores = dataclasses.field(init=False)
    coalescer: Coalescer = dataclasses.field(init=False)
    writer: ApiWriter = dataclasses.field(init=False)
    tracker: RolloutTracker = dataclasses.field(init=False)
    scheduler: Scheduler = dataclasses.field(init=False)
    reconciler: Reconciler = dataclasses.field(init=False)
    manifests: dict[ObjectKey, Manifest] = dataclasses.field(default_factory=dict)
    namespace: dict[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        room, opts = self.room, self.options
        self.stores = Stores(KEYS)
        self.stores.namespace_annotations = lambda _ns: self.namespace  # type: ignore[method-assign]
        self.coalescer = Coalescer(room.clock)
        self.writer = ApiWriter(self)
        self.scheduler = Scheduler(
            opts, room.clock, self.stores, self.coalescer, room.reports.fleet, room.reports.problems
        )
        self.tracker = RolloutTracker(room.clock, room.reports.rollouts, self.stores.workload,
                                      self.scheduler.finished)  # fmt: skip
        sup = Supervisor()
        rotations = Rotations(room.clock, self.writer, room.fence, room.reports.rollouts, room.reports.problems, sup,
                              self.stores.workload, self.scheduler.rotation_done)  # fmt: skip
        self.reconciler = Reconciler(
            opts, BUILTIN, room.clock, self.stores, self.coalescer,
            Throttle(room.clock, min_interval=0, rate=0, burst=0),
            Pauses(room.clock, KEYS, self.writer, room.fence, room.reports.rollouts, room.reports.problems, room.spawned),
            self.tracker, self.writer, room.fence, room.reports.queue, room.reports.reloads, room.reports.problems, sup, rotations,
            Reverts(room.clock, room.reports.reloads, opts.plan.strategy), self.scheduler,
        )  # fmt: skip
        room.fence.start_leading()

    def add(self, m: Manifest) -> ObjectKey:
        key = ObjectKey(m["kind"], m["metadata"]["namespace"], m["metadata"]["name"])
        self.manifests[key] = m
        self.seen(key)
        return key

    def seen(self, key: ObjectKey) -> None:
        """A watch event with the manifest's current state."""
        spec = BUILTIN[key.kind]
        obj = msgspec.json.decode(msgspec.json.encode(self.manifests[key]), type=spec.projection)
        w = workload_entry(key.kind, spec.workload(obj), KEYS, spec.status).workload
        self.stores.index.put(w)
        if key in self.tracker:
            self.tracker.observe(w)
        self.scheduler.observe(w)

    def rolled(self, key: ObjectKey, *, ok: bool = True) -> None:
        """The workload's controller finished (or failed) the rollout."""
        m = self.manifests[key]
        m["status"]["observedGeneration"] = m["metadata"]["generation"]
        if not ok:
            m["status"]["conditions"] = [{"type": "Progressing", "status": "False",
                                          "reason": "ProgressDeadlineExceeded"}]  # fmt: skip
            m["status"]["updatedReplicas"] = 1
        else:
            m["status"].pop("conditions", None)
            m["status"]["updatedReplicas"] = 2
        self.seen(key)

    def change(self, *keys: ObjectKey, content: str, annotations: dict[str, str] | None = None
               ) -> Change:  # fmt: skip
        c = Change(ResourceType.SECRET, "ns", "db", hashing.secret_hash({"k": content.encode()}),
                   annotations=annotations or {})  # fmt: skip
        for k in keys:
            self.coalescer.add(k, dataclasses.replace(c, namespace=k.namespace), None, 0)
        return c

    async def drain(self) -> None:
        while self.coalescer.depth:
            item = await self.coalescer.get()
            await self.reconciler.handle(item)
        await self.room.spawned.run()  # the Events

    def written(self) -> list[str]:
        return [k.name for k, _names in self.writer.reloads]


def rig(**options: Any) -> Rig:
    return Rig(Room(), Options(min_interval=0, reload_rate=0, **options))


async def test_at_most_n_rollouts_are_in_flight_and_a_finished_one_frees_a_slot_in_order() -> None:
    r = rig(max_concurrent_rollouts=3)  # one namespace: three quarters, rounded down
    keys = [r.add(manifest(f"w{i}")) for i in range(5)]
    r.change(*keys, content="v2")
    await r.drain()
    assert r.written() == ["w0", "w1"]
    assert r.scheduler.in_flight == set(keys[:2])
    assert r.scheduler.counts()["slots"] == 3
    deferred = [m for _k, reason, m in r.room.events.sent if reason == "ReloadDeferred"]
    assert ["number 1 in line" in m for m in deferred] == [True, False, False]
    assert "number 3 in line" in deferred[2]
    r.rolled(keys[0])
    await r.drain()
    assert r.written() == ["w0", "w1", "w2"], "the first in line, and only it"
    r.rolled(keys[1])
    r.rolled(keys[2])
    await r.drain()
    assert r.written() == ["w0", "w1", "w2", "w3", "w4"]
    assert r.room.sample("kube_reloader_deferred_total", reason="slots") == 3


async def test_a_newer_change_of_a_waiting_workload_keeps_its_place_and_is_written_once() -> None:
    r = rig(max_concurrent_rollouts=1)
    a, b = r.add(manifest("a")), r.add(manifest("b"))
    r.change(a, b, content="v2")
    await r.drain()
    r.change(b, content="v3")
    await r.drain()
    assert r.written() == ["a"]
    r.rolled(a)
    await r.drain()
    assert r.written() == ["a", "b"]
    env = r.manifests[b]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env[0]["value"] == hashing.secret_hash({"k": b"v3"}), "the latest content"


async def test_a_waiting_workload_that_became_up_to_date_leaves_the_line() -> None:
    r = rig(max_concurrent_rollouts=1)
    a, b, c = r.add(manifest("a")), r.add(manifest("b")), r.add(manifest("c"))
    r.change(a, b, c, content="v2")
    await r.drain()
    r.change(b, content="v1")  # reverted for b's sake: its template carries nothing yet
    r.manifests[b]["spec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "STAKATER_DB_SECRET", "value": hashing.secret_hash({"k": b"v1"})}]  # fmt: skip
    r.seen(b)
    await r.drain()
    assert b not in r.scheduler.held
    r.rolled(a)
    await r.drain()
    assert r.written() == ["a", "c"]


async def test_the_breaker_halts_a_content_after_n_failed_rollouts_and_new_content_resumes() -> (
    None
):
    r = rig(max_concurrent_rollouts=3, halt_after_failures=2)
    keys = [r.add(manifest(f"w{i}")) for i in range(6)]
    bad = r.change(*keys, content="bad")
    await r.drain()
    assert r.written() == ["w0", "w1"]
    r.rolled(keys[0], ok=False)
    await r.drain()  # w2 gets the freed slot: one failure is not enough
    r.rolled(keys[1], ok=False)
    await r.drain()
    assert r.written() == ["w0", "w1", "w2"], "halted after two failures"
    assert r.room.sample("kube_reloader_halted", namespace="ns", resource="Secret/db") == 1
    halted = [k.name for k, reason, _m in r.room.events.sent if reason == "ReloadHalted"]
    assert "db" in halted, "on the Secret"
    assert {"w3", "w4", "w5"} <= set(halted), "on every held workload"
    assert r.scheduler.counts()["halted"] == 3
    r.rolled(keys[2], ok=False)
    fix = r.change(*keys, content="good")
    assert fix.hash != bad.hash
    for _ in range(6):
        await r.drain()
        for k in keys:
            if k in r.scheduler.in_flight:
                r.rolled(k)
    assert sorted(r.written()) == sorted(["w0", "w1", "w2", *[f"w{i}" for i in range(6)]])
    assert r.room.sample("kube_reloader_halted", namespace="ns", resource="Secret/db") == 0
    assert r.scheduler.held == {}


@pytest.mark.parametrize(("writer", "halted"), [("Reloader", 1), ("kubectl-client-side-apply", 0)])
async def test_the_breaker_reads_failures_back_from_status_after_a_restart_if_we_wrote_them(
    writer: str, halted: int
) -> None:
    """Two Deployments whose template kube-reloader wrote last with the Secret's current
    content failed their rollout: that content is halted. The same failures after someone
    else's template change (an image bump) blame nothing."""
    r = rig(halt_after_failures=2)
    cache_content(r, "bad")
    bad_hash = hashing.secret_hash({"k": b"bad"})
    keys = []
    for i in range(3):
        m = manifest(f"w{i}")
        if i < 2:  # rolled to the bad content by a previous process, and failed
            m["spec"]["template"]["spec"]["containers"][0]["env"] = [
                {"name": "STAKATER_DB_SECRET", "value": bad_hash}]  # fmt: skip
            m["metadata"]["generation"] = 2
            m["metadata"]["managedFields"] = [{
                "manager": writer, "operation": "Update", "time": "2026-12-01T10:00:00Z",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:template": {}}}}]  # fmt: skip
            m["status"].update(observedGeneration=2, updatedReplicas=1, conditions=[
                {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}])  # fmt: skip
        keys.append(r.add(m))
    r.change(keys[2], content="bad")
    await r.drain()
    assert r.written() == ([] if halted else ["w2"])
    assert r.scheduler.counts()["halted"] == halted


WINDOW = {"kube-reloader.io/reload-window": "30 * * * * 10m"}  # hh:30-hh:40 each hour


async def test_a_change_outside_the_window_is_written_once_when_it_opens() -> None:
    r = rig()
    assert dt.datetime.fromtimestamp(EPOCH, dt.UTC).minute == 26  # fakes' epoch: hh:26:40
    k = r.add(manifest("w", annotations=WINDOW))
    r.change(k, content="v2")
    await r.drain()
    assert r.written() == []
    assert r.scheduler.held == {k: "window"}
    assert r.room.clock.pending() == [200.0 + 1.0], "the window opens at hh:30:00, plus 1 s"
    r.change(k, content="v3")  # a newer change joins the wait
    await r.drain()
    r.room.clock.advance(201.0)
    await r.drain()
    assert r.written() == ["w"]
    assert r.writer.reloads[0][1] == ["db"]


async def test_an_urgent_change_bypasses_the_window() -> None:
    r = rig()
    k = r.add(manifest("w", annotations=WINDOW))
    r.change(k, content="v2", annotations={"kube-reloader.io/reload-urgent": "true"})
    await r.drain()
    assert r.written() == ["w"]


async def test_a_frozen_namespace_holds_reloads_until_the_freeze_is_lifted() -> None:
    r = rig()
    r.namespace["kube-reloader.io/freeze"] = "true"
    k = r.add(manifest("w"))
    r.change(k, content="v2")
    await r.drain()
    assert r.written() == []
    del r.namespace["kube-reloader.io/freeze"]
    r.scheduler.namespace_changed("ns")
    await r.drain()
    assert r.written() == ["w"]


async def test_a_workload_that_follows_another_is_written_after_its_rollout_completed() -> None:
    r = rig()
    b = r.add(manifest("b", annotations={"kube-reloader.io/reload-after": "Deployment/a"}))
    a = r.add(manifest("a"))
    r.change(b, a, content="v2")  # b first: it must wait
    await r.drain()
    assert r.written() == ["a"]
    assert r.scheduler.held == {b: "order"}
    r.rolled(a)
    await r.drain()
    assert r.written() == ["a", "b"]


async def test_a_running_job_under_after_completion_is_re_created_when_it_finishes() -> None:
    r = rig()
    m = manifest("j", kind="Job", annotations={"kube-reloader.io/job-policy": "after-completion"})
    m["status"] = {"active": 1}
    k = r.add(m)
    r.change(k, content="v2")
    await r.drain()
    assert r.written() == []
    assert r.scheduler.held == {k: "job-running"}
    m["status"] = {"active": 0, "conditions": [{"type": "SuccessCriteriaMet", "status": "True"}]}
    r.seen(k)
    await r.drain()
    assert r.written() == [], "finishing: not yet marked Complete"
    m["status"]["conditions"].append({"type": "Complete", "status": "True"})
    r.seen(k)
    await r.drain()
    assert r.written() == ["j"]
    assert r.scheduler.in_flight == set(), "a Job's run holds no slot"


async def test_a_rollout_found_in_flight_at_start_holds_a_slot_until_it_completes() -> None:
    r = rig(max_concurrent_rollouts=1)
    m = manifest("old")
    m["spec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "STAKATER_DB_SECRET", "value": "abc"}]  # fmt: skip
    m["metadata"]["generation"] = 2
    old = r.add(m)
    assert r.scheduler.adopt(r.stores.index.workloads[old])
    k = r.add(manifest("new"))
    r.change(k, content="v2")
    await r.drain()
    assert r.written() == []
    r.rolled(old)
    await r.drain()
    assert r.written() == ["new"]


async def test_without_a_cap_nothing_is_held_or_adopted() -> None:
    r = rig()
    keys = [r.add(manifest(f"w{i}")) for i in range(20)]
    r.change(*keys, content="v2")
    await r.drain()
    assert len(r.written()) == 20
    assert not r.scheduler.adopt(r.stores.index.workloads[keys[0]])
    assert r.scheduler.held == {}


async def test_a_dropped_rotation_frees_its_slot_and_counts_no_failure_for_the_breaker() -> None:
    r = rig(max_concurrent_rollouts=3, halt_after_failures=1)
    keys = [r.add(manifest(f"w{i}", annotations={"kube-reloader.io/strategy": "evict"}))
            for i in range(2)]  # fmt: skip
    c = r.change(content="bad")
    for k in keys:
        w = r.stores.index.workloads[k]
        plan = planning.plan(change=c, workload=w, config=r.options.plan, now=int(EPOCH))
        assert r.scheduler.admit(w, [plan]).write
        r.scheduler.wrote(k, [plan], written=True, rolling=True)
    r.scheduler.rotation_done(keys[0], None)  # lost the lease, or the workload went away
    assert r.scheduler.in_flight == {keys[1]}
    assert r.scheduler.breaker.halted == {}
    r.scheduler.rotation_done(keys[1], False)  # its replacements never became available
    assert r.scheduler.in_flight == set()
    assert r.scheduler.breaker.holding([plan]) == ("Secret ns/db",)
    await r.room.spawned.run()  # the Events


async def test_one_namespace_alone_leaves_a_quarter_and_freed_slots_go_to_the_others_first(
) -> None:  # fmt: skip
    r = rig(max_concurrent_rollouts=4)
    hog = [r.add(manifest(f"h{i}", namespace="hog")) for i in range(6)]
    r.change(*hog, content="v2")
    await r.drain()
    assert r.written() == ["h0", "h1", "h2"], "three quarters of the slots"
    other = [r.add(manifest(f"o{i}", namespace="other")) for i in range(2)]
    r.change(*other, content="v2")
    await r.drain()
    assert r.written()[3:] == ["o0"], "the slot left free"
    r.rolled(hog[0])
    await r.drain()
    assert r.written()[4:] == ["o1"], "the namespace holding fewer slots first (h3 came earlier)"
    r.rolled(hog[1])
    await r.drain()
    assert r.written()[5:] == ["h3"]


async def test_a_rollout_that_never_finishes_holds_its_slot_for_at_most_the_default_deadline(
) -> None:  # fmt: skip
    r = rig(max_concurrent_rollouts=1)
    stuck = r.add(manifest("stuck"))
    r.manifests[stuck]["spec"]["progressDeadlineSeconds"] = 2_000_000_000  # its tenant's choice
    waiting = r.add(manifest("next", namespace="other"))
    r.change(stuck, waiting, content="v2")
    await r.drain()
    assert r.written() == ["stuck"]
    r.room.clock.advance(SLOT_SECONDS - 1)
    await r.drain()
    assert r.written() == ["stuck"]
    r.room.clock.advance(1)
    await r.drain()
    assert r.written() == ["stuck", "next"]
    assert r.scheduler.breaker.halted == {}, "a slot freed by time is no failure"


async def test_a_slot_past_its_deadline_is_not_counted_once_looked_at_with_nobody_waiting() -> None:
    # no timer fires for a slot: the deadline is checked when a reload is admitted and when
    # the in-flight gauge is read (expire_due); nothing counts as failed
    r = rig(max_concurrent_rollouts=2)
    stuck = r.add(manifest("a"))
    r.manifests[stuck]["spec"]["progressDeadlineSeconds"] = 2_000_000_000
    r.change(stuck, content="v2")
    await r.drain()
    assert r.scheduler.in_flight == {stuck}
    r.room.clock.advance(SLOT_SECONDS - 1)
    r.scheduler.expire_due()
    assert r.scheduler.in_flight == {stuck}
    r.room.clock.advance(1)
    r.scheduler.expire_due()
    assert r.scheduler.in_flight == set()
    assert r.scheduler.breaker.halted == {}


def test_the_scheduler_keeps_no_timer_of_its_own() -> None:
    # one owner of timers for a held reload: the coalescer (a window's opening, a slot's
    # deadline); the scheduler only says when
    source = Path(scheduler_module.__file__).read_text()
    assert "call_later" not in source
    assert "Timer" not in source


def cache_content(r: Rig, content: str) -> None:
    """The Secret's content as the watch cache holds it now."""
    entry = ConfigEntry(ObjectMeta(name="db", namespace="ns"), ResourceType.SECRET,
                        hashing.secret_hash({"k": content.encode()}))  # fmt: skip
    r.stores.config = lambda _t, _ns, _n: entry  # type: ignore[method-assign]


async def test_a_change_reverted_while_its_window_is_closed_writes_nothing_when_it_opens() -> None:
    r = rig()
    m = manifest("w", annotations=WINDOW)
    m["spec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "STAKATER_DB_SECRET", "value": hashing.secret_hash({"k": b"v0"})}]  # fmt: skip
    k = r.add(m)
    cache_content(r, "v1")
    r.change(k, content="v1")
    await r.drain()
    assert r.scheduler.held == {k: "window"}
    cache_content(r, "v0")  # reverted: the fan-out sees nothing to reload and queues nothing
    r.room.clock.advance(201.0)
    await r.drain()
    assert r.written() == []
    assert r.scheduler.held == {}


async def test_an_urgent_change_during_a_window_hold_is_written_at_once() -> None:
    r = rig()
    k = r.add(manifest("w", annotations=WINDOW))
    r.change(k, content="v2")
    await r.drain()
    assert r.written() == []
    r.change(k, content="v3", annotations={"kube-reloader.io/reload-urgent": "true"})
    await r.drain()
    assert r.written() == ["w"]
    assert all(t < 200 for t in r.room.clock.pending()), "the window's timer is gone"


async def test_removing_a_workloads_window_writes_its_held_change() -> None:
    r = rig()
    k = r.add(manifest("w", annotations={"kube-reloader.io/reload-window": "0 0 31 2 * 1h"}))
    r.change(k, content="v2")
    await r.drain()
    assert r.scheduler.held == {k: "window"}, "a window that never opens"
    del r.manifests[k]["metadata"]["annotations"]["kube-reloader.io/reload-window"]
    r.seen(k)
    await r.drain()
    assert r.written() == ["w"]


async def test_a_deleted_followed_workload_no_longer_holds_its_followers() -> None:
    r = rig()
    a = r.add(manifest("a"))
    b = r.add(manifest("b", annotations={"kube-reloader.io/reload-after": "Deployment/a"}))
    r.change(a, b, content="v2")
    await r.drain()
    assert r.scheduler.held == {b: "order"}
    r.stores.index.remove(a)
    r.reconciler.forget(a)
    await r.drain()
    assert r.written() == ["a", "b"]


async def test_a_write_that_met_a_conflict_keeps_its_turn_for_the_slot() -> None:
    r = rig(max_concurrent_rollouts=1)
    a, b = r.add(manifest("a")), r.add(manifest("b"))
    r.writer.fail.append(errors.Conflict(409, "the object has been modified"))
    r.writer.objects[a] = copy.deepcopy(r.manifests[a])
    r.change(a, b, content="v2")
    await r.drain()
    assert r.written() == ["a"], "a again, not b"
    assert r.scheduler.held == {b: "slots"}


async def test_held_workloads_woken_again_and_again_are_logged_once_per_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    r = rig()
    caplog.set_level(logging.INFO, logger="kube_reloader.runtime.controller")
    a = r.add(manifest("a"))
    after = {"kube-reloader.io/reload-after": "Deployment/a"}
    followers = [r.add(manifest(f"f{i}", annotations=after)) for i in range(150)]
    r.change(*followers, a, content="v2")
    await r.drain()
    assert r.written() == ["a"]
    for _ in range(10):  # the tenant pokes the workload they all follow
        r.manifests[a]["metadata"].setdefault("labels", {})["poke"] = str(_)
        r.seen(a)
        await r.drain()
    held = [rec for rec in caplog.records if rec.getMessage() == "reload held"]
    assert len(held) == 150, "one line per held workload, not one per wake"
    assert r.room.sample("kube_reloader_deferred_total", reason="order") >= 150 * 10
    r.rolled(a)
    await r.drain()
    assert sorted(r.written()) == sorted(["a", *(k.name for k in followers)])
