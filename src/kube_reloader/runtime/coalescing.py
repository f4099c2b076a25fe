"""Pending work: the changes waiting for each workload, gathered into one `WorkItem` per
workload, and the one mechanism that queues it now or after a delay (coalescing window,
rate-limit deferral, retry backoff). The queue hands out the item itself.

Semantics (client-go's workqueue, per workload): an item is queued at most once; changes that
arrive while it waits join it; changes that arrive while a worker handles it form a new item,
queued when that worker is done. All delays are timers of the injected clock, owned here:
`schedule` (coalescing window, rate-limit deferral) keeps the timer already running for the
key, so changes join the wait; `retry_after` (backoff) runs beside it and never holds back a
newer change; `wake_at` looks at a held reload again by time alone (its window opens, a slot's
deadline passes: the scheduler says when; the front of the rate's line when its token comes);
`requeue` queues at once (after a conflict, or when what a held reload waits for happens).
Handing an item out ends its delay: the changes it held back go with it, and a newer change
waits only its own window.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kube_reloader.core.objects import ObjectKey, ResourceType
from kube_reloader.core.planning import Change
from kube_reloader.runtime.clock import Clock, Timer
from kube_reloader.runtime.queueing import WorkQueue

ChangeKey = tuple[ResourceType, str]


@dataclass
class WorkItem:
    """Everything one reload of one workload is about."""

    key: ObjectKey
    changes: dict[ChangeKey, Change] = field(default_factory=dict)
    #: when each change was first observed (monotonic), for the reload latency
    observed: dict[ChangeKey, float] = field(default_factory=dict)
    #: when the item was first queued (monotonic), for the queue latency
    queued_at: float | None = None

    def under(self, newer: WorkItem) -> WorkItem:
        """This (older) item with `newer`'s changes winning (each seen from before ours)."""
        merged = dict(self.changes)
        for k, c in newer.changes.items():
            merged[k] = c.since(self.changes[k]) if k in self.changes else c
        return WorkItem(
            self.key,
            merged,
            {**newer.observed, **self.observed},
            min((t for t in (self.queued_at, newer.queued_at) if t is not None), default=None),
        )


class Coalescer:
    def __init__(self, clock: Clock, on_queued: Callable[[int], None] | None = None) -> None:
        self.clock = clock
        self._on_queued = on_queued
        self._waiting: dict[ObjectKey, WorkItem] = {}
        self._timers: dict[ObjectKey, Timer] = {}
        self._retries: dict[ObjectKey, Timer] = {}
        #: a held item's wake: (when, monotonic; its timer)
        self._wakes: dict[ObjectKey, tuple[float, Timer]] = {}
        self._queue: WorkQueue[ObjectKey] = WorkQueue(lane=_namespace)

    def __len__(self) -> int:
        """Workloads with changes waiting to be written."""
        return len(self._waiting)

    def __contains__(self, key: object) -> bool:
        return key in self._waiting

    @property
    def depth(self) -> int:
        return len(self._queue)

    @property
    def active(self) -> int:
        return self._queue.active

    def add(self, key: ObjectKey, change: Change, observed: float | None, delay: float) -> bool:
        """Add a change for `key`, queued after `delay`; True when it joined waiting work.
        `observed` (monotonic) is when the change was seen, if its latency is measured."""
        item = self._waiting.setdefault(key, WorkItem(key))
        joined = bool(item.changes)
        ck = (change.rtype, change.name)
        earlier = item.changes.get(ck)
        item.changes[ck] = change if earlier is None else change.since(earlier)
        if observed is not None:
            item.observed.setdefault(ck, observed)
        self.schedule(key, delay)
        return joined

    def put_back(self, item: WorkItem) -> None:
        """Return an item not (fully) handled; changes that arrived meanwhile win. An item
        with no changes left is not put back (it would count as pending work)."""
        if not item.changes:
            return
        newer = self._waiting.get(item.key)
        self._waiting[item.key] = item if newer is None else item.under(newer)

    def schedule(self, key: ObjectKey, delay: float) -> None:
        """Queue `key`'s waiting item after `delay` (the only delayed add)."""
        if key in self._timers:
            return
        if delay <= 0:
            self._enqueue(key)
            return

        def fire() -> None:
            self._timers.pop(key, None)
            self._enqueue(key)

        self._timers[key] = self.clock.call_later(delay, fire)

    def retry_after(self, key: ObjectKey, delay: float) -> None:
        """Queue `key` again after a backoff of `delay`, whatever other timer runs for it."""
        old = self._retries.pop(key, None)
        if old is not None:
            old.cancel()

        def fire() -> None:
            self._retries.pop(key, None)
            self._queue.add(key)

        self._retries[key] = self.clock.call_later(delay, fire)

    def wake_at(self, key: ObjectKey, delay: float) -> None:
        """Queue `key`'s held item again no later than `delay` from now, if it still waits
        then. An earlier wake already set is kept: a wake too early only looks again."""
        due = self.clock.monotonic() + delay
        current = self._wakes.get(key)
        if current is not None and current[0] <= due:
            return
        self.cancel_wake(key)

        def fire() -> None:
            self._wakes.pop(key, None)
            if key in self._waiting:
                self._queue.add(key)

        self._wakes[key] = (due, self.clock.call_later(delay, fire))

    def cancel_wake(self, key: ObjectKey) -> None:
        current = self._wakes.pop(key, None)
        if current is not None:
            current[1].cancel()

    def timers(self, key: ObjectKey) -> set[str]:
        """The timers running for `key`: "delay" (a window or a deferral), "retry", "wake"."""
        running = {"delay": key in self._timers, "retry": key in self._retries}
        running["wake"] = key in self._wakes
        return {name for name, on in running.items() if on}

    def requeue(self, key: ObjectKey) -> None:
        """Queue `key` at once (it is handed out again when its current worker is done)."""
        self._queue.add(key)

    def _enqueue(self, key: ObjectKey) -> None:
        """A new add (counted): the window or deferral ended, or no delay was asked."""
        item = self._waiting.get(key)
        if item is not None and item.queued_at is None:
            item.queued_at = self.clock.monotonic()
        self._queue.add(key)
        if self._on_queued is not None:
            self._on_queued(len(self._queue))

    async def get(self) -> WorkItem:
        """The next item to handle (mark it done with `done`); may have no changes when they
        were dropped meanwhile."""
        key = await self._queue.get()
        delay = self._timers.pop(key, None)
        if delay is not None:
            delay.cancel()  # what it waited to queue is handed out now; newer changes wait anew
        return self._waiting.pop(key, None) or WorkItem(key)

    def handling(self, key: ObjectKey) -> bool:
        """Is a worker handling `key` now?"""
        return self._queue.handling(key)

    def done(self, key: ObjectKey) -> None:
        self._queue.done(key)

    def drop(self, key: ObjectKey) -> None:
        """Forget `key`'s waiting changes (its workload is gone)."""
        self._waiting.pop(key, None)
        self.cancel_wake(key)

    def close(self) -> None:
        for timer in [
            *self._timers.values(),
            *self._retries.values(),
            *(t for _, t in self._wakes.values()),
        ]:
            timer.cancel()
        self._timers.clear()
        self._retries.clear()
        self._wakes.clear()
        self._queue.close()


def _namespace(key: ObjectKey) -> str:
    """The queue's lane: workloads are handed out namespace by namespace, in turn."""
    return key.namespace
