"""`Pacer`: a walk lets the other tasks run after `seconds` of work, and time it spent waiting
between items (a watch whose events come one at a time) is not work."""

from __future__ import annotations

import asyncio

import pytest

from kube_reloader.runtime.clock import Pacer, SystemClock

from .fakes import FakeClock


class ScriptedClock(SystemClock):
    """The system clock's kind, with its wall and CPU time set by the test."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 100.0
        self.used = 5.0
        self.cpu_reads = 0

    def monotonic(self) -> float:
        return self.now

    def cpu(self) -> float:
        self.cpu_reads += 1
        return self.used


async def steps(
    pacer: Pacer,
    clock: ScriptedClock,
    *,
    waited: float,
    worked: float,
    n: int,
    on_cpu: float = 1.0,
) -> list[bool]:
    """`n` items, each after `waited` seconds of waiting and `worked` seconds of work, done
    while the thread has `on_cpu` of the CPU (the rest of the time it is preempted)."""
    out = []
    for _ in range(n):
        clock.now += waited + worked / on_cpu
        clock.used += worked
        out.append(await pacer.step())
    return out


@pytest.mark.asyncio
async def test_items_that_come_one_at_a_time_after_a_wait_never_yield() -> None:
    clock = ScriptedClock()
    pacer = Pacer(clock, 0.01)
    assert await steps(pacer, clock, waited=0.1, worked=0.0005, n=50) == [False] * 50
    assert pacer.yields == 0


@pytest.mark.asyncio
async def test_a_walk_that_works_without_waiting_yields_after_each_slice_of_work() -> None:
    clock = ScriptedClock()
    pacer = Pacer(clock, 0.01)
    got = await steps(pacer, clock, waited=0.0, worked=0.004, n=9)
    # 12 ms of work is over the 10 ms slice: the third item yields, and a new slice starts
    assert got == [False, False, True, False, False, True, False, False, True]
    assert pacer.yields == 3


@pytest.mark.asyncio
async def test_work_after_a_wait_counts_from_the_wait() -> None:
    clock = ScriptedClock()
    pacer = Pacer(clock, 0.01)
    got = await steps(pacer, clock, waited=0.05, worked=0.004, n=1)
    got += await steps(pacer, clock, waited=0.0, worked=0.004, n=3)
    # the wait ended the slice; 12 ms of work after it is over the next one
    assert got == [False, False, False, True]
    assert pacer.yields == 1


@pytest.mark.asyncio
@pytest.mark.parametrize("on_cpu", [0.999, 0.9, 0.5, 0.2])
async def test_a_walk_preempted_for_part_of_its_slices_still_yields_after_each(
    on_cpu: float,
) -> None:
    clock = ScriptedClock()
    pacer = Pacer(clock, 0.01)
    got = await steps(pacer, clock, waited=0.0, worked=0.00005, n=2000, on_cpu=on_cpu)
    item = 0.00005 / on_cpu  # each item's wall time
    wall = 2000 * item
    # a slice ends at the first item after its 10 ms: one yield per slice
    assert pacer.yields >= int(wall / (0.01 + 2 * item)), f"{pacer.yields} yields in {wall:.2f} s"
    assert sum(got) == pacer.yields


@pytest.mark.asyncio
async def test_the_walks_start_and_each_slice_tell_the_clocks_working_hook() -> None:
    clock = ScriptedClock()
    told: list[float] = []
    clock.working = lambda: told.append(clock.now)
    pacer = Pacer(clock, 0.01)
    assert len(told) == 1, "the walk's first slice starts with the pacer"
    await steps(pacer, clock, waited=0.0, worked=0.004, n=3)
    assert len(told) == 2, "the third item ends the first slice"
    await steps(pacer, clock, waited=0.5, worked=0.0005, n=1)
    assert len(told) == 3, "an item after a wait starts a slice"


@pytest.mark.asyncio
async def test_the_cpu_clock_is_read_only_once_a_slice_is_over_on_the_wall() -> None:
    clock = ScriptedClock()
    pacer = Pacer(clock, 0.01)
    reads = clock.cpu_reads
    await steps(pacer, clock, waited=0.0, worked=0.001, n=9)
    assert clock.cpu_reads == reads


@pytest.mark.asyncio
async def test_a_yield_lets_a_ready_task_run() -> None:
    clock = ScriptedClock()
    pacer = Pacer(clock, 0.01)
    ran = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.call_soon(ran.set)
    clock.now += 0.02
    clock.used += 0.02
    assert await pacer.step()
    assert ran.is_set()


@pytest.mark.asyncio
async def test_on_a_clock_that_is_not_the_systems_all_time_is_work() -> None:
    clock = FakeClock()
    pacer = Pacer(clock, 0.01)
    assert not await pacer.step()
    clock.advance(0.02)
    assert await pacer.step()
    assert pacer.yields == 1
