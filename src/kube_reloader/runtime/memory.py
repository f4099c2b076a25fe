"""Give memory freed after the initial LISTs back to the operating system, and keep the
garbage collector's pauses off the event loop's critical path.

The first sync decodes every ConfigMap and Secret page by page and keeps only hashes, but
glibc keeps the freed pages in the heap: measured on 10,000 Secrets of 8 KiB, 5,000
ConfigMaps and 2,000 Deployments, RSS after sync drops from ~86 MiB to ~62 MiB once they
are returned. Without glibc (musl, other systems) this is a no-op.

A full collection walks every object the collector tracks; with large caches (a tenant's
Deployments of thousands of references each, tens of thousands of ConfigMaps) one took
0.15-0.2 s, a step that holds the event loop, and the initial LISTs, which make most of the
long-lived objects at once, set off several. So automatic collections wait during the initial
sync (`defer_collections`: what it frees is freed by reference counting, LIST pages and their
decoded items included); after it, everything alive (the caches' bulk) is frozen out of every
later collection (`gc.freeze`; frozen objects are still freed by reference counting, only a
cycle made during the sync is kept) and collections resume, each walking only what came
since. No full collection is made here either: it would be the very step avoided.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
from collections.abc import Iterator
from typing import Any


def _malloc_trim() -> Any:
    # The process's own symbols include libc's: no `find_library` (which runs ldconfig or a
    # compiler in a subprocess) at start-up.
    try:
        return getattr(ctypes.CDLL(None), "malloc_trim", None)
    except OSError:
        return None


_TRIM = _malloc_trim()


@contextlib.contextmanager
def loading_modules() -> Iterator[None]:
    """No collection while the controller's modules load, then what they made frozen out of
    later ones. Imports make a hundred thousand long-lived objects and next to no garbage; the
    collections they set off walk them again and again (~8 ms of a start's CPU, issue 33).
    Once a process: a later call (the test suite runs many controllers) changes nothing."""
    if _LOADED[0]:
        yield
        return
    _LOADED[0] = True
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


_LOADED = [False]


def defer_collections() -> None:
    """No automatic collection until `release_free_memory` (after the initial sync), or
    `resume_collections` (a sync given up)."""
    gc.disable()


def resume_collections() -> None:
    gc.enable()


#: a process freezes its heap once, at its (first) controller's initial sync: a process that
#: runs controllers one after another (the test suite) freezes no later garbage
_FROZEN = [False]


def release_free_memory() -> bool:
    """Freeze what is alive out of later collections (once a process) and let them run
    again, then return free heap pages to the OS; True if the heap was trimmed."""
    if not _FROZEN[0]:
        _FROZEN[0] = True
        gc.freeze()
    gc.enable()
    if _TRIM is None:
        return False
    return bool(_TRIM(0))
