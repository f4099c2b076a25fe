"""An asyncio Kubernetes API client: typed reads, every write verb, and streaming watches.

Built on aiohttp (connection reuse, streaming bodies, client certificates) and msgspec (bytes
are decoded straight into the caller's projection type, so a watch on 10,000 Deployments
never materialises 10,000 full objects). Every failure surfaces as a `kube.errors` class.

Watch streams hold their connection for minutes, one each (HTTP/1.1 has no multiplexing), so
they get a connection pool of their own, sized by nothing but the number of watches: with
one shared pool, 15 namespaces x 7 watched kinds filled it, and the LISTs, lease renewals
and PATCHes behind them waited for a connection until they timed out.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import ssl
import tempfile
from base64 import b64encode
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Generic, TypeVar, overload
from urllib.parse import unquote, urlsplit

import aiohttp
import msgspec

from kube_reloader import __version__
from kube_reloader.kube import errors
from kube_reloader.kube.config import AuthState, ConnectionConfig
from kube_reloader.kube.resources import Resource

T = TypeVar("T")
R = TypeVar("R")
RawObject = dict[str, Any]

USER_AGENT = f"kube-reloader/{__version__}"
DEFAULT_PAGE_SIZE = 500
#: a LIST page of about this many bytes at most when paging by size (see `next_page_limit`)
DEFAULT_PAGE_BYTES = 2 * 1024 * 1024
#: the first page when paging by size: small enough for large objects, one step from the cap
FIRST_PAGE_LIMIT = 50
MAX_LINE_BYTES = 16 * 1024 * 1024  # a watch event line; etcd's own limit is 1.5 MiB per object


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


class PatchType(StrEnum):
    """The patch content types the API server understands."""

    STRATEGIC = "application/strategic-merge-patch+json"
    MERGE = "application/merge-patch+json"
    JSON = "application/json-patch+json"
    APPLY = "application/apply-patch+yaml"


class ListMeta(msgspec.Struct, omit_defaults=True):
    resourceVersion: str = ""
    # `continue` is a Python keyword, hence the rename.
    continue_: str = msgspec.field(default="", name="continue")
    remainingItemCount: int | None = None


class ListPage(msgspec.Struct, Generic[T]):
    """One page of a LIST: the items decoded as `T`, and the list metadata."""

    items: list[T] | None = None
    metadata: ListMeta = msgspec.field(default_factory=ListMeta)


@dataclass(frozen=True, slots=True)
class ObjectList(Generic[T]):
    """All pages of a LIST, with the resourceVersion to start a watch from."""

    items: list[T]
    resource_version: str


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


class _Bookmark(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How the client itself retries one request (the reflector has its own loop)."""

    attempts: int = 4
    base_delay: float = 0.2
    max_delay: float = 5.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        if retry_after is not None:
            return min(retry_after, 30.0)
        cap = min(self.max_delay, self.base_delay * (2**attempt))
        return random.uniform(cap / 2, cap)  # noqa: S311 - jitter, not crypto


class Client:
    """Connections to one API server. Use as an async context manager.

    Ordinary requests share a pool of at most `max_connections`; each watch stream has a
    connection of its own, from a separate pool, so open watches never take a connection
    that a read, a write or a lease renewal needs. `close` closes both.
    """

    def __init__(
        self,
        config: ConnectionConfig,
        *,
        user_agent: str = USER_AGENT,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        max_connections: int = 100,
        observer: Callable[[str, str], None] | None = None,
    ) -> None:
        self.config = config
        #: told (verb, status code or "error") after every request, e.g. to count them
        self.observer = observer
        self._user_agent = user_agent
        self._timeout = timeout
        self._retry = retry or RetryPolicy()
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self._stream_session: aiohttp.ClientSession | None = None
        self._proxy, proxy_auth = _proxy_parts(config.proxy)
        # https goes through a CONNECT tunnel: the credentials go on the CONNECT request
        # only; plain http is sent to the proxy itself, the credentials on each request.
        tunnel = config.server.startswith("https://")
        self._connect_headers = proxy_auth if tunnel else None
        self._proxy_auth = {} if tunnel else proxy_auth or {}
        self._ssl_cache: dict[tuple[bytes | None, bytes | None], ssl.SSLContext] = {}
        self._decoders: dict[Any, Any] = {}

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close both pools (open watch streams end with `ConnectionFailed`)."""
        sessions = (self._session, self._stream_session)
        self._session = self._stream_session = None
        for session in sessions:
            if session is not None:
                await session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        """The pool of ordinary requests: at most `max_connections` at once."""
        if self._session is None or self._session.closed:
            self._session = self._new_session(self._max_connections)
        return self._session

    @property
    def stream_session(self) -> aiohttp.ClientSession:
        """The pool of watch streams: one connection per open watch, no limit."""
        if self._stream_session is None or self._stream_session.closed:
            self._stream_session = self._new_session(0)
        return self._stream_session

    def _new_session(self, limit: int) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(
            base_url=None,
            connector=aiohttp.TCPConnector(limit=limit),
            headers={"User-Agent": self._user_agent, "Accept": "application/json"},
            skip_auto_headers=("Accept-Encoding",) if self.config.disable_compression else (),
            auto_decompress=True,
        )

    # ----------------------------------------------------------------- plumbing

    def _ssl_context(self, auth: AuthState) -> ssl.SSLContext | bool:
        if not self.config.server.startswith("https://"):
            return False
        key = (auth.cert_pem, auth.key_pem)
        ctx = self._ssl_cache.get(key)
        if ctx is not None:
            return ctx
        if self.config.insecure_skip_tls_verify:
            ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        elif self.config.ca_pem:
            # Trust exactly the cluster's CA, not the system store.
            try:
                ctx = ssl.create_default_context(
                    ssl.Purpose.SERVER_AUTH, cadata=self.config.ca_pem.decode("ascii")
                )
            except (ssl.SSLError, UnicodeDecodeError, ValueError) as exc:
                raise errors.ConfigError(
                    f"{self.config.source or self.config.server}: "
                    "certificate authority is not valid PEM"
                ) from exc
        else:
            ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        if auth.cert_pem and auth.key_pem:
            _load_cert_chain(ctx, auth.cert_pem, auth.key_pem, self.config.source)
        self._ssl_cache = {key: ctx}  # credentials rotate; keep only the current context
        return ctx

    def _decoder(self, tp: Any) -> Any:
        dec = self._decoders.get(tp)
        if dec is None:
            dec = msgspec.json.Decoder(tp)
            self._decoders[tp] = dec
        return dec

    @contextlib.asynccontextmanager
    async def _open(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
        client_timeout: aiohttp.ClientTimeout | None = None,
        retry: bool = True,
        stream: bool = False,
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        """Send one request (with auth, retries and error mapping); yield the OK response.

        `stream`: a long-lived response (a watch), sent from the pool of streams.
        """
        url = self.config.server + path
        session = self.stream_session if stream else self.session
        attempt = 0
        reauthed = False
        while True:
            auth = await self.config.credentials.current()
            headers: dict[str, str] = {}
            if auth.token:
                headers["Authorization"] = f"Bearer {auth.token}"
            basic = aiohttp.BasicAuth(*auth.basic) if auth.basic else None
            if content_type:
                headers["Content-Type"] = content_type
            headers.update(self._proxy_auth)
            kwargs: dict[str, Any] = {}
            if self.config.tls_server_name:
                kwargs["server_hostname"] = self.config.tls_server_name
            try:
                resp = await session.request(
                    method,
                    url,
                    params=params,
                    data=body,
                    headers=headers,
                    auth=basic,
                    ssl=self._ssl_context(auth),
                    timeout=client_timeout or aiohttp.ClientTimeout(total=self._timeout),
                    proxy=self._proxy,
                    proxy_headers=self._connect_headers,
                    **kwargs,
                )
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                if self.observer is not None:
                    self.observer(method, "error")
                err: errors.KubeError = errors.ConnectionFailed(
                    f"{method} {path}: cannot reach {self.config.server}: {_describe(exc)}"
                )
                if retry and method == "GET" and attempt + 1 < self._retry.attempts:
                    await asyncio.sleep(self._retry.delay(attempt))
                    attempt += 1
                    continue
                raise err from exc
            if self.observer is not None:
                self.observer(method, str(resp.status))
            if resp.status < 400:
                try:
                    yield resp
                finally:
                    resp.release()
                return
            try:
                data = await resp.read()
            except (aiohttp.ClientError, TimeoutError) as exc:
                data = str(exc).encode()
            finally:
                resp.release()
            api_err = errors.from_status(
                resp.status,
                data,
                method=method,
                path=path,
                retry_after=resp.headers.get("Retry-After"),
            )
            if isinstance(api_err, errors.Unauthorized) and not reauthed:
                reauthed = True
                if await self.config.credentials.invalidate():
                    continue
            retryable = isinstance(api_err, errors.TooManyRequests) or (
                isinstance(api_err, errors.ServerError) and method == "GET"
            )
            if retry and retryable and attempt + 1 < self._retry.attempts:
                await asyncio.sleep(self._retry.delay(attempt, api_err.retry_after))
                attempt += 1
                continue
            raise api_err

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
    ) -> bytes:
        """Any request; returns the raw response body."""
        async with self._open(
            method, path, params=params, body=body, content_type=content_type
        ) as resp:
            try:
                return await resp.read()
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise errors.ConnectionFailed(
                    f"{method} {path}: connection broke while reading: {_describe(exc)}"
                ) from exc

    # ----------------------------------------------------------------- reads

    @overload
    async def get(
        self, resource: Resource, name: str, *, namespace: str | None = None
    ) -> RawObject: ...

    @overload
    async def get(
        self, resource: Resource, name: str, *, namespace: str | None = None, type: type[T]
    ) -> T: ...

    async def get(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        type: Any = RawObject,
    ) -> Any:
        """GET one object, decoded as `type` (a plain dict by default)."""
        data = await self.request("GET", resource.path(namespace, name))
        return self._decode(data, type, f"{resource.kind} {namespace or ''}/{name}")

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
        decoder = self._decoder(ListPage[type])
        while True:
            data = await self.request("GET", path, params=params)
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

    # ----------------------------------------------------------------- writes

    async def create(
        self,
        resource: Resource,
        body: Mapping[str, Any],
        *,
        namespace: str | None = None,
        field_manager: str | None = None,
        dry_run: bool = False,
    ) -> RawObject:
        """POST a new object; `namespace` defaults to the body's own."""
        ns = namespace or _body_namespace(body)
        params = _write_params(field_manager, dry_run)
        data = await self.request(
            "POST",
            resource.path(ns),
            params=params,
            body=msgspec.json.encode(body),
            content_type="application/json",
        )
        return self._decode_raw(data, f"created {resource.kind}")

    async def update(
        self,
        resource: Resource,
        body: Mapping[str, Any],
        *,
        namespace: str | None = None,
        field_manager: str | None = None,
        subresource: str | None = None,
    ) -> RawObject:
        """PUT a whole object (optimistic concurrency through its resourceVersion)."""
        name = str((body.get("metadata") or {}).get("name") or "")
        ns = namespace or _body_namespace(body)
        data = await self.request(
            "PUT",
            resource.path(ns, name, subresource),
            params=_write_params(field_manager, False),
            body=msgspec.json.encode(body),
            content_type="application/json",
        )
        return self._decode_raw(data, f"{resource.kind} {ns or ''}/{name}")

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.STRATEGIC,
        field_manager: str | None = None,
        force: bool | None = None,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> RawObject:
        """PATCH one object with any patch type; returns the object after the patch."""
        params = _write_params(field_manager, dry_run)
        if force is not None:
            params["force"] = "true" if force else "false"
        data = await self.request(
            "PATCH",
            resource.path(namespace, name, subresource),
            params=params,
            body=msgspec.json.encode(patch),
            content_type=patch_type.value,
        )
        return self._decode_raw(data, f"{resource.kind} {namespace or ''}/{name}")

    async def delete(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        propagation_policy: str | None = None,
        grace_period_seconds: int | None = None,
        preconditions_uid: str | None = None,
    ) -> RawObject:
        """DELETE one object (`propagation_policy`: Foreground, Background or Orphan)."""
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if preconditions_uid:
            options["preconditions"] = {"uid": preconditions_uid}
        data = await self.request(
            "DELETE",
            resource.path(namespace, name),
            body=msgspec.json.encode(options),
            content_type="application/json",
        )
        return self._decode_raw(data, f"{resource.kind} {namespace or ''}/{name}")

    # ----------------------------------------------------------------- watch

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
                        obj = decoder.decode(raw.object)
                    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                        raise errors.KubeError(
                            f"WATCH {resource}: cannot decode an event: {exc}"
                        ) from exc
                    yield WatchEvent(raw.type, obj)
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise errors.ConnectionFailed(
                    f"WATCH {resource}: stream broke: {_describe(exc)}"
                ) from exc

    # ----------------------------------------------------------------- helpers

    def _decode_raw(self, data: bytes, what: str) -> RawObject:
        obj = self._decode(data, RawObject, what)
        if not isinstance(obj, dict):
            raise errors.KubeError(f"{what}: the answer is not a JSON object")
        return obj

    def _decode(self, data: bytes, tp: Any, what: str) -> Any:
        try:
            return self._decoder(tp).decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise errors.KubeError(f"{what}: cannot decode the answer: {exc}") from exc


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


def _write_params(field_manager: str | None, dry_run: bool) -> dict[str, str]:
    params: dict[str, str] = {}
    if field_manager:
        params["fieldManager"] = field_manager
    if dry_run:
        params["dryRun"] = "All"
    return params


def _body_namespace(body: Mapping[str, Any]) -> str | None:
    ns = (body.get("metadata") or {}).get("namespace")
    return str(ns) if ns else None


def _proxy_parts(proxy: str | None) -> tuple[str | None, dict[str, str] | None]:
    """The proxy URL without credentials, and the header that carries them, as Go sends it."""
    if not proxy:
        return None, None
    parts = urlsplit(proxy)
    if parts.username is None:
        return proxy, None
    user_pass = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
    header = "Basic " + b64encode(user_pass.encode()).decode()
    bare = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
    return bare, {"Proxy-Authorization": header}


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0]


def _load_cert_chain(ctx: ssl.SSLContext, cert: bytes, key: bytes, source: str) -> None:
    """`ssl` only loads client certificates from files: use a private, short-lived dir."""
    with tempfile.TemporaryDirectory(prefix="kube-reloader-tls-") as tmp:
        cert_path = os.path.join(tmp, "tls.crt")
        key_path = os.path.join(tmp, "tls.key")
        for path, data in ((cert_path, cert), (key_path, key)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        try:
            ctx.load_cert_chain(cert_path, key_path)
        except ssl.SSLError as exc:
            raise errors.ConfigError(
                f"{source}: client certificate/key cannot be loaded ({exc.reason})"
            ) from exc
