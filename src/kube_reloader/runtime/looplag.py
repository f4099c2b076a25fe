"""The event loop's lag: how late a timer due now runs. Every step of every task runs on the
one loop, so the lag is the longest any step held it (a walk over a tenant's objects that
does not yield, a large decode); leases, probes and every other namespace's reloads wait
that long. The worst of the last `WINDOW` seconds is kept beside each sample
(`kube_reloader_event_loop_lag_seconds`, `..._max_seconds`).

Each sample is one timer callback that arms the next: no task step, Event or future per
sample. What a sample costs is mostly the wakeup itself (on the benchmark's machine, a busy
two-core VM, a wakeup costs 0.3-2.8 ms of CPU with the caches gone cold, whatever it runs),
so the sampler takes as few wakeups of its own as it can:

- After a sample that finds the loop working, the next is due in `INTERVAL`: a step that
  holds the loop for `s` seconds is seen as at least `s - INTERVAL` late. The loop works
  when its thread used, since the sample before, at least `IDLE_WORK` of CPU and at least
  `IDLE_SHARE` of the time from that sample to when this one was due (the idle mark: the
  wait the sampler asked for, or the time to the wakeup a sample rode; not the wait it
  got, which a stall off the CPU lengthens). The sampler's own wakeup stays under the
  mark. With a mark of one millisecond, as it was, that wakeup counted as work: after an
  idle second it brought another sample 0.1 s later, and a sampler at 0.1 s whose own
  wakeup cost a millisecond kept itself there.
- After a sample that finds it idle, the next is due in `IDLE_INTERVAL`. Every walk over a
  tenant's objects (`clock.Pacer`: each watch stream's events, the catch-up, fan-outs,
  audits) says when it starts a slice of work (`awake`, through the system clock's
  `working` hook, at its start and at each slice); the sample is then taken on that
  wakeup (a timer due at once measures the rest of that turn of the loop), at most every
  `INTERVAL / 2`: a walk that starts sooner after one brings the next sample to `INTERVAL`
  after it. After a sample that rode, the next is due as the CPU since the sample before
  says: a light event alone (a no-op update, about half a millisecond; a reload, a
  millisecond or two; with what the loop used since the sample before under the idle
  mark) leaves the sampler idle and costs no wakeup of its own; one that worked brings the
  next in `INTERVAL`. Work that starts otherwise after an idle second or a light event (an
  HTTP request, a timer's callback) is seen from the next sample on, so a step that holds
  the loop then is seen as at least `s - IDLE_INTERVAL` late; and a stall that comes
  before a walk's first slice (the decode of the event that starts it) is not seen.
- Work that comes at least every `INTERVAL` takes every sample on its own wakeups: the
  sampler does not wake the process at all."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from kube_reloader.runtime.clock import Clock, SystemClock, Timer

#: seconds between samples while the loop works
INTERVAL = 0.1
#: seconds between samples while it is idle
IDLE_INTERVAL = 1.0
#: CPU seconds used since the last sample under which the loop counts as idle (a sample's
#: own wakeup after 0.1 s costs 0.3-0.7 ms on the benchmark's machine, at times more)
IDLE_WORK = 0.003
#: the share of the wait asked for since the last sample, on the CPU, under which the loop
#: counts as idle: 10 ms over an idle second (a sample's own wakeup costs up to 2.8 ms)
IDLE_SHARE = 0.01
#: seconds over which the worst lag is kept
WINDOW = 60.0


class LoopLag:
    """Samples the loop's lag (see the module). On the system clock it takes the clock's
    `working` hook and reads the loop thread's CPU seconds from it unless `cpu` is given;
    with any other clock and no `cpu`, the loop never counts as idle."""

    def __init__(
        self,
        clock: Clock,
        report: Callable[[float, float], None],
        cpu: Callable[[], float] | None = None,
    ) -> None:
        self.clock = clock
        self.report = report
        if isinstance(clock, SystemClock):
            cpu = cpu or clock.cpu
            clock.working = self.awake  # each walk's slice (`Pacer`) says the loop works
        self._cpu = cpu
        #: (when, lag) of the samples of the last WINDOW seconds, the worst kept in front
        self._recent: deque[tuple[float, float]] = deque()
        self._timer: Timer | None = None
        self._due = 0.0  # when the armed timer is due
        self._sampled = float("-inf")  # when the last sample was taken
        self._worked = 0.0  # the CPU clock then
        self._rode = float("-inf")  # when the last sample that rode a walk's wakeup was armed
        self._failed: asyncio.Future[None] | None = None
        #: samples taken on a wakeup a walk brought (see `awake`)
        self.riders = 0

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

    def awake(self) -> None:
        """The loop works (a walk starts a slice): the next sample rides this wakeup (a
        timer due at once) when the last is half an interval old, or the sampler is idle
        (its next sample more than an interval away) and the last sample that rode is half
        an interval old. A walk that starts within half an interval of a sample that rode
        brings the idle sampler's next sample to an interval after that one (a slice of it
        that holds the loop is seen as at least `s - INTERVAL` late): samples ride at most
        every half interval. One clock read otherwise."""
        if self._timer is None:
            return
        now, due = self.clock.monotonic(), self._due
        if due > now and (
            now - self._sampled >= INTERVAL / 2
            or (due - now > INTERVAL and now - self._rode >= INTERVAL / 2)
        ):
            self._timer.cancel()
            self.riders += 1
            self._rode = now
            self._arm(0.0, now)
        elif due - now > INTERVAL:  # idle, and a sample rode just now: due an interval after it
            self._timer.cancel()
            self._arm(self._sampled + INTERVAL - now, now)

    async def run(self) -> None:
        """Sample until cancelled. A sample that raises ends the run with that error, so the
        supervisor counts it and starts the sampler again."""
        self._failed = asyncio.get_running_loop().create_future()
        self._sampled = now = self.clock.monotonic()
        self._worked = self._cpu() if self._cpu is not None else 0.0
        self._arm(INTERVAL, now)
        try:
            await self._failed
        finally:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def _arm(self, delay: float, now: float) -> None:
        due = now + delay
        self._due = due
        self._timer = self.clock.call_later(delay, lambda: self._tick(due))

    def _tick(self, due: float) -> None:
        try:
            now, since = self.clock.monotonic(), self._sampled
            lag = max(0.0, now - due)
            self.report(lag, self.sample(lag))
            self._sampled = now
            if self._cpu is None:
                busy = True
            else:
                cpu, worked = self._cpu(), self._worked
                self._worked = cpu
                busy = cpu - worked >= max(IDLE_WORK, (due - since) * IDLE_SHARE)
            self._arm(INTERVAL if busy else IDLE_INTERVAL, now)
        except Exception as exc:  # noqa: BLE001 - handed to the supervisor through `failed`
            self._timer = None
            if self._failed is not None and not self._failed.done():
                self._failed.set_exception(exc)
