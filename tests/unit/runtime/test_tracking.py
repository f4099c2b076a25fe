"""Rollout tracking: one deadline per workload; the outcome is reported once."""

from __future__ import annotations

import dataclasses

from kube_reloader.core import planning, rollouts
from kube_reloader.core.objects import ObjectKey
from kube_reloader.runtime.tracking import RolloutTracker

from .fakes import Room, workload

STATUS = rollouts.Status(generation=2, observed_generation=1, replicas=2, updated=0, available=2,
                         progress_deadline_seconds=60.0)  # fmt: skip
ANSWER = {"metadata": {"generation": 2}}


def tracker(room: Room, seen: dict[ObjectKey, planning.Workload]) -> RolloutTracker:
    return RolloutTracker(
        room.clock, room.reports.rollouts, seen.get, on_finished=lambda _k, _r: None
    )


async def test_a_rollout_that_completes_is_reported_with_its_duration_and_no_event() -> None:
    room = Room()
    w = workload(status=STATUS)
    seen = {w.key: w}
    t = tracker(room, seen)
    t.started(w, ANSWER)
    assert w.key in t
    assert room.clock.pending() == [90.0], "deadline: progressDeadline + grace"
    room.clock.advance(12.0)
    done = dataclasses.replace(w, status=dataclasses.replace(
        STATUS, observed_generation=2, updated=2, available=2))  # fmt: skip
    t.observe(done)
    await room.spawned.run()
    assert w.key not in t
    assert room.clock.pending() == []
    assert room.sample("kube_reloader_rollouts_total", workload_kind="Deployment",
                       result="complete") == 1  # fmt: skip
    assert room.sample("kube_reloader_rollout_duration_seconds_sum",
                       workload_kind="Deployment") == 12.0  # fmt: skip
    assert room.events.sent == []


async def test_a_rollout_past_its_deadline_is_stuck_and_gets_a_warning() -> None:
    room = Room()
    w = workload(status=STATUS)
    t = tracker(room, {w.key: w})
    t.started(w, ANSWER)
    room.clock.advance(90.0)
    await room.spawned.run()
    assert room.events.reasons() == ["ReloadRolloutStuck"]
    assert w.key not in t


async def test_a_failed_progress_deadline_is_reported_as_failed() -> None:
    room = Room()
    w = workload(status=STATUS)
    t = tracker(room, {w.key: w})
    t.started(w, ANSWER)
    t.observe(dataclasses.replace(w, status=dataclasses.replace(
        STATUS, observed_generation=2, progress_deadline_exceeded=True)))  # fmt: skip
    await room.spawned.run()
    assert room.events.reasons() == ["ReloadRolloutFailed"]


async def test_a_newer_reload_replaces_the_deadline_and_forget_cancels_it() -> None:
    room = Room()
    w = workload(status=STATUS)
    t = tracker(room, {w.key: w})
    t.started(w, ANSWER)
    room.clock.advance(50.0)
    t.started(w, {"metadata": {"generation": 3}})
    assert room.clock.pending() == [90.0], "one timer per workload"
    room.clock.advance(60.0)
    await room.spawned.run()
    assert room.events.sent == [], "the first deadline no longer counts"
    t.forget(w.key)
    room.clock.advance(100.0)
    await room.spawned.run()
    assert room.events.sent == []


async def test_a_slow_rollout_that_keeps_progressing_is_never_stuck_and_a_paused_one_waits() -> (
    None
):
    room = Room()
    w = workload(status=dataclasses.replace(STATUS, replicas=10, updated=0, available=10,
                                            outdated=10))  # fmt: skip
    seen = {w.key: w}
    t = tracker(room, seen)
    t.started(w, ANSWER)
    for n in range(1, 10):  # one more pod every 60 s: each within the 90 s deadline
        room.clock.advance(60.0)
        t.observe(dataclasses.replace(w, status=dataclasses.replace(
            w.status, observed_generation=2, updated=n, outdated=10 - n)))  # fmt: skip
    assert w.key in t, "not stuck after 540 s of steady progress"
    paused = dataclasses.replace(w, paused=True)
    seen[w.key] = paused
    room.clock.advance(1000.0)
    assert w.key in t, "a paused Deployment is not stuck"
    seen[w.key] = w
    room.clock.advance(100.0)
    assert w.key not in t
    assert room.sample("kube_reloader_rollouts_total", workload_kind="Deployment",
                       result="stuck") == 1  # fmt: skip
    await room.spawned.run()
