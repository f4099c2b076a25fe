"""A keyed work queue, fair across namespaces.

`WorkQueue`: each key is queued at most once, and handled by one worker at a time. Adding a
key that is already queued does nothing; adding a key that a worker is handling marks it
dirty, and it is queued again when that worker is done (client-go's workqueue semantics).
Keys are handed out lane by lane (a lane per namespace, round-robin), first come, first
served within a lane: a namespace that queues thousands of workloads delays another
namespace's next one by at most one item per lane ahead of it. Delays are the coalescer's
(`coalescing`): this queue only orders keys.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


def _one_lane(_key: object) -> str:
    return ""


class WorkQueue(Generic[K]):
    def __init__(self, lane: Callable[[K], str] = _one_lane) -> None:
        self._lane = lane
        #: queued keys per lane; the lanes in turn order (a lane served goes to the back)
        self._lanes: dict[str, deque[K]] = {}
        self._queued: set[K] = set()
        self._active: set[K] = set()
        self._dirty: set[K] = set()
        self._getters: deque[asyncio.Future[None]] = deque()
        self._closed = False

    def __len__(self) -> int:
        return len(self._queued)

    @property
    def active(self) -> int:
        return len(self._active)

    def handling(self, key: K) -> bool:
        """Is a worker handling `key` now?"""
        return key in self._active

    def add(self, key: K) -> None:
        if self._closed:
            return
        if key in self._active:
            self._dirty.add(key)
            return
        if key in self._queued:
            return
        self._queued.add(key)
        self._lanes.setdefault(self._lane(key), deque()).append(key)
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(None)
                break

    async def get(self) -> K:
        while not self._lanes:
            getter = asyncio.get_running_loop().create_future()
            self._getters.append(getter)
            try:
                await getter
            except asyncio.CancelledError:
                with contextlib.suppress(ValueError):
                    self._getters.remove(getter)
                if getter.done() and not getter.cancelled() and self._lanes:
                    self._wake_one()  # it was woken for an item it will not take
                raise
        lane_name = next(iter(self._lanes))
        lane = self._lanes.pop(lane_name)
        key = lane.popleft()
        if lane:
            self._lanes[lane_name] = lane  # to the back of the turn order
        self._queued.discard(key)
        self._active.add(key)
        if self._lanes:
            self._wake_one()
        return key

    def _wake_one(self) -> None:
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(None)
                return

    def done(self, key: K) -> None:
        self._active.discard(key)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)

    def close(self) -> None:
        self._closed = True
