"""The event-loop lag sampler: each sample, and the worst of the last minute."""

from __future__ import annotations

import asyncio

import pytest

from kube_reloader.runtime.looplag import INTERVAL, WINDOW, LoopLag

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
