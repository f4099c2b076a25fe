"""Reporting's Event writes: bounded in flight and in number waiting, so a slow Events API or a
tenant's storm of Warnings never takes the connections the Lease renewals and reloads need; and
shared among namespaces (`runtime.eventing`), so one namespace's storm never crowds out
another's Events."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Coroutine
from typing import Any

import pytest

from kube_reloader.core import fairness, planning
from kube_reloader.core.correlating import Correlator
from kube_reloader.kube import errors
from kube_reloader.metrics import Recorder
from kube_reloader.runtime import eventing
from kube_reloader.runtime.fencing import Fence
from kube_reloader.runtime.reporting import Sink
from kube_reloader.runtime.reports import Reports

from .fakes import FakeClock, Room, change, workload
from .test_event_recording import FakeEventsAPI


class HangingEvents:
    """An Events API that answers only when told to."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.most = 0
        self.sent: list[tuple[str, str]] = []
        self.answer = asyncio.Event()

    async def send(self, workload: planning.Workload, event_type: str, reason: str,
                   message: str, component: str, action: str = "",
                   version: str = "") -> None:  # fmt: skip
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await self.answer.wait()
            self.sent.append((workload.namespace, reason))
        finally:
            self.in_flight -= 1


def reporter(
    sink: HangingEvents, fence: Fence | None = None
) -> tuple[Reports, list[Any], Recorder]:
    tasks: list[Any] = []

    def spawn(_name: str, coro: Coroutine[Any, Any, None]) -> None:
        tasks.append(asyncio.get_running_loop().create_task(coro))

    metrics = Recorder(by_namespace=False)
    reports = Reports.over(Sink(metrics, sink, fence or Fence(), spawn, FakeClock(), None))
    return reports, tasks, metrics


def in_ns(name: str, namespace: str) -> planning.Workload:
    return dataclasses.replace(workload(name), namespace=namespace)


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def dropped(metrics: Recorder, namespace: str) -> float:
    labels = {"namespace": namespace, "what": "event"}
    return metrics.registry.get_sample_value("kube_reloader_dropped_total", labels) or 0.0


async def test_events_are_written_a_few_at_a_time_and_a_lone_namespace_fills_its_share() -> None:
    sink = HangingEvents()
    r, tasks, metrics = reporter(sink)
    for i in range(eventing.CAP):
        r.sink.event(in_ns(f"w{i}", "storm"), "Warning", "ReloadError", "boom", "reloader")
    await settle()
    assert sink.most == eventing.WRITERS
    assert len(tasks) == eventing.WRITERS, "a fixed pool of writers, not a task per Event"
    half = fairness.share(eventing.CAP, 0)  # three quarters of the queue
    # its share, and one notice telling the namespace its Events are dropped
    assert r.sink.events.pending == half + 1
    assert dropped(metrics, "storm") == eventing.CAP - half
    sink.answer.set()
    await asyncio.gather(*tasks)
    assert len(sink.sent) == half + 1
    assert sink.sent.count(("storm", "ReloadEventsDropped")) == 1
    assert r.sink.events.pending == 0
    r.sink.event(in_ns("later", "storm"), "Normal", "Reloaded", "ok", "reloader")
    await asyncio.gather(*tasks)
    assert len(sink.sent) == half + 2, "room again once the backlog is written"


async def test_another_namespaces_event_is_queued_and_written_early_despite_a_storm() -> None:
    sink = HangingEvents()
    r, tasks, metrics = reporter(sink)
    for i in range(eventing.CAP * 3):
        r.sink.event(in_ns(f"w{i}", "storm"), "Warning", "ReloadError", "boom", "reloader")
    assert r.sink.event(in_ns("canary", "quiet"), "Normal", "Reloaded", "ok", "reloader")
    assert dropped(metrics, "quiet") == 0
    sink.answer.set()
    await asyncio.gather(*tasks)
    order = [ns for ns, _ in sink.sent]
    assert order.index("quiet") <= eventing.WRITERS + 1, "lanes take turns: no waiting behind"


async def test_a_warning_dropped_for_its_namespaces_share_is_warned_when_next_seen() -> None:
    sink = HangingEvents()
    r, tasks, _ = reporter(sink)
    fence = r.sink.fence
    fence.start_leading()
    for i in range(eventing.CAP):
        r.sink.event(in_ns(f"w{i}", "storm"), "Warning", "ReloadError", "boom", "reloader")
    late = in_ns("late", "storm")
    r.problems.warn_once(
        late, ("a bad annotation",)
    )  # over the share: dropped, not marked as warned
    sink.answer.set()
    await asyncio.gather(*tasks)
    assert ("storm", "ReloadAnnotationInvalid") not in sink.sent
    r.problems.warn_once(late, ("a bad annotation",))
    r.problems.warn_once(late, ("a bad annotation",))
    await asyncio.gather(*tasks)
    assert sink.sent.count(("storm", "ReloadAnnotationInvalid")) == 1, "once, when room came"


async def test_an_event_waiting_for_a_slot_is_not_written_once_the_replica_stops_leading() -> None:
    sink = HangingEvents()
    fence = Fence()
    r, tasks, _ = reporter(sink, fence)
    for i in range(eventing.WRITERS + 3):
        r.sink.event(workload(f"w{i}"), "Warning", "ReloadError", "boom", "reloader")
    await settle()
    fence.stop_leading()
    sink.answer.set()
    await asyncio.gather(*tasks)
    assert len(sink.sent) == eventing.WRITERS, "the three waiting were not written by a standby"


async def test_a_workload_deferred_over_and_over_is_logged_once_per_reason_until_written(
    caplog: pytest.LogCaptureFixture,
) -> None:
    r, metrics = logging_reporter(caplog)
    w = workload("follower")
    for _ in range(10):
        r.reloads.deferred(w, "rate_limit", "2026-12-03T00:00:00Z", 0)
    r.fleet.held(w, "order", "waiting for Deployment/a", first=True)
    r.reloads.deferred(w, "rate_limit", "2026-12-03T00:00:01Z", 0)
    lines = [rec.getMessage() for rec in caplog.records]
    assert lines.count("reload deferred") == 2, "once, and again when the reason changed back"
    assert lines.count("reload held") == 1
    assert (
        metrics.registry.get_sample_value("kube_reloader_deferred_total", {"reason": "rate_limit"})
        == 11
    ), "every deferral counted"
    plan = planning.plan(change=change("cm"), workload=w, config=planning.Config(), now=0)
    r.reloads.reloaded(w, plan, None)
    r.reloads.deferred(w, "rate_limit", "2026-12-03T00:00:02Z", 0)
    assert [rec.getMessage() for rec in caplog.records].count("reload deferred") == 3


async def test_a_hold_that_ended_and_began_again_is_logged_and_evented_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    r, _ = logging_reporter(caplog)
    r.sink.fence.start_leading()
    w = workload("frozen")
    r.fleet.held(w, "frozen", "frozen (namespace ns)", first=True)
    r.fleet.held(w, "frozen", "frozen (namespace ns)", first=False)  # woken and held again
    r.fleet.released(w.key)  # the change was reverted: the workload has nothing to wait for
    r.fleet.held(w, "frozen", "frozen (namespace ns)", first=True)  # a new change, held again
    r.reloads.deferred(w, "rate_limit", "2026-12-03T00:00:00Z", 0)
    r.fleet.released(w.key)
    r.reloads.deferred(w, "rate_limit", "2026-12-03T00:00:01Z", 0)
    lines = [rec.getMessage() for rec in caplog.records]
    assert lines.count("reload held") == 2
    assert lines.count("reload deferred") == 2
    assert r.sink.events.pending == 2, "a ReloadDeferred Event per hold"


def logging_reporter(caplog: pytest.LogCaptureFixture) -> tuple[Reports, Recorder]:
    """Reports whose Events never get written, their info lines captured."""
    caplog.set_level(logging.INFO, logger="kube_reloader.runtime.controller")
    r, _tasks, metrics = reporter(HangingEvents())
    return r, metrics


# -- one sink under every domain ------------------------------------------------------------


def test_the_domains_count_into_the_one_recorder_and_the_one_stats_of_their_sink() -> None:
    room = Room()
    r, w = room.reports, workload("web")
    r.reloads.deferred(w, "rate_limit", "2026-12-03T00:00:00Z", 0)
    r.fleet.held(w, "order", "waiting for Deployment/a", first=False)
    r.queue.retrying()
    for reason in ("rate_limit", "order", "retry_backoff"):
        assert room.sample("kube_reloader_deferred_total", reason=reason) == 1, reason
    plan = planning.plan(change=change("cm"), workload=w, config=planning.Config(), now=0)
    r.reloads.reloaded(w, plan, None)
    r.rollouts.rotation_done(w, [plan], 2, 1.0)
    r.webhooks.webhook_retrying(change("cm"), "timeout", 0.5)
    assert (r.sink.stats.reloads, r.sink.stats.retries) == (2, 2)
    assert room.sample("reloader_errors_total", type="handler_error") == 2
    room.spawned.close()  # the Events queued are not written here


def test_a_hold_of_the_fleet_and_a_deferral_of_the_reloads_share_one_memory_of_the_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="kube_reloader.runtime.controller")
    room = Room()
    room.fence.start_leading()
    r, w = room.reports, workload("web")
    r.fleet.held(w, "rate_limit", "held", first=False)
    r.reloads.deferred(w, "rate_limit", "2026-12-03T00:00:00Z", 0)  # the same reason: not news
    plan = planning.plan(change=change("cm"), workload=w, config=planning.Config(), now=0)
    r.rollouts.rotation_done(w, [plan], 2, 1.0)  # written: the next deferral is news again
    r.reloads.deferred(w, "rate_limit", "2026-12-03T00:00:01Z", 0)
    assert [rec.getMessage() for rec in caplog.records].count("reload deferred") == 1
    room.spawned.close()  # the Events queued are not written here


async def test_events_of_the_fleet_and_of_the_reloads_share_the_recorders_per_object_limit() -> (
    None
):
    api, clock, tasks = FakeEventsAPI(), FakeClock(), []

    def spawn(_name: str, coro: Coroutine[Any, Any, None]) -> None:
        tasks.append(asyncio.get_running_loop().create_task(coro))

    correlated = eventing.EventRecorder(
        api, clock, lambda kind: "apps/v1", correlator=Correlator(burst=1)
    )  # type: ignore[arg-type]
    fence = Fence()
    fence.start_leading()
    r = Reports.over(Sink(Recorder(by_namespace=False), correlated, fence, spawn, clock, None))
    web, other = workload("web"), workload("other")
    plan = planning.plan(change=change("cm"), workload=web, config=planning.Config(), now=0)
    r.fleet.held(web, "halted", "halted by the circuit breaker", first=True)
    r.reloads.reverted(web, plan)  # the same object, source and type: over its burst of one
    r.reloads.reverted(other, plan)  # another object: a burst of its own
    await settle()
    await asyncio.gather(*tasks)
    written = [(body["involvedObject"]["name"], body["reason"]) for _, _, body in api.calls]
    assert written == [("web", "ReloadHalted"), ("other", "ReloadReverted")]


# -- the reload Events of each version ------------------------------------------------------


@pytest.mark.parametrize(("v2", "reasons", "notes", "sources"), [
    (False, ["Reloaded", "ReloadFail"],
     ["Changes detected in 'cm' of type 'CONFIGMAP' in namespace 'ns', Updated 'web' of type "
      "'Deployment' in namespace 'ns'",
      "Update for 'web' of type 'Deployment' in namespace 'ns' failed with error "
      'deployments.apps "web" is forbidden: no'],
     [("reloader-configmaps", ""), ("reloader-configmaps", "")]),
    (True, ["Reloaded", "ReloadFailed"],
     ["Reloaded due to ConfigMap cm change",
      'Failed to reload due to ConfigMap cm change: deployments.apps "web" is forbidden: no'],
     [("reloader", "Reloading"), ("reloader", "Reloading")]),
])  # fmt: skip
async def test_a_reload_and_a_failed_one_are_told_in_the_words_and_api_of_each_version(
    v2: bool, reasons: list[str], notes: list[str], sources: list[tuple[str, str]]
) -> None:
    room = Room(v2=v2)
    room.fence.start_leading()
    r, w = room.reports, workload("web")
    plan = planning.plan(change=change("cm"), workload=w, config=planning.Config(), now=0)
    r.reloads.reloaded(w, plan, None)
    refused = errors.Forbidden(
        403, "no", reason="Forbidden", text='deployments.apps "web" is forbidden: no'
    )
    r.reloads.reload_failed(w, [plan], refused)
    await room.spawned.run()
    assert room.events.reasons() == reasons
    assert [message for _k, _r, message in room.events.sent] == notes
    assert room.events.sources == sources
