"""Reporting's Event writes: bounded in flight and in number waiting, so a slow Events API or a
tenant's storm of Warnings never takes the connections the Lease renewals and reloads need."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from kube_reloader.core import planning
from kube_reloader.metrics import Recorder
from kube_reloader.runtime.fencing import Fence
from kube_reloader.runtime.reporting import MAX_EVENT_WRITES, MAX_EVENTS_PENDING, Reporter

from .fakes import workload


class HangingEvents:
    """An Events API that answers only when told to."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.most = 0
        self.sent = 0
        self.answer = asyncio.Event()

    async def send(self, workload: planning.Workload, event_type: str, reason: str,
                   message: str, component: str) -> None:  # fmt: skip
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await self.answer.wait()
            self.sent += 1
        finally:
            self.in_flight -= 1


def reporter(sink: HangingEvents, fence: Fence | None = None) -> tuple[Reporter, list[Any]]:
    tasks: list[Any] = []

    def spawn(_name: str, coro: Coroutine[Any, Any, None]) -> None:
        tasks.append(asyncio.get_running_loop().create_task(coro))

    return Reporter(Recorder(by_namespace=False), sink, fence or Fence(), spawn), tasks


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_events_for_many_objects_are_written_a_few_at_a_time_and_the_excess_dropped() -> None:
    sink = HangingEvents()
    r, tasks = reporter(sink)
    for i in range(MAX_EVENTS_PENDING + 50):
        r.event(workload(f"w{i}"), "Warning", "ReloadError", "boom", "reloader")
    await settle()
    assert sink.most == MAX_EVENT_WRITES
    assert r.events_dropped == 50
    assert len(tasks) == MAX_EVENTS_PENDING
    sink.answer.set()
    await asyncio.gather(*tasks)
    assert sink.sent == MAX_EVENTS_PENDING
    assert sink.most == MAX_EVENT_WRITES
    assert r.events_pending == 0
    r.event(workload("later"), "Normal", "Reloaded", "ok", "reloader")
    await tasks[-1]
    assert sink.sent == MAX_EVENTS_PENDING + 1, "room again once the backlog is written"
    assert r.events_dropped == 50


async def test_an_event_waiting_for_a_slot_is_not_written_once_the_replica_stops_leading() -> None:
    sink = HangingEvents()
    fence = Fence()
    r, tasks = reporter(sink, fence)
    for i in range(MAX_EVENT_WRITES + 3):
        r.event(workload(f"w{i}"), "Warning", "ReloadError", "boom", "reloader")
    await settle()
    fence.stop_leading()
    sink.answer.set()
    await asyncio.gather(*tasks)
    assert sink.sent == MAX_EVENT_WRITES, "the three waiting were not written by a standby"
