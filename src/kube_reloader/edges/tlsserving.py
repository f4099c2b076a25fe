"""TLS for a `serving.Server` (the admission webhook's listener), counted from the first byte.

asyncio's `create_server(ssl=...)` hands a connection to its protocol only after the TLS
handshake, and allocates a ~256 KiB buffer for every handshake it starts: bare TCP connects
were neither capped nor timed by the `Edge` and cost that buffer each (issue 29: ~2,000 of
them took the process from 57 to 395 MiB, where it stayed). Here the listener accepts plain
TCP; the guard admits the connection to the `Edge` first (its caps, and its header timeout,
which now covers the handshake and the headers together) and only then upgrades it
(`loop.start_tls`). A connection shed or timed out mid-handshake is aborted, its TLS buffer
freed.

With a client CA (`require_client_certificates`), the context requires a client certificate
chaining to it (`ssl.CERT_REQUIRED`): a caller without one fails the handshake and never sends
a byte of HTTP. `check` may refuse a verified certificate afterwards (the allowed names).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Collection, Coroutine, Mapping
from typing import Any

from aiohttp import web

from kube_reloader.edges.serving import Edge, Limits, Server, _Guard

#: a verified client certificate (`SSLObject.getpeercert()`) -> whether it may be served
PeerCheck = Callable[[Any], bool]
#: runs a handshake as a task of its own (the supervisor's `oneshot`: it owns every task)
Spawn = Callable[[str, Coroutine[Any, Any, None]], object]


class _TlsGuard(_Guard):
    """A `_Guard` whose connection is upgraded to TLS once admitted."""

    def __init__(
        self,
        edge: Edge,
        make_inner: Callable[[], asyncio.Protocol],
        tls: ssl.SSLContext,
        spawn: Spawn,
        check: PeerCheck | None,
    ) -> None:
        super().__init__(edge, make_inner)
        self.tls, self.spawn, self.check = tls, spawn, check
        self.upgrade: object = None
        self.dropped = False

    def _begin(self, transport: asyncio.Transport) -> None:
        transport.pause_reading()  # no byte of the handshake for the guard: `start_tls` resumes
        self.upgrade = self.spawn("admission-handshake", self._handshake(transport))

    async def _handshake(self, raw: asyncio.Transport) -> None:
        if self.dropped or raw.is_closing():
            return
        timeout = self.edge.limits.header_timeout
        try:
            secure = await self.loop.start_tls(
                raw, self, self.tls, server_side=True, ssl_handshake_timeout=timeout
            )
        except (OSError, RuntimeError):  # ssl.SSLError is an OSError: no or a bad certificate
            secure = None
        if not self._accepted(secure):
            if not self.dropped:
                self.edge.refused_one(self.loop.time())
                self.drop()
        else:
            assert secure is not None
            self.transport = secure
            super()._begin(secure)
            early, self.early = self.early, []
            for data in early:  # decrypted (and scanned) before `start_tls` returned
                self.inner.data_received(data)  # type: ignore[union-attr]

    def _accepted(self, secure: asyncio.Transport | None) -> bool:
        if secure is None or self.dropped or secure.is_closing():
            return False
        return self.check is None or self.check(secure.get_extra_info("peercert"))

    def eof_received(self) -> bool | None:
        return True if self.inner is None else super().eof_received()

    def drop(self) -> None:
        self.dropped = True
        super().drop()  # mid-handshake the guard's transport is the TCP one: aborted


class TlsServer(Server):
    """A `Server` over TLS with `context` (its certificate may be replaced while serving)."""

    def __init__(
        self,
        app: web.Application,
        addr: str,
        context: ssl.SSLContext,
        spawn: Spawn,
        *,
        limits: Limits | None = None,
        check: PeerCheck | None = None,
    ) -> None:
        super().__init__(app, addr, limits=limits)
        self.context, self.spawn, self.check = context, spawn, check

    def _guard(self, handlers: Callable[[], asyncio.Protocol]) -> _Guard:
        return _TlsGuard(self.edge, handlers, self.context, self.spawn, self.check)


def require_client_certificates(context: ssl.SSLContext, client_ca: str) -> None:
    """Make `context` (a server's) ask every client for a certificate chaining to the CA
    bundle in file `client_ca`, and refuse the handshake without one. Raises `OSError` or
    `ssl.SSLError` when the file cannot be read or holds no certificate."""
    context.load_verify_locations(cafile=client_ca)
    context.verify_mode = ssl.CERT_REQUIRED


def names_of(cert: Any) -> set[str]:
    """The common names and DNS names of a certificate as `getpeercert()` gives it."""
    if not isinstance(cert, Mapping):
        return set()
    names: set[str] = set()
    for rdn in cert.get("subject") or ():
        for attr in rdn if isinstance(rdn, tuple) else ():
            if isinstance(attr, tuple) and len(attr) == 2 and attr[0] == "commonName":
                names.add(str(attr[1]))
    for alt in cert.get("subjectAltName") or ():
        if isinstance(alt, tuple) and len(alt) == 2 and alt[0] == "DNS":
            names.add(str(alt[1]))
    return names


def allow_names(allowed: Collection[str]) -> PeerCheck:
    """A check passing a certificate that names (CN or DNS SAN) one of `allowed`."""
    wanted = frozenset(allowed)
    return lambda cert: bool(names_of(cert) & wanted)
