"""The controller's audit across rounds: a namespace whose pods cannot be listed keeps its
series, the gauge's cardinality is capped, and StaleCertificate Events are deduplicated in a
memory of their own (other warnings never evict it)."""

from __future__ import annotations

import dataclasses
import logging

import msgspec
import pytest

from kube_reloader.metrics import MAX_STALE_SERIES
from kube_reloader.runtime import auditreports, reporting
from kube_reloader.runtime.auditreports import StaleCertificate
from kube_reloader.runtime.clock import Pacer
from kube_reloader.runtime.reporting import MAX_WARNED
from tests.unit.runtime.fakes import Room, workload
from tests.unit.runtime.test_auditing import _close_rooms, rig, series

__all__ = ["_close_rooms"]


async def test_a_namespace_whose_pods_cannot_be_listed_keeps_its_previous_series() -> None:
    room, _stores, client, audit = rig()
    await audit.once()
    before = series(room)
    assert before
    client.refuse_pods.add("ns")
    report = await audit.once()
    assert report.unread == {"ns"}
    assert series(room) == before, "a failed read is no news: the alert must not flap"
    client.refuse_pods.clear()
    client.pods["ns"] = []
    await audit.once()
    assert series(room) == {}, "read again: what is stale now"


def stale_series(n: int) -> set[tuple[str, str, str, str]]:
    return {(f"ns{i % 7}", "Deployment", f"w{i}", "ConfigMap/cfg") for i in range(n)}


async def test_the_stale_gauge_exports_at_most_its_cap_and_warns_once_with_the_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    room = Room()
    caplog.set_level(logging.WARNING)
    for _ in range(2):
        await room.reports.audit.stale(stale_series(MAX_STALE_SERIES + 25), Pacer(room.clock))
    exported = sum(
        len(m.samples) for m in room.metrics.registry.collect()
        if m.name == "kube_reloader_stale_workloads"
    )  # fmt: skip
    assert exported == MAX_STALE_SERIES
    warned = [r for r in caplog.records if "too many stale pairs" in r.getMessage()]
    assert len(warned) == 1, "one warning while the count left out stays the same"
    assert getattr(warned[0], "left_out", None) == 25
    assert (
        sum(
            room.sample("kube_reloader_dropped_total", namespace=f"ns{i}", what="stale_series")
            for i in range(7)
        )
        == 2 * 25
    ), "counted per namespace, in each round"
    await room.reports.audit.stale(stale_series(3), Pacer(room.clock))
    assert sum(len(m.samples) for m in room.metrics.registry.collect()
               if m.name == "kube_reloader_stale_workloads") == 3  # fmt: skip


def cert(name: str, secret: str, changed_at: float) -> StaleCertificate:
    return StaleCertificate(workload(name), secret, changed_at, f"{name} runs {secret}")


async def test_stale_certificate_events_survive_a_flood_of_other_warnings() -> None:
    room = Room()
    room.fence.start_leading()
    found = [cert("nats", "nats-tls", 1.0), cert("api", "api-tls", 1.0)]
    room.reports.audit.stale_certificates(found)
    for i in range(MAX_WARNED + 10):
        room.reports.problems.warn_once(workload(f"w{i}"), (f"bad annotation {i}",))
        if i % 500 == 0:
            await room.spawned.run()  # (Events waiting are bounded: send them as they come)
    await room.spawned.run()
    room.reports.audit.stale_certificates(found)
    await room.spawned.run()
    assert room.events.reasons().count("StaleCertificate") == 2


async def test_one_tenant_rotating_often_gets_an_event_per_rotation_and_evicts_no_other(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(reporting, "MAX_WARNED", 60)
    monkeypatch.setattr(auditreports, "MAX_STALE_CERTIFICATES", 60)
    room = Room()
    room.fence.start_leading()
    others = [cert(f"w{i}", f"s{i}", 1.0) for i in range(50)]
    for rotation in range(1, 30):
        room.reports.audit.stale_certificates([cert("busy", "busy-tls", float(rotation)), *others])
    await room.spawned.run()
    sent = [(key.name, reason) for key, reason, _ in room.events.sent]
    assert sent.count(("busy", "StaleCertificate")) == 29
    assert len(sent) == 29 + 50, "each other workload warned once, never again"


async def test_more_stale_certificates_than_the_cap_are_not_warned_again_every_round(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    room = leading_room(monkeypatch, cap=20)
    many = [cert(f"w{i}", "tls", 1.0) for i in range(25)]
    for _ in range(3):
        room.reports.audit.stale_certificates(many)
        await room.spawned.run()
    assert room.events.reasons().count("StaleCertificate") == 20, "the cap, once each"


async def test_ten_thousand_new_stale_series_are_set_in_parts_letting_other_tasks_run() -> None:
    room = Room()
    steps: list[int] = []

    class Every:
        """A pacer that yields at every step (as a slow machine would)."""

        async def step(self) -> bool:
            steps.append(len(room.metrics._stale))
            return True

    await room.reports.audit.stale(stale_series(MAX_STALE_SERIES), Every())  # type: ignore[arg-type]
    assert len(steps) == MAX_STALE_SERIES // auditreports.CHUNK
    assert steps[0] == auditreports.CHUNK, "a part at a time"
    assert steps[-1] == MAX_STALE_SERIES


async def test_the_stale_certificate_memory_never_exceeds_its_cap_however_many_namespaces(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    room = leading_room(monkeypatch, cap=100)
    full = [cert(f"a{i}", "tls", 1.0) for i in range(100)]
    room.reports.audit.stale_certificates(full)
    others = [msgspec.structs.replace(cert(f"n{i}", "tls", 1.0),
                                  workload=dataclasses.replace(workload(f"n{i}"), namespace=f"ns{i}"))
              for i in range(100)]  # fmt: skip
    room.reports.audit.stale_certificates(full + others)
    assert len(room.reports.audit._stale_certs) <= 100
    await room.spawned.run()


def leading_room(monkeypatch: pytest.MonkeyPatch, *, cap: int) -> Room:
    """A leader's room whose StaleCertificate memory holds at most `cap`."""
    monkeypatch.setattr(auditreports, "MAX_STALE_CERTIFICATES", cap)
    room = Room()
    room.fence.start_leading()
    return room
