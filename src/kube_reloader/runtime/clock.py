"""Time, injected: the wall clock, the monotonic clock and timers come from one `Clock`, so
every room can be driven by a fake clock in unit tests (no real waiting)."""

from __future__ import annotations

import asyncio
import datetime as dt
import math
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


class Grains:
    """Timers that need not be exact, each run at the first whole `grain` seconds of the
    clock's monotonic time at or after its due time (to the loop's millisecond: uvloop
    rounds), all of one grain from a single timer of the clock: the timers a fan-out makes
    apart (one per workload) fire on one wakeup of the loop per grain they fall in, where
    the loop's own would each be due at its own millisecond. A callback that raises an
    `Exception` does not stop the others of its grain; the first is raised after them."""

    def __init__(self, clock: Clock, grain: float = 1.0) -> None:
        self.clock = clock
        self.grain = grain
        #: grain number -> its timer and its callbacks, by handle
        self._due: dict[int, tuple[Timer, dict[_Grained, Callable[[], None]]]] = {}

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        now = self.clock.monotonic()
        slot = math.ceil((now + max(0.0, delay)) / self.grain)
        entry = self._due.get(slot)
        if entry is None:
            timer = self.clock.call_later(slot * self.grain - now, lambda: self._fire(slot))
            entry = self._due[slot] = (timer, {})
        handle = _Grained(self, slot)
        entry[1][handle] = callback
        return handle

    def _cancel(self, handle: _Grained) -> None:
        entry = self._due.get(handle.slot)
        if entry is None or entry[1].pop(handle, None) is None:
            return
        if not entry[1]:
            entry[0].cancel()
            del self._due[handle.slot]

    def _fire(self, slot: int) -> None:
        """Run the grain's callbacks one by one, each taken out first: one cancelled by a
        callback before it does not run, one made for this grain by a callback does."""
        entry = self._due.get(slot)
        if entry is None:
            return
        callbacks, failed = entry[1], []
        while callbacks:
            callback = callbacks.pop(next(iter(callbacks)))
            try:
                callback()
            except Exception as exc:  # noqa: BLE001 - raised after the others ran
                failed.append(exc)
        if self._due.get(slot) is entry:
            del self._due[slot]
        if failed:
            raise failed[0]


class _Grained:
    """One callback of a `Grains`: cancelled alone."""

    __slots__ = ("owner", "slot")

    def __init__(self, owner: Grains, slot: int) -> None:
        self.owner = owner
        self.slot = slot

    def cancel(self) -> None:
        self.owner._cancel(self)


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
