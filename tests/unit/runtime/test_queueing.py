"""The keyed work queue: de-duplication, one worker per key, delayed re-adds."""

from __future__ import annotations

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


async def test_a_closed_queue_takes_no_more_work() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.close()
    q.add("c")
    assert len(q) == 0, "a closed queue takes no more work"
