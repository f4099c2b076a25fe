"""Rotations (pod-level reloads) on a fake clock against a fake workload controller: each pod
older than the change evicted once, the next only after its replacement is Ready, refusals
retried later, a standby never evicting, a replacement that never becomes Ready stopping the
rotation — and the template never written."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, ClassVar

from kube_reloader.core import planning, rollouts
from kube_reloader.core.evicting import PodPolicy, PodStrategy
from kube_reloader.core.objects import ObjectKey
from kube_reloader.kube.projections import OwnerReference
from kube_reloader.runtime.rotations import Rotations
from kube_reloader.runtime.supervisor import Supervisor

from .fakes import EPOCH, PodWriter, Room, change, stamp, workload

KEY = ObjectKey("Deployment", "ns", "web")
EVICT = PodPolicy(PodStrategy.EVICT)


@dataclasses.dataclass
class Rig:
    room: Room
    writer: PodWriter
    rotations: Rotations

    async def settle(self) -> None:
        for _ in range(30):
            await asyncio.sleep(0)

    async def tick(self, seconds: float = 1.0, *, ready: bool = True) -> None:
        """Time passes; the workload's controller replaces what was evicted."""
        self.room.clock.advance(seconds)
        self.writer.replace(self.room.clock.wall(), ready=ready)
        await self.settle()


def rig(replicas: int = 3) -> Rig:
    room = Room()
    writer = PodWriter()
    writer.objects[KEY] = {"metadata": {"uid": "dep-1"},
                           "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}}}}  # fmt: skip
    for _ in range(replicas):
        writer.add(EPOCH - 100, ready_at=EPOCH - 90)
    status = rollouts.Status(generation=1, observed_generation=1, replicas=replicas,
                             updated=replicas, available=replicas)  # fmt: skip
    w = workload(status=status)
    rotations = Rotations(room.clock, writer, room.fence, room.reports.rollouts, room.reports.problems, Supervisor(),
                          lambda key: w if key == KEY else None, lambda _k, _ok: None)  # fmt: skip
    return Rig(room, writer, rotations)


async def test_each_old_pod_is_evicted_once_after_the_previous_replacement_is_ready() -> None:
    r = rig(replicas=3)
    old = [p.metadata.uid for p in r.writer.pod_list]
    r.rotations.start(workload(), EVICT, [], changed_at=EPOCH + 0.5)
    r.rotations.start(workload(), EVICT, [], changed_at=EPOCH + 0.5)  # once, not twice
    await r.settle()
    assert r.writer.evictions == [], "nothing before the change's second has passed"
    for _ in range(8):
        await r.tick()
    assert r.writer.evictions == old, "each old pod once, one at a time"
    assert r.writer.reloads == [], "the template is never written"
    assert KEY not in r.rotations


async def test_one_reloaded_event_names_the_pods_replaced() -> None:
    r = rig(replicas=2)
    plan = planning.plan(change=change("cm"), workload=workload(), config=planning.Config(), now=0)
    r.rotations.start(workload(), EVICT, [plan], changed_at=EPOCH)
    for _ in range(8):
        await r.tick()
    await r.room.spawned.run()
    assert r.room.events.reasons() == ["Reloaded"]
    ((_, _, message),) = r.room.events.sent
    assert "replaced 2 pods of 'web' of type 'Deployment'" in message
    assert r.room.sample("kube_reloader_evictions_total", result="evicted") == 2


async def test_a_refused_eviction_is_asked_again_later_and_never_forced() -> None:
    r = rig(replicas=2)
    r.writer.refuse = 2
    r.rotations.start(workload(), EVICT, [], changed_at=EPOCH)
    for _ in range(4):
        await r.tick()
    assert r.writer.evictions == [], "refused twice: backing off (1 s, then 2 s)"
    for _ in range(12):
        await r.tick()
    assert len(r.writer.evictions) == 2
    assert r.room.sample("kube_reloader_evictions_total", result="refused") == 2


async def test_a_replica_that_lost_the_lease_evicts_nothing_and_leaves_the_rotation() -> None:
    r = rig(replicas=2)
    r.rotations.start(workload(), EVICT, [], changed_at=EPOCH)
    while not r.writer.evictions:
        await r.tick()
    r.room.fence.stop_leading()  # the next leader's catch-up carries on from the pods
    for _ in range(5):
        await r.tick()
    assert len(r.writer.evictions) == 1
    assert KEY not in r.rotations


async def test_evictions_refused_for_longer_than_the_deadline_end_the_rotation() -> None:
    r = rig(replicas=2)
    r.writer.refuse = 10_000
    r.rotations.start(workload(), EVICT, [], changed_at=EPOCH)
    for _ in range(30):
        await r.tick(60)
    await r.room.spawned.run()
    assert KEY not in r.rotations
    assert r.room.events.reasons() == ["ReloadRolloutFailed"]
    assert "evictions refused for" in r.room.events.sent[0][2]


async def test_a_replacement_never_ready_stops_the_rotation_with_a_warning() -> None:
    r = rig(replicas=3)
    r.rotations.start(workload(), EVICT, [], changed_at=EPOCH)
    for _ in range(3):
        await r.tick(ready=False)
    assert len(r.writer.evictions) == 1
    await r.tick(rollouts.DEFAULT_DEADLINE_SECONDS + rollouts.GRACE_SECONDS, ready=False)
    await r.tick(ready=False)
    await r.room.spawned.run()
    assert r.room.events.reasons() == ["ReloadRolloutFailed"]
    assert len(r.writer.evictions) == 1, "no further evictions"
    assert KEY not in r.rotations


async def test_a_newer_change_during_a_rotation_replaces_the_replacements_made_before_it() -> None:
    r = rig(replicas=2)
    r.rotations.start(workload(), EVICT, [], changed_at=EPOCH)
    while not r.writer.evictions:
        await r.tick()
    await r.tick()  # a replacement exists before change 2
    second = r.room.clock.wall() + 0.5
    r.room.clock.advance(0.5)
    r.rotations.start(workload(), EVICT, [], changed_at=second)
    for _ in range(12):
        await r.tick()
    assert len(r.writer.evictions) == len(set(r.writer.evictions)), "no pod twice"
    assert len(r.writer.evictions) > 2, "replacements older than change 2 were replaced too"
    created = [p.metadata.creationTimestamp or "" for p in r.writer.pod_list]
    assert all(c > stamp(second) for c in created), "no pod older than change 2 is left"
    assert KEY not in r.rotations


async def test_a_custom_kind_without_a_selector_has_the_pods_it_controls_replaced() -> None:
    room = Room()
    owner = OwnerReference(apiVersion="x.io/v1", kind="PodSet", name="web", uid="ps-1",
                           controller=True)  # fmt: skip
    writer = PodWriter(selector="", owner=owner)
    key = ObjectKey("PodSet", "ns", "web")
    writer.objects[key] = {"metadata": {"uid": "ps-1"}, "spec": {"pod": {}}}
    for _ in range(2):
        writer.add(EPOCH - 100, ready_at=EPOCH - 90)
    writer.owner = OwnerReference(apiVersion="v1", kind="Pod", name="x", uid="other",
                                  controller=True)  # fmt: skip
    writer.add(EPOCH - 100, ready_at=EPOCH - 90)  # another controller's pod: never touched
    writer.owner = owner
    custom = dataclasses.replace(workload(), kind="PodSet", uid="ps-1")
    rotations = Rotations(room.clock, writer, room.fence, room.reports.rollouts, room.reports.problems, Supervisor(),
                          lambda k: custom if k == key else None, lambda _k, _ok: None)  # fmt: skip
    rig_ = Rig(room, writer, rotations)
    rotations.start(custom, EVICT, [], changed_at=EPOCH)
    for _ in range(8):
        await rig_.tick()
    assert sorted(writer.evictions) == ["pod-0", "pod-1"]


class Stuck(Rotations):
    """Rotations whose hostile tenant's never end (a budget that refuses for ever)."""

    release = asyncio.Event()
    ran: ClassVar[list[str]] = []

    async def _rotate(self, rotation: Any) -> bool | None:
        self.ran.append(rotation.workload.name)
        if rotation.workload.namespace == "hog":
            await self.release.wait()
        return True


async def test_one_namespaces_stuck_rotations_never_take_the_slots_another_namespace_needs() -> (
    None
):
    room = Room()
    room.fence.start_leading()
    Stuck.ran = []
    no_one = Supervisor(), lambda _k: None, lambda _k, _ok: None
    rs = Stuck(
        room.clock, PodWriter(), room.fence, room.reports.rollouts, room.reports.problems, *no_one
    )
    for i in range(40):
        rs.start(dataclasses.replace(workload(f"h{i}"), namespace="hog"), EVICT, [], EPOCH)
    for _ in range(5):
        await asyncio.sleep(0)
    running = list(Stuck.ran)
    assert len(running) == 24, "three quarters of the 32 slots while it is alone"
    rs.start(workload("canary"), EVICT, [], EPOCH)
    for _ in range(5):
        await asyncio.sleep(0)
    assert "canary" in Stuck.ran, "started at once"
    assert ObjectKey("Deployment", "ns", "canary") not in rs, "and done"
    await room.spawned.run()
    deferred = [m for _k, reason, m in room.events.sent if reason == "ReloadDeferred"]
    assert len(deferred) == 16, "each waiting hog rotation is told why, once, on itself"
    assert "its share of the 32" in deferred[0]
    Stuck.release.set()
    for _ in range(50):
        await asyncio.sleep(0)
    assert len(Stuck.ran) == 41, "the waiting ones ran once slots freed"


def test_a_tenants_own_progress_deadline_never_holds_a_rotation_past_the_cap() -> None:
    huge = rollouts.Status(generation=1, observed_generation=1, replicas=1, updated=1,
                           available=1, progress_deadline_seconds=2_147_483_647)  # fmt: skip
    assert rollouts.held_deadline(huge) == rollouts.MAX_HOLD_SECONDS == 630.0
    assert rollouts.held_deadline(None) == rollouts.DEFAULT_DEADLINE_SECONDS
