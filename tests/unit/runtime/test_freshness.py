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
from kube_reloader.runtime.freshness import Freshness, Suspect
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
    async def pods(self, namespace: str, selector: str) -> list:  # type: ignore[type-arg]
        raise errors.Forbidden(403, 'pods is forbidden: cannot list resource "pods"')


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
        for _ in range(30):
            await asyncio.sleep(0)
        return started


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
    fresh = Freshness(w, room.fence, room.reporter, Supervisor(),
                      lambda key, change: queued.append((key, change)))  # fmt: skip
    return Rig(room, w, fresh, queued)


OTHER = OwnerReference(
    apiVersion="apps/v1", kind="ReplicaSet", name="webapp-1", uid="rs-9", controller=True
)


def mixed_owners() -> Rig:
    """Its own pod is new; an older pod of `webapp`'s ReplicaSet matches its selector too."""
    r = rig((CHANGED_AT + 5,))
    r.writer.owner = OTHER
    r.writer.add(CHANGED_AT - 5, ready_at=CHANGED_AT - 5)
    return r


CASES: list[tuple[str, Callable[[], Rig], bool]] = [
    ("every pod started after the change", lambda: rig((CHANGED_AT + 5, CHANGED_AT + 9)), False),
    ("a pod started before the change", lambda: rig((CHANGED_AT - 5, CHANGED_AT + 9)), True),
    ("a pod started in the change's own second", lambda: rig((CHANGED_AT,)), True),
    ("no pods to look at", lambda: rig((), replicas=0), True),
    ("the pods cannot be listed", lambda: rig((CHANGED_AT + 5,), writer=ListFails()), True),
    (
        "the only pods belong to another workload's ReplicaSet",
        lambda: rig((CHANGED_AT + 5,), owner=OTHER),
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
    assert r.queued == ([(KEY, CHANGE)] if rolls else []), case
    assert r.fresh.current(KEY, CHANGE) is not rolls


async def test_a_workload_found_current_is_not_looked_at_again_for_the_same_content() -> None:
    r = rig((CHANGED_AT + 5,))
    assert await r.check()
    reads = len(r.writer.reads)
    assert not await r.check(), "found current before: no second look"
    assert len(r.writer.reads) == reads
    newer = dataclasses.replace(CHANGE, hash=hashing.configmap_hash({"k": "3"}))
    assert not r.fresh.current(KEY, newer), "other content is not known to be current"


async def test_a_kind_whose_pods_it_cannot_find_rolls_without_a_read() -> None:
    r = rig((CHANGED_AT + 5,))
    assert await r.check(kind="Widget")
    assert r.queued == [(ObjectKey("Widget", "ns", "web"), CHANGE)]
    assert r.writer.reads == []


async def test_a_replica_that_stops_leading_during_the_look_queues_nothing() -> None:
    r = rig((CHANGED_AT - 5,))
    r.room.fence.stop_leading()
    assert await r.check()
    assert r.queued == []
    assert not r.fresh.current(KEY, CHANGE)


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
    resync = Resync(Options(), BUILTIN, room.clock, stores, co, room.fence, room.reporter,
                    asyncio.Event())  # fmt: skip
    looked: list[object] = []

    class Recording(Freshness):
        def check(self, workload: object, suspects: list[Suspect]) -> bool:  # type: ignore[override]
            looked.extend(s.change for s in suspects)
            return True

    resync.freshness = Recording(PodWriter(), room.fence, room.reporter, Supervisor(),
                                 resync.queue)  # fmt: skip
    return resync, co, looked


def test_the_catch_up_asks_the_pods_only_when_time_is_the_only_evidence() -> None:
    resync, co, looked = resync_rig(template_at=CHANGED_AT - 100, carried=None)
    assert resync.reconcile_missed() == 1
    assert [c.name for c in looked] == ["cm"]  # type: ignore[attr-defined]
    assert KEY not in co, "not queued before its pods were looked at"


def test_a_workload_carrying_an_older_hash_is_caught_up_without_looking_at_pods() -> None:
    old = hashing.configmap_hash({"k": "1"})
    resync, co, looked = resync_rig(template_at=CHANGED_AT - 100, carried=old)
    assert resync.reconcile_missed() == 1
    assert looked == []
    assert KEY in co, "queued at once: its own hash says it is behind"


def test_a_workload_whose_template_is_newer_than_the_change_is_not_looked_at() -> None:
    resync, co, looked = resync_rig(template_at=CHANGED_AT + 100, carried=None)
    assert resync.reconcile_missed() == 0
    assert looked == []
    assert KEY not in co
