"""Slots shared by tenants (namespaces, or a listener's client addresses) by `core.fairness`'s
rule, waited for asynchronously: the rotations' slots (`runtime.rotations`) and the admission
edge's reading and answering stages (`admitserving`) use the same one."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from kube_reloader.core import fairness


class FairSlots:
    """`cap` slots (<= 0: no limit); a tenant over its share waits for its turn."""

    def __init__(self, cap: int) -> None:
        self.ledger: fairness.Ledger[asyncio.Future[None]] = fairness.Ledger(cap)

    @property
    def held(self) -> int:
        return self.ledger.total

    @property
    def waiting(self) -> int:
        return self.ledger.waiting

    def room(self, tenant: str) -> bool:
        """Would `tenant` get a slot at once?"""
        return self.ledger.room(tenant)

    async def acquire(self, tenant: str, deadline: float | None = None) -> bool:
        """Take a slot for `tenant`, waiting for its turn (until `deadline`, event-loop
        time, if given); False when the deadline came first (then nothing is held)."""
        if self.ledger.take(tenant):
            return True
        turn = asyncio.get_running_loop().create_future()
        self.ledger.wait(tenant, turn)
        try:
            async with asyncio.timeout_at(deadline):
                await turn
        except (asyncio.CancelledError, TimeoutError) as exc:
            if turn.done() and not turn.cancelled():
                self.release(tenant)  # given a slot as it gave up: hand it on
            else:
                self.ledger.leave(tenant, turn)
            if isinstance(exc, TimeoutError):
                return False
            raise
        return True

    def release(self, tenant: str) -> None:
        self.ledger.release(tenant)
        for holder, granted in self.ledger.grants():
            if granted.done():  # gave up while waiting: its slot goes on, the others keep theirs
                self.release(holder)
            else:
                granted.set_result(None)

    @contextlib.asynccontextmanager
    async def slot(self, tenant: str) -> AsyncIterator[None]:
        await self.acquire(tenant)
        try:
            yield
        finally:
            self.release(tenant)
