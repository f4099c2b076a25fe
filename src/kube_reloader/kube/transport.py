"""Connections to one API server: the pools, auth headers, proxy, retries, error mapping and
the decoding of answers.

`Transport` owns the HTTP side of `Client`: every request, a LIST page or a watch stream
included, goes through `Transport.open`, which presents the current credentials, retries
what is worth retrying, re-authenticates once after a 401, and turns every failure into a
`kube.errors` class. An injected `RequestObserver` is told what
client-go tells its metrics adapters: every attempt's status code, and every request's
duration with its retries (watches excepted), both with the API server's host.

Watch streams hold their connection for minutes, one each (HTTP/1.1 has no multiplexing), so
they get a connection pool of their own, sized by nothing but the number of watches: with
one shared pool, 15 namespaces x 7 watched kinds filled it, and the LISTs, lease renewals
and PATCHes behind them waited for a connection until they timed out.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from base64 import b64encode
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Protocol, Self, TypedDict
from urllib.parse import unquote, urlencode, urlsplit

import msgspec

from kube_reloader import __version__
from kube_reloader.core import limiting
from kube_reloader.kube import errors, tls, wire
from kube_reloader.kube.config import ConnectionConfig
from kube_reloader.kube.credentials import AuthState

RawObject = dict[str, Any]

USER_AGENT = f"kube-reloader/{__version__}"
#: the code of an attempt that got no answer, as client-go reports it
NO_ANSWER = "<error>"


class RequestObserver(Protocol):
    """Told about requests, as client-go tells its metrics adapters (`rest_client_*`)."""

    def api_request(self, method: str, code: str, host: str) -> None:
        """One attempt ended: its status code, or `NO_ANSWER`; each retry is an attempt."""
        ...

    def api_request_done(self, verb: str, host: str, seconds: float) -> None:
        """One request ended, its retries and reading the answer included (not a watch)."""
        ...


def host_of(server: str) -> str:
    """The host (and port, when given) of the API server's URL, as Go's `url.URL.Host`."""
    return urlsplit(server).netloc.rpartition("@")[2] or "none"


class RetryPolicy(msgspec.Struct, frozen=True):
    """How the client itself retries one request (the reflector has its own loop)."""

    attempts: int = 4
    base_delay: float = 0.2
    max_delay: float = 5.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        if retry_after is not None:
            return min(retry_after, 30.0)
        jitter = random.random()  # noqa: S311 - jitter, not crypto
        return limiting.backoff(attempt, base=self.base_delay, cap=self.max_delay, jitter=jitter)


class TransportOptions(TypedDict, total=False):
    """The keywords of `Transport` besides its config (and so of `Client`)."""

    user_agent: str
    timeout: float
    retry: RetryPolicy | None
    max_connections: int
    observer: RequestObserver | None
    monotonic: Callable[[], float]


class Transport:
    """Connections to one API server, and how requests are sent, retried and decoded. Use as
    an async context manager. `Client` holds one; its pager and watcher send through it.

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
        observer: RequestObserver | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        #: told about every attempt and every request, e.g. to count and time them
        self.observer = observer
        self.host = host_of(config.server)
        self._monotonic = monotonic
        #: the seconds one ordinary request may take; a watch's connect timeout
        self.timeout = timeout
        self._retry = retry or RetryPolicy()
        self._max_connections = max_connections
        #: (requests, watch streams), made together on first use; each takes over the other's
        #: idle connections (a watch starts on its LIST's)
        self._pools: tuple[wire.Pool, wire.Pool] | None = None
        proxy, proxy_auth = _proxy_parts(config.proxy)
        self._server_host, self._server_port, https = wire.Target.of(config.server)
        self._prefix = urlsplit(config.server).path.rstrip("/")
        self._proxy = wire.Target.of(proxy)[:2] if proxy else None
        self._https = https
        # plain http through a proxy names the whole URL on the request line
        origin = config.server.rstrip("/").removesuffix(self._prefix)
        self._absolute = origin if proxy and not https else ""
        # https goes through a CONNECT tunnel: the credentials go on the CONNECT request
        # only; plain http is sent to the proxy itself, the credentials on each request.
        self._connect_headers = tuple((proxy_auth or {}).items()) if https else ()
        self._base_headers = {"User-Agent": user_agent, "Accept": "application/json"}
        if not config.disable_compression:
            self._base_headers["Accept-Encoding"] = "gzip"
        if not https:
            self._base_headers.update(proxy_auth or {})
        self._targets: dict[tuple[bytes | None, bytes | None], wire.Target] = {}
        self._decoders: dict[Any, Any] = {}

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close both pools (open watch streams end with `ConnectionFailed`)."""
        pools, self._pools = self._pools or (), None
        for pool in pools:
            pool.close()

    @property
    def pool(self) -> wire.Pool:
        """The pool of ordinary requests: at most `max_connections` at once."""
        return self._pair()[0]

    @property
    def stream_pool(self) -> wire.Pool:
        """The pool of watch streams: one connection per open watch, no limit."""
        return self._pair()[1]

    def _pair(self) -> tuple[wire.Pool, wire.Pool]:
        if self._pools is None:
            self._pools = wire.Pool(self._max_connections), wire.Pool(0)
            self._pools[0].shares(self._pools[1])
        return self._pools

    # ----------------------------------------------------------------- plumbing

    def _target(self, auth: AuthState) -> wire.Target:
        """Where a request with `auth`'s credentials connects: the server, the proxy and the
        TLS context presenting `auth`'s client certificate (made once per certificate;
        credentials rotate, so only the current one is kept)."""
        key = (auth.cert_pem, auth.key_pem)
        target = self._targets.get(key)
        if target is None:
            target = wire.Target(
                https=self._https,
                host=self._server_host,
                port=self._server_port,
                ssl=tls.client_context(self.config, auth) if self._https else None,
                server_hostname=self.config.tls_server_name or None,
                proxy=self._proxy,
                connect_headers=self._connect_headers,
            )
            self._targets = {key: target}
        return target

    def decoder(self, tp: Any) -> Any:
        """The msgspec JSON decoder of `tp`, made once per type and kept."""
        dec = self._decoders.get(tp)
        if dec is None:
            dec = msgspec.json.Decoder(tp)
            self._decoders[tp] = dec
        return dec

    @contextlib.asynccontextmanager
    async def open(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
        read_timeout: float | None = None,
        retry: bool = True,
        stream: bool = False,
    ) -> AsyncIterator[wire.Response]:
        """Send one request (with auth, retries and error mapping); yield the OK response.

        `stream`: a long-lived response (a watch), sent from the pool of streams, with no
        deadline but `read_timeout` seconds at most between two reads of its body.
        """
        attempt = 0
        reauthed = False
        while True:
            auth = await self.config.credentials.current()
            try:
                resp = await self._send(
                    method, path, auth, params, body, content_type, stream, read_timeout
                )
            except wire.FAILURES as exc:
                err = self._unreachable(method, path, exc)
                if retry and method == "GET" and attempt + 1 < self._retry.attempts:
                    await asyncio.sleep(self._retry.delay(attempt))
                    attempt += 1
                    continue
                raise err from exc
            if self.observer is not None:
                self.observer.api_request(method, str(resp.status), self.host)
            if resp.status < 400:
                try:
                    yield resp
                finally:
                    resp.release()
                return
            api_err = await _error_of(resp, method, path)
            if isinstance(api_err, errors.Unauthorized) and not reauthed:
                reauthed = True
                if await self.config.credentials.invalidate():
                    continue
            if retry and _retryable(api_err, method) and attempt + 1 < self._retry.attempts:
                await asyncio.sleep(self._retry.delay(attempt, api_err.retry_after))
                attempt += 1
                continue
            raise api_err

    async def _send(
        self,
        method: str,
        path: str,
        auth: AuthState,
        params: Mapping[str, str] | None,
        body: bytes | None,
        content_type: str | None,
        stream: bool,
        read_timeout: float | None,
    ) -> wire.Response:
        """One attempt, with `auth`'s credentials. The wire's and the system's errors (a TLS
        context that cannot be built included) are raised for `open` to map."""
        headers = dict(self._base_headers)
        if auth.token:
            headers["Authorization"] = f"Bearer {auth.token}"
        elif auth.basic:
            user_pass = f"{auth.basic[0]}:{auth.basic[1]}".encode()
            headers["Authorization"] = "Basic " + b64encode(user_pass).decode()
        if content_type:
            headers["Content-Type"] = content_type
        target = self._target(auth)
        uri = self._absolute + self._prefix + path
        if params:
            uri += "?" + urlencode(params)
        head = wire.request_head(method, uri, self.host, headers, body)
        pool = self.stream_pool if stream else self.pool
        if stream:
            return await pool.send(
                target, head, body, head_within=self.timeout, read_timeout=read_timeout
            )
        deadline = asyncio.get_running_loop().time() + self.timeout
        return await pool.send(target, head, body, head_within=self.timeout, deadline=deadline)

    def _unreachable(self, method: str, path: str, exc: BaseException) -> errors.KubeError:
        """An attempt that got no answer: told to the observer, as `ConnectionFailed`."""
        if self.observer is not None:
            self.observer.api_request(method, NO_ANSWER, self.host)
        return errors.ConnectionFailed(
            f"{method} {path}: cannot reach {self.config.server}: {describe(exc)}"
        )

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
        retry: bool = True,
    ) -> bytes:
        """Any request; returns the raw response body. `retry=False`: a 429 is the caller's
        to retry (an eviction refused by a disruption budget)."""
        started = self._monotonic()
        try:
            async with self.open(
                method, path, params=params, body=body, content_type=content_type, retry=retry
            ) as resp:
                try:
                    return await resp.read()
                except wire.FAILURES as exc:
                    raise errors.ConnectionFailed(
                        f"{method} {path}: connection broke while reading: {describe(exc)}"
                    ) from exc
        finally:
            if self.observer is not None:
                self.observer.api_request_done(method, self.host, self._monotonic() - started)

    # ----------------------------------------------------------------- helpers

    def decode_raw(self, data: bytes, what: str) -> RawObject:
        """An answer that must be a JSON object, as a dict; `what` names it in the error."""
        obj = self.decode(data, RawObject, what)
        if not isinstance(obj, dict):
            raise errors.KubeError(f"{what}: the answer is not a JSON object")
        return obj

    def decode(self, data: bytes, tp: Any, what: str) -> Any:
        """An answer decoded as `tp`; what does not decode or fit raises `KubeError`."""
        try:
            return self.decoder(tp).decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise errors.KubeError(f"{what}: cannot decode the answer: {exc}") from exc


async def _error_of(resp: wire.Response, method: str, path: str) -> errors.ApiError:
    """The `kube.errors` class of a refused request, from its status and body (read, and the
    connection released)."""
    try:
        data = await resp.read()
    except wire.FAILURES as exc:
        data = str(exc).encode()
    finally:
        resp.release()
    return errors.from_status(
        resp.status,
        data,
        method=method,
        path=path,
        retry_after=resp.headers.get("retry-after"),
        content_type=resp.headers.get("content-type"),
    )


def _retryable(err: errors.ApiError, method: str) -> bool:
    """Worth sending again: a 429, or a server error of a GET."""
    return isinstance(err, errors.TooManyRequests) or (
        isinstance(err, errors.ServerError) and method == "GET"
    )


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


def describe(exc: BaseException) -> str:
    """The first line of an exception's message, or its class name if it has none."""
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0]
