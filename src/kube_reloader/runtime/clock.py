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


async def sleep(clock: Clock, seconds: float) -> None:
    """Wait `seconds` on `clock` (a fake clock's timers fire when the test moves it)."""
    woken = asyncio.Event()
    timer = clock.call_later(seconds, woken.set)
    try:
        await woken.wait()
    finally:
        timer.cancel()
