"""A CONNECT tunnel through an HTTP proxy, then TLS inside it: how `wire` reaches an https
API server through the proxy a kubeconfig names."""

from __future__ import annotations

import asyncio
import ssl

__all__ = ["MAX_HEAD", "WireError", "open_tls"]

#: bytes of one answer's head (status line and headers), a proxy's included
MAX_HEAD = 64 * 1024


class WireError(Exception):
    """The request got no usable answer."""


class _Connecting(asyncio.Protocol):
    """A proxy's answer to CONNECT: its head, up to the empty line."""

    def __init__(self) -> None:
        self.answer: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self.buf = b""

    def data_received(self, data: bytes) -> None:
        self.buf += data
        end = self.buf.find(b"\r\n\r\n")
        if not self.answer.done() and (end >= 0 or len(self.buf) > MAX_HEAD):
            self.answer.set_result(self.buf[: max(end, 0)])

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.answer.done():
            self.answer.set_exception(WireError("the proxy closed the connection"))


async def open_tls(
    loop: asyncio.AbstractEventLoop,
    proxy: tuple[str, int],
    server: tuple[str, int],
    connect_headers: tuple[tuple[str, str], ...],
    protocol: asyncio.Protocol,
    context: ssl.SSLContext,
    server_hostname: str,
) -> asyncio.Transport:
    """Ask `proxy` for a tunnel to `server` (with `connect_headers`), then do TLS inside it
    for `protocol`, whose `connection_made` the caller calls with the transport returned."""
    raw, connecting = await loop.create_connection(_Connecting, *proxy)
    host, port = server
    authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    lines = [f"CONNECT {authority} HTTP/1.1", f"Host: {authority}"]
    lines += [f"{k}: {v}" for k, v in connect_headers]
    raw.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    try:
        line = (await connecting.answer).split(b"\r\n", 1)[0]
        status = line.split(b" ", 2)
        if len(status) < 2 or status[1] != b"200":
            raise WireError(f"proxy refused CONNECT: {line[:200].decode('latin-1')}")
        tls = await loop.start_tls(raw, protocol, context, server_hostname=server_hostname)
    except BaseException:
        raw.abort()
        raise
    if tls is None:
        raise WireError("the tunnel closed during the TLS handshake")
    return tls
