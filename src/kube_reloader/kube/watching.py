"""A reflector: LIST, then WATCH from the list's resourceVersion, forever, losing nothing.

The reflector keeps the last projection of every object it has seen (the caller chooses the
projection, so this is as small as the caller wants). That store is what makes it safe: when
the watch window expires (`410 Gone`) or the stream breaks for longer than the server keeps
history, it relists and diffs the fresh list against the store, emitting the ADDED, MODIFIED
and DELETED events that happened while nobody was watching. Bookmarks keep the resume point
fresh on quiet resources, so an idle watch rarely expires at all.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator, Callable, Mapping
from enum import StrEnum
from typing import Any, Generic, Protocol, TypeVar

import msgspec

from kube_reloader.core import limiting
from kube_reloader.kube import errors
from kube_reloader.kube.client import Client
from kube_reloader.kube.paging import DEFAULT_PAGE_BYTES, DEFAULT_PAGE_SIZE
from kube_reloader.kube.projections import ObjectMeta
from kube_reloader.kube.resources import Resource

log = logging.getLogger(__name__)

Key = tuple[str, str]


class HasMetadata(Protocol):
    @property
    def metadata(self) -> ObjectMeta: ...


T = TypeVar("T", bound=HasMetadata)


class EventType(StrEnum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    SYNCED = "SYNCED"  # the store now mirrors a complete LIST (initial sync or relist)


class ReflectorEvent(msgspec.Struct, Generic[T], frozen=True):
    """A change to the store. `synthesized` marks events inferred by diffing a relist."""

    type: EventType
    key: Key
    object: T | None
    old: T | None = None
    synthesized: bool = False


class Backoff(msgspec.Struct, frozen=True):
    """Jittered exponential backoff between failed LIST/WATCH attempts."""

    base: float = 0.5
    cap: float = 30.0

    def delay(self, failures: int) -> float:
        jitter = random.random()  # noqa: S311 - jitter, not crypto
        return limiting.backoff(failures - 1, base=self.base, cap=self.cap, jitter=jitter)


def key_of(obj: HasMetadata) -> Key:
    return (obj.metadata.namespace, obj.metadata.name)


class Reflector(Generic[T]):
    """Mirror one resource type into `store` and report every change as an event."""

    def __init__(
        self,
        client: Client,
        resource: Resource,
        *,
        type: type[Any],  # decoded as this, then reduced by `transform`
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
        page_bytes: int | None = DEFAULT_PAGE_BYTES,
        watch_timeout: tuple[int, int] = (240, 360),
        backoff: Backoff | None = None,
        store: Mapping[Key, T] | None = None,
        resource_version: str | None = None,
        on_error: Callable[[BaseException], None] | None = None,
        transform: Callable[[Any], T] | None = None,
        poll_interval: float = 10.0,
        update: Callable[[Any, T], T | None] | None = None,
    ) -> None:
        self.client = client
        self.resource = resource
        self.type = type
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.page_size = page_size
        #: LIST pages are sized to about this many bytes (at most `page_size` items each)
        self.page_bytes = page_bytes
        self.watch_timeout = watch_timeout
        self.backoff = backoff or Backoff()
        self.store: dict[Key, T] = dict(store or {})
        #: where the next watch resumes; empty means "LIST first"
        self.resource_version = resource_version or ""
        self.synced = asyncio.Event()
        self.lists = 0
        self.relists = 0
        self.watch_restarts = 0
        self.errors = 0
        self._on_error = on_error
        #: reduces each decoded object to what is stored and emitted (e.g. data -> hash)
        self._transform = transform
        #: a cheaper reduction of a MODIFIED object from its stored one (a status update, a
        #: write that left a ConfigMap's content alone), or None to reduce it in full
        self._update = update
        #: objects the transform could not reduce (skipped, logged; one bad object never
        #: stops the watch of every other one)
        self.rejected = 0
        #: when RBAC allows LIST but not WATCH, relist this often instead (None: never)
        self.poll_interval = poll_interval
        self.polling = False
        #: the last error was a 403: RBAC does not allow this (exported as a metric)
        self.forbidden = False
        self._logged: set[str] = set()

    def __repr__(self) -> str:
        scope = f" in {self.namespace}" if self.namespace else ""
        return f"<Reflector {self.resource}{scope} rv={self.resource_version or '-'}>"

    async def events(self) -> AsyncIterator[ReflectorEvent[T]]:
        """Run forever (until cancelled), yielding every change to the store."""
        failures = 0
        while True:
            try:
                if not self.resource_version or self.polling:
                    async for ev in self._relist():
                        yield ev
                    failures = 0
                    self.forbidden = False
                if self.polling:
                    await asyncio.sleep(self.poll_interval)
                    continue
                async for ev in self._watch():
                    failures = 0
                    self.forbidden = False
                    yield ev
                self.watch_restarts += 1  # the server closed the stream: resume from rv
            except errors.Gone:
                self._expired()
            except errors.Forbidden as exc:
                if self._refused(exc):
                    continue  # LIST is allowed but WATCH is not: poll instead of failing
                failures += 1
                self._log_once(
                    "RBAC forbids listing this resource; retrying",
                    str(exc),
                    {"resource": str(self.resource), "error": exc.message},
                )
                await asyncio.sleep(self.backoff.delay(failures))
            except (errors.KubeError, OSError) as exc:
                failures += 1
                await asyncio.sleep(self._failed(exc, failures))

    def _expired(self) -> None:
        """The watch's resourceVersion expired (410 Gone): the next round relists."""
        log.info(
            "watch expired, relisting",
            extra={
                "resource": str(self.resource),
                "resource_version": self.resource_version,
            },
        )
        self.resource_version = ""
        self.watch_restarts += 1

    def _refused(self, exc: errors.Forbidden) -> bool:
        """A 403, counted and told; True when it turns the reflector to polling: LIST is
        allowed (it synced) but WATCH is not, and polling is on."""
        self.forbidden = True
        self.errors += 1
        if self._on_error is not None:
            self._on_error(exc)
        if not (self.synced.is_set() and self.poll_interval and not self.polling):
            return False
        self.polling = True
        log.error(
            "RBAC allows list but not watch; polling instead (grant watch to fix)",
            extra={
                "resource": str(self.resource),
                "poll_seconds": self.poll_interval,
                "error": exc.message,
            },
        )
        return True

    def _failed(self, exc: errors.KubeError | OSError, failures: int) -> float:
        """A failed LIST or WATCH (the `failures`th in a row), counted, told and logged; the
        seconds to wait before the next try. A 400 or 422 also drops the resume point."""
        self.errors += 1
        self.watch_restarts += 1
        if self._on_error is not None:
            self._on_error(exc)
        delay = self.backoff.delay(failures)
        log.warning(
            "list/watch failed, retrying",
            extra={
                "resource": str(self.resource),
                "error": str(exc),
                "retry_in_seconds": round(delay, 2),
                "failures": failures,
            },
        )
        if isinstance(exc, errors.ApiError) and exc.code in (400, 422):
            self.resource_version = ""  # a malformed resume point: start over
        return delay

    def _log_once(self, message: str, key: str, extra: dict[str, Any]) -> None:
        """An error that repeats at every retry is logged once at error level, then at debug."""
        if key in self._logged:
            log.debug(message, extra=extra)
            return
        self._logged.add(key)
        log.error(message, extra=extra)

    def _reduce(self, obj: Any) -> Any:
        """The transform of one object, or None when it raised (the object is skipped)."""
        if self._transform is None:
            return obj
        try:
            return self._transform(obj)
        except Exception as exc:  # noqa: BLE001 - one unreadable object is skipped, not fatal
            self.rejected += 1
            meta = getattr(obj, "metadata", None)
            log.error(
                "object skipped: could not be read",
                extra={
                    "resource": str(self.resource),
                    "namespace": getattr(meta, "namespace", ""),
                    "object": getattr(meta, "name", ""),
                    "error": f"{type(exc).__name__}: {exc}"[:300],
                },
            )
            return None

    def _updated(self, obj: Any) -> Any:
        """`update` of the object and its stored reduction, or None (none stored, no
        `update`, or it raised: the full reduction then decides)."""
        if self._update is None:
            return None
        meta = getattr(obj, "metadata", None)
        old = self.store.get((meta.namespace, meta.name)) if meta is not None else None
        if old is None:
            return None
        try:
            return self._update(obj, old)
        except Exception:  # noqa: BLE001 - the full reduction reports what is wrong
            return None

    async def _relist(self) -> AsyncIterator[ReflectorEvent[T]]:
        # Items are reduced page by page, so the full decoded objects of one page at most
        # are alive at once (never all of a large LIST).
        result = await self.client.list_reduced(
            self.resource,
            namespace=self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            limit=self.page_size,
            page_bytes=self.page_bytes,
            type=self.type,
            reduce=self._reduce,
        )
        # Diffing against known state (a relist, or a resume whose point expired): every
        # event below is inferred, not observed.
        diffing = bool(self.lists or self.store)
        if diffing:
            self.relists += 1
        self.lists += 1
        fresh: dict[Key, T] = {}
        for obj in result.items:
            if obj is not None:
                fresh[key_of(obj)] = obj
        old_store = self.store
        self.store = fresh
        self.resource_version = result.resource_version
        for key, old in old_store.items():
            new = fresh.get(key)
            if new is None or new.metadata.uid != old.metadata.uid:
                yield ReflectorEvent(EventType.DELETED, key, old, old, synthesized=True)
        for key, obj in fresh.items():
            prev = old_store.get(key)
            if prev is None or prev.metadata.uid != obj.metadata.uid:
                yield ReflectorEvent(EventType.ADDED, key, obj, None, synthesized=diffing)
            elif prev.metadata.resourceVersion != obj.metadata.resourceVersion:
                yield ReflectorEvent(EventType.MODIFIED, key, obj, prev, synthesized=True)
        self.synced.set()
        yield ReflectorEvent(EventType.SYNCED, ("", ""), None)

    async def _watch(self) -> AsyncIterator[ReflectorEvent[T]]:
        timeout = random.randint(*self.watch_timeout)  # noqa: S311 - spread reconnects
        if not self.synced.is_set():
            self.synced.set()  # resumed from a known resourceVersion: the store is current
        async for ev in self.client.watch(
            self.resource,
            namespace=self.namespace,
            resource_version=self.resource_version,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            timeout_seconds=timeout,
            type=self.type,
        ):
            if ev.type == "BOOKMARK":
                self.resource_version = str(ev.object) or self.resource_version
                continue
            obj: Any = self._updated(ev.object) if ev.type == "MODIFIED" else None
            if obj is None:
                obj = self._reduce(ev.object)
            if obj is None:
                rv = getattr(getattr(ev.object, "metadata", None), "resourceVersion", "")
                self.resource_version = rv or self.resource_version
                continue
            key = key_of(obj)
            rv = obj.metadata.resourceVersion
            if ev.type == "DELETED":
                old = self.store.pop(key, None)
                self.resource_version = rv or self.resource_version
                yield ReflectorEvent(EventType.DELETED, key, obj, old)
                continue
            old = self.store.get(key)
            self.store[key] = obj
            self.resource_version = rv or self.resource_version
            if old is None:
                yield ReflectorEvent(EventType.ADDED, key, obj, None)
            elif old.metadata.uid != obj.metadata.uid:
                yield ReflectorEvent(EventType.DELETED, key, old, old, synthesized=True)
                yield ReflectorEvent(EventType.ADDED, key, obj, None)
            else:
                yield ReflectorEvent(EventType.MODIFIED, key, obj, old)
