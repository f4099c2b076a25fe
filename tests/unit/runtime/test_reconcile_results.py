"""What a reconcile comes to, scenario by scenario: the `core.results.Result` the reconciler
returns, and what the coalescer holds afterwards (the changes kept or not, queued at once or
not, which timer runs), and the consecutive failures (fake clock, fake writer)."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from kube_reloader.core.objects import ObjectKey
from kube_reloader.core.results import Defer, Done, Drop, Hold, Requeue, Result, Retry
from kube_reloader.kube import errors
from kube_reloader.runtime.coalescing import Coalescer, WorkItem
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

from .fakes import KEYS, FakeWriter, Room, change, workload

#: the consecutive failures every scenario starts with
EARLIER_FAILURES = 2


class Writer(FakeWriter):
    """A fake writer whose re-read after a conflict can fail too, and which can run
    something while a write is in flight (`during`)."""

    def __init__(self) -> None:
        super().__init__()
        self.read_fails: list[Exception] = []
        self.during: Callable[[], None] = lambda: None

    async def reload(self, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        self.during()
        return await super().reload(*args, **kwargs)

    async def read(self, key: ObjectKey) -> dict[str, Any]:
        if self.read_fails:
            self.reads.append(key)
            raise self.read_fails.pop(0)
        return await super().read(key)


@dataclasses.dataclass
class Rig:
    room: Room
    writer: Writer
    stores: Stores
    coalescer: Coalescer
    reconciler: Reconciler


def rig(options: Options) -> Rig:
    room, writer, stores = Room(), Writer(), Stores(KEYS)
    co = Coalescer(room.clock)
    throttle = Throttle(room.clock, min_interval=options.min_interval, rate=0, burst=0)
    pauses = Pauses(
        room.clock,
        KEYS,
        writer,
        room.fence,
        room.reports.rollouts,
        room.reports.problems,
        room.spawned,
    )
    scheduler = Scheduler(
        options, room.clock, stores, co, room.reports.fleet, room.reports.problems
    )
    tracker = RolloutTracker(room.clock, room.reports.rollouts, stores.workload, scheduler.finished)
    sup = Supervisor()
    done = scheduler.rotation_done
    rotations = Rotations(
        room.clock,
        writer,
        room.fence,
        room.reports.rollouts,
        room.reports.problems,
        sup,
        stores.workload,
        done,
    )
    reverts = Reverts(room.clock, room.reports.reloads, options.plan.strategy)
    rec = Reconciler(
        *(options, BUILTIN, room.clock, stores, co, throttle, pauses, tracker, writer),
        *(
            room.fence,
            room.reports.queue,
            room.reports.reloads,
            room.reports.problems,
            sup,
            rotations,
            reverts,
            scheduler,
        ),
    )
    return Rig(room, writer, stores, co, rec)


def item(key: ObjectKey, name: str) -> WorkItem:
    c = change(name)
    return WorkItem(key, {(c.rtype, c.name): c}, {(c.rtype, c.name): 0.0})


def rolling_answer(name: str) -> dict[str, Any]:
    """The API server's answer to a write of Deployment ns/`name`: its rollout not observed
    yet, so the tracker follows it and its slot stays taken."""
    return {
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "ns", "generation": 2},
        "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "app"}]}}},
        "status": {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 0},
    }


Prepare = Callable[[Rig], Awaitable[None]]


async def nothing(r: Rig) -> None:
    return None


def failing(*exc: Exception) -> Prepare:
    async def prepare(r: Rig) -> None:
        r.writer.fail.extend(exc)

    return prepare


def conflicting(*on_read: Exception) -> Prepare:
    async def prepare(r: Rig) -> None:
        r.writer.fail.append(errors.Conflict(409, "changed"))
        r.writer.objects[workload().key] = rolling_answer("web")
        r.writer.read_fails.extend(on_read)

    return prepare


async def written_a_second_ago(r: Rig) -> None:
    w = workload(configmap="a")
    await r.reconciler.handle(item(w.key, "a"))
    r.room.clock.advance(1.0)


async def the_only_slot_taken(r: Rig) -> None:
    other = workload("api", configmap="a")
    r.stores.index.put(other)
    r.writer.answer = rolling_answer("api")
    assert await r.reconciler.handle(item(other.key, "a")) == Done()
    r.writer.answer = None


async def gone_from_the_cache(r: Rig) -> None:
    r.stores.index.remove(workload().key)


async def leadership_lost(r: Rig) -> None:
    r.room.fence.stop_leading()


@dataclasses.dataclass(frozen=True)
class Scenario:
    prepare: Prepare
    result: Result
    #: the changes wait in the coalescer afterwards
    kept: bool
    #: the timers the coalescer runs for the workload afterwards
    timers: frozenset[str] = frozenset()
    #: queued again at once
    queued: bool = False
    failures: int = EARLIER_FAILURES
    options: Options = dataclasses.field(default_factory=lambda: Options(min_interval=0.0))
    change: str = "a"


SCENARIOS = {
    "written": Scenario(nothing, Done(), kept=False, failures=0),
    "already carried by the workload": Scenario(
        nothing, Done(), kept=False, failures=0, change="unrelated"
    ),
    "held for a slot": Scenario(
        the_only_slot_taken,
        Hold("slots", after=SLOT_SECONDS),
        kept=True,
        timers=frozenset({"wake"}),
        failures=0,
        options=Options(min_interval=0.0, max_concurrent_rollouts=1),
    ),
    "deferred by the minimum interval": Scenario(
        written_a_second_ago,
        Defer("min_interval", after=4.0),
        kept=True,
        timers=frozenset({"delay"}),
        options=Options(min_interval=5.0),
    ),
    "conflicted": Scenario(conflicting(), Requeue(), kept=True, queued=True),
    "conflicted and gone on the re-read": Scenario(
        conflicting(errors.NotFound(404, "gone")), Drop(), kept=False
    ),
    "conflicted and the re-read failed": Scenario(
        conflicting(errors.ConnectionFailed("down")),
        Retry(),
        kept=True,
        timers=frozenset({"retry"}),
        failures=EARLIER_FAILURES + 1,
    ),
    "a transient error": Scenario(
        failing(errors.ConnectionFailed("down")),
        Retry(),
        kept=True,
        timers=frozenset({"retry"}),
        failures=EARLIER_FAILURES + 1,
    ),
    "refused for good": Scenario(
        failing(errors.Forbidden(403, "no")), Done(), kept=False, failures=0
    ),
    "not found by the write": Scenario(
        failing(errors.NotFound(404, "gone")), Done(cleared=False), kept=False
    ),
    "gone from the cache": Scenario(gone_from_the_cache, Done(cleared=False), kept=False),
    "crashed": Scenario(
        failing(ZeroDivisionError()),
        Retry(),
        kept=True,
        timers=frozenset({"retry"}),
        failures=EARLIER_FAILURES + 1,
    ),
    "cancelled by a lost lease": Scenario(
        leadership_lost,
        Retry(),
        kept=True,
        timers=frozenset({"retry"}),
        failures=EARLIER_FAILURES + 1,
    ),
}


@pytest.mark.parametrize("scenario", SCENARIOS.values(), ids=SCENARIOS.keys())
async def test_a_reconcile_returns_its_result_and_the_coalescer_holds_what_it_says(
    scenario: Scenario,
) -> None:
    r = rig(scenario.options)
    w = workload(configmap="a")
    r.stores.index.put(w)
    await scenario.prepare(r)
    r.reconciler.failures[w.key] = EARLIER_FAILURES
    result = await r.reconciler.handle(item(w.key, scenario.change))
    assert result == scenario.result
    assert (w.key in r.coalescer) is scenario.kept
    assert r.coalescer.timers(w.key) == scenario.timers
    assert (r.coalescer.depth == 1) is scenario.queued
    assert r.reconciler.failures.get(w.key, 0) == scenario.failures
    r.room.spawned.close()


async def test_a_retry_backs_off_from_the_earlier_failures() -> None:
    r = rig(Options(min_interval=0.0))
    w = workload(configmap="a")
    r.stores.index.put(w)
    r.reconciler.failures[w.key] = EARLIER_FAILURES
    r.writer.fail.append(errors.ConnectionFailed("down"))
    assert await r.reconciler.handle(item(w.key, "a")) == Retry()
    assert r.room.clock.pending() == [pytest.approx(0.2 * 2**EARLIER_FAILURES)]
    r.room.spawned.close()


async def test_a_held_reload_keeps_its_changes_under_newer_ones_and_wakes_when_the_slot_frees() -> (
    None
):
    r = rig(Options(min_interval=0.0, max_concurrent_rollouts=1))
    w = workload(configmap="a")
    r.stores.index.put(w)
    await the_only_slot_taken(r)
    assert await r.reconciler.handle(item(w.key, "a")) == Hold("slots", after=SLOT_SECONDS)
    r.coalescer.add(w.key, change("a", "v2"), observed=None, delay=10.0)
    r.room.clock.advance(SLOT_SECONDS)
    woken = await r.coalescer.get()
    assert [c.hash for c in woken.changes.values()] == [change("a", "v2").hash]
    r.room.spawned.close()


def rated(r: Rig, *names: str) -> list[ObjectKey]:
    """A rate of one reload a second (burst one) already spent; workloads `names` cached."""
    r.reconciler.throttle = Throttle(r.room.clock, min_interval=0, rate=1.0, burst=1.0)
    r.reconciler.throttle.take(ObjectKey("Deployment", "ns", "spent"))
    keys = []
    for name in names:
        w = workload(name, configmap="a")
        r.stores.index.put(w)
        keys.append(w.key)
    return keys


async def held_back(r: Rig, *keys: ObjectKey) -> None:
    """Each of `keys` changed and handled once: held back by the spent rate, in that order."""
    for key in keys:
        assert isinstance(await r.reconciler.handle(item(key, "a")), Defer)


async def test_a_reload_held_back_by_the_rate_waits_in_its_line_for_its_turn() -> None:
    r = rig(Options(min_interval=0.0))
    first, second = rated(r, "first", "second")
    assert await r.reconciler.handle(item(first, "a")) == Defer("rate_limit", after=4 / 3)
    assert r.coalescer.timers(first) == {"delay", "wake"}, "woken at its token, whatever runs"
    assert await r.reconciler.handle(item(second, "a")) == Defer("rate_limit", after=4 / 3 + 1)
    assert r.reconciler.throttle.waiting() == 2
    assert r.coalescer.timers(first) == {"delay", "wake"}, "the front is woken for its token"
    assert r.coalescer.timers(second) == {"delay"}
    r.room.spawned.close()


async def test_a_reload_whose_change_ended_leaves_the_line_and_the_next_is_woken() -> None:
    r = rig(Options(min_interval=0.0))
    first, second = rated(r, "first", "second")
    await held_back(r, first, second)
    assert await r.reconciler.handle(item(first, "unrelated")) == Done(), "nothing to write"
    assert r.reconciler.throttle.front() == (second, pytest.approx(4 / 3))
    assert "wake" in r.coalescer.timers(second)
    r.room.spawned.close()


async def test_a_front_of_the_line_whose_changes_are_gone_gives_its_place_to_the_next() -> None:
    r = rig(Options(min_interval=0.0))
    first, second, third = rated(r, "first", "second", "third")
    await held_back(r, first, second)
    r.coalescer.drop(first)  # gone without a word to the throttle
    await r.reconciler.handle(item(third, "a"))
    assert r.reconciler.throttle.front() == (second, pytest.approx(4 / 3))
    assert r.reconciler.throttle.waiting() == 2
    r.reconciler.forget(second)
    assert r.reconciler.throttle.front() == (third, pytest.approx(4 / 3))
    assert "wake" in r.coalescer.timers(third)
    r.room.spawned.close()


async def test_a_token_given_back_by_a_failed_write_goes_to_the_front_of_the_line_at_once() -> None:
    r = rig(Options(min_interval=0.0))
    r.reconciler.throttle = throttle = Throttle(r.room.clock, min_interval=0, rate=1.0, burst=1.0)
    x, front = workload("x", configmap="a"), workload("front", configmap="a")
    for w in (x, front):
        r.stores.index.put(w)

    def held_back_meanwhile() -> None:  # behind the token x's write took
        r.coalescer.add(front.key, change("a"), observed=None, delay=30.0)
        assert throttle.wait(front.key)[0] == pytest.approx(4 / 3)

    r.writer.during = held_back_meanwhile
    r.writer.fail.append(errors.ConnectionFailed("down"))
    assert await r.reconciler.handle(item(x.key, "a")) == Retry()
    assert throttle.front() == (front.key, 0.0), "x's token is back"
    assert "wake" in r.coalescer.timers(front.key)
    assert r.room.clock.pending()[0] == 0.0, "woken now, not when the next token comes"
    r.room.spawned.close()


async def test_a_write_from_the_line_that_failed_backs_off_and_is_not_woken_at_once() -> None:
    r = rig(Options(min_interval=0.0))
    (x,) = rated(r, "x")
    assert await r.reconciler.handle(item(x, "a")) == Defer("rate_limit", after=4 / 3)
    r.room.clock.advance(4 / 3)  # its turn: woken, let through, and the write fails
    r.writer.fail.append(errors.ConnectionFailed("down"))
    woken = await r.coalescer.get()
    assert await r.reconciler.handle(woken) == Retry()
    assert r.reconciler.throttle.waiting() == 0, "out of the line while it backs off"
    assert r.coalescer.timers(x) == {"retry"}, "woken by its backoff only"
    assert r.room.clock.pending() == [pytest.approx(0.2 * 2**0)]
    r.room.spawned.close()


async def test_a_conflicted_write_from_the_line_keeps_its_place_at_the_front() -> None:
    r = rig(Options(min_interval=0.0))
    x, other = rated(r, "x", "other")
    await held_back(r, x, other)
    r.room.clock.advance(4 / 3)
    r.writer.fail.append(errors.Conflict(409, "changed"))
    r.writer.objects[x] = rolling_answer("x")  # the re-read
    woken = await r.coalescer.get()
    assert woken.key == x
    assert await r.reconciler.handle(woken) == Requeue()
    assert r.reconciler.throttle.front() == (x, 0.0), "re-planned at once, first in line"
    r.room.spawned.close()
