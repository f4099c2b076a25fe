"""The event loop's lag: how late a timer due now runs. Every step of every task runs on the
one loop, so the lag is the longest any step held it (a walk over a tenant's objects that
does not yield, a large decode); leases, probes and every other namespace's reloads wait
that long. Sampled every `INTERVAL` seconds; the worst of the last `WINDOW` seconds is kept
beside each sample (`kube_reloader_event_loop_lag_seconds`, `..._max_seconds`).

Each sample is one timer callback that arms the next: no task step, Event or future per
sample. The samples are still most of what an idle controller spends (about 1.6 of its 2.0
ms of CPU a second, measured with `/proc/<pid>/schedstat`): the wakeups themselves."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from kube_reloader.runtime.clock import Clock, Timer

#: seconds between samples
INTERVAL = 0.1
#: seconds over which the worst lag is kept
WINDOW = 60.0


class LoopLag:
    def __init__(self, clock: Clock, report: Callable[[float, float], None]) -> None:
        self.clock = clock
        self.report = report
        #: (when, lag) of the samples of the last WINDOW seconds, the worst kept in front
        self._recent: deque[tuple[float, float]] = deque()

    def sample(self, lag: float) -> float:
        """Take one sample; returns the worst of the last WINDOW seconds (a monotonic deque:
        each sample is compared once on its way in and once on its way out)."""
        now = self.clock.monotonic()
        recent = self._recent
        while recent and recent[-1][1] <= lag:
            recent.pop()
        recent.append((now, lag))
        while recent[0][0] < now - WINDOW:
            recent.popleft()
        return recent[0][1]

    async def run(self) -> None:
        """Sample until cancelled. A sample that raises ends the run with that error, so the
        supervisor counts it and starts the sampler again."""
        failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        timer: Timer | None = None

        def tick(due: float) -> None:
            nonlocal timer
            try:
                now = self.clock.monotonic()
                lag = max(0.0, now - due)
                self.report(lag, self.sample(lag))
                timer = self.clock.call_later(INTERVAL, lambda: tick(now + INTERVAL))
            except Exception as exc:  # noqa: BLE001 - handed to the supervisor through `failed`
                if not failed.done():
                    failed.set_exception(exc)

        start = self.clock.monotonic()
        timer = self.clock.call_later(INTERVAL, lambda: tick(start + INTERVAL))
        try:
            await failed
        finally:
            timer.cancel()
