"""Loopback ports for the dev cluster's servers and the tests' child processes.

A port asked of the kernel (`bind(("127.0.0.1", 0))`) and released again can come back at
the very next request, or go to any outgoing connection, because it lies in the ephemeral
range the kernel hands out. Two such ports given to one child (its metrics and its health
listener) were once the same port, and the child could not listen. `free_port()` picks
outside the ephemeral range instead (below it, then above it), never gives one process the
same port twice, and walks from a random start, so two processes (pytest's workers, or
processes with one PID in two containers) seldom probe the same ports; each candidate is
bound once to check nobody holds it.
"""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

LOWEST = 10_000  # the search's floor: above the well-known and most registered ports
HIGHEST = 65_535
RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
DEFAULT_EPHEMERAL = (32_768, 60_999)  # Linux's default when the file cannot be read


def ephemeral_range(path: Path = RANGE_FILE) -> tuple[int, int]:
    """The kernel's ephemeral port range, or Linux's default when it cannot be read."""
    try:
        low, high = (int(part) for part in path.read_text().split())
    except (OSError, ValueError):
        return DEFAULT_EPHEMERAL
    return (low, high) if 0 < low <= high <= HIGHEST else DEFAULT_EPHEMERAL


def outside(ephemeral: tuple[int, int]) -> list[int]:
    """The ports from `LOWEST` up that the kernel never picks: below its range, then above."""
    low, high = ephemeral
    return [*range(LOWEST, max(low, LOWEST)), *range(max(high + 1, LOWEST), HIGHEST + 1)]


def bindable(port: int) -> bool:
    """Whether a listener could bind 127.0.0.1:`port` now (nothing else holds it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def kernel_port() -> int:
    """A port the kernel picks from its ephemeral range (the last resort)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PortPicker:
    """Hands out distinct free loopback ports outside the ephemeral range, walking from
    `seed`; falls back to the kernel's pick (still never a port given before) when those
    ports are all taken."""

    def __init__(
        self, seed: int, ephemeral: tuple[int, int], given: set[int] | None = None
    ) -> None:
        self._ports = outside(ephemeral)
        self._cursor = seed % len(self._ports) if self._ports else 0
        self.given: set[int] = set(given or ())
        self._lock = threading.Lock()

    def take(self) -> int:
        with self._lock:
            port = self._walk() or self._fallback()
            self.given.add(port)
            return port

    def reserve(self, port: int) -> None:
        """Never hand out `port` (someone chose it: a pinned port)."""
        with self._lock:
            self.given.add(port)

    def _walk(self) -> int | None:
        ports = self._ports
        for _ in range(len(ports)):
            port = ports[self._cursor % len(ports)]
            self._cursor += 1
            if port not in self.given and bindable(port):
                return port
        return None

    def _fallback(self) -> int:
        for _ in range(64):
            port = kernel_port()
            if port not in self.given:
                return port
        raise OSError("no free loopback port")


_PICKERS: dict[int, PortPicker] = {}  # by PID: a forked child walks from a start of its own
_PICKERS_LOCK = threading.Lock()


def _picker() -> PortPicker:
    pid = os.getpid()
    with _PICKERS_LOCK:
        picker = _PICKERS.get(pid)
        if picker is None:  # a new process, or a forked child: it keeps what was given
            given = set().union(*(p.given for p in _PICKERS.values()))
            seed = int.from_bytes(os.urandom(4), "big")
            picker = _PICKERS[pid] = PortPicker(seed, ephemeral_range(), given)
        return picker


def free_port() -> int:
    """A loopback port nothing holds now and this process was never given before."""
    return _picker().take()


def reserve(port: int) -> None:
    """Keep `port` (chosen elsewhere, e.g. pinned by the caller) out of `free_port()`'s picks."""
    _picker().reserve(port)
