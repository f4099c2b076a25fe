"""WATCH streams: newline-delimited events of any size, decoded into the caller's type.

`Watcher` owns the WATCH verb of `Client`, opening each stream through the `Transport` it
holds (from its pool of streams). Each event's object is decoded straight from its bytes,
BOOKMARK events keep only their resourceVersion, and a watch ERROR event is raised as the
matching `kube.errors` class.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any, Generic, TypeVar

import msgspec

from kube_reloader.kube import errors, wire
from kube_reloader.kube.resources import Resource
from kube_reloader.kube.transport import RawObject, Transport, describe

log = logging.getLogger(__name__)

T = TypeVar("T")

MAX_LINE_BYTES = 16 * 1024 * 1024  # a watch event line; etcd's own limit is 1.5 MiB per object


class WatchEvent(msgspec.Struct, Generic[T], frozen=True):
    """One watch event. `type` is ADDED, MODIFIED, DELETED or BOOKMARK."""

    type: str
    object: T
    raw_type: str = ""


class _RawEvent(msgspec.Struct):
    type: str
    object: msgspec.Raw


class _TypedEvent(msgspec.Struct, Generic[T]):
    """An event decoded in one pass, its object as the caller's type."""

    type: str
    object: T


#: the events that carry an object of the watched kind (decoded in one pass)
_OBJECT_EVENTS = frozenset({"ADDED", "MODIFIED", "DELETED"})


class _Meta(msgspec.Struct):
    resourceVersion: str = ""
    name: str = ""
    namespace: str = ""


class _Bookmark(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)


class Watcher:
    """The WATCH verb of `Client`: each stream a GET through `transport`, from its pool of
    streams, with the same credentials, retries and error mapping as any request."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    async def watch(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
        allow_bookmarks: bool = True,
        type: Any = RawObject,
    ) -> AsyncIterator[WatchEvent[Any]]:
        """Stream watch events; each object decoded as `type` straight from its bytes.

        Ends when the server closes the stream (after `timeout_seconds`). A watch ERROR
        event is raised as the matching `ApiError` (`Gone` for an expired resourceVersion).
        BOOKMARK events carry only a resourceVersion: their `object` is a `str`.
        """
        params = _watch_params(
            timeout_seconds=timeout_seconds,
            allow_bookmarks=allow_bookmarks,
            resource_version=resource_version,
            label_selector=label_selector,
            field_selector=field_selector,
        )
        tr = self.transport
        events = _Events(
            resource,
            tr.decoder(type),
            tr.decoder(_RawEvent),
            tr.decoder(_Bookmark),
            tr.decoder(_TypedEvent[type]),
        )
        path = resource.path(namespace)
        read_timeout = timeout_seconds + 30
        async with tr.open(
            "GET", path, params=params, read_timeout=read_timeout, stream=True
        ) as resp:
            lines = _Lines()
            try:
                async for chunk in resp.chunks():
                    for line in lines.feed(chunk):
                        yield events.decode(line)
                    lines.check()
                for line in lines.rest():
                    yield events.decode(line)
            except wire.FAILURES as exc:
                raise errors.ConnectionFailed(
                    f"WATCH {resource}: stream broke: {describe(exc)}"
                ) from exc


def _watch_params(
    *,
    timeout_seconds: int,
    allow_bookmarks: bool,
    resource_version: str | None,
    label_selector: str | None,
    field_selector: str | None,
) -> dict[str, str]:
    """The query of a WATCH request."""
    params: dict[str, str] = {
        "watch": "true",
        "timeoutSeconds": str(timeout_seconds),
    }
    if allow_bookmarks:
        params["allowWatchBookmarks"] = "true"
    if resource_version:
        params["resourceVersion"] = resource_version
    if label_selector:
        params["labelSelector"] = label_selector
    if field_selector:
        params["fieldSelector"] = field_selector
    return params


class _Events(msgspec.Struct, frozen=True):
    """The lines of one resource's watch stream as events, with the decoders of its objects
    (the caller's type), of the event envelope and of a bookmark (metadata only)."""

    resource: Resource
    objects: Any
    envelopes: Any
    bookmarks: Any
    #: the decoder of a whole event with its object as the caller's type (one pass)
    typed: Any

    def decode(self, line: bytes) -> WatchEvent[Any]:
        """One line as an event. A watch ERROR event is raised as its `ApiError`; an object
        that does not fit its type is logged and stands as a BOOKMARK of its resourceVersion;
        a line that is not an event raises `KubeError`.

        An ADDED, MODIFIED or DELETED event whose object fits is decoded in one pass; any
        other line (a bookmark, an error, an object that does not fit) the long way, by its
        envelope first."""
        try:
            ev = self.typed.decode(line)
        except msgspec.ValidationError:
            ev = None
        except msgspec.DecodeError as exc:
            raise errors.KubeError(f"WATCH {self.resource}: cannot decode an event: {exc}") from exc
        if ev is not None and ev.type in _OBJECT_EVENTS:
            return WatchEvent(ev.type, ev.object)
        return self._decode_envelope(line)

    def _decode_envelope(self, line: bytes) -> WatchEvent[Any]:
        try:
            raw = self.envelopes.decode(line)
            if raw.type == "ERROR":
                status = msgspec.json.decode(raw.object)
                raise errors.from_watch_error(status)
            if raw.type == "BOOKMARK":
                bm = self.bookmarks.decode(raw.object)
                return WatchEvent("BOOKMARK", bm.metadata.resourceVersion)
            try:
                obj = self.objects.decode(raw.object)
            except msgspec.ValidationError as exc:
                # well-formed JSON whose fields do not fit the projection (a custom kind
                # without a schema): skip this object, keep watching
                meta = self.bookmarks.decode(raw.object).metadata
                log.error(
                    "watch event skipped: the object does not fit its type",
                    extra={
                        "resource": str(self.resource),
                        "namespace": meta.namespace,
                        "object": meta.name,
                        "error": str(exc)[:300],
                    },
                )
                return WatchEvent("BOOKMARK", meta.resourceVersion)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise errors.KubeError(f"WATCH {self.resource}: cannot decode an event: {exc}") from exc
        return WatchEvent(raw.type, obj)


class _Lines:
    """Splits a chunked body into newline-delimited records of any length (up to a bound),
    without an async generator of its own: a chunk that is one whole record, the common
    case, is passed on without being copied into the buffer."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        """The records `chunk` completes, in order."""
        buf = self.buf
        if not buf and chunk.find(b"\n") == len(chunk) - 1:  # one whole record
            return [chunk[:-1]] if len(chunk) > 1 else []
        buf.extend(chunk)
        out: list[bytes] = []
        start = 0
        while True:
            end = buf.find(b"\n", start)
            if end < 0:
                break
            if end > start:
                out.append(bytes(buf[start:end]))
            start = end + 1
        del buf[:start]
        return out

    def check(self) -> None:
        """Raise once the record being gathered is over the bound (after the records
        before it were passed on)."""
        if len(self.buf) > MAX_LINE_BYTES:
            raise errors.KubeError(f"watch event larger than {MAX_LINE_BYTES} bytes")

    def rest(self) -> list[bytes]:
        """What is left when the body ends: a last record without its newline."""
        return [bytes(self.buf)] if self.buf.strip() else []
