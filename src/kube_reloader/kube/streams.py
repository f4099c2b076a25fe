"""WATCH streams: newline-delimited events of any size, decoded into the caller's type.

Each event's object is decoded straight from its bytes, BOOKMARK events keep only their
resourceVersion, and a watch ERROR event is raised as the matching `kube.errors` class.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import aiohttp
import msgspec

from kube_reloader.kube import errors
from kube_reloader.kube.resources import Resource
from kube_reloader.kube.transport import RawObject, Transport, describe

log = logging.getLogger(__name__)

T = TypeVar("T")

MAX_LINE_BYTES = 16 * 1024 * 1024  # a watch event line; etcd's own limit is 1.5 MiB per object


@dataclass(frozen=True, slots=True)
class WatchEvent(Generic[T]):
    """One watch event. `type` is ADDED, MODIFIED, DELETED or BOOKMARK."""

    type: str
    object: T
    raw_type: str = ""


class _RawEvent(msgspec.Struct):
    type: str
    object: msgspec.Raw


class _Meta(msgspec.Struct):
    resourceVersion: str = ""
    name: str = ""
    namespace: str = ""


class _Bookmark(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)


class Watcher(Transport):
    """The WATCH verb of `Client`."""

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
        decoder = self._decoder(type)
        raw_decoder = self._decoder(_RawEvent)
        bookmark_decoder = self._decoder(_Bookmark)
        timeout = aiohttp.ClientTimeout(
            total=None, connect=self._timeout, sock_read=timeout_seconds + 30
        )
        path = resource.path(namespace)
        async with self._open(
            "GET", path, params=params, client_timeout=timeout, stream=True
        ) as resp:
            try:
                async for line in _lines(resp.content):
                    try:
                        raw = raw_decoder.decode(line)
                        if raw.type == "ERROR":
                            status = msgspec.json.decode(raw.object)
                            raise errors.from_watch_error(status)
                        if raw.type == "BOOKMARK":
                            bm = bookmark_decoder.decode(raw.object)
                            yield WatchEvent("BOOKMARK", bm.metadata.resourceVersion)
                            continue
                        try:
                            obj = decoder.decode(raw.object)
                        except msgspec.ValidationError as exc:
                            # well-formed JSON whose fields do not fit the projection (a
                            # custom kind without a schema): skip this object, keep watching
                            meta = bookmark_decoder.decode(raw.object).metadata
                            log.error(
                                "watch event skipped: the object does not fit its type",
                                extra={"resource": str(resource), "namespace": meta.namespace,
                                       "object": meta.name, "error": str(exc)[:300]},
                            )  # fmt: skip
                            yield WatchEvent("BOOKMARK", meta.resourceVersion)
                            continue
                    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                        raise errors.KubeError(
                            f"WATCH {resource}: cannot decode an event: {exc}"
                        ) from exc
                    yield WatchEvent(raw.type, obj)
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise errors.ConnectionFailed(
                    f"WATCH {resource}: stream broke: {describe(exc)}"
                ) from exc


async def _lines(stream: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    """Split a chunked body into newline-delimited records of any length (up to a bound)."""
    buf = bytearray()
    async for chunk in stream.iter_any():
        buf.extend(chunk)
        start = 0
        while True:
            end = buf.find(b"\n", start)
            if end < 0:
                break
            if end > start:
                yield bytes(buf[start:end])
            start = end + 1
        del buf[:start]
        if len(buf) > MAX_LINE_BYTES:
            raise errors.KubeError(f"watch event larger than {MAX_LINE_BYTES} bytes")
    if buf.strip():
        yield bytes(buf)
