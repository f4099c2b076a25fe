"""The event loop the controller runs on (`--event-loop`): the standard library's asyncio
loop, or uvloop's (libuv) where the `uvloop` extra is installed. The choice changes nothing the
controller does; bench/README.md has the two measured side by side."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from kube_reloader.cli.flagset import FlagError

LOOPS = ("asyncio", "uvloop")


def loop_factory(
    name: str, *, tls_listener: bool = False
) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """What `asyncio.Runner` makes its loop with (None: the standard loop), or a one-line
    `FlagError` for a name that is not a loop here.

    `tls_listener`: the admission webhook's listener is asked for. It takes a connection over
    to TLS only once admitted, pausing reads in `connection_made`; uvloop starts reading right
    after that call whatever it asked, so the handshake's first bytes would reach the guard,
    not TLS. That combination is refused rather than served wrong."""
    if name == "asyncio":
        return None
    if name != "uvloop":
        raise FlagError(f"--event-loop: {name!r} is not one of {', '.join(LOOPS)}")
    if tls_listener:
        raise FlagError(
            "--event-loop=uvloop: not with --admission-addr (its TLS listener needs asyncio's loop)"
        )
    try:
        import uvloop
    except ImportError:
        raise FlagError(
            "--event-loop=uvloop: uvloop is not installed (pip install 'kube-reloader[uvloop]')"
        ) from None
    return uvloop.new_event_loop
