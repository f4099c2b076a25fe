"""Who may write, and the writes in flight: the one place leadership is checked before a
write is sent, and where losing it cancels what is being written."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

log = logging.getLogger("kube_reloader.runtime.controller")


class Fence:
    """Set while this replica may write (always without HA; while leading with HA)."""

    def __init__(self) -> None:
        self.leading = asyncio.Event()
        self.leading.set()
        #: set while this replica may not write: what waits for leadership to end waits on it
        #: (no polling, so an idle controller does not wake for it)
        self.following = asyncio.Event()
        #: reconciles in flight, cancelled the moment this replica stops leading
        self.writing: set[asyncio.Task[Any]] = set()
        #: of those, the ones past their point of no return (a Job deleted, not re-created
        #: yet): they finish even when leadership is lost, and shutdown waits for them
        self.committed: set[asyncio.Task[Any]] = set()

    def may_write(self) -> bool:
        """Checked right before every write is sent."""
        return self.leading.is_set()

    def start_leading(self) -> None:
        self.following.clear()
        self.leading.set()

    def stop_leading(self) -> None:
        """Stop writing at once: no new write starts, those in flight are cancelled."""
        self.leading.clear()
        self.following.set()
        for write in list(self.writing):
            if write not in self.committed:  # a half-done Job re-creation must finish
                write.cancel()
        if self.writing:
            log.warning(
                "leadership lost: in-flight writes cancelled", extra={"writes": len(self.writing)}
            )

    async def guarded(self, write: asyncio.Task[Any]) -> bool:
        """Await `write` as a write in flight: True when it ran to its end (its exception,
        if any, is raised here), False when losing the lease cancelled it. A cancellation of
        the caller itself cancels the write too and propagates."""
        self.writing.add(write)
        try:
            await asyncio.shield(write)
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if not write.cancelled() or (me is not None and me.cancelling()):
                write.cancel()
                raise
            return False
        finally:
            self.writing.discard(write)
        return True

    def commit(self) -> None:
        """The calling write can no longer be abandoned half-way."""
        task = asyncio.current_task()
        if task is not None:
            self.committed.add(task)
            task.add_done_callback(self.committed.discard)
