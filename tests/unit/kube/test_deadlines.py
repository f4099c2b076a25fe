"""The wire's deadlines (`kube.deadlines`): a stream of waits on one timer, which fails a wait
at its due time and never before."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from kube_reloader.kube.deadlines import EARLY, Watchdog, until


class Spy:
    """The running loop's `time` and `call_at`, counting the timers set and telling when one
    has run."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.timers = 0
        self.armed = asyncio.Event()
        self.fired = asyncio.Event()

    def time(self) -> float:
        return self.loop.time()

    def call_at(self, when: float, callback: Callable[[], None]) -> asyncio.TimerHandle:
        self.timers += 1
        self.armed.set()

        def run() -> None:
            callback()
            self.fired.set()

        return self.loop.call_at(when, run)


def ready(loop: asyncio.AbstractEventLoop) -> asyncio.Future[None]:
    fut: asyncio.Future[None] = loop.create_future()
    loop.call_soon(fut.set_result, None)
    return fut


def dog(spy: Spy) -> Watchdog:
    return Watchdog(spy)  # type: ignore[arg-type] - the two methods it uses


async def test_a_thousand_waits_that_end_in_time_set_one_timer() -> None:
    spy = Spy()
    watchdog = dog(spy)
    for _ in range(1000):
        await watchdog.wait(ready(spy.loop), spy.time() + 60)
    assert spy.timers == 1
    watchdog.cancel()


async def test_a_wait_past_its_due_time_fails_with_a_timeout_not_before_it() -> None:
    spy = Spy()
    watchdog = dog(spy)
    await watchdog.wait(ready(spy.loop), spy.time() + 0.05)  # sets the timer for +0.05
    due = spy.time() + 0.3  # the timer fires first, and moves to this
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(watchdog.wait(spy.loop.create_future(), due), 10)
    assert spy.time() >= due - EARLY


async def test_a_wait_due_before_the_timer_sets_it_earlier() -> None:
    spy = Spy()
    watchdog = dog(spy)
    await watchdog.wait(ready(spy.loop), spy.time() + 3600)
    started = spy.time()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(watchdog.wait(spy.loop.create_future(), started + 0.05), 10)
    assert spy.time() - started < 5, "the watchdog's timeout, not the test's bound"


async def test_a_timer_that_fires_while_nothing_waits_is_dropped_and_the_next_wait_sets_one() -> (
    None
):
    spy = Spy()
    watchdog = dog(spy)
    await watchdog.wait(ready(spy.loop), spy.time() + 0.01)
    await asyncio.wait_for(spy.fired.wait(), 10)
    assert spy.timers == 1
    await watchdog.wait(ready(spy.loop), spy.time() + 60)
    assert spy.timers == 2
    watchdog.cancel()


async def test_a_cancelled_watchdog_fails_nothing() -> None:
    spy = Spy()
    watchdog = dog(spy)
    slow: asyncio.Future[None] = spy.loop.create_future()
    due = spy.time() + 0.01
    waiting = asyncio.ensure_future(watchdog.wait(slow, due))
    await asyncio.wait_for(spy.armed.wait(), 10)  # the wait has set its timer
    assert spy.timers == 1
    watchdog.cancel()
    later = asyncio.Event()
    spy.loop.call_at(due + 0.05, later.set)  # timers run in order: this one proves it is past
    await asyncio.wait_for(later.wait(), 10)
    assert not waiting.done()
    assert not spy.fired.is_set()
    slow.set_result(None)
    await waiting


async def test_until_fails_a_wait_at_its_deadline_and_leaves_no_timer() -> None:
    loop = asyncio.get_running_loop()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(until(loop, loop.create_future(), loop.time() + 0.01), 10)
    await until(loop, ready(loop), loop.time() + 60)
