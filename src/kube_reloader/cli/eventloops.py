"""The event loop the controller runs on (`--event-loop`): uvloop's (libuv) where it is
installed (it is a dependency wherever it builds: Linux and macOS on CPython), the standard
library's asyncio loop otherwise or when asked for. The choice changes nothing the controller
does; bench/README.md has the two measured side by side."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from kube_reloader.cli.flagset import FlagError

LOOPS = ("auto", "asyncio", "uvloop")

_NO_TLS_LISTENER = "not with --admission-addr (its TLS listener needs asyncio's loop)"


def loop_factory(
    name: str, *, tls_listener: bool = False
) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """What `asyncio.Runner` makes its loop with (None: the standard loop), or a one-line
    `FlagError` for a name that is not a loop here.

    `auto` is uvloop where it imports and the standard loop otherwise, and the standard loop
    whenever `tls_listener` is set: the admission webhook's listener takes a connection over
    to TLS only once admitted, pausing reads in `connection_made`; uvloop starts reading right
    after that call whatever it asked, so the handshake's first bytes would reach the guard,
    not TLS. Asked for by name, that combination is refused rather than served wrong."""
    if name not in LOOPS:
        raise FlagError(f"--event-loop: {name!r} is not one of {', '.join(LOOPS)}")
    if name == "asyncio" or (name == "auto" and tls_listener):
        return None
    if tls_listener:
        raise FlagError(f"--event-loop=uvloop: {_NO_TLS_LISTENER}")
    try:
        import uvloop
    except ImportError:
        if name == "auto":
            return None
        raise FlagError(
            "--event-loop=uvloop: uvloop is not installed (pip install 'kube-reloader[uvloop]')"
        ) from None
    return uvloop.new_event_loop
