"""Kubernetes Events correlated as client-go's recorder correlates them (`EventCorrelator`).

Three bounded memories, each of at most `CACHE_ENTRIES` entries (the least recently used is
forgotten first), all keyed by the Event's source and involved object, so one noisy object
never holds back another's Events:

* counting: an Event identical to one recorded before (same source, object, type, reason and
  message) is not created again; the first one's `count` goes up and its `lastTimestamp`
  moves (the caller patches it);
* aggregation: the 10th distinct message with the same source, object, type and reason
  within 10 minutes of the previous one is recorded as one Event whose message starts with
  "(combined from similar events): ", counted from then on like any other;
* spam filter: a source may record 25 Events about one object at once, then one every 5
  minutes (a token bucket per source and object); an Event over it is not recorded.

Pure and deterministic: the caller passes the time (wall seconds for the Event's
timestamps, monotonic seconds for intervals and the bucket) and a fresh name to use when a
new Event is created.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from kube_reloader.core.limiting import TokenBucket
from kube_reloader.core.records import record

#: client-go's defaults (`NewEventCorrelator`)
CACHE_ENTRIES = 4096
AGGREGATE_MAX_EVENTS = 10
AGGREGATE_INTERVAL = 600.0
SPAM_BURST = 25
SPAM_RATE = 1 / 300
#: an Event's message is cut to this many characters (as recorded before correlating)
MAX_MESSAGE = 1024
COMBINED = "(combined from similar events): "

K = TypeVar("K")
V = TypeVar("V")


class LRU(Generic[K, V]):
    """At most `size` entries; reading or writing one makes it the most recent."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._entries.get(key)
        if value is not None:
            self._entries.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


@record
class Occurrence:
    """One Event asked for: its source, involved object, type, reason and message."""

    component: str
    kind: str
    api_version: str
    namespace: str
    name: str
    uid: str
    event_type: str
    reason: str
    message: str

    @property
    def source_object(self) -> tuple[str, ...]:
        """Who says it about what, and how (client-go's spam key)."""
        return (
            self.component,
            self.kind,
            self.namespace,
            self.name,
            self.uid,
            self.api_version,
            self.event_type,
        )


@record
class Record:
    """What to write: Event `name` with this message and count (`count` > 1: it exists,
    patch its count, lastTimestamp and message)."""

    name: str
    message: str
    count: int
    #: wall seconds of the first occurrence (`firstTimestamp`) and of this one
    first: float
    last: float

    @property
    def update(self) -> bool:
        return self.count > 1


@dataclass(slots=True)
class _Similar:
    """Distinct messages (their digests) seen for one source, object, type and reason."""

    last: float
    messages: OrderedDict[bytes, None] = field(default_factory=OrderedDict)


@record
class _Seen:
    name: str
    count: int
    first: float


def _digest(message: str) -> bytes:
    return hashlib.blake2b(message.encode(), digest_size=16).digest()


class Correlator:
    """Decides, for each Event asked for, whether to create it, count it on an existing
    Event, or drop it (see the module's docstring)."""

    def __init__(
        self,
        *,
        entries: int = CACHE_ENTRIES,
        max_events: int = AGGREGATE_MAX_EVENTS,
        interval: float = AGGREGATE_INTERVAL,
        burst: int = SPAM_BURST,
        rate: float = SPAM_RATE,
    ) -> None:
        self.max_events = max_events
        self.interval = interval
        self.burst = burst
        self.rate = rate
        self._similar: LRU[tuple[str, ...], _Similar] = LRU(entries)
        self._seen: LRU[tuple[object, ...], _Seen] = LRU(entries)
        self._buckets: LRU[tuple[str, ...], TokenBucket] = LRU(entries)

    def correlate(
        self, occurrence: Occurrence, *, wall: float, now: float, fresh_name: str
    ) -> Record | None:
        """The Event to write for `occurrence` at `wall` (monotonic `now`), named
        `fresh_name` if it is a new one; None when the spam filter drops it."""
        message = occurrence.message[:MAX_MESSAGE]
        group = (*occurrence.source_object, occurrence.reason)
        key: tuple[object, ...] = (*group, _digest(message))
        similar = self._similar.get(group)
        if similar is None or now - similar.last > self.interval:
            similar = _Similar(now)
        similar.messages[_digest(message)] = None
        similar.last = now
        self._similar.put(group, similar)
        if len(similar.messages) >= self.max_events:
            similar.messages.popitem(last=False)  # the set never grows past the threshold
            key, message = group, (COMBINED + message)[:MAX_MESSAGE]
        seen = self._seen.get(key)
        if seen is None:
            record = Record(fresh_name, message, 1, wall, wall)
        else:
            record = Record(seen.name, message, seen.count + 1, seen.first, wall)
        self._seen.put(key, _Seen(record.name, record.count, record.first))
        bucket = self._buckets.get(occurrence.source_object)
        if bucket is None:
            bucket = TokenBucket(self.rate, self.burst)
        self._buckets.put(occurrence.source_object, bucket)
        if bucket.take(now) > 0:
            return None
        return record

    def sizes(self) -> tuple[int, int, int]:
        """Entries held by each memory (aggregation, counting, spam filter)."""
        return len(self._similar), len(self._seen), len(self._buckets)
