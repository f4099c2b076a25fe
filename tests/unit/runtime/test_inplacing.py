"""In-place rotations on a fake clock against a fake kubelet: one annotation on one pod at a
time, the next only once that pod restarted (or, for `signal`, the settle time passed), the
signal request carrying the digest of the files the volume will hold — and neither the
template written nor a pod evicted."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from typing import Any

import msgspec

from kube_reloader.core import inplace, planning, rollouts
from kube_reloader.core.evicting import PodPolicy, PodStrategy
from kube_reloader.core.objects import ObjectKey, ResourceType
from kube_reloader.kube.pods import ContainerState, ContainerStatus, Started
from kube_reloader.runtime.rotations import Rotations
from kube_reloader.runtime.supervisor import Supervisor

from .fakes import EPOCH, PodWriter, Room, change, stamp, workload

KEY = ObjectKey("Deployment", "ns", "web")


@dataclasses.dataclass
class KubeletWriter(PodWriter):
    """Pods with one container each; a restart token makes the fake kubelet restart that
    pod's container at the next tick; `files` are the ConfigMaps' contents."""

    annotated: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)
    files: dict[str, dict[str, bytes]] = dataclasses.field(default_factory=dict)
    pending: set[str] = dataclasses.field(default_factory=set)

    def started(self, uid: str, at: float) -> None:
        for i, p in enumerate(self.pod_list):
            if p.metadata.uid == uid:
                before = sum(c.restartCount for c in p.status.containerStatuses)
                restarts = before + 1 if p.status.containerStatuses else 0
                status = ContainerStatus("app", ContainerState(running=Started(stamp(at))),
                                         restartCount=restarts)  # fmt: skip
                self.pod_list[i] = msgspec.structs.replace(
                    p, status=msgspec.structs.replace(p.status, containerStatuses=(status,))
                )

    async def annotate_pod(self, namespace: str, name: str, uid: str, key: str, value: str) -> None:
        self.annotated.append((name, key, value))
        for i, p in enumerate(self.pod_list):
            if p.metadata.uid == uid:
                meta = msgspec.structs.replace(
                    p.metadata, annotations={**p.metadata.annotations, key: value}
                )
                self.pod_list[i] = msgspec.structs.replace(p, metadata=meta)
                if key == inplace.RESTART:
                    self.pending.add(uid)

    async def config_files(
        self, rtype: ResourceType, namespace: str, name: str
    ) -> dict[str, bytes]:
        return dict(self.files[name])

    def restart_pending(self, now: float) -> None:
        for uid in sorted(self.pending):
            self.started(uid, now)
        self.pending.clear()


@dataclasses.dataclass
class Rig:
    room: Room
    writer: KubeletWriter
    rotations: Rotations

    async def tick(self, seconds: float = 1.0) -> None:
        self.room.clock.advance(seconds)
        self.writer.restart_pending(self.room.clock.wall())
        for _ in range(30):
            await asyncio.sleep(0)


def rig(replicas: int = 3) -> Rig:
    room = Room()
    writer = KubeletWriter()
    template: dict[str, Any] = {"spec": {"volumes": [
        {"name": "config", "configMap": {"name": "cm", "items": [{"key": "app.conf", "path": "a"}]}},
        {"name": "other", "configMap": {"name": "unrelated"}}]}}  # fmt: skip
    writer.objects[KEY] = {"metadata": {"uid": "dep-1"}, "spec": {
        "replicas": replicas, "selector": {"matchLabels": {"app": "web"}}, "template": template}}  # fmt: skip
    writer.files = {"cm": {"app.conf": b"new", "unused": b"x"}, "unrelated": {"k": b"v"}}
    for _ in range(replicas):
        writer.add(EPOCH - 100, ready_at=EPOCH - 90)
    for p in writer.pod_list:
        writer.started(p.metadata.uid, EPOCH - 95)
    status = rollouts.Status(generation=1, observed_generation=1, replicas=replicas,
                             updated=replicas, available=replicas)  # fmt: skip
    w = workload(status=status)
    rotations = Rotations(room.clock, writer, room.fence, room.reports.rollouts, room.reports.problems, Supervisor(),
                          lambda key: w if key == KEY else None, lambda _k, _ok: None)  # fmt: skip
    return Rig(room, writer, rotations)


def plans() -> list[planning.Plan]:
    return [
        planning.plan(change=change("cm"), workload=workload(), config=planning.Config(), now=0)
    ]


async def test_restart_in_place_asks_one_pod_at_a_time_and_each_once() -> None:
    r = rig(replicas=3)
    policy = PodPolicy(PodStrategy.RESTART_IN_PLACE)
    r.rotations.start(workload(), policy, plans(), changed_at=EPOCH + 0.5)
    seen: list[int] = []
    for _ in range(12):
        await r.tick()
        seen.append(len(r.writer.annotated))
    await r.room.spawned.run()
    names = [name for name, _, _ in r.writer.annotated]
    assert sorted(names) == sorted({p.metadata.name for p in r.writer.pod_list})
    assert all(b - a <= 1 for a, b in itertools.pairwise(seen)), "one at a time"
    assert {value for _, _, value in r.writer.annotated} == {inplace.restart_token(EPOCH + 0.5)}
    assert r.writer.evictions == []
    assert r.writer.reloads == [], "the template is never written"
    assert KEY not in r.rotations
    assert r.room.events.reasons() == ["Reloaded"]
    assert "restarted 3 pods of 'web'" in r.room.events.sent[0][2]
    assert "in place" in r.room.events.sent[0][2]


async def test_signal_publishes_the_digest_of_the_projected_keys_only() -> None:
    r = rig(replicas=2)
    policy = PodPolicy(PodStrategy.SIGNAL, signal="SIGUSR1")
    r.rotations.start(workload(), policy, plans(), changed_at=EPOCH)
    for _ in range(20):
        await r.tick()
    await r.room.spawned.run()
    want = ("SIGUSR1", {"config": inplace.files_digest([b"new"])})
    values = [value for _, _, value in r.writer.annotated]
    assert [inplace.parse_request(v) for v in values] == [want, want]
    assert values[0] == values[1], "one change, one request for every pod"
    assert '"change"' not in values[0], "digests tell changes apart: no identifier needed"
    assert KEY not in r.rotations
    assert "signalled 2 pods" in r.room.events.sent[0][2]


async def test_signal_waits_the_settle_time_between_pods() -> None:
    r = rig(replicas=2)
    r.rotations.start(workload(), PodPolicy(PodStrategy.SIGNAL), plans(), changed_at=EPOCH)
    await r.tick()
    assert len(r.writer.annotated) == 1
    for _ in range(int(inplace.SIGNAL_SETTLE) - 2):
        await r.tick()
    assert len(r.writer.annotated) == 1
    for _ in range(4):
        await r.tick()
    assert len(r.writer.annotated) == 2


async def test_a_replica_that_lost_the_lease_annotates_nothing_more() -> None:
    r = rig(replicas=3)
    r.rotations.start(workload(), PodPolicy(PodStrategy.RESTART_IN_PLACE), plans(),
                      changed_at=EPOCH)  # fmt: skip
    while not r.writer.annotated:
        await r.tick()
    r.room.fence.stop_leading()
    for _ in range(6):
        await r.tick()
    assert len(r.writer.annotated) == 1
    assert KEY not in r.rotations


async def test_pods_already_restarted_after_the_change_are_left_alone() -> None:
    r = rig(replicas=2)
    for p in r.writer.pod_list:
        r.writer.started(p.metadata.uid, EPOCH + 5)
    r.rotations.start(workload(), PodPolicy(PodStrategy.RESTART_IN_PLACE), plans(),
                      changed_at=EPOCH)  # fmt: skip
    for _ in range(4):
        await r.tick()
    assert r.writer.annotated == []
    assert KEY not in r.rotations


async def test_a_pod_that_restarts_with_a_clock_behind_counts_as_restarted() -> None:
    """The node's clock lags: the restarted container's start looks older than the change.
    Its restart count says it restarted after being asked: it is not asked again."""
    r = rig(replicas=1)
    r.rotations.start(workload(), PodPolicy(PodStrategy.RESTART_IN_PLACE), plans(),
                      changed_at=EPOCH + 30)  # fmt: skip
    for _ in range(40):
        r.room.clock.advance(1.0)
        for uid in sorted(r.writer.pending):
            r.writer.started(uid, EPOCH - 50)  # a start time from a clock far behind
        r.writer.pending.clear()
        for _ in range(30):
            await asyncio.sleep(0)
    await r.room.spawned.run()
    assert len(r.writer.annotated) == 1
    assert KEY not in r.rotations


async def test_a_pod_that_never_restarts_fails_the_rotation_after_the_deadline() -> None:
    r = rig(replicas=2)
    r.rotations.start(workload(), PodPolicy(PodStrategy.RESTART_IN_PLACE), plans(),
                      changed_at=EPOCH)  # fmt: skip
    for _ in range(80):
        r.writer.pending.clear()  # the agent exits, but nothing restarts the containers
        r.room.clock.advance(15.0)
        for _ in range(30):
            await asyncio.sleep(0)
    await r.room.spawned.run()
    assert KEY not in r.rotations
    assert r.room.events.reasons() == ["ReloadRolloutFailed"]
    assert "in place stopped after 1 pods" in r.room.events.sent[0][2]
    assert len({name for name, _, _ in r.writer.annotated}) == 1, "never a second pod"


async def test_a_volume_holding_a_secret_is_named_changed_never_digested() -> None:
    r = rig(replicas=1)
    r.writer.objects[KEY]["spec"]["template"]["spec"]["volumes"] = [
        {"name": "config", "projected": {"sources": [
            {"configMap": {"name": "cm"}}, {"secret": {"name": "creds"}}]}}]  # fmt: skip
    r.rotations.start(workload(), PodPolicy(PodStrategy.SIGNAL), plans(), changed_at=EPOCH)
    for _ in range(3):
        await r.tick()
    await r.room.spawned.run()
    ((_, _, value),) = r.writer.annotated
    assert inplace.parse_request(value) == ("SIGHUP", {"config": inplace.CHANGED})


async def test_two_changes_of_a_secret_ask_with_two_different_requests() -> None:
    """Found by the TLS scenarios: a Secret volume is named `changed`, so without a change
    identifier the second renewal asked with the first one's text, and the agent, which had
    served that text, never signalled again."""
    r = rig(replicas=1)
    r.writer.objects[KEY]["spec"]["template"]["spec"]["volumes"] = [
        {"name": "tls", "secret": {"secretName": "cm"}}]  # fmt: skip
    r.writer.files = {"cm": {"tls.crt": b"x"}}
    for n, content in enumerate(("v2", "v3")):
        secret = dataclasses.replace(change("cm", content), rtype=ResourceType.SECRET)
        plan = planning.plan(change=secret, workload=workload(), config=planning.Config(), now=0)
        r.rotations.start(workload(), PodPolicy(PodStrategy.SIGNAL), [plan],
                          changed_at=EPOCH + 30 * n)  # fmt: skip
        for _ in range(10):
            await r.tick()
        await r.room.spawned.run()
    first, second = (value for _, _, value in r.writer.annotated)
    assert inplace.parse_request(first) == inplace.parse_request(second)
    assert first != second
