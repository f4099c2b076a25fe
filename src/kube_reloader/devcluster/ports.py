"""Loopback ports for the dev cluster's servers and the tests' child processes.

A port asked of the kernel (`bind(("127.0.0.1", 0))`) and released again can come back at
the very next request, or go to any outgoing connection, because it lies in the ephemeral
range the kernel hands out. Two such ports given to one child (its metrics and its health
listener) were once the same port, and the child could not listen. `free_port()` picks
below the ephemeral range instead, never gives one process the same port twice, and walks
from a start derived from its PID, so two processes (pytest's workers) seldom probe the
same ports; each candidate is bound once to check nobody holds it.
"""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

LOWEST = 10_000  # the search range's floor: above the well-known and most registered ports
RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
DEFAULT_EPHEMERAL = (32_768, 60_999)  # Linux's default when the file cannot be read
SPREAD = 2_654_435_761  # Knuth's multiplicative hash: spreads neighbouring PIDs apart


def ephemeral_range(path: Path = RANGE_FILE) -> tuple[int, int]:
    """The kernel's ephemeral port range, or Linux's default when it cannot be read."""
    try:
        low, high = (int(part) for part in path.read_text().split())
    except (OSError, ValueError):
        return DEFAULT_EPHEMERAL
    return (low, high) if 0 < low <= high < 65_536 else DEFAULT_EPHEMERAL


def bindable(port: int) -> bool:
    """Whether a listener could bind 127.0.0.1:`port` now (nothing else holds it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def kernel_port() -> int:
    """A port the kernel picks from its ephemeral range (the fallback)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PortPicker:
    """Hands out distinct free loopback ports below the ephemeral range, walking from a
    start derived from `seed`; falls back to the kernel's pick (still never a port given
    before) when that range is too small or full."""

    def __init__(self, seed: int, ephemeral: tuple[int, int]) -> None:
        self._low, self._high = LOWEST, min(ephemeral[0], 65_536)
        span = max(self._high - self._low, 1)
        self._cursor = (seed * SPREAD) % span
        self._given: set[int] = set()
        self._lock = threading.Lock()

    def take(self) -> int:
        with self._lock:
            port = self._walk() or self._fallback()
            self._given.add(port)
            return port

    def _walk(self) -> int | None:
        span = self._high - self._low
        for _ in range(max(span, 0)):
            port = self._low + self._cursor % span
            self._cursor += 1
            if port not in self._given and bindable(port):
                return port
        return None

    def _fallback(self) -> int:
        for _ in range(64):
            port = kernel_port()
            if port not in self._given:
                return port
        raise OSError("no free loopback port")


_PICKERS: dict[int, PortPicker] = {}  # by PID: a forked child walks from a start of its own


def free_port() -> int:
    """A loopback port nothing holds now and this process was never given before."""
    pid = os.getpid()
    picker = _PICKERS.get(pid)
    if picker is None:
        picker = _PICKERS.setdefault(pid, PortPicker(pid, ephemeral_range()))
    return picker.take()
