"""The staleness audit as the manager starts it: a room that waits for the controller to be
ready and for the first round to be due (`--audit-interval`, 5 minutes by default), and only
then loads the audit (`auditing`, with `core.staleness`, `core.x509` and `kube.podstarts`).

No start reads that code before its first round, so a start does not pay its import; from
the first round on, the loaded room (`Auditing`) keeps its series and certificates across
the supervisor's restarts of this task.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from kube_reloader.kube.client import Client
from kube_reloader.runtime.auditreports import AuditReports
from kube_reloader.runtime.clock import Clock, sleep
from kube_reloader.runtime.fencing import Fence
from kube_reloader.runtime.options import Options
from kube_reloader.runtime.stores import Stores

if TYPE_CHECKING:
    from kube_reloader.runtime.auditing import Auditing


class AuditRoom:
    """`loop` is the supervised task: the first round loads the audit, the rest are its own."""

    def __init__(
        self,
        client: Client,
        options: Options,
        clock: Clock,
        stores: Stores,
        fence: Fence,
        audit: AuditReports,
        ready: asyncio.Event,
    ) -> None:
        self._parts = (client, options, clock, stores, fence, audit, ready)
        #: the audit, once its first round was due
        self.room: Auditing | None = None

    async def loop(self) -> None:
        if self.room is None:
            _, options, clock, _, _, _, ready = self._parts
            await ready.wait()
            await sleep(clock, options.audit_interval)
            from kube_reloader.runtime.auditing import Auditing  # first due: see the docstring

            self.room = Auditing(*self._parts)
            await self.room.round()
        await self.room.loop()
