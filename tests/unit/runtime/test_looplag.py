"""The event-loop lag sampler: each sample, and the worst of the last minute."""

from __future__ import annotations

import asyncio

import pytest

from kube_reloader.runtime.clock import Pacer, SystemClock
from kube_reloader.runtime.looplag import (
    IDLE_INTERVAL,
    IDLE_SHARE,
    IDLE_WORK,
    INTERVAL,
    WINDOW,
    LoopLag,
)

from .fakes import FakeClock, until


def test_the_worst_lag_is_kept_for_a_minute_then_forgotten() -> None:
    clock = FakeClock()
    reported: list[tuple[float, float]] = []
    lag = LoopLag(clock, lambda s, w: reported.append((s, w)))
    assert lag.sample(0.3) == 0.3
    clock.advance(1)
    assert lag.sample(0.01) == 0.3, "the worst of the minute"
    clock.advance(WINDOW - 2)
    assert lag.sample(0.02) == 0.3
    clock.advance(2)
    assert lag.sample(0.005) == 0.02, "0.3 is older than a minute now"


async def test_the_sampler_reports_how_late_its_timer_ran() -> None:
    clock = FakeClock()
    reported: list[tuple[float, float]] = []
    lag = LoopLag(clock, lambda s, w: reported.append((s, w)))
    task = asyncio.ensure_future(lag.run())
    await until(lambda: bool(clock.timers), "the first sample armed")
    (timer,) = clock.timers
    clock.timers.remove(timer)
    clock.now = 0.35  # the loop was held: the 0.1 s timer runs 0.25 s late
    timer.callback()
    assert len(reported) == 1
    assert abs(reported[0][0] - 0.25) < 1e-9
    clock.advance(INTERVAL)  # the next sample is due a whole interval after this one ran
    assert len(reported) == 2
    assert reported[1][0] == 0.0
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert clock.pending() == [], "a stopped sampler leaves no timer behind"


async def test_a_sample_that_raises_ends_the_run_with_its_error() -> None:
    clock = FakeClock()

    def report(seconds: float, worst: float) -> None:
        raise RuntimeError("metrics gone")

    task = asyncio.ensure_future(LoopLag(clock, report).run())
    await until(lambda: bool(clock.timers), "the first sample armed")
    clock.advance(INTERVAL)
    with pytest.raises(RuntimeError, match="metrics gone"):
        await task
    assert clock.pending() == []


class Cpu:
    """The loop thread's CPU clock, moved by the test."""

    def __init__(self) -> None:
        self.used = 0.0

    def __call__(self) -> float:
        return self.used


async def started(clock: FakeClock, cpu: Cpu) -> tuple[LoopLag, list[float], asyncio.Task[None]]:
    reported: list[float] = []
    lag = LoopLag(clock, lambda s, _w: reported.append(s), cpu)
    task = asyncio.ensure_future(lag.run())
    await until(lambda: bool(clock.timers), "the first sample armed")
    return lag, reported, task


async def idle(clock: FakeClock, cpu: Cpu) -> tuple[LoopLag, list[float], asyncio.Task[None]]:
    """A sampler started, after its first sample: no work since the start, so it is idle."""
    got = await started(clock, cpu)
    clock.advance(INTERVAL)
    return got


async def stopped(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_an_idle_loop_is_sampled_once_a_second() -> None:
    clock, cpu = FakeClock(), Cpu()
    _, reported, task = await idle(clock, cpu)
    assert len(reported) == 1
    assert clock.pending() == [IDLE_INTERVAL], "no work since the start: idle"
    clock.advance(IDLE_INTERVAL)
    assert len(reported) == 2
    assert clock.pending() == [IDLE_INTERVAL]
    await stopped(task)


async def test_a_loop_that_used_cpu_since_the_last_sample_is_sampled_every_interval() -> None:
    clock, cpu = FakeClock(), Cpu()
    _, reported, task = await started(clock, cpu)
    cpu.used += IDLE_WORK
    clock.advance(INTERVAL)
    assert clock.pending() == [INTERVAL]
    clock.advance(INTERVAL)  # nothing ran in this one
    assert clock.pending() == [IDLE_INTERVAL]
    assert len(reported) == 2
    await stopped(task)


@pytest.mark.parametrize(
    ("used", "next_in"),
    [
        (IDLE_WORK * 2, IDLE_INTERVAL),  # its own cold wakeup, over the floor: still idle
        (IDLE_INTERVAL * IDLE_SHARE * 0.99, IDLE_INTERVAL),
        (IDLE_INTERVAL * IDLE_SHARE, INTERVAL),  # a share of the second: the loop works
    ],
)
async def test_an_idle_second_counts_as_work_only_from_a_share_of_it_on_the_cpu(
    used: float, next_in: float
) -> None:
    clock, cpu = FakeClock(), Cpu()
    _, reported, task = await idle(clock, cpu)
    assert IDLE_WORK * 2 < IDLE_INTERVAL * IDLE_SHARE, "the share is over the floor here"
    cpu.used += used
    clock.advance(IDLE_INTERVAL)
    assert len(reported) == 2
    assert clock.pending() == [pytest.approx(next_in)]
    await stopped(task)


@pytest.mark.parametrize(
    ("after", "used", "next_in"),
    [
        (0.5, 0.5 * IDLE_SHARE * 0.9, IDLE_INTERVAL),  # over the floor, under the share
        (0.5, 0.5 * IDLE_SHARE, INTERVAL),
        (0.01, IDLE_WORK * 0.9, IDLE_INTERVAL),  # over the share, under the floor
        (0.01, IDLE_WORK, INTERVAL),
    ],
)
async def test_a_sample_that_rode_counts_work_by_the_floor_and_the_share_since_the_last(
    after: float, used: float, next_in: float
) -> None:
    clock, cpu = FakeClock(), Cpu()
    lag, reported, task = await idle(clock, cpu)
    assert 0.5 * IDLE_SHARE * 0.9 > IDLE_WORK, "the share is over the floor at 0.5 s"
    clock.advance(after)
    cpu.used += used
    lag.awake()
    clock.advance(0.0)
    assert lag.riders == 1
    assert len(reported) == 2
    assert clock.pending() == [pytest.approx(next_in)]
    await stopped(task)


async def test_a_sampler_whose_own_wakeup_costs_a_millisecond_or_two_goes_idle() -> None:
    clock, cpu = FakeClock(), Cpu()
    _, reported, task = await started(clock, cpu)
    cpu.used += 0.05
    clock.advance(INTERVAL)  # the loop worked: the next sample is due in an interval
    assert clock.pending() == [pytest.approx(INTERVAL)]
    cpu.used += 0.002  # only the next sample's own wakeup
    clock.advance(INTERVAL)
    assert clock.pending() == [pytest.approx(IDLE_INTERVAL)]
    assert len(reported) == 2
    await stopped(task)


async def test_a_stall_off_the_cpu_does_not_lift_the_mark_the_loop_works_by() -> None:
    clock, cpu = FakeClock(), Cpu()
    _, reported, task = await started(clock, cpu)
    cpu.used += IDLE_WORK
    clock.advance(INTERVAL)  # the loop worked: the next sample is due in an interval
    assert clock.pending() == [pytest.approx(INTERVAL)]
    cpu.used += IDLE_WORK  # as much work again, then the loop is held 0.5 s off the CPU
    clock.now += INTERVAL + 0.5
    clock.advance(0.0)
    assert reported[-1] == pytest.approx(0.5), "the stall is seen"
    assert clock.pending() == [pytest.approx(INTERVAL)], "and the loop still counts as working"
    await stopped(task)


async def test_work_that_arrives_at_an_idle_sampler_brings_a_sample_due_at_once() -> None:
    clock, cpu = FakeClock(), Cpu()
    lag, reported, task = await idle(clock, cpu)
    assert clock.pending() == [IDLE_INTERVAL]
    clock.advance(0.4)
    lag.awake()
    assert clock.pending() == [0.0], "the sample rides the wakeup that brought the work"
    clock.now += 0.3  # that turn of the loop held it for 0.3 s, on the CPU
    cpu.used += 0.3
    clock.advance(0)
    assert reported[-1] == pytest.approx(0.3)
    assert clock.pending() == [pytest.approx(INTERVAL)], "the loop worked: next in an interval"
    assert lag.riders == 1
    await stopped(task)


async def test_a_light_event_alone_is_sampled_on_its_own_wakeup_and_leaves_the_sampler_idle() -> (
    None
):
    clock, cpu = FakeClock(), Cpu()
    lag, reported, task = await idle(clock, cpu)
    for _ in range(5):  # a no-op update every 0.3 s, half a millisecond each
        clock.advance(0.3)
        lag.awake()
        cpu.used += IDLE_WORK / 2
        clock.advance(0)
        assert clock.pending() == [pytest.approx(IDLE_INTERVAL)], "no wakeup of its own follows"
    assert lag.riders == 5
    assert len(reported) == 6
    await stopped(task)


async def test_events_that_come_every_interval_take_every_sample_on_their_own_wakeups() -> None:
    clock, cpu = FakeClock(), Cpu()
    lag, reported, task = await started(clock, cpu)
    woken_by_sampler = 0
    for _ in range(20):
        clock.now += INTERVAL * 0.9  # the sampler's own timer is not due yet
        woken_by_sampler += any(t.due <= clock.now for t in clock.timers if not t.cancelled)
        lag.awake()
        clock.advance(0)
    assert woken_by_sampler == 0
    assert lag.riders == 20
    assert len(reported) == 20
    await stopped(task)


async def test_light_events_close_together_take_a_sample_at_most_every_half_interval() -> None:
    clock, cpu = FakeClock(), Cpu()
    lag, reported, task = await idle(clock, cpu)
    for _ in range(50):  # a no-op update every 10 ms, a tenth of a millisecond each
        clock.advance(0.01)
        lag.awake()
        cpu.used += IDLE_WORK / 10
        clock.advance(0)
    assert lag.riders == 10, "one every 50 ms over half a second"
    assert len(reported) == 11
    await stopped(task)


async def test_a_walk_just_after_a_sample_that_rode_brings_the_next_within_an_interval() -> None:
    clock, cpu = FakeClock(), Cpu()
    lag, reported, task = await idle(clock, cpu)
    clock.advance(0.3)
    lag.awake()  # a light event rides its own wakeup and leaves the sampler idle
    clock.advance(0)
    assert clock.pending() == [pytest.approx(IDLE_INTERVAL)]
    clock.advance(0.01)
    lag.awake()  # another walk 10 ms later (the fan-out, the workload stream)
    assert clock.pending() == [pytest.approx(INTERVAL - 0.01)], "an interval after the rider"
    assert lag.riders == 1
    clock.now += 0.4  # that walk's slice holds the loop for 0.4 s
    cpu.used += 0.4
    clock.advance(0)
    assert reported[-1] == pytest.approx(0.4 - (INTERVAL - 0.01)), "seen, an interval short"
    await stopped(task)


async def test_work_soon_after_a_sample_waits_for_the_armed_one() -> None:
    clock, cpu = FakeClock(), Cpu()
    lag, reported, task = await started(clock, cpu)
    cpu.used += IDLE_WORK
    clock.advance(INTERVAL)
    assert len(reported) == 1
    clock.now += INTERVAL / 4
    lag.awake()
    assert clock.pending() == [pytest.approx(INTERVAL * 3 / 4)], "the armed sample is soon enough"
    assert lag.riders == 0
    await stopped(task)


async def test_work_right_after_an_idle_sample_still_brings_the_sampler_back_at_once() -> None:
    clock, cpu = FakeClock(), Cpu()
    lag, _, task = await idle(clock, cpu)
    assert clock.pending() == [IDLE_INTERVAL]
    clock.advance(0.01)
    lag.awake()
    assert clock.pending() == [0.0]
    await stopped(task)


def test_work_that_arrives_before_the_sampler_runs_arms_nothing() -> None:
    clock = FakeClock()
    lag = LoopLag(clock, lambda _s, _w: None, Cpu())
    lag.awake()
    assert clock.pending() == []


async def test_on_the_system_clock_a_walks_slice_brings_an_idle_sampler_back_at_once() -> None:
    clock = SystemClock()
    samples: asyncio.Queue[float] = asyncio.Queue()
    lag = LoopLag(clock, lambda s, _w: samples.put_nowait(s), cpu=lambda: 0.0)
    assert clock.working == lag.awake, "the sampler takes the clock's hook"
    task = asyncio.ensure_future(lag.run())
    await asyncio.wait_for(samples.get(), 10)  # the first sample; then idle: next in 1 s
    pacer = Pacer(clock, 0.0)  # every step ends a slice
    await pacer.step()
    assert lag.riders == 1
    # the sample that rides the walk's wakeup comes long before the idle one would
    await asyncio.wait_for(samples.get(), IDLE_INTERVAL / 2)
    await stopped(task)


async def test_a_sampler_started_again_after_a_failure_samples_as_before() -> None:
    clock, cpu = FakeClock(), Cpu()
    failures = [RuntimeError("metrics gone")]
    reported: list[float] = []

    def report(seconds: float, _worst: float) -> None:
        if failures:
            raise failures.pop()
        reported.append(seconds)

    lag = LoopLag(clock, report, cpu)
    task = asyncio.ensure_future(lag.run())
    await until(lambda: bool(clock.timers), "the first sample armed")
    clock.advance(INTERVAL)
    with pytest.raises(RuntimeError):
        await task
    assert clock.pending() == []
    lag.awake()  # between the runs: nothing to ride
    assert clock.pending() == []
    task = asyncio.ensure_future(lag.run())  # as the supervisor does
    await until(lambda: bool(clock.pending()), "the sample armed again")
    assert clock.pending() == [INTERVAL]
    cpu.used += IDLE_WORK
    clock.advance(INTERVAL)
    assert len(reported) == 1
    assert clock.pending() == [pytest.approx(INTERVAL)], "the loop worked: next in an interval"
    await stopped(task)
