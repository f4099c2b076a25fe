"""The start-up catch-up: reload what changed while nobody was writing, nothing else."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable

from kube_reloader.core import hashing
from kube_reloader.core.objects import ResourceType
from kube_reloader.kube.projections import ObjectMeta
from kube_reloader.runtime.cache import ConfigEntry
from kube_reloader.runtime.coalescing import Coalescer
from kube_reloader.runtime.kinds import BUILTIN
from kube_reloader.runtime.options import Options
from kube_reloader.runtime.resyncing import Resync
from kube_reloader.runtime.stores import Stores

from .fakes import AUTO, KEYS, Room, until, workload

H2 = hashing.configmap_hash({"k": "2"})


class Store:
    """A reflector's store, as the catch-up reads it."""

    def __init__(self, entries: dict[tuple[str, str], ConfigEntry]) -> None:
        self.store = entries
        self.resource = type("R", (), {"plural": "configmaps"})()


def rig(
    *workloads: object, changed_at: float | None, wanted: Callable[[str], bool] = lambda _ns: True
) -> tuple[Room, Stores, Coalescer, Resync]:
    room, stores = Room(), Stores(KEYS)
    for w in workloads:
        stores.index.put(w)  # type: ignore[arg-type]
    entry = ConfigEntry(ObjectMeta(name="cm", namespace="ns"), ResourceType.CONFIGMAP, H2,
                        changed_at=changed_at)  # fmt: skip
    stores.configs.append(Store({("ns", "cm"): entry}))  # type: ignore[arg-type]
    co = Coalescer(room.clock)
    resync = Resync(Options(), BUILTIN, room.clock, stores, co, room.fence, room.reports.changes, room.reports.problems,
                    asyncio.Event(), wanted, adopt=lambda _w: False, freshness=None)  # fmt: skip
    return room, stores, co, resync


async def test_a_workload_whose_config_changed_after_its_template_is_queued_once() -> None:
    w = dataclasses.replace(workload(configmap="cm"), template_changed_at=100.0)
    _room, _stores, co, resync = rig(w, changed_at=200.0)
    assert await resync.reconcile_missed() == 1
    assert w.key in co
    assert await resync.reconcile_missed() == 0, "already queued: not counted twice"


async def test_a_workload_changed_after_its_config_is_left_alone() -> None:
    w = dataclasses.replace(workload(configmap="cm"), template_changed_at=300.0)
    _room, _stores, co, resync = rig(w, changed_at=200.0)
    assert await resync.reconcile_missed() == 0
    assert w.key not in co


async def test_jobs_and_cronjobs_are_never_re_run_by_the_catch_up() -> None:
    job = dataclasses.replace(workload("j", kind="Job", configmap="cm"), template_changed_at=1.0)
    _room, _stores, co, resync = rig(job, changed_at=200.0)
    assert await resync.reconcile_missed() == 0
    assert len(co) == 0


async def test_a_workload_whose_check_raises_gets_a_warning_and_the_others_are_still_checked(
) -> None:  # fmt: skip
    bad = dataclasses.replace(workload("bad", configmap="cm"), template_changed_at=1.0)
    good = dataclasses.replace(workload("good", configmap="cm"), template_changed_at=1.0)
    room, stores, co, resync = rig(bad, good, changed_at=200.0)
    real = stores.resolve

    def resolve(w: object) -> object:
        if w.name == "bad":  # type: ignore[attr-defined]
            raise RuntimeError("boom")
        return real(w)  # type: ignore[arg-type]

    stores.resolve = resolve  # type: ignore[method-assign]
    assert await resync.reconcile_missed() == 1
    assert good.key in co
    assert bad.key not in co
    assert room.sample("kube_reloader_object_errors_total", stage="catch-up") == 1
    await room.spawned.run()
    assert room.events.reasons() == ["ReloadError"]


async def test_a_workload_in_a_namespace_the_filter_leaves_out_is_never_caught_up() -> None:
    w = dataclasses.replace(workload(configmap="cm"), template_changed_at=100.0)
    # --namespaces-to-ignore=ns, say
    _room, _stores, co, resync = rig(w, changed_at=200.0, wanted=lambda ns: ns != "ns")
    assert await resync.reconcile_missed() == 0
    assert w.key not in co


async def test_an_evict_workload_is_caught_up_whatever_its_templates_time() -> None:
    annotations = {**AUTO, "kube-reloader.io/strategy": "evict"}
    w = dataclasses.replace(workload(configmap="cm", annotations=annotations),
                            template_changed_at=300.0)  # fmt: skip
    _room, _stores, co, resync = rig(w, changed_at=200.0)
    assert await resync.reconcile_missed() == 1, "its pods, not its template, say what it runs"
    assert w.key in co


class WorkClock:
    """A monotonic clock that moves by `per_read` at every read: each step of work costs."""

    def __init__(self, per_read: float) -> None:
        self.now = 0.0
        self.per_read = per_read

    def wall(self) -> float:
        return 1_000_000.0

    def monotonic(self) -> float:
        self.now += self.per_read
        return self.now

    def call_later(self, delay: float, callback: object) -> object:
        raise AssertionError("no timer expected")


async def test_a_tenant_sized_catch_up_lets_other_tasks_run_and_visits_namespaces_in_turn(
) -> None:  # fmt: skip
    room, stores = Room(), Stores(KEYS)
    named = {"configmap.reloader.stakater.com/reload": "x"}
    for i in range(1_500):  # a tenant's named lists, and a canary elsewhere
        w = dataclasses.replace(workload(f"t{i}", annotations=named), namespace="tenant")
        stores.index.put(w)
    canary = dataclasses.replace(workload("canary", configmap="cm"), template_changed_at=100.0)
    stores.index.put(canary)
    entries = {("tenant", f"c{i}"): ConfigEntry(ObjectMeta(name=f"c{i}", namespace="tenant"),
                                                ResourceType.CONFIGMAP, H2, changed_at=200.0)
               for i in range(300)}  # fmt: skip
    entries[("ns", "cm")] = ConfigEntry(ObjectMeta(name="cm", namespace="ns"),
                                        ResourceType.CONFIGMAP, H2, changed_at=200.0)  # fmt: skip
    stores.configs.append(Store(entries))  # type: ignore[arg-type]
    co = Coalescer(room.clock)
    clock = WorkClock(per_read=0.001)
    room.fence.start_leading()
    resync = Resync(Options(), BUILTIN, clock, stores, co, room.fence, room.reports.changes, room.reports.problems,  # type: ignore[arg-type]
                    asyncio.Event(), lambda _ns: True, lambda _w: False, None)  # fmt: skip
    yields = 0
    canary_at: int | None = None

    async def other() -> None:
        nonlocal yields, canary_at
        while True:
            yields += 1
            if canary_at is None and canary.key in co:
                canary_at = yields
            await asyncio.sleep(0)

    task = asyncio.ensure_future(other())
    await asyncio.sleep(0)
    start = yields
    assert await resync.reconcile_missed() == 1
    task.cancel()
    assert canary_at is not None
    assert canary_at - start <= 2, "visited in its turn, early"
    assert yields - start >= 1_500 // 10, "at least every ten reads of the clock"


def test_a_named_list_concerns_only_the_configs_it_matches() -> None:
    stores = Stores(KEYS)
    entries = {("ns", n): ConfigEntry(ObjectMeta(name=n, namespace="ns"),
                                      ResourceType.CONFIGMAP, H2) for n in ("app-a", "app-b", "db")}  # fmt: skip
    entries[("other", "app-c")] = ConfigEntry(ObjectMeta(name="app-c", namespace="other"),
                                              ResourceType.CONFIGMAP, H2)  # fmt: skip
    stores.configs.append(Store(entries))  # type: ignore[arg-type]
    w = workload(
        "w", annotations={"configmap.reloader.stakater.com/reload": "app-.*"}, configmap="db"
    )
    assert stores.wanted(w) == {(ResourceType.CONFIGMAP, n) for n in ("app-a", "app-b", "db")}


async def test_the_catch_up_runs_once_per_won_election_and_waits_without_polling_between() -> None:
    room, _stores, _co, resync = rig(changed_at=None)
    walks: list[bool] = []  # whether this replica was leading when each walk started

    async def walk() -> int:
        walks.append(room.fence.leading.is_set())
        return 0

    resync.reconcile_missed = walk  # type: ignore[method-assign]
    resync.ready.set()
    task = asyncio.create_task(resync.loop())
    await until(lambda: len(walks) == 1, "the start caught up")
    room.fence.stop_leading()
    room.fence.start_leading()  # lost and won again before the loop ran: still a new term
    await until(lambda: len(walks) == 2, "the new term caught up")
    room.fence.stop_leading()
    room.fence.start_leading()
    await until(lambda: len(walks) == 3, "the third term caught up")
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert walks == [True, True, True], (
        "one walk per term, each while leading: a standby does not walk"
    )
