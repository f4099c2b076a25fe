"""HTTP/1.1 answers for the controller's own listeners (`/metrics`, the probes, diagnostics):
llhttp's parser (httptools) on an asyncio protocol, behind `serving`'s guard.

These listeners answer a handful of GETs with small bodies, so they need no framework: a
route is a path and a handler from the query to a `Reply`. Importing a web framework cost
the controller a fifth of a second of CPU at every start (issue 33); the admission webhook's
listener, which reads request bodies, still runs on aiohttp, imported only in that mode.

What a client may cost is bounded by the guard (`serving._Guard`: connection caps, header
timeout and size); here, an idle keep-alive connection is closed after `keepalive` seconds,
requests on one connection are answered one after the other in order, and a request that
does not parse gets a 400 and the connection closed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from functools import partial
from http import HTTPStatus
from typing import cast
from urllib.parse import parse_qsl

import httptools
import msgspec

log = logging.getLogger(__name__)

TEXT = "text/plain; charset=utf-8"


class Reply(msgspec.Struct, frozen=True):
    """One answer: its status, body, content type and any further headers."""

    status: int = 200
    body: bytes = b""
    content_type: str = TEXT
    headers: tuple[tuple[str, str], ...] = ()

    @staticmethod
    def text(text: str, status: int = 200, headers: tuple[tuple[str, str], ...] = ()) -> Reply:
        return Reply(status, text.encode(), TEXT, headers)


#: a route's handler: the request's query (first value of each name) -> the answer, or a
#: future of it (work done off the loop); no handler starts a task (the supervisor owns them)
Handler = Callable[[Mapping[str, str]], "Reply | asyncio.Future[Reply]"]
Routes = dict[str, Handler]

NOT_FOUND = Reply.text("404: Not Found", 404)
NOT_ALLOWED = Reply.text("405: Method Not Allowed", 405, (("Allow", "GET, HEAD"),))
BAD_REQUEST = Reply.text("400: Bad Request", 400)
FAILED = Reply.text("500: Internal Server Error", 500)


def split_addr(addr: str, *, default_host: str = "0.0.0.0") -> tuple[str, int]:  # noqa: S104
    """`:9090`, `127.0.0.1:9090` or `[::1]:9090` -> (host, port)."""
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"{addr!r} is not host:port")
    host = host.strip("[]") or default_host
    return host, int(port)


_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def http_date(second: int) -> str:
    """RFC 9110's IMF-fixdate of `second` (`Sun, 06 Nov 1994 08:49:37 GMT`), in English
    whatever the locale (the `email` package that formats it too costs 2 ms to import)."""
    t = time.gmtime(second)
    return (
        f"{_DAYS[t.tm_wday]}, {t.tm_mday:02d} {_MONTHS[t.tm_mon - 1]} {t.tm_year:04d} "
        f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} GMT"
    )


class _Date:
    """The `Date` header, formatted once a second."""

    second = -1
    value = ""

    @classmethod
    def now(cls) -> str:
        second = int(time.time())
        if second != cls.second:
            cls.second, cls.value = second, http_date(second)
        return cls.value


def encode(reply: Reply, *, keep_alive: bool, head_only: bool = False) -> bytes:
    """The bytes of `reply` on the wire."""
    try:
        reason = HTTPStatus(reply.status).phrase
    except ValueError:
        reason = ""
    lines = [
        f"HTTP/1.1 {reply.status} {reason}",
        f"Content-Type: {reply.content_type}",
        f"Content-Length: {len(reply.body)}",
        f"Date: {_Date.now()}",
        *(f"{k}: {v}" for k, v in reply.headers),
    ]
    if not keep_alive:
        lines.append("Connection: close")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head if head_only else head + reply.body


def then(future: asyncio.Future[bytes], reply: Callable[[bytes], Reply]) -> asyncio.Future[Reply]:
    """A future of `reply(result)` once `future` is done (its error passed on)."""
    out: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()

    def done(f: asyncio.Future[bytes]) -> None:
        if out.cancelled():
            return
        if f.cancelled():
            out.cancel()
        elif f.exception() is not None:
            out.set_exception(f.exception())  # type: ignore[arg-type]
        else:
            out.set_result(reply(f.result()))

    future.add_done_callback(done)
    return out


class Answering(asyncio.Protocol):
    """One connection: parse its requests, answer each from `routes`, in order. No task:
    an answer that is not ready at once is a future whose callback writes it."""

    def __init__(self, routes: Routes, keepalive: float) -> None:
        self.routes = routes
        self.keepalive = keepalive
        self.loop = asyncio.get_running_loop()
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.url = b""
        #: (method, url, keep-alive, the answer if it is fixed already)
        self.pending: deque[tuple[bytes, bytes, bool, Reply | None]] = deque()
        self.waiting: asyncio.Future[Reply] | None = None  # the answer being made
        self.idle: asyncio.TimerHandle | None = None
        #: the client is not reading its answers: read no more requests, answer no more
        self.blocked = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        # The idle timer runs on: only an answer re-arms it, so a request whose body never
        # comes is closed `keepalive` seconds after the last answer like an idle connection.
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:  # answered as HTTP/1.1, then the connection ends
            self._last(None)
        except httptools.HttpParserError:
            self._last(BAD_REQUEST)

    def pause_writing(self) -> None:
        """The answers pile up unread: stop reading requests until they drain, so a client
        that pipelines requests and reads nothing holds one buffer's worth, not more."""
        self.blocked = True
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self.blocked = False
        if self._open():
            assert self.transport is not None
            self.transport.resume_reading()
            self._answer_next()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self.pending.clear()
        if self.waiting is not None:
            self.waiting.cancel()
            self.waiting = None

    # parser callbacks
    def on_message_begin(self) -> None:
        self.url = b""

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_message_complete(self) -> None:
        method, keep = self.parser.get_method(), self.parser.should_keep_alive()
        self.pending.append((method, self.url, keep, None))
        if self.waiting is None:
            self._answer_next()

    def _answer_next(self) -> None:
        """Answer the waiting requests in order, until one's answer is not ready yet."""
        while self.pending and self.waiting is None and not self.blocked and self._open():
            method, url, keep, fixed = self.pending.popleft()
            reply = fixed or self._reply(method, url)
            if isinstance(reply, Reply):
                self._write(reply, method, keep)
                continue
            self.waiting = reply
            reply.add_done_callback(partial(self._ready, method=method, keep=keep))
        if self.waiting is None:  # idle, or blocked by a client not reading: both time out
            self._arm()

    def _ready(self, answer: asyncio.Future[Reply], *, method: bytes, keep: bool) -> None:
        if answer is not self.waiting:  # the connection went away meanwhile
            return
        self.waiting = None
        exc = None if answer.cancelled() else answer.exception()
        if answer.cancelled() or exc is not None:
            log.error("an HTTP answer failed", extra={"error": str(exc)[:300]})
            self._write(FAILED, method, keep)
        else:
            self._write(answer.result(), method, keep)
        self._answer_next()

    def _open(self) -> bool:
        return self.transport is not None and not self.transport.is_closing()

    def _write(self, reply: Reply, method: bytes, keep: bool) -> None:
        if not self._open():
            return
        assert self.transport is not None
        self.transport.write(encode(reply, keep_alive=keep, head_only=method == b"HEAD"))
        if not keep:
            self.transport.close()

    def _reply(self, method: bytes, url: bytes) -> Reply | asyncio.Future[Reply]:
        try:
            parsed = httptools.parse_url(url)
        except httptools.HttpParserInvalidURLError:
            return BAD_REQUEST
        handler = self.routes.get((parsed.path or b"/").decode("latin-1"))
        if handler is None:
            return NOT_FOUND
        if method not in (b"GET", b"HEAD"):
            return NOT_ALLOWED
        query = dict(reversed(parse_qsl((parsed.query or b"").decode("latin-1"), True)))
        try:
            return handler(query)
        except Exception:
            log.exception("an HTTP handler failed", extra={"path": parsed.path.decode("latin-1")})
            return FAILED

    def _last(self, reply: Reply | None) -> None:
        """Read no more: answer what came before, then `reply` (if any), then close."""
        if self.transport is not None:
            self.transport.pause_reading()
        if reply is not None:
            self.pending.append((b"", b"", False, reply))
        elif self.pending:
            method, url, _, fixed = self.pending.pop()
            self.pending.append((method, url, False, fixed))
        elif self.waiting is None and self.transport is not None:
            self.transport.close()
            return
        if self.waiting is None:
            self._answer_next()

    def _arm(self) -> None:
        self._disarm()
        if self.transport is not None:
            self.idle = self.loop.call_later(self.keepalive, self._expire)

    def _disarm(self) -> None:
        if self.idle is not None:
            self.idle.cancel()
            self.idle = None

    def _expire(self) -> None:
        self.idle = None
        if self.transport is not None and self.waiting is None:
            # a client that stopped reading would never let a close flush: cut it off
            self.transport.abort() if self.blocked else self.transport.close()
