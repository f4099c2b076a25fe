"""Event series as client-go's `events.k8s.io/v1` recorder keeps them (Reloader v2 records
through it): an Event isomorphic to one recorded less than `FINISH_SECONDS` ago (the same type,
action, reason, reporting controller and instance, and regarding object at the same
resourceVersion) is not created again. Its second occurrence turns the first Event into a
series (`series.count` 2, written at once by a PATCH); later ones only count, and the count is
written by the sweeps: every `REFRESH_SECONDS` for each series, and, every `FINISH_SECONDS`,
a last time for a series quiet for `FINISH_SECONDS`, which is then forgotten (as is a single
Event that old).

Pure: the caller does the writes each step names, calls `sweep` on its own timer and
`forget`s a finished series once its last count is written (one whose write failed is
written again at the next sweep). The cache holds at most `MAX_ENTRIES` Events, each
namespace its share (`core.fairness`): a namespace past it forgets its own oldest Event (a
series' count the caller writes first), so one tenant's reloads never push out another's
series.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from kube_reloader.core import fairness

FINISH_SECONDS = 6 * 60.0
REFRESH_SECONDS = 30 * 60.0
MAX_ENTRIES = 4096


class Step(StrEnum):
    CREATE = "create"  # a new Event: create it under its name
    SERIES = "series"  # the Event's series (now or newly counted): write it by a PATCH
    COUNTED = "counted"  # counted in the cache only


@dataclass
class Entry:
    """A recorded Event: its key, name and namespace, when it was made, its series if any."""

    key: Hashable
    name: str
    namespace: str
    created: float
    count: int = 0  # 0: no series yet (a single Event)
    last_observed: float = 0.0
    #: the Event as created (the caller's): created again with its series if it is gone
    body: Any = None
    #: quiet for FINISH_SECONDS: its last count to write, then forgotten
    finished: bool = False


class SeriesCache:
    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self._entries: dict[Hashable, Entry] = {}
        self._held: Counter[str] = Counter()
        self._refreshed = 0.0

    def __len__(self) -> int:
        return len(self._entries)

    def record(
        self, key: Hashable, name: str, namespace: str, wall: float
    ) -> tuple[Step, Entry, Entry | None]:
        """An occurrence at `wall` (epoch seconds) of the Event `key`, which would be named
        `name`: the step to take, the Event's entry, and the entry forgotten to make room
        (None, or one whose series' count the caller writes)."""
        if not self._refreshed:
            self._refreshed = wall  # the refresh period starts with the first Event
        entry = self._entries.get(key)
        if entry is None:
            forgotten = self._room_for(namespace)
            entry = Entry(key, name, namespace, wall)
            self._entries[key] = entry
            self._held[namespace] += 1
            return Step.CREATE, entry, forgotten if forgotten and forgotten.count else None
        entry.last_observed, entry.finished = wall, False  # (a finished one not yet forgotten)
        if entry.count:
            entry.count += 1
            return Step.COUNTED, entry, None
        entry.count = 2
        return Step.SERIES, entry, None

    def _room_for(self, namespace: str) -> Entry | None:
        """Forget one Event if `namespace` may not hold one more: its own oldest, or (it has
        none) the oldest of the namespace holding most."""
        others = sum(1 for ns, n in self._held.items() if n and ns != namespace)
        held, total = self._held[namespace], len(self._entries)
        if fairness.may_take(self.max_entries, held, total, others):
            return None
        victim_ns = namespace if held else max(self._held, key=lambda ns: self._held[ns])
        victim = next(e for e in self._entries.values() if e.namespace == victim_ns)
        self._drop(victim)
        return victim

    def _drop(self, entry: Entry) -> None:
        if self._entries.get(entry.key) is entry:
            del self._entries[entry.key]
            self._held[entry.namespace] -= 1
            if self._held[entry.namespace] <= 0:
                del self._held[entry.namespace]

    def forget(self, entry: Entry) -> None:
        """A finished series' last count was written (unless it was counted again since)."""
        if entry.finished:
            self._drop(entry)

    def sweep(self, wall: float) -> list[Entry]:
        """The series to write now: every series on a refresh (each `REFRESH_SECONDS`), else
        those quiet for `FINISH_SECONDS` (marked finished: `forget` them once written). Single
        Events that old are forgotten."""
        refresh = wall - self._refreshed >= REFRESH_SECONDS
        if refresh:
            self._refreshed = wall
        out = []
        for entry in list(self._entries.values()):
            if entry.count:
                entry.finished = entry.last_observed < wall - FINISH_SECONDS
                if refresh or entry.finished:
                    out.append(entry)
            elif entry.created < wall - FINISH_SECONDS:
                self._drop(entry)
        return out
