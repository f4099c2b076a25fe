"""Time, injected: the wall clock, the monotonic clock and timers come from one `Clock`, so
every room can be driven by a fake clock in unit tests (no real waiting)."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Callable
from typing import Protocol


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def wall(self) -> float:
        """Seconds since the epoch (what annotations and Events record)."""
        ...

    def monotonic(self) -> float:
        """Seconds for durations and deadlines (never jumps)."""
        ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        """Run `callback` after `delay` seconds on the running event loop."""
        ...


def utc(clock: Clock) -> dt.datetime:
    """The clock's wall time as an aware UTC datetime."""
    return dt.datetime.fromtimestamp(clock.wall(), dt.UTC)


class SystemClock:
    """The real clock; `wall` may be replaced (tests shift it to simulate skew)."""

    def __init__(self, wall: Callable[[], float] = time.time) -> None:
        self._wall = wall

    def wall(self) -> float:
        return self._wall()

    def monotonic(self) -> float:
        return time.monotonic()

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        return asyncio.get_running_loop().call_later(max(0.0, delay), callback)

    def cpu(self) -> float:
        """Seconds of CPU this thread (the event loop's) has used: time spent waiting does
        not count."""
        return time.thread_time()


async def sleep(clock: Clock, seconds: float) -> None:
    """Wait `seconds` on `clock` (a fake clock's timers fire when the test moves it)."""
    woken = asyncio.Event()
    timer = clock.call_later(seconds, woken.set)
    try:
        await woken.wait()
    finally:
        timer.cancel()


#: seconds a walk over a tenant's objects works before it lets other tasks run
STEP_SECONDS = 0.01


class Pacer:
    """Paces a long walk: `await pacer.step()` between items lets the other tasks run once
    the walk has worked `seconds` since it last yielded (leases, probes and every other
    namespace's reloads wait at most that long), and costs one clock read otherwise.

    Time the walk spent waiting is not work: a watch whose events come one at a time has
    let the loop run between them, so it does not yield again after each (that yield is a
    whole loop turn per event). Work is read from the thread's CPU time when a slice's wall
    time is over; on a clock that is not the system's (a test's), all of its time is work."""

    def __init__(self, clock: Clock, seconds: float = STEP_SECONDS) -> None:
        self.clock = clock
        self.seconds = seconds
        self._cpu = clock.cpu if isinstance(clock, SystemClock) else clock.monotonic
        self.started = clock.monotonic()
        self.worked = self._cpu()  # the CPU clock at the slice's start
        self.yields = 0

    async def step(self) -> bool:
        """Yield if this slice's work is over; True when it did. A slice whose wall time is
        over but whose work is not (the walk waited) starts again without a yield."""
        if self.clock.monotonic() - self.started <= self.seconds:
            return False
        cpu = self._cpu()
        yielded = cpu - self.worked > self.seconds
        if yielded:
            await asyncio.sleep(0)
            self.yields += 1
            cpu = self._cpu()
        self.started, self.worked = self.clock.monotonic(), cpu
        return yielded
