"""LIST, page by page: `limit` and `continue`, pages sized by count or by bytes.

`Pager` owns the LIST verbs of `Client` (`list_pages`, `list`, `list_reduced`), sending each
page through the `Transport` it holds. Items are decoded as the caller's type a page at a
time, and `list_reduced` reduces each page before the next one is fetched, so a LIST of many
large objects never holds them all.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, Generic, TypeVar, overload

import msgspec

from kube_reloader.kube import errors
from kube_reloader.kube.resources import Resource
from kube_reloader.kube.transport import RawObject, Transport

T = TypeVar("T")
R = TypeVar("R")

DEFAULT_PAGE_SIZE = 500
#: a LIST page of about this many bytes at most when paging by size (see `next_page_limit`)
DEFAULT_PAGE_BYTES = 2 * 1024 * 1024
#: the first page when paging by size: small enough for large objects, one step from the cap
FIRST_PAGE_LIMIT = 50


def next_page_limit(asked: int, got: int, body_bytes: int, target_bytes: int, cap: int) -> int:
    """How many items the next LIST page asks for, so that it is about `target_bytes` long.

    `asked` items were asked for and `got` came back in `body_bytes`: the next page's size
    is estimated from their average, at least 1 and at most `cap`. The body, its decoded
    objects and their reduced forms are alive together while a page is handled, so pages
    of a few MiB keep a LIST of 10,000 large Secrets from costing tens of MiB at once,
    while lists of small objects still come 500 at a time.
    """
    if got < asked or body_bytes <= 0:
        return asked  # the last page (or an empty one): nothing to learn from
    per_item = body_bytes / got
    return max(1, min(cap, int(target_bytes / per_item)))


class ListMeta(msgspec.Struct, omit_defaults=True):
    resourceVersion: str = ""
    # `continue` is a Python keyword, hence the rename.
    continue_: str = msgspec.field(default="", name="continue")
    remainingItemCount: int | None = None


class ListPage(msgspec.Struct, Generic[T]):
    """One page of a LIST: the items decoded as `T`, and the list metadata."""

    items: list[T] | None = None
    metadata: ListMeta = msgspec.field(default_factory=ListMeta)


class ObjectList(msgspec.Struct, Generic[T], frozen=True):
    """All pages of a LIST, with the resourceVersion to start a watch from."""

    items: list[T]
    resource_version: str


class Pager:
    """The LIST verbs of `Client`: every page a GET through `transport`, with its retries."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    async def list_pages(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
        page_bytes: int | None = None,
        resource_version: str | None = None,
        type: Any = RawObject,
    ) -> AsyncIterator[ListPage[Any]]:
        """LIST page by page (`limit` + `continue`), decoding items as `type`.

        With `page_bytes`, pages are sized by bytes rather than by count: the first asks
        for `FIRST_PAGE_LIMIT` items, each next one for as many as should fill `page_bytes`
        judging by the last page, never more than `limit`.
        """
        params: dict[str, str] = {}
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        asked = min(limit, FIRST_PAGE_LIMIT) if limit and page_bytes else limit
        if asked:
            params["limit"] = str(asked)
        if resource_version is not None:
            params["resourceVersion"] = resource_version
        path = resource.path(namespace)
        decoder = self.transport.decoder(ListPage[type])
        while True:
            data = await self.transport.request("GET", path, params=params)
            try:
                page: ListPage[Any] = decoder.decode(data)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                raise errors.KubeError(f"LIST {resource}: cannot decode the answer: {exc}") from exc
            size = len(data)
            del data  # the page holds on to what it needs (raw views into the body)
            yield page
            token, got = page.metadata.continue_, len(page.items or ())
            del page  # neither the page nor its body is alive while the next one is fetched
            if not token:
                return
            params = {k: v for k, v in params.items() if k != "resourceVersion"}
            params["continue"] = token
            if asked and page_bytes:
                asked = next_page_limit(asked, got, size, page_bytes, limit)
                params["limit"] = str(asked)

    @overload
    async def list(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
    ) -> ObjectList[RawObject]: ...

    @overload
    async def list(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
        type: type[T],
    ) -> ObjectList[T]: ...

    async def list(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
        type: Any = RawObject,
    ) -> ObjectList[Any]:
        """LIST every page; returns all items and the list's resourceVersion."""
        return await self.list_reduced(
            resource,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            limit=limit,
            type=type,
            reduce=None,
        )

    async def list_reduced(
        self,
        resource: Resource,
        *,
        type: Any,
        reduce: Callable[[Any], R] | None,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
        page_bytes: int | None = None,
    ) -> ObjectList[R]:
        """LIST every page, passing each item through `reduce` as its page arrives.

        Only one decoded page is alive at a time: a LIST of 10,000 large Secrets reduced to
        hashes never holds their data all at once. With `page_bytes`, pages are sized by
        bytes (see `list_pages`), so neither does one page of them.

        If the continue token expires mid-way (410), the whole list restarts once, as a
        consistent snapshot is the point of returning a single resourceVersion.
        """
        for attempt in range(2):
            items: list[Any] = []
            rv = ""
            try:
                async for page in self.list_pages(
                    resource,
                    namespace=namespace,
                    label_selector=label_selector,
                    field_selector=field_selector,
                    limit=limit,
                    page_bytes=page_bytes,
                    type=type,
                ):
                    if reduce is None:
                        items.extend(page.items or ())
                    else:
                        items.extend(reduce(item) for item in page.items or ())
                    rv = rv or page.metadata.resourceVersion
                    del page  # not alive while the next page is fetched and decoded
            except errors.Gone:
                if attempt:
                    raise
                continue
            return ObjectList(items, rv)
        raise AssertionError("unreachable")  # pragma: no cover
