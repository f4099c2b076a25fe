"""The coalescer: one work item per workload, queued now or after a delay (one mechanism)."""

from __future__ import annotations

import asyncio

from kube_reloader.core.objects import ObjectKey
from kube_reloader.runtime.coalescing import Coalescer, WorkItem

from .fakes import FakeClock, change

KEY = ObjectKey("Deployment", "ns", "web")


async def test_changes_inside_the_window_become_one_item_queued_when_the_window_ends() -> None:
    clock = FakeClock()
    co = Coalescer(clock)
    assert not co.add(KEY, change("a"), observed=0.0, delay=0.3)
    clock.advance(0.1)
    assert co.add(KEY, change("b"), observed=0.1, delay=0.3), "joins the waiting item"
    assert co.depth == 0
    clock.advance(0.2)
    assert co.depth == 1, "queued when the first window ends, not extended by the second"
    item = await asyncio.wait_for(co.get(), 1)
    assert sorted(name for _t, name in item.changes) == ["a", "b"]
    assert sorted(item.observed.values()) == [0.0, 0.1]
    assert item.queued_at == 0.3


async def test_a_delayed_add_keeps_the_timer_already_running_for_the_workload() -> None:
    clock = FakeClock()
    co = Coalescer(clock)
    co.add(KEY, change("a"), observed=None, delay=5.0)
    co.schedule(KEY, 0.1)
    assert clock.pending() == [5.0]
    clock.advance(5.0)
    assert co.depth == 1


async def test_a_zero_delay_queues_at_once_and_counts_the_add() -> None:
    depths: list[int] = []
    co = Coalescer(FakeClock(), on_queued=depths.append)
    co.add(KEY, change("a"), observed=None, delay=0)
    assert co.depth == 1
    assert depths == [1]


async def test_a_put_back_item_keeps_its_changes_under_newer_ones() -> None:
    clock = FakeClock()
    co = Coalescer(clock)
    co.add(KEY, change("a", "old"), observed=1.0, delay=0)
    item = await co.get()
    co.add(KEY, change("a", "new"), observed=2.0, delay=0)
    co.put_back(item)
    co.done(KEY)
    again = await asyncio.wait_for(co.get(), 1)
    (only,) = again.changes.values()
    assert only == change("a", "new"), "the newer change wins"
    assert list(again.observed.values()) == [1.0], "latency counts from the first sighting"


async def test_a_change_arriving_while_its_workload_is_handled_is_queued_when_done() -> None:
    co = Coalescer(FakeClock())
    co.add(KEY, change("a"), observed=None, delay=0)
    first = await co.get()
    co.add(KEY, change("b"), observed=None, delay=0)
    assert co.depth == 0, "never handed to a second worker at the same time"
    co.done(KEY)
    second = await asyncio.wait_for(co.get(), 1)
    assert [n for _t, n in first.changes] == ["a"]
    assert [n for _t, n in second.changes] == ["b"]


async def test_dropped_changes_leave_an_empty_item_and_close_cancels_the_timers() -> None:
    clock = FakeClock()
    co = Coalescer(clock)
    co.add(KEY, change("a"), observed=None, delay=0)
    co.drop(KEY)
    assert await co.get() == WorkItem(KEY)
    other = ObjectKey("Deployment", "ns", "other")
    co.add(other, change("a"), observed=None, delay=1.0)
    co.close()
    clock.advance(2.0)
    assert co.depth == 0


async def test_a_retry_runs_beside_the_window_and_a_requeue_is_immediate() -> None:
    clock = FakeClock()
    co = Coalescer(clock)
    co.add(KEY, change("a"), observed=None, delay=5.0)
    co.retry_after(KEY, 0.2)
    assert clock.pending() == [0.2, 5.0]
    clock.advance(0.2)
    assert co.depth == 1
    other = ObjectKey("Deployment", "ns", "other")
    co.requeue(other)
    assert co.depth == 2


async def test_an_item_put_back_with_no_changes_left_is_not_pending_work() -> None:
    co = Coalescer(FakeClock())
    co.add(KEY, change("a"), observed=None, delay=0)
    item = await co.get()
    item.changes.clear()
    co.put_back(item)
    assert len(co) == 0
    assert KEY not in co


async def test_handing_out_an_item_ends_its_delay_and_a_newer_change_waits_only_its_own() -> None:
    clock = FakeClock()
    co = Coalescer(clock)
    co.add(KEY, change("a"), observed=None, delay=30.0)  # a deferral's long wait
    co.requeue(KEY)  # woken before it ends (the front of the rate's line)
    item = await asyncio.wait_for(co.get(), 1)
    assert [name for _t, name in item.changes] == ["a"]
    assert clock.pending() == [], "what it waited to queue is handed out"
    co.done(KEY)
    co.add(KEY, change("b"), observed=None, delay=0.3)
    clock.advance(0.3)
    assert co.depth == 1, "queued after its own window, not the old deferral"
