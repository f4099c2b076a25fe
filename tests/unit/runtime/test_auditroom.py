"""The staleness audit's supervised task: its first round is due an interval after the
controller is ready, loads the audit then, and the loaded room runs every round after it."""

from __future__ import annotations

import asyncio
import contextlib

from kube_reloader.runtime.auditroom import AuditRoom
from tests.unit.runtime.fakes import until
from tests.unit.runtime.test_auditing import rig, series


async def test_the_first_round_waits_for_readiness_and_an_interval_then_rounds_follow() -> None:
    room, stores, client, audit = rig()
    ready = asyncio.Event()
    lazy = AuditRoom(client, audit.options, room.clock, stores, room.fence,  # type: ignore[arg-type]
                     room.reports.audit, ready)  # fmt: skip
    task = asyncio.ensure_future(lazy.loop())
    try:
        await until(lambda: True, "a turn")
        room.clock.advance(120.0)  # not ready yet: no timer runs, nothing is read
        await until(lambda: True, "a turn")
        assert (lazy.room, client.requests) == (None, [])
        ready.set()
        await until(lambda: bool(room.clock.pending()), "the first round's timer")
        room.clock.advance(59.0)
        await until(lambda: True, "a turn")
        assert (lazy.room, client.requests) == (None, [])
        room.clock.advance(1.0)
        await until(lambda: lazy.room is not None and lazy.room.last is not None, "round one")
        await room.spawned.run()
        assert series(room) == {("nats", "Secret/nats-tls"): 1.0, ("plain", "ConfigMap/cfg"): 1.0}
        first = client.requests.count("LIST pods ns")
        room.clock.advance(60.0)
        await until(lambda: client.requests.count("LIST pods ns") == first + 1, "round two")
    finally:
        task.cancel()
        room.spawned.close()


async def test_a_restarted_task_keeps_the_loaded_audit_and_its_series() -> None:
    room, stores, client, audit = rig()
    ready = asyncio.Event()
    ready.set()
    lazy = AuditRoom(client, audit.options, room.clock, stores, room.fence,  # type: ignore[arg-type]
                     room.reports.audit, ready)  # fmt: skip
    task = asyncio.ensure_future(lazy.loop())
    await until(lambda: bool(room.clock.pending()), "the first round's timer")
    room.clock.advance(60.0)
    await until(lambda: lazy.room is not None and lazy.room.last is not None, "round one")
    loaded = lazy.room
    assert loaded is not None
    assert loaded.series
    first = client.requests.count("LIST pods ns")
    task.cancel()  # as the supervisor restarts a crashed task: the same callable again
    with contextlib.suppress(asyncio.CancelledError):
        await task
    task = asyncio.ensure_future(lazy.loop())
    try:
        await until(lambda: bool(room.clock.pending()), "the next round's timer")
        room.clock.advance(60.0)
        await until(lambda: client.requests.count("LIST pods ns") == first + 1, "round two")
        assert lazy.room is loaded
        assert loaded.series
    finally:
        task.cancel()
        room.spawned.close()


async def test_a_standby_loads_the_audit_when_due_but_reads_nothing() -> None:
    room, stores, client, audit = rig()
    room.fence.stop_leading()
    ready = asyncio.Event()
    ready.set()
    lazy = AuditRoom(client, audit.options, room.clock, stores, room.fence,  # type: ignore[arg-type]
                     room.reports.audit, ready)  # fmt: skip
    task = asyncio.ensure_future(lazy.loop())
    try:
        await until(lambda: bool(room.clock.pending()), "the first round's timer")
        room.clock.advance(60.0)
        await until(lambda: lazy.room is not None, "the audit loaded")
        await until(lambda: bool(room.clock.pending()), "the next round's timer")
        assert client.requests == []
        assert series(room) == {}
    finally:
        task.cancel()
        room.spawned.close()
