"""The keyed work queue: de-duplication, one worker per key, delayed re-adds."""

from __future__ import annotations

import asyncio

from kube_reloader.runtime.queueing import WorkQueue


async def test_a_key_added_twice_is_queued_once() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add("a")
    q.add("b")
    assert len(q) == 2
    assert [await q.get(), await q.get()] == ["a", "b"]


async def test_a_key_added_while_active_is_requeued_when_done() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    key = await q.get()
    q.add("a")
    assert len(q) == 0, "not handed to a second worker while the first holds it"
    q.done(key)
    assert len(q) == 1
    assert await q.get() == "a"


async def test_add_after_queues_later_and_close_cancels_timers() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add_after("a", 0.01)
    assert len(q) == 0
    assert await asyncio.wait_for(q.get(), 1) == "a"
    q.add_after("b", 0.01)
    q.close()
    await asyncio.sleep(0.03)
    assert len(q) == 0
    q.add("c")
    assert len(q) == 0, "a closed queue takes no more work"
