"""The catch-up's look at the pods: a change missed on time alone rolls only when some pod of
the workload started before it (or the pods cannot be told)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable

import pytest

from kube_reloader.core import hashing
from kube_reloader.core.objects import ObjectKey, ResourceType
from kube_reloader.core.planning import Change, workload_from_manifest
from kube_reloader.kube import errors
from kube_reloader.kube.projections import ObjectMeta, OwnerReference
from kube_reloader.runtime.cache import ConfigEntry
from kube_reloader.runtime.coalescing import Coalescer
from kube_reloader.runtime.freshness import MAX_ACTIVE, Freshness, Suspect
from kube_reloader.runtime.kinds import BUILTIN
from kube_reloader.runtime.options import Options
from kube_reloader.runtime.resyncing import Resync
from kube_reloader.runtime.stores import Stores
from kube_reloader.runtime.supervisor import Supervisor

from .fakes import AUTO, EPOCH, KEYS, PodWriter, Room, workload

KEY = ObjectKey("Deployment", "ns", "web")
CHANGED_AT = EPOCH - 50.0
CHANGE = Change(ResourceType.CONFIGMAP, "ns", "cm", hashing.configmap_hash({"k": "2"}))


class ListFails(PodWriter):
    """Answers the pod LIST with `errors` in turn, then lists."""

    def __init__(self, *fail: Exception) -> None:
        super().__init__()
        self.fail = list(fail)
        self.lists = 0

    async def pods(self, namespace: str, selector: str) -> list:  # type: ignore[type-arg]
        self.lists += 1
        if self.fail:
            raise self.fail.pop(0)
        return await super().pods(namespace, selector)


FORBIDDEN = errors.Forbidden(403, 'pods is forbidden: cannot list resource "pods"')
UNAVAILABLE = errors.ServerError(503, "the server is currently unable to handle the request")


@dataclasses.dataclass
class Rig:
    room: Room
    writer: PodWriter
    fresh: Freshness
    queued: list[tuple[ObjectKey, Change]]

    async def check(self, kind: str = "Deployment") -> bool:
        started = self.fresh.check(
            workload(kind=kind), [Suspect(CHANGE, CHANGED_AT, "written after the template")]
        )
        await self.settle()
        return started

    async def settle(self) -> None:
        for _ in range(30):
            await asyncio.sleep(0)


def rig(
    created: tuple[float, ...], *, replicas: int | None = None, writer: PodWriter | None = None,
    owner: OwnerReference | None = None,
) -> Rig:  # fmt: skip
    room = Room()
    w = writer or PodWriter()
    w.owner = owner
    spec: dict[str, object] = {"selector": {"matchLabels": {"app": "web"}}}
    if replicas is not None:
        spec["replicas"] = replicas
    w.objects[KEY] = {"metadata": {"uid": "dep-1"}, "spec": spec}
    for t in created:
        w.add(t, ready_at=t)
    queued: list[tuple[ObjectKey, Change]] = []
    fresh = Freshness(room.clock, w, room.fence, room.reports.changes, room.reports.problems, Supervisor(),
                      lambda key, change: queued.append((key, change)))  # fmt: skip
    return Rig(room, w, fresh, queued)


OTHER = OwnerReference(
    apiVersion="apps/v1", kind="ReplicaSet", name="webapp-1", uid="rs-9", controller=True
)


def mixed_owners() -> Rig:
    """Its own pod is new; an older pod of `webapp`'s ReplicaSet matches its selector too."""
    r = rig((CHANGED_AT + 9,))
    r.writer.owner = OTHER
    r.writer.add(CHANGED_AT - 5, ready_at=CHANGED_AT - 5)
    return r


def evicted_leftover() -> Rig:
    """Its live pods are new; an evicted pod from before the change awaits garbage collection."""
    r = rig((CHANGED_AT + 9,))
    r.writer.add(CHANGED_AT - 5, ready_at=None, phase="Failed")
    return r


CASES: list[tuple[str, Callable[[], Rig], bool]] = [
    ("every pod started after the change", lambda: rig((CHANGED_AT + 9, CHANGED_AT + 20)), False),
    ("a pod started before the change", lambda: rig((CHANGED_AT - 5, CHANGED_AT + 9)), True),
    ("a pod started in the change's own second", lambda: rig((CHANGED_AT,)), True),
    ("a pod started within the margin after it", lambda: rig((CHANGED_AT + 3,)), True),
    ("an ended pod from before it is left over", evicted_leftover, False),
    (
        "the pods cannot be listed",
        lambda: rig((CHANGED_AT + 9,), writer=ListFails(FORBIDDEN)),
        True,
    ),
    (
        "the API fails once, then answers",
        lambda: rig((CHANGED_AT + 9,), writer=ListFails(UNAVAILABLE)),
        False,
    ),
    ("no pods to look at", lambda: rig((), replicas=0), True),
    (
        "the only pods belong to another workload's ReplicaSet",
        lambda: rig((CHANGED_AT + 9,), owner=OTHER),
        True,
    ),
    ("an old pod of another workload matches its selector", mixed_owners, False),
]


@pytest.mark.parametrize(("case", "make", "rolls"), CASES, ids=[c[0] for c in CASES])
async def test_a_change_missed_on_time_alone_rolls_only_when_a_pod_may_run_old_content(
    case: str, make: Callable[[], Rig], rolls: bool
) -> None:
    r = make()
    assert await r.check()
    r.room.clock.advance(10.0)  # any retry's pause passes
    await r.settle()
    assert r.queued == ([(KEY, CHANGE)] if rolls else []), case
    assert r.fresh.current(KEY, CHANGE, CHANGED_AT) is not rolls


async def test_a_workload_found_current_is_not_looked_at_again_for_the_same_write() -> None:
    r = rig((CHANGED_AT + 9,))
    assert await r.check()
    reads = len(r.writer.reads)
    assert not await r.check(), "found current before: no second look"
    assert len(r.writer.reads) == reads
    newer = dataclasses.replace(CHANGE, hash=hashing.configmap_hash({"k": "3"}))
    assert not r.fresh.current(KEY, newer, CHANGED_AT), "other content is not known current"
    assert not r.fresh.current(KEY, CHANGE, CHANGED_AT + 1), "a later write of it is not either"


async def test_a_kind_whose_pods_it_cannot_find_rolls_without_a_read() -> None:
    r = rig((CHANGED_AT + 9,))
    assert await r.check(kind="Widget")
    assert r.queued == [(ObjectKey("Widget", "ns", "web"), CHANGE)]
    assert r.writer.reads == []


async def test_a_replica_that_stops_leading_before_the_look_queues_nothing() -> None:
    r = rig((CHANGED_AT - 5,))
    r.room.fence.stop_leading()
    assert await r.check()
    assert r.queued == []
    assert r.writer.reads == [], "a standby does not look either"
    assert not r.fresh.current(KEY, CHANGE, CHANGED_AT)


async def test_a_refused_pod_list_is_asked_once_and_every_later_look_rolls() -> None:
    writer = ListFails(FORBIDDEN)
    r = rig((CHANGED_AT + 9,), writer=writer)
    assert await r.check()
    other = workload("api")
    writer.objects[other.key] = writer.objects[KEY]
    assert r.fresh.check(other, [Suspect(CHANGE, CHANGED_AT, "written after the template")])
    await r.settle()
    assert writer.lists == 1
    assert [k for k, _ in r.queued] == [KEY, other.key]


async def test_an_api_that_keeps_failing_rolls_after_the_retries() -> None:
    writer = ListFails(*[UNAVAILABLE] * 4)
    r = rig((CHANGED_AT + 9,), writer=writer)
    assert await r.check()
    for _ in range(3):  # after 1 s, 2 s and 4 s
        assert r.queued == [], "still retrying"
        r.room.clock.advance(5.0)
        await r.settle()
    assert r.queued == [(KEY, CHANGE)]
    assert writer.lists == 4


async def test_looks_take_turns_across_namespaces_at_most_a_few_at_once() -> None:
    """A namespace with many such workloads waits its turn with the others."""
    room = Room()
    order: list[str] = []
    gate = asyncio.Event()

    class Slow(PodWriter):
        async def read(self, key: ObjectKey) -> dict[str, object]:
            order.append(key.namespace)
            await gate.wait()
            return {"metadata": {"uid": ""}, "spec": {"selector": {"matchLabels": {"app": "web"}}}}

    fresh = Freshness(room.clock, Slow(), room.fence, room.reports.changes, room.reports.problems, Supervisor(),
                      lambda _k, _c: None)  # fmt: skip
    busy = [dataclasses.replace(workload(f"w{i}"), namespace="busy") for i in range(20)]
    quiet = [dataclasses.replace(workload(f"q{i}"), namespace="quiet") for i in range(2)]
    for w in (*busy, *quiet):
        assert fresh.check(w, [Suspect(CHANGE, CHANGED_AT, "time")])
    for _ in range(30):
        await asyncio.sleep(0)
    assert len(order) == MAX_ACTIVE, "a bounded number of looks at once"
    assert order.count("quiet") == 2, "the quiet namespace is not behind the busy one"
    gate.set()
    for _ in range(200):
        await asyncio.sleep(0)
    assert len(order) == 22
    assert fresh.waiting == 0


def resync_rig(template_at: float, carried: str | None) -> tuple[Resync, Coalescer, list[object]]:
    room, stores = Room(), Stores(KEYS)
    env = [] if carried is None else [{"name": "STAKATER_CM_CONFIGMAP", "value": carried}]
    w = workload_from_manifest({
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "ns", "annotations": AUTO},
        "spec": {"template": {"spec": {"containers": [
            {"name": "app", "env": env, "envFrom": [{"configMapRef": {"name": "cm"}}]}]}}},
    })  # fmt: skip
    stores.index.put(dataclasses.replace(w, template_changed_at=template_at))
    entry = ConfigEntry(ObjectMeta(name="cm", namespace="ns"), ResourceType.CONFIGMAP,
                        CHANGE.hash, changed_at=CHANGED_AT)  # fmt: skip

    store = type("Store", (), {"store": {("ns", "cm"): entry},
                               "resource": type("R", (), {"plural": "configmaps"})()})  # fmt: skip
    stores.configs.append(store())
    co = Coalescer(room.clock)
    looked: list[object] = []

    class Recording(Freshness):
        def check(self, workload: object, suspects: list[Suspect]) -> bool:  # type: ignore[override]
            looked.extend(s.change for s in suspects)
            return True

    fresh = Recording(room.clock, PodWriter(), room.fence, room.reports.changes, room.reports.problems, Supervisor(),
                      lambda key, change: co.add(key, change, None, 0.0))  # fmt: skip
    resync = Resync(Options(), BUILTIN, room.clock, stores, co, room.fence, room.reports.changes, room.reports.problems,
                    asyncio.Event(), lambda _ns: True, lambda _w: False, fresh)  # fmt: skip
    return resync, co, looked


async def test_the_catch_up_asks_the_pods_only_when_time_is_the_only_evidence() -> None:
    resync, co, looked = resync_rig(template_at=CHANGED_AT - 100, carried=None)
    assert await resync.reconcile_missed() == 1
    assert [c.name for c in looked] == ["cm"]  # type: ignore[attr-defined]
    assert KEY not in co, "not queued before its pods were looked at"


async def test_a_workload_carrying_an_older_hash_is_caught_up_without_looking_at_pods() -> None:
    old = hashing.configmap_hash({"k": "1"})
    resync, co, looked = resync_rig(template_at=CHANGED_AT - 100, carried=old)
    assert await resync.reconcile_missed() == 1
    assert looked == []
    assert KEY in co, "queued at once: its own hash says it is behind"


async def test_a_workload_whose_template_is_newer_than_the_change_is_not_looked_at() -> None:
    resync, co, looked = resync_rig(template_at=CHANGED_AT + 100, carried=None)
    assert await resync.reconcile_missed() == 0
    assert looked == []
    assert KEY not in co


async def test_a_look_that_crashes_rolls_that_workload_and_the_others_are_still_looked_at() -> None:
    class Crashing(PodWriter):
        async def read(self, key: ObjectKey) -> dict[str, object]:
            if key.name == "bad":
                raise RuntimeError("boom")
            return await super().read(key)

    r = rig((CHANGED_AT + 9,), writer=Crashing())
    bad = workload("bad")
    assert r.fresh.check(bad, [Suspect(CHANGE, CHANGED_AT, "time")])
    assert await r.check()
    assert r.queued == [(bad.key, CHANGE)]
    assert r.fresh.current(KEY, CHANGE, CHANGED_AT)
