"""Reverted reloads: a template write undone within a minute earns one ReloadReverted Warning;
a newer reload of our own, or a revert after the minute, does not."""

from __future__ import annotations

import dataclasses

from kube_reloader.core import planning, rollouts
from kube_reloader.core.strategies import Strategy
from kube_reloader.runtime.reverts import WATCH_SECONDS, Reverts

from .fakes import Room, change, workload


def carrying(w: planning.Workload, value: str | None, generation: int) -> planning.Workload:
    """`w` at `generation`, its container carrying STAKATER_CM_CONFIGMAP=value (None: not
    at all)."""
    env = [] if value is None else [{"name": "STAKATER_CM_CONFIGMAP", "value": value}]
    seen = planning.workload_from_manifest({
        "kind": w.kind, "metadata": {"name": w.name, "namespace": w.namespace,
                                     "annotations": dict(w.annotations)},
        "spec": {"template": {"spec": {"containers": [
            {"name": "app", "envFrom": [{"configMapRef": {"name": "cm"}}], "env": env}]}}},
    })  # fmt: skip
    status = rollouts.Status(generation=generation, observed_generation=generation, replicas=1)
    return dataclasses.replace(seen, status=status)


def planned(w: planning.Workload, content: str) -> planning.Plan:
    return planning.plan(change=change("cm", content), workload=w, config=planning.Config(), now=0)


async def test_a_template_put_back_as_it_was_earns_one_warning() -> None:
    room = Room()
    reverts = Reverts(room.clock, room.reports.reloads, Strategy.ENV_VARS)
    before = workload()
    p = planned(before, "v2")
    reverts.written(before, [p], generation=2)
    reverts.observe(carrying(before, p.change.hash, 2))  # our own write, seen
    reverts.observe(carrying(before, None, 3))  # the operator put its template back
    reverts.observe(carrying(before, None, 3))
    await room.spawned.run()
    assert room.events.reasons() == ["ReloadReverted"]
    assert "kube-reloader.io/strategy: evict" in room.events.sent[0][2]
    assert room.sample("kube_reloader_reverted_total", workload_kind="Deployment") == 1


async def test_a_newer_reload_of_our_own_is_not_a_revert() -> None:
    room = Room()
    reverts = Reverts(room.clock, room.reports.reloads, Strategy.ENV_VARS)
    before = workload()
    reverts.written(before, [planned(before, "v2")], generation=2)
    reverts.observe(carrying(before, planned(before, "v3").change.hash, 3))
    await room.spawned.run()
    assert room.events.reasons() == []


async def test_after_a_minute_the_workload_is_no_longer_watched() -> None:
    room = Room()
    reverts = Reverts(room.clock, room.reports.reloads, Strategy.ENV_VARS)
    before = workload()
    reverts.written(before, [planned(before, "v2")], generation=2)
    room.clock.advance(WATCH_SECONDS)
    assert before.key not in reverts
    reverts.observe(carrying(before, None, 3))
    await room.spawned.run()
    assert room.events.reasons() == []


async def test_the_watches_a_fan_out_starts_end_together_within_a_second_after_the_minute() -> None:
    room = Room()
    reverts = Reverts(room.clock, room.reports.reloads, Strategy.ENV_VARS)
    first, second = workload("first"), workload("second")
    room.clock.advance(0.2)
    reverts.written(first, [planned(first, "v2")], generation=2)
    room.clock.advance(0.3)
    reverts.written(second, [planned(second, "v2")], generation=2)
    due = [round(room.clock.now + d, 9) for d in room.clock.pending()]
    assert due == [61.0], "one timer, a minute after the later write, on a whole second"
    room.clock.advance(WATCH_SECONDS)  # 60.5: a minute after the later write
    assert first.key in reverts
    assert second.key in reverts
    room.clock.advance(0.5)
    assert first.key not in reverts
    assert second.key not in reverts


async def test_kinds_whose_reload_is_not_a_lasting_template_write_are_not_watched() -> None:
    room = Room()
    reverts = Reverts(room.clock, room.reports.reloads, Strategy.ENV_VARS)
    job = dataclasses.replace(workload(), kind="Job")
    reverts.written(job, [planned(job, "v2")], generation=2)
    assert job.key not in reverts
    assert room.clock.pending() == []


async def test_a_state_from_before_the_write_arriving_late_is_not_a_revert() -> None:
    room = Room()
    reverts = Reverts(room.clock, room.reports.reloads, Strategy.ENV_VARS)
    before = workload()
    reverts.written(before, [planned(before, "v2")], generation=5)
    reverts.observe(carrying(before, None, 4))  # e.g. the pause PATCH just before the reload
    await room.spawned.run()
    assert room.events.reasons() == []
    assert before.key in reverts
