"""Waits with a deadline on the wire, made with as few timers as they need.

`until` bounds one wait with one timer (the head of an answer). `Watchdog` bounds a stream of
waits (a body read chunk by chunk, a watch's events): one timer per connection, set for the
first wait and moved only when it fires before the latest wait's due time, so a wait that
ends in time costs no timer at all. A watch event used to cost a timer made and cancelled,
about 20 µs of CPU per event on an idle loop.
"""

from __future__ import annotations

import asyncio

#: how early a timer may fire (a loop keeping milliseconds rounds its delay) and still count
#: as at its time, so that a timer a hair early is not set again, and again, for the rest
EARLY = 0.001


async def until(
    loop: asyncio.AbstractEventLoop, fut: asyncio.Future[None], deadline: float | None
) -> None:
    """Wait for `fut`, raising `TimeoutError` at `deadline` (one timer, no task)."""
    if deadline is None:
        await fut
        return
    timer = loop.call_at(deadline, _expire, fut)
    try:
        await fut
    finally:
        timer.cancel()


def _expire(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_exception(TimeoutError())


class Watchdog:
    """The deadlines of one connection's waits, one after another, on one timer.

    `wait(fut, due)` waits for `fut` and fails it with `TimeoutError` once the loop's time
    reaches `due`. The timer is set when none is (or when it would fire after `due`); when it
    fires before the latest due time it is set again for that time; when nothing waits it
    is dropped, and the next wait sets it."""

    __slots__ = ("_at", "_due", "_handle", "_loop", "_waiting")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._handle: asyncio.TimerHandle | None = None
        self._at = 0.0  # when the timer fires
        self._due = 0.0  # the due time of the wait in progress
        self._waiting: asyncio.Future[None] | None = None

    async def wait(self, fut: asyncio.Future[None], due: float | None) -> None:
        if due is None:
            await fut
            return
        self._due, self._waiting = due, fut
        if self._handle is None or self._at > due:
            self.cancel()
            self._arm(due)
        try:
            await fut
        finally:
            self._waiting = None

    def cancel(self) -> None:
        """Drop the timer (the connection is closed, or starts another request)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _arm(self, at: float) -> None:
        self._at = at
        self._handle = self._loop.call_at(at, self._fire)

    def _fire(self) -> None:
        self._handle = None
        fut = self._waiting
        if fut is None or fut.done():
            return  # nothing waits: the next wait sets the timer again
        if self._loop.time() < self._due - EARLY:
            self._arm(self._due)
            return
        _expire(fut)
