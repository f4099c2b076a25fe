"""The controller's wiring: what passes between rooms when a workload is seen or deleted, and
what leadership does to the fence (no cluster: the rooms get a fake clock and writer)."""

from __future__ import annotations

import dataclasses

from kube_reloader.runtime.clock import utc
from kube_reloader.runtime.controller import Controller
from kube_reloader.runtime.options import Options

from .fakes import AUTO, KEYS, FakeClock, FakeWriter, change, workload

PAUSE = {**AUTO, KEYS.pause_period: "30s"}


def controller() -> tuple[Controller, FakeClock]:
    clock = FakeClock()
    c = Controller(object(), Options(), clock=clock, writer=FakeWriter())  # type: ignore[arg-type]
    return c, clock


def paused(kind: str = "Deployment") -> object:
    at = utc(FakeClock()).strftime("%Y-%m-%dT%H:%M:%SZ")
    return dataclasses.replace(
        workload(kind=kind, annotations={**PAUSE, KEYS.paused_at: at}), paused=True
    )


def test_a_paused_deployment_seen_arms_its_resume_and_other_kinds_arm_nothing() -> None:
    c, clock = controller()
    c._workload_seen(paused())  # type: ignore[arg-type]
    assert clock.pending() == [30.0]
    c2, clock2 = controller()
    c2._workload_seen(paused("StatefulSet"))  # type: ignore[arg-type]
    assert clock2.pending() == []


def test_a_deleted_workload_leaves_no_timer_limit_or_failure_behind() -> None:
    c, clock = controller()
    w = paused()
    c._workload_seen(w)  # type: ignore[arg-type]
    key = w.key  # type: ignore[attr-defined]
    c.throttle.reloaded(key)
    c.reconciler.failures[key] = 3
    c.tracker.started(w, {"metadata": {"generation": 1}})  # type: ignore[arg-type]
    c._workload_gone(key)
    assert clock.pending() == []
    assert key not in c.reconciler.failures
    assert c.throttle.wait(key)[0] == 0
    assert key not in c.tracker


def test_leadership_flips_the_fence_the_rooms_share() -> None:
    c, _clock = controller()
    assert c.may_write()
    c.stop_leading()
    assert not c.may_write()
    assert not c.reconciler.fence.may_write()
    assert not c.reports.sink.fence.may_write()
    c.start_leading()
    assert c.pauses.fence.may_write()


def test_pending_work_is_what_the_coalescer_holds() -> None:
    c, _clock = controller()
    w = workload()
    c.coalescer.add(w.key, change(), observed=None, delay=0.3)
    assert c.pending == 1
    assert c.metrics.loop_registry.get_sample_value("kube_reloader_pending_reloads") == 1
