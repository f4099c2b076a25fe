"""The Event recorder: what it creates and patches, and what it does when the API says no."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from kube_reloader.core import eventseries, planning
from kube_reloader.core.correlating import Correlator
from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import PatchType
from kube_reloader.runtime import eventing, v2events
from tests.unit.runtime.fakes import EPOCH, FakeClock, Spawned

WALL = 1_780_000_000.0
WEB = planning.workload_from_manifest({
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "ns", "uid": "uid-1"},
    "spec": {"template": {"spec": {"containers": [{"name": "app"}]}}},
})  # fmt: skip


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def wall(self) -> float:
        return WALL + self.now

    def monotonic(self) -> float:
        return self.now


class FakeEventsAPI:
    """Records creates and patches of Events; `fail_patch` raises on the next patches."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.fail_patch: list[errors.KubeError] = []
        #: creates of Events about this object wait for `gate`
        self.gated = ""
        self.gate = asyncio.Event()

    async def create(
        self, resource: resources.Resource, body: Mapping[str, Any], *, namespace: str
    ) -> dict[str, Any]:
        assert (resource, namespace) == (resources.EVENTS, "ns")
        if self.gated and body["involvedObject"]["name"] == self.gated:
            await self.gate.wait()
        self.calls.append(("create", body["metadata"]["name"], dict(body)))
        return dict(body)

    async def patch(
        self, resource: resources.Resource, name: str, patch: Mapping[str, Any], *,
        namespace: str, patch_type: PatchType,
    ) -> dict[str, Any]:  # fmt: skip
        assert (resource, namespace, patch_type) == (resources.EVENTS, "ns", PatchType.STRATEGIC)
        if self.fail_patch:
            raise self.fail_patch.pop(0)
        self.calls.append(("patch", name, dict(patch)))
        return dict(patch)


def recorder(api: FakeEventsAPI, clock: Clock) -> eventing.EventRecorder:
    return eventing.EventRecorder(api, clock, lambda kind: "apps/v1")  # type: ignore[arg-type]


async def reloaded(rec: eventing.EventRecorder, workload: planning.Workload = WEB) -> None:
    await rec.send(workload, "Normal", "Reloaded", "Changes detected", "reloader-configmaps")


async def test_the_first_event_is_created_as_client_gos_recorder_creates_it() -> None:
    api, clock = FakeEventsAPI(), Clock()
    await reloaded(recorder(api, clock))
    [(verb, name, body)] = api.calls
    assert verb == "create"
    assert name.startswith("web.")
    assert body == {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": "ns"},
        "involvedObject": {"kind": "Deployment", "apiVersion": "apps/v1", "namespace": "ns",
                           "name": "web", "uid": "uid-1"},
        "type": "Normal", "reason": "Reloaded", "message": "Changes detected",
        "source": {"component": "reloader-configmaps"},
        "firstTimestamp": "2026-05-28T20:26:40Z", "lastTimestamp": "2026-05-28T20:26:40Z",
        "count": 1, "reportingComponent": "reloader-configmaps",
    }  # fmt: skip


async def test_an_identical_event_patches_the_count_and_last_timestamp_of_the_first() -> None:
    api, clock = FakeEventsAPI(), Clock()
    rec = recorder(api, clock)
    await reloaded(rec)
    for _ in range(2):
        clock.now += 61
        await reloaded(rec)
    name = api.calls[0][1]
    assert api.calls[1:] == [
        ("patch", name, {"count": 2, "lastTimestamp": "2026-05-28T20:27:41Z",
                         "message": "Changes detected"}),
        ("patch", name, {"count": 3, "lastTimestamp": "2026-05-28T20:28:42Z",
                         "message": "Changes detected"}),
    ]  # fmt: skip


async def test_an_event_deleted_meanwhile_is_created_again_under_its_name_with_its_count() -> None:
    api, clock = FakeEventsAPI(), Clock()
    rec = recorder(api, clock)
    await reloaded(rec)
    api.fail_patch = [errors.NotFound(404, 'events "web.x" not found')]
    clock.now += 5
    await reloaded(rec)
    (_, first, _), (verb, name, body) = api.calls
    assert (verb, name) == ("create", first)
    assert (body["count"], body["firstTimestamp"], body["lastTimestamp"]) == (
        2, "2026-05-28T20:26:40Z", "2026-05-28T20:26:45Z")  # fmt: skip


async def test_without_rbac_to_patch_repeated_events_are_created_as_new_ones_after_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api, clock = FakeEventsAPI(), Clock()
    rec = recorder(api, clock)
    await reloaded(rec)
    api.fail_patch = [errors.Forbidden(403, 'events "web.x" is forbidden')]
    for _ in range(2):
        clock.now += 1
        await reloaded(rec)
    verbs = [(verb, body["count"]) for verb, _name, body in api.calls]
    assert verbs == [("create", 1), ("create", 1), ("create", 1)], "never patched again"
    assert len({name for _verb, name, _body in api.calls}) == 3
    assert rec.patch_forbidden
    assert [r.message for r in caplog.records if r.levelname == "WARNING"] == [
        "cannot patch Events: repeated Events are created as new ones (grant patch on events)"
    ]


async def test_a_patch_refused_for_another_reason_is_raised_to_the_caller() -> None:
    api, clock = FakeEventsAPI(), Clock()
    rec = recorder(api, clock)
    await reloaded(rec)
    api.fail_patch = [errors.Invalid(422, "bad")]
    with pytest.raises(errors.Invalid):
        await reloaded(rec)


async def test_writes_of_one_event_are_made_in_order_and_others_never_wait_for_them() -> None:
    api, clock = FakeEventsAPI(), Clock()
    rec = recorder(api, clock)
    api.gated = "web"
    first = asyncio.create_task(reloaded(rec))
    repeat = asyncio.create_task(reloaded(rec))
    for _ in range(5):
        await asyncio.sleep(0)
    assert api.calls == [], "the create waits; the patch of the same Event waits behind it"
    api_other = planning.workload_from_manifest({
        "kind": "Deployment", "metadata": {"name": "api", "namespace": "ns", "uid": "uid-2"},
        "spec": {"template": {"spec": {"containers": [{"name": "app"}]}}},
    })  # fmt: skip
    await reloaded(rec, api_other)
    assert [(verb, name.split(".")[0]) for verb, name, _ in api.calls] == [("create", "api")]
    api.gate.set()
    await asyncio.wait_for(asyncio.gather(first, repeat), 5)
    assert [(verb, name.split(".")[0]) for verb, name, _ in api.calls] == [
        ("create", "api"), ("create", "web"), ("patch", "web")]  # fmt: skip
    assert len(rec._turns) == 0, "no lock outlives its writes"


async def test_one_noisy_object_is_rate_limited_and_another_objects_events_still_go_out() -> None:
    api, clock = FakeEventsAPI(), Clock()
    rec = recorder(api, clock)
    for i in range(40):
        await rec.send(WEB, "Warning", "ReloadFail", f"failure {i % 3}", "reloader-configmaps")
    quiet = planning.workload_from_manifest({
        "kind": "Deployment", "metadata": {"name": "quiet", "namespace": "ns", "uid": "uid-q"},
        "spec": {"template": {"spec": {"containers": [{"name": "app"}]}}},
    })  # fmt: skip
    await reloaded(rec, quiet)
    noisy = [c for c in api.calls if c[1].startswith("web.")]
    assert len(noisy) == 25, "client-go's burst per source and object"
    assert [c[0] for c in api.calls if c[1].startswith("quiet.")] == ["create"]


def test_a_name_too_long_for_an_event_becomes_a_uuid() -> None:
    assert len(eventing.fresh_name("w" * 253)) == 36
    assert eventing.fresh_name("web").startswith("web.")


async def test_the_recorder_uses_its_own_correlator_when_given_one() -> None:
    api, clock = FakeEventsAPI(), Clock()
    rec = eventing.EventRecorder(api, clock, lambda kind: "v1", correlator=Correlator(burst=1))  # type: ignore[arg-type]
    await reloaded(rec)
    await reloaded(rec)
    assert len(api.calls) == 1


class FakeEventsV1API:
    """Records creates and PATCHes of `events.k8s.io/v1` Events; `gone` names Events a PATCH
    finds deleted."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self.patched: list[tuple[str, dict[str, Any]]] = []
        self.gone: set[str] = set()
        #: names whose next create finds the Event made meanwhile (it is then patchable)
        self.raced: set[str] = set()
        #: PATCHes to refuse (a server error), in turn
        self.failing = 0
        #: set to hold creates until it is set
        self.creating: asyncio.Event | None = None
        self.calls: list[str] = []

    async def create(
        self, resource: resources.Resource, body: Mapping[str, Any], *, namespace: str
    ) -> dict[str, Any]:
        assert (resource, namespace) == (resources.EVENTS_V1, "ns")
        name = body["metadata"]["name"]
        if self.creating is not None:
            await self.creating.wait()
        self.calls.append(f"create {name}")  # when it is done
        if name in self.raced:
            self.raced.discard(name)
            self.gone.discard(name)
            raise errors.AlreadyExists(409, "exists", reason="AlreadyExists")
        self.created.append(dict(body))
        return dict(body)

    async def patch(
        self, resource: resources.Resource, name: str, patch: dict[str, Any], *,
        namespace: str, patch_type: PatchType,
    ) -> dict[str, Any]:  # fmt: skip
        assert (resource, namespace, patch_type) == (resources.EVENTS_V1, "ns", PatchType.STRATEGIC)
        self.calls.append(f"patch {name}")
        if self.failing:
            self.failing -= 1
            raise errors.ServerError(500, "down", reason="InternalError")
        if name in self.gone:
            raise errors.NotFound(404, "gone", reason="NotFound")
        self.patched.append((name, patch))
        return patch


def v2_recorder(api: FakeEventsV1API, clock: Any, spawn: Any = None) -> eventing.EventRecorder:
    return eventing.EventRecorder(
        api, clock, lambda kind: "apps/v1", instance="reloader-host", spawn=spawn,  # type: ignore[arg-type]
    )  # fmt: skip


async def test_with_an_action_each_event_is_created_through_events_k8s_io_as_v2_records_it() -> (
    None
):
    api, clock = FakeEventsV1API(), Clock()
    rec = v2_recorder(api, clock)
    note = "Reloaded due to ConfigMap c change"
    await rec.send(WEB, "Normal", "Reloaded", note, "reloader", "Reloading", "41")
    clock.now = 0.25
    await rec.send(WEB, "Normal", "Reloaded", note, "reloader", "Reloading", "42")
    first, second = api.created
    assert first == {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"web.{int(WALL * 1e9):x}", "namespace": "ns"},
        "eventTime": "2026-05-28T20:26:40.000000Z",
        "reportingController": "reloader",
        "reportingInstance": "reloader-host",
        "action": "Reloading",
        "reason": "Reloaded",
        "regarding": {"kind": "Deployment", "apiVersion": "apps/v1", "namespace": "ns",
                      "name": "web", "uid": "uid-1", "resourceVersion": "41"},
        "note": note,
        "type": "Normal",
    }  # fmt: skip
    assert second["metadata"]["name"] == f"web.{int((WALL + 0.25) * 1e9):x}"
    assert second["eventTime"] == "2026-05-28T20:26:40.250000Z"
    assert second["regarding"]["resourceVersion"] == "42", "a reload's new version: a new Event"
    assert api.patched == []


FAILED_NOTE = "Failed to reload due to ConfigMap c change: boom"


async def send_failed(
    rec: eventing.EventRecorder, version: str = "7", note: str = FAILED_NOTE
) -> None:
    await rec.send(WEB, "Warning", "ReloadFailed", note, "reloader", "Reloading", version)


async def test_an_isomorphic_v2_event_becomes_a_series_of_the_first_as_client_gos_recorder_writes_it() -> (
    None
):
    api, clock, spawned = FakeEventsV1API(), FakeClock(), Spawned()
    rec = v2_recorder(api, clock, spawned)
    await send_failed(rec)
    clock.advance(10)
    await send_failed(rec, note="Failed to reload due to ConfigMap d change: boom")  # note: no key
    clock.advance(10)
    await send_failed(rec)
    name = api.created[0]["metadata"]["name"]
    assert len(api.created) == 1
    assert api.patched == [(name, {"series": {"count": 2, "lastObservedTime": micro(10)}})]
    await send_failed(rec, version="8")  # the object changed: another Event
    assert len(api.created) == 2
    clock.advance(eventseries.FINISH_SECONDS)  # the first sweep: the series is still recent
    assert await spawned.run() == ["event-series"]
    assert len(api.patched) == 1
    clock.advance(eventseries.FINISH_SECONDS)  # the next: quiet for 6 minutes, its count written
    assert await spawned.run() == ["event-series"]
    assert api.patched[-1] == (name, {"series": {"count": 3, "lastObservedTime": micro(20)}})
    await send_failed(rec)  # the series ended: a new Event
    assert len(api.created) == 3


async def test_a_series_whose_event_is_gone_is_created_again_with_its_count() -> None:
    api, clock = FakeEventsV1API(), FakeClock()
    rec = v2_recorder(api, clock)
    await send_failed(rec)
    api.gone.add(api.created[0]["metadata"]["name"])
    await send_failed(rec)
    first, again = api.created
    assert again == {**first, "series": {"count": 2, "lastObservedTime": micro(0)}}


async def test_the_series_sweep_runs_only_while_events_are_remembered() -> None:
    api, clock, spawned = FakeEventsV1API(), FakeClock(), Spawned()
    rec = v2_recorder(api, clock, spawned)
    assert clock.pending() == []
    await send_failed(rec)
    assert clock.pending() == [eventseries.FINISH_SECONDS]
    clock.advance(eventseries.FINISH_SECONDS)
    await spawned.run()  # the single Event is still young: remembered, swept again later
    clock.advance(eventseries.FINISH_SECONDS)
    await spawned.run()  # now forgotten: nothing left to sweep
    assert clock.pending() == []
    assert api.patched == []


def micro(seconds: float) -> str:
    return v2events.micro_time(EPOCH + seconds)


class SecondReading(FakeClock):
    """A clock that opens `gate` when it is read the second time: the second send has begun
    (each send reads the time first), while the first one's create waits behind the gate."""

    def __init__(self, gate: asyncio.Event) -> None:
        super().__init__()
        self.gate, self.reads = gate, 0

    def wall(self) -> float:
        self.reads += 1
        if self.reads == 2:
            self.gate.set()
        return super().wall()


async def test_a_series_patch_waits_for_its_events_create() -> None:
    api = FakeEventsV1API()
    api.creating = asyncio.Event()
    rec = v2_recorder(api, SecondReading(api.creating))
    await asyncio.gather(send_failed(rec), send_failed(rec))
    name = api.created[0]["metadata"]["name"]
    assert api.calls == [f"create {name}", f"patch {name}"]


async def test_an_event_created_meanwhile_by_another_write_is_patched_with_the_series() -> None:
    api, clock = FakeEventsV1API(), FakeClock()
    rec = v2_recorder(api, clock)
    await send_failed(rec)
    name = api.created[0]["metadata"]["name"]
    api.gone.add(name)
    api.raced.add(name)
    await send_failed(rec)
    assert api.calls == [f"create {name}", f"patch {name}", f"create {name}", f"patch {name}"]
    assert api.patched == [(name, {"series": {"count": 2, "lastObservedTime": micro(0)}})]


async def test_a_series_whose_last_write_failed_is_written_at_the_next_sweep() -> None:
    api, clock, spawned = FakeEventsV1API(), FakeClock(), Spawned()
    rec = v2_recorder(api, clock, spawned)
    await send_failed(rec)
    await send_failed(rec)
    await send_failed(rec)
    for _ in range(2):  # the series goes quiet: its last count is due at the second sweep
        clock.advance(eventseries.FINISH_SECONDS)
        api.failing = 1
        await spawned.run()
    clock.advance(eventseries.FINISH_SECONDS)
    await spawned.run()
    name = api.created[0]["metadata"]["name"]
    assert api.patched[-1] == (name, {"series": {"count": 3, "lastObservedTime": micro(0)}})
    assert len(rec.v2.series) == 0, "forgotten once written"
