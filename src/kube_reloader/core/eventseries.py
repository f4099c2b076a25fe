"""Event series as client-go's `events.k8s.io/v1` recorder keeps them (Reloader v2 records
through it): an Event isomorphic to one recorded less than `FINISH_SECONDS` ago (the same type,
action, reason, reporting controller and instance, and regarding object at the same
resourceVersion) is not created again. Its second occurrence turns the first Event into a
series (`series.count` 2, written at once by a PATCH); later ones only count, and the count is
written by the sweeps: every `REFRESH_SECONDS` for each series, and, every `FINISH_SECONDS`,
a last time for a series quiet for `FINISH_SECONDS`, which is then forgotten (as is a single
Event that old).

Pure: the caller does the writes each step names, and calls `sweep` on its own timer. The
cache holds at most `MAX_ENTRIES` Events (the oldest forgotten: its next occurrence makes a
new Event), so no namespace's Events can grow it without bound.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

FINISH_SECONDS = 6 * 60.0
REFRESH_SECONDS = 30 * 60.0
MAX_ENTRIES = 4096


class Step(StrEnum):
    CREATE = "create"  # a new Event: create it under its name
    SERIES = "series"  # the Event's series (now or newly counted): write it by a PATCH
    COUNTED = "counted"  # counted in the cache only


@dataclass
class Entry:
    """A recorded Event: its name and namespace, when it was made, its series if any."""

    name: str
    namespace: str
    created: float
    count: int = 0  # 0: no series yet (a single Event)
    last_observed: float = 0.0
    #: the Event as created (the caller's): created again with its series if it is gone
    body: Any = None


class SeriesCache:
    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self._entries: dict[Hashable, Entry] = {}
        self._refreshed = 0.0

    def __len__(self) -> int:
        return len(self._entries)

    def record(self, key: Hashable, name: str, namespace: str, wall: float) -> tuple[Step, Entry]:
        """An occurrence at `wall` (epoch seconds) of the Event `key` would be named `name`."""
        if not self._refreshed:
            self._refreshed = wall  # the refresh period starts with the first Event
        entry = self._entries.get(key)
        if entry is None:
            entry = Entry(name, namespace, wall)
            self._entries[key] = entry
            if len(self._entries) > self.max_entries:
                del self._entries[next(iter(self._entries))]
            return Step.CREATE, entry
        entry.last_observed = wall
        if entry.count:
            entry.count += 1
            return Step.COUNTED, entry
        entry.count = 2
        return Step.SERIES, entry

    def sweep(self, wall: float) -> list[Entry]:
        """The series to write now (every series on a refresh, else the finished ones); the
        finished series and the old single Events are forgotten."""
        refresh = wall - self._refreshed >= REFRESH_SECONDS
        if refresh:
            self._refreshed = wall
        out = []
        for key, entry in list(self._entries.items()):
            if entry.count:
                finished = entry.last_observed < wall - FINISH_SECONDS
                if refresh or finished:
                    out.append(entry)
                if finished:
                    del self._entries[key]
            elif entry.created < wall - FINISH_SECONDS:
                del self._entries[key]
        return out
