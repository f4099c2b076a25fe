"""The fence's guarded write: done, cancelled by a lost lease, or cancelled with its caller."""

from __future__ import annotations

import asyncio

import pytest

from kube_reloader.runtime.fencing import Fence


async def test_a_write_that_runs_to_its_end_is_true_and_its_error_reaches_the_caller() -> None:
    fence = Fence()
    assert await fence.guarded(asyncio.create_task(asyncio.sleep(0)))

    async def fails() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await fence.guarded(asyncio.create_task(fails()))
    assert fence.writing == set()


async def test_losing_the_lease_cancels_the_write_and_the_caller_carries_on() -> None:
    fence = Fence()
    write = asyncio.create_task(asyncio.sleep(60))
    waiting = asyncio.create_task(fence.guarded(write))
    await asyncio.sleep(0)
    fence.stop_leading()
    assert await waiting is False
    assert write.cancelled()
    assert fence.writing == set()


async def test_cancelling_the_caller_cancels_its_write_too() -> None:
    fence = Fence()
    write = asyncio.create_task(asyncio.sleep(60))
    caller = asyncio.create_task(fence.guarded(write))
    await asyncio.sleep(0)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    await asyncio.sleep(0)
    assert write.cancelled()
