"""A keyed work queue: each key is queued at most once, and handled by one worker at a time.

Adding a key that is already queued does nothing; adding a key that a worker is handling marks
it dirty, and it is queued again when that worker is done (client-go's workqueue semantics).
Delays are the coalescer's (`coalescing`): this queue only orders keys.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    def __init__(self) -> None:
        self._queue: asyncio.Queue[K] = asyncio.Queue()
        self._queued: set[K] = set()
        self._active: set[K] = set()
        self._dirty: set[K] = set()
        self._closed = False

    def __len__(self) -> int:
        return len(self._queued)

    @property
    def active(self) -> int:
        return len(self._active)

    def add(self, key: K) -> None:
        if self._closed:
            return
        if key in self._active:
            self._dirty.add(key)
            return
        if key in self._queued:
            return
        self._queued.add(key)
        self._queue.put_nowait(key)

    async def get(self) -> K:
        key = await self._queue.get()
        self._queued.discard(key)
        self._active.add(key)
        return key

    def done(self, key: K) -> None:
        self._active.discard(key)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)

    def close(self) -> None:
        self._closed = True
