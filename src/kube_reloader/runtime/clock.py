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
        #: called when a walk (`Pacer`) starts a slice of work: the loop-lag sampler's hook
        #: (`looplag.LoopLag.awake`), so it samples a loop that works, not an idle one
        self.working: Callable[[], None] = _nothing

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


def on_grain(clock: Clock, delay: float, grain: float = 1.0) -> float:
    """`delay`, lengthened (by less than `grain`) to end on a whole multiple of `grain`
    seconds of `clock`'s monotonic time: timers that need not be exact, made apart (one per
    workload of a fan-out), fire together on one wakeup of the loop instead of one each."""
    return delay + (-(clock.monotonic() + delay)) % grain


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
#: a slice in which the loop's thread ran less than this share of the time mostly waited
WAITED = 0.1


def _nothing() -> None:
    pass


class Pacer:
    """Paces a long walk: `await pacer.step()` between items lets the other tasks run once
    `seconds` have passed since it last did (leases, probes and every other namespace's
    reloads wait at most that long), and costs one clock read otherwise.

    A slice that mostly waited does not end in a yield: a watch whose events come one at a
    time has let the loop run between them, so it need not yield again after each (that is
    a whole loop turn per event). Once a slice's wall time is over, the thread's CPU time
    tells: under `WAITED` of the wall time on the CPU, the slice waited and a new one starts
    here; otherwise the walk yields, even when it was preempted for part of the slice. On a
    clock that is not the system's (a test's), all of its time is work.

    The walk's start (the pacer made) and each slice it starts or ends tell the system
    clock's `working` hook (the loop-lag sampler) that the loop works."""

    def __init__(self, clock: Clock, seconds: float = STEP_SECONDS) -> None:
        self.clock = clock
        self.seconds = seconds
        system = clock if isinstance(clock, SystemClock) else None
        self._system = system
        self._cpu = system.cpu if system is not None else clock.monotonic
        self.started = clock.monotonic()
        self.worked = self._cpu()  # the CPU clock at the slice's start
        self.yields = 0
        if system is not None:
            system.working()  # the walk's first slice starts here

    async def step(self) -> bool:
        """Yield if this slice is over and was not mostly a wait; True when it did."""
        now = self.clock.monotonic()
        if now - self.started <= self.seconds:
            return False
        if self._system is not None:
            self._system.working()
        cpu = self._cpu()
        if cpu - self.worked < (now - self.started) * WAITED:
            self.started, self.worked = now, cpu
            return False
        await asyncio.sleep(0)
        self.yields += 1
        self.started, self.worked = self.clock.monotonic(), self._cpu()
        return True
