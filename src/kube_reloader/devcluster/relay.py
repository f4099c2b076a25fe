"""A TCP relay from inside the real node's network namespace to the host's loopback.

The real node (kubelet, containerd and its pods) lives in a network namespace of its own, so
that none of its addresses exists on the host. The API server listens on the host's
127.0.0.1 only; this relay listens inside the node's namespace and forwards each connection,
byte for byte (TLS passes through untouched), to `127.0.0.1:<port>` on the host.

One process does both sides: it enters the node's namespace (`setns`) just long enough to
create its listening socket, then returns to the host's, where every forwarded connection is
opened. A socket stays in the namespace it was created in. `socket_in` and `pipe` also serve
the node tests' relay the other way round (host to a pod: tests/node/webhookpath.py).

Run as `python -m kube_reloader.devcluster.relay NETNS_PATH LISTEN_PORT TARGET_PORT`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import socket
import sys
from collections.abc import Callable, Sequence

CLONE_NEWNET = 0x40000000
#: bytes read at once from either side
CHUNK = 64 * 1024


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def _in_netns(netns: str, make: Callable[[], socket.socket]) -> socket.socket:
    """`make()` run inside the network namespace `netns` (a path such as /run/netns/NAME);
    the calling thread is back in its own namespace on return, and the socket made stays in
    `netns` whichever thread uses it."""
    own = os.open("/proc/self/ns/net", os.O_RDONLY)
    target = os.open(netns, os.O_RDONLY)
    try:
        _setns(target)
        try:
            return make()
        finally:
            _setns(own)
    finally:
        os.close(own)
        os.close(target)


def listen_in(netns: str, port: int) -> socket.socket:
    """A listening TCP socket on 0.0.0.0:`port` inside the network namespace `netns`."""

    def make() -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("0.0.0.0", port))  # noqa: S104 - inside the node's own namespace only
        sock.listen(128)
        sock.setblocking(False)
        return sock

    return _in_netns(netns, make)


def socket_in(netns: str) -> socket.socket:
    """A TCP socket of the network namespace `netns`, not yet connected, non-blocking (for
    `loop.sock_connect`): a host process's way to dial a node or pod address."""

    def make() -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        return sock

    return _in_netns(netns, make)


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            if writer.can_write_eof():
                writer.write_eof()


async def _serve(sock: socket.socket, target_port: int) -> None:
    async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            ur, uw = await asyncio.open_connection("127.0.0.1", target_port)
        except OSError:
            w.close()
            return
        await asyncio.gather(pipe(r, uw), pipe(ur, w))
        for side in (w, uw):
            side.close()

    server = await asyncio.start_server(handle, sock=sock)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


def main(argv: Sequence[str]) -> int:
    if len(argv) != 3:
        print("usage: relay NETNS_PATH LISTEN_PORT TARGET_PORT", file=sys.stderr)
        return 2
    netns, listen_port, target_port = argv[0], int(argv[1]), int(argv[2])
    sock = listen_in(netns, listen_port)
    print(f"relay: {netns} 0.0.0.0:{listen_port} -> host 127.0.0.1:{target_port}", flush=True)
    asyncio.run(_serve(sock, target_port))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
