"""Intake: which watch events become changes, and what happens before the initial sync."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses

import msgspec
import pytest

from kube_reloader.core import planning
from kube_reloader.core.objects import ResourceType
from kube_reloader.core.planning import Change, Event
from kube_reloader.core.strategies import Compat
from kube_reloader.kube.projections import ObjectMeta
from kube_reloader.kube.watching import EventType, ReflectorEvent
from kube_reloader.runtime.cache import ConfigEntry, WorkloadEntry
from kube_reloader.runtime.intake import (
    MAX_AHEAD_SECONDS,
    FanOutFn,
    Intake,
    clamp_content_time,
    keep_content_time,
)
from kube_reloader.runtime.options import Options
from kube_reloader.runtime.stores import Stores
from kube_reloader.runtime.supervisor import Supervisor

from .fakes import KEYS, Room, intake_ports, no_fan_out
from .fakes import workload as fake_workload


def entry(content: str, namespace: str = "ns") -> ConfigEntry:
    return ConfigEntry(ObjectMeta(name="cm", namespace=namespace), ResourceType.CONFIGMAP, content)


def event(kind: EventType, new: str | None, old: str | None = None, *,
          synthesized: bool = False, namespace: str = "ns") -> ReflectorEvent[ConfigEntry]:  # fmt: skip
    return ReflectorEvent(
        kind, (namespace, "cm"),
        None if new is None else entry(new, namespace),
        None if old is None else entry(old, namespace),
        synthesized,
    )  # fmt: skip


def intake(room: Room, fan_out: FanOutFn = no_fan_out, **options: object) -> Intake:
    opts = dataclasses.replace(Options(), **options)  # type: ignore[arg-type]
    return Intake(
        *(
            opts,
            room.clock,
            Stores(KEYS),
            room.reports.changes,
            room.reports.problems,
            Supervisor(),
            asyncio.Event(),
        ),
        **intake_ports(fan_out),
    )


CASES = [
    # (what, event, options, initial, expected event or None)
    ("a content change", event(EventType.MODIFIED, "h2", "h1"), {}, False, Event.UPDATED),
    ("a metadata-only update", event(EventType.MODIFIED, "h1", "h1"), {}, False, None),
    ("a creation without --reload-on-create", event(EventType.ADDED, "h1"), {}, False, None),
    ("a creation with --reload-on-create", event(EventType.ADDED, "h1"),
     {"reload_on_create": True}, False, Event.CREATED),
    ("an object listed at start", event(EventType.ADDED, "h1"),
     {"reload_on_create": True}, True, None),
    ("an object listed at start with --sync-after-restart", event(EventType.ADDED, "h1"),
     {"reload_on_create": True, "sync_after_restart": True}, True, Event.CREATED),
    ("a creation missed while not watching", event(EventType.ADDED, "h1", synthesized=True),
     {"reload_on_create": True}, True, Event.CREATED),
    ("a deletion without --reload-on-delete", event(EventType.DELETED, "h1"), {}, False, None),
    ("a deletion with --reload-on-delete", event(EventType.DELETED, "h1"),
     {"reload_on_delete": True}, False, Event.DELETED),
    ("a change in an ignored namespace", event(EventType.MODIFIED, "h2", "h1", namespace="kube-system"),
     {"namespaces_to_ignore": frozenset({"kube-system"})}, False, None),
    ("a change outside the watched namespaces", event(EventType.MODIFIED, "h2", "h1", namespace="b"),
     {"namespaces": ("a",)}, False, None),
]  # fmt: skip


@pytest.mark.parametrize(("what", "ev", "options", "initial", "expected"), CASES,
                         ids=[c[0] for c in CASES])  # fmt: skip
def test_a_watch_event_becomes_a_change_only_when_it_should(
    what: str, ev: ReflectorEvent[ConfigEntry], options: dict[str, object], initial: bool,
    expected: Event | None,
) -> None:  # fmt: skip
    change = intake(Room(), **options).change_for(ev, initial=initial)
    assert (change.event if change else None) == expected, what
    if change is not None and expected is not Event.DELETED:
        assert change.hash == ev.object.hash  # type: ignore[union-attr]


@pytest.mark.parametrize(("compat", "annotations"), [
    (Compat.V1, {"reloader.stakater.com/match": "true"}), (Compat.V2, {}),
])  # fmt: skip
def test_a_deletion_keeps_the_objects_annotations_in_v1_and_carries_none_in_v2_as_each_decides(
    compat: Compat, annotations: dict[str, str]
) -> None:
    meta = ObjectMeta(
        name="cm", namespace="ns", annotations={"reloader.stakater.com/match": "true"}
    )
    gone = ConfigEntry(meta, ResourceType.CONFIGMAP, "h1")
    ev = ReflectorEvent(EventType.DELETED, ("ns", "cm"), gone, None, False)
    plan = planning.Config(compat=compat)
    change = intake(Room(), reload_on_delete=True, plan=plan).change_for(ev, initial=False)
    assert change is not None
    assert (change.event, dict(change.annotations)) == (Event.DELETED, annotations)


def test_in_v2_the_deletion_of_an_ignored_object_is_no_change_as_its_predicate_filters_it() -> None:
    meta = ObjectMeta(
        name="cm", namespace="ns", annotations={"reloader.stakater.com/ignore": "true"}
    )
    ev = ReflectorEvent(EventType.DELETED, ("ns", "cm"), ConfigEntry(meta, ResourceType.CONFIGMAP, "h1"),
                        None, False)  # fmt: skip
    plan = planning.Config(compat=Compat.V2)
    assert intake(Room(), reload_on_delete=True, plan=plan).change_for(ev, initial=False) is None


async def test_changes_before_the_initial_sync_wait_and_only_the_latest_fans_out() -> None:
    room = Room()
    delivered: list[Change] = []

    async def fan_out(change: Change, observed: float) -> None:
        delivered.append(change)

    i = intake(room, fan_out)
    await i.on_config(event(EventType.MODIFIED, "h2", "h1"), "configmaps", initial=False)
    await i.on_config(event(EventType.MODIFIED, "h3", "h2"), "configmaps", initial=False)
    assert delivered == []
    await i.synced()  # no required reflectors in this test: synced at once
    await i.drained()
    assert [c.hash for c in delivered] == ["h3"]
    assert i.ready.is_set()
    await i.on_config(event(EventType.MODIFIED, "h4", "h3"), "configmaps", initial=False)
    await i.drained()
    assert [c.hash for c in delivered] == ["h3", "h4"]
    assert room.reports.sink.stats.changes == 3


class NamespaceList:
    """A namespaces reflector's state: listed, or forbidden by RBAC."""

    def __init__(self, *, forbidden: bool = False) -> None:
        self.synced = asyncio.Event()
        self.forbidden = forbidden


@pytest.mark.parametrize(
    ("select", "forbidden", "ready"),
    [
        (False, True, True),  # policies only, RBAC says no: ready, policies not read
        (False, False, False),  # policies only, the list still running: wait for it
        (True, True, False),  # the selector decides what is watched: its list gates readiness
    ],
)
async def test_namespaces_watched_for_their_policies_never_keep_a_forbidden_controller_unready(
    select: bool, forbidden: bool, ready: bool
) -> None:
    i = intake(Room())
    i.stores.namespaces = NamespaceList(forbidden=forbidden)  # type: ignore[assignment]
    i.stores.namespaces_select = select
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(i.synced(), 0.5)
    assert i.ready.is_set() is ready


def test_a_write_that_left_the_content_alone_keeps_the_time_of_the_last_content_change() -> None:
    old = msgspec.structs.replace(entry("h1"), changed_at=100.0)
    relabelled = msgspec.structs.replace(entry("h1"), changed_at=200.0)
    store = {("ns", "cm"): relabelled}
    keep_content_time(store, ReflectorEvent(EventType.MODIFIED, ("ns", "cm"), relabelled, old))
    assert store[("ns", "cm")].changed_at == 100.0
    rewritten = msgspec.structs.replace(entry("h2"), changed_at=300.0)
    store = {("ns", "cm"): rewritten}
    keep_content_time(store, ReflectorEvent(EventType.MODIFIED, ("ns", "cm"), rewritten, old))
    assert store[("ns", "cm")].changed_at == 300.0


def named_event(namespace: str, name: str, new: str, old: str) -> ReflectorEvent[ConfigEntry]:
    def e(content: str) -> ConfigEntry:
        return ConfigEntry(ObjectMeta(name=name, namespace=namespace), ResourceType.CONFIGMAP,
                           content)  # fmt: skip

    return ReflectorEvent(EventType.MODIFIED, (namespace, name), e(new), e(old), False)


async def test_an_expensive_namespace_neither_blocks_the_watch_nor_delays_another_namespace(
) -> None:  # fmt: skip
    order: list[str] = []
    busy = asyncio.Event()

    async def fan_out(change: Change, observed: float) -> None:
        if change.namespace == "tenant":
            await busy.wait()  # each of its changes costs a long fan-out
        order.append(f"{change.namespace}/{change.name}")

    i = intake(Room(), fan_out)
    i.ready.set()
    for n in range(300):
        await i.on_config(named_event("tenant", f"c{n}", "h2", "h1"), "configmaps", initial=False)
    await i.on_config(named_event("canary", "cm", "h2", "h1"), "configmaps", initial=False)
    for _ in range(3):
        await asyncio.sleep(0)
    assert i.waiting == 300, "the consumer returned at once; one change is being fanned out"
    busy.set()
    await i.drained()
    assert order.index("canary/cm") == 1, "its turn came after the one change in flight"
    assert len(order) == 301


async def test_changes_of_one_resource_waiting_for_their_fan_out_join_in_its_place() -> None:
    delivered: list[Change] = []

    async def fan_out(change: Change, observed: float) -> None:
        delivered.append(change)

    i = intake(Room(), fan_out)
    i.ready.set()
    await i.on_config(named_event("ns", "a", "h2", "h1"), "configmaps", initial=False)
    await i.on_config(named_event("ns", "b", "h2", "h1"), "configmaps", initial=False)
    await i.on_config(named_event("ns", "a", "h3", "h2"), "configmaps", initial=False)
    await i.drained()
    assert [(c.name, c.hash) for c in delivered] == [("a", "h3"), ("b", "h2")]


async def test_a_content_or_template_time_a_tenant_wrote_in_the_future_is_clamped() -> None:
    room = Room()
    i = intake(room)
    now = room.clock.wall()
    forged = msgspec.structs.replace(entry("h2"), changed_at=253402300799.0)  # 9999-12-31
    store = {("ns", "cm"): forged}
    clamp_content_time(store, ReflectorEvent(EventType.MODIFIED, ("ns", "cm"), forged, None),
                       now + MAX_AHEAD_SECONDS)  # fmt: skip
    assert store[("ns", "cm")].changed_at == now + MAX_AHEAD_SECONDS
    w = dataclasses.replace(fake_workload(), template_changed_at=253402300799.0)
    i.on_workload(
        ReflectorEvent(EventType.ADDED, ("ns", "web"), WorkloadEntry(ObjectMeta(), w), None)
    )
    indexed = i.stores.index.workloads[w.key]
    assert indexed.template_changed_at == now + MAX_AHEAD_SECONDS
