"""Pause periods: pause before the write, resume on time (from the object), leader only."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from kube_reloader.core.objects import ObjectKey
from kube_reloader.kube import errors
from kube_reloader.runtime.clock import utc
from kube_reloader.runtime.pauses import RESUME_RETRY, Pauses

from .fakes import AUTO, KEYS, FakeWriter, Room, workload

PERIOD = {**AUTO, KEYS.pause_period: "30s"}


def pauses(room: Room, writer: FakeWriter, *, v2: bool = False) -> Pauses:
    return Pauses(
        room.clock,
        KEYS,
        writer,
        room.fence,
        room.reports.rollouts,
        room.reports.problems,
        room.spawned,
        v2=v2,
    )


def paused_object(w_name: str = "web") -> dict[str, object]:
    return {"metadata": {"name": w_name, "annotations": {KEYS.paused_at: "2026-01-01T00:00:00Z"}},
            "spec": {"paused": True}}  # fmt: skip


async def test_a_deployment_with_a_pause_period_is_paused_and_resumed_when_it_ends() -> None:
    room, writer = Room(), FakeWriter()
    p = pauses(room, writer)
    w = workload(annotations=PERIOD)
    writer.objects[w.key] = paused_object()
    await p.before_write(w, utc(room.clock))
    assert writer.pauses == [w.key]
    assert room.clock.pending() == [30.0]
    room.clock.advance(29.0)
    assert await room.spawned.run() == []
    room.clock.advance(1.0)
    assert await room.spawned.run() == [f"resume/{w.key}"]
    assert writer.resumes == [w.key]
    assert room.sample("kube_reloader_pauses_total", action="resume") == 1


async def test_an_invalid_pause_period_costs_a_warning_and_no_pause() -> None:
    room, writer = Room(), FakeWriter()
    w = workload(annotations={**AUTO, KEYS.pause_period: "soon"})
    await pauses(room, writer).before_write(w, utc(room.clock))
    await room.spawned.run()
    assert writer.pauses == []
    assert room.events.reasons() == ["ReloadAnnotationInvalid"]


async def test_a_standby_does_not_resume_and_looks_again_later() -> None:
    room, writer = Room(), FakeWriter()
    p = pauses(room, writer)
    w = workload(annotations=PERIOD)
    room.fence.stop_leading()
    await p.resume(w.key)
    assert writer.resumes == []
    assert writer.reads == []
    assert room.clock.pending() == [RESUME_RETRY]


async def test_a_deployment_resumed_by_someone_else_is_left_alone() -> None:
    room, writer = Room(), FakeWriter()
    w = workload(annotations=PERIOD)
    writer.objects[w.key] = {"metadata": {"annotations": {}}, "spec": {"paused": False}}
    await pauses(room, writer).resume(w.key)
    assert writer.resumes == []


async def test_a_failed_resume_is_retried_and_a_gone_deployment_is_not() -> None:
    room = Room()

    class Failing(FakeWriter):
        async def read(self, key: object) -> dict[str, object]:  # type: ignore[override]
            raise self.fail.pop(0)

    writer = Failing(fail=[errors.Transient(503, "busy"), errors.NotFound(404, "gone")])
    p = pauses(room, writer)
    w = workload(annotations=PERIOD)
    await p.resume(w.key)
    assert room.clock.pending() == [RESUME_RETRY]
    room.clock.advance(RESUME_RETRY)
    await room.spawned.run()
    assert room.clock.pending() == [], "a gone Deployment is not retried"


async def test_seeing_a_paused_deployment_arms_one_timer_and_an_unpaused_one_cancels_it() -> None:
    room, writer = Room(), FakeWriter()
    p = pauses(room, writer)
    now = utc(room.clock).strftime("%Y-%m-%dT%H:%M:%SZ")
    w = dataclasses.replace(workload(annotations={**PERIOD, KEYS.paused_at: now}), paused=True)
    p.observe(w)
    p.observe(w)
    assert room.clock.pending() == [30.0], "one timer however often it is seen"
    p.observe(dataclasses.replace(w, paused=False))
    assert w.key not in p
    assert room.clock.pending() == []


async def test_a_deployment_seen_while_its_resume_runs_is_resumed_and_counted_once() -> None:
    room = Room()
    reading = asyncio.Event()
    answer = asyncio.Event()

    class Slow(FakeWriter):
        async def read(self, key: ObjectKey) -> dict[str, Any]:
            reading.set()
            await answer.wait()  # the GET is on the wire while the rollout's events come in
            return await super().read(key)

    writer = Slow()
    p = pauses(room, writer)
    now = utc(room.clock).strftime("%Y-%m-%dT%H:%M:%SZ")
    w = dataclasses.replace(workload(annotations={**PERIOD, KEYS.paused_at: now}), paused=True)
    writer.objects[w.key] = paused_object()
    resume = asyncio.ensure_future(p.resume(w.key))
    await reading.wait()
    p.observe(w)  # still paused: its resume is under way, not due again
    assert room.clock.pending() == []
    assert w.key in p
    answer.set()
    await resume
    assert await room.spawned.run() == []
    assert writer.resumes == [w.key]
    assert room.sample("kube_reloader_pauses_total", action="resume") == 1
    assert w.key not in p


# -- Reloader v2's pause (--compat=v2) ------------------------------------------------------


async def test_v2_pauses_in_the_reloads_write_and_resumes_when_the_period_ends() -> None:
    room, writer = Room(), FakeWriter()
    p = pauses(room, writer, v2=True)
    w = workload(annotations=PERIOD)
    writer.objects[w.key] = paused_object()
    body = await p.for_write(w, utc(room.clock))
    assert body == {"metadata": {"annotations": {KEYS.paused_at: "2026-05-28T20:26:40Z"}},
                    "spec": {"paused": True}}  # fmt: skip
    assert writer.pauses == [], "no write of its own"
    assert room.clock.pending() == [30.0]
    room.clock.advance(30.0)
    assert await room.spawned.run() == [f"resume/{w.key}"]
    assert writer.resumes == [w.key]


async def test_v2_stamps_its_pause_again_on_each_reload_so_it_lasts_the_period_from_the_last() -> (
    None
):
    room, writer = Room(), FakeWriter()
    p = pauses(room, writer, v2=True)
    stamped = {**PERIOD, KEYS.paused_at: "2026-05-28T20:26:30Z"}  # 10 s before the clock
    w = dataclasses.replace(workload(annotations=stamped), paused=True)
    body = await p.for_write(w, utc(room.clock))
    assert body is not None
    assert body["metadata"]["annotations"][KEYS.paused_at] == "2026-05-28T20:26:40Z"
    assert room.clock.pending() == [30.0], "the period from now, not from the first stamp"
    v1 = await pauses(Room(), FakeWriter()).for_write(w, utc(room.clock))
    assert v1 is None, "v1 never extends a pause"


async def test_v2_leaves_a_deployment_someone_else_paused_and_a_bad_period_unpaused() -> None:
    room, writer = Room(), FakeWriter()
    p = pauses(room, writer, v2=True)
    theirs = dataclasses.replace(workload(annotations=PERIOD), paused=True)
    assert await p.for_write(theirs, utc(room.clock)) is None
    bad = workload(annotations={**AUTO, KEYS.pause_period: "soon"})
    assert await p.for_write(bad, utc(room.clock)) is None
    await room.spawned.run()
    assert room.events.reasons() == ["ReloadAnnotationInvalid"]
    assert room.clock.pending() == []
