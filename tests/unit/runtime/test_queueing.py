"""The keyed work queue (de-duplication, one worker per key, lanes per namespace in turn) and
the slots namespaces share fairly."""

from __future__ import annotations

import asyncio

from kube_reloader.runtime.queueing import WorkQueue
from kube_reloader.turns import FairSlots


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


async def test_keys_are_handed_out_namespace_by_namespace_in_turn() -> None:
    q: WorkQueue[tuple[str, str]] = WorkQueue(lane=lambda k: k[0])
    for i in range(100):
        q.add(("busy", f"w{i}"))
    q.add(("quiet", "canary"))
    first = [await q.get() for _ in range(3)]
    assert first == [("busy", "w0"), ("quiet", "canary"), ("busy", "w1")]


async def test_a_waiting_worker_is_woken_by_the_next_add() -> None:
    q: WorkQueue[str] = WorkQueue()
    getter = asyncio.ensure_future(q.get())
    await asyncio.sleep(0)
    q.add("a")
    assert await asyncio.wait_for(getter, 1) == "a"


async def test_a_cancelled_worker_does_not_lose_the_key_it_was_woken_for() -> None:
    q: WorkQueue[str] = WorkQueue()
    one, two = asyncio.ensure_future(q.get()), asyncio.ensure_future(q.get())
    await asyncio.sleep(0)
    q.add("a")
    one.cancel()
    assert await asyncio.wait_for(two, 1) == "a"


async def test_a_namespace_over_its_share_of_slots_waits_and_another_starts_at_once() -> None:
    slots = FairSlots(4)
    for _ in range(3):
        await slots.acquire("hog")
    hog_waits = asyncio.ensure_future(slots.acquire("hog"))
    await asyncio.sleep(0)
    assert not hog_waits.done(), "three quarters: its share alone"
    await asyncio.wait_for(slots.acquire("canary"), 1)
    assert slots.held == 4
    slots.release("hog")
    await asyncio.sleep(0)
    assert not hog_waits.done(), "over its share now that another holds a slot"
    slots.release("canary")
    await asyncio.wait_for(hog_waits, 1)


async def test_a_waiter_cancelled_after_its_grant_hands_the_slot_on() -> None:
    slots = FairSlots(1)
    await slots.acquire("a")
    b = asyncio.ensure_future(slots.acquire("b"))
    c = asyncio.ensure_future(slots.acquire("c"))
    await asyncio.sleep(0)
    slots.release("a")  # b is granted...
    b.cancel()  # ...but cancelled before it runs
    await asyncio.wait_for(c, 1)
    assert slots.held == 1


async def test_a_cancelled_waiter_first_among_several_grants_leaves_the_others_theirs() -> None:
    slots = FairSlots(8)
    for tenant, n in (("a", 3), ("b", 3), ("c", 1)):
        for _ in range(n):
            await slots.acquire(tenant)
    wait_a = asyncio.ensure_future(slots.acquire("a"))
    wait_b = asyncio.ensure_future(slots.acquire("b"))
    await asyncio.sleep(0)
    wait_a.cancel()
    await asyncio.sleep(0)
    slots.release("c")  # c leaves: shares grow, several waiters may be granted at once
    await asyncio.wait_for(wait_b, 1)
    assert slots.held == 7, "b's slot granted and nothing counted for the cancelled a"
    assert slots.waiting == 0
