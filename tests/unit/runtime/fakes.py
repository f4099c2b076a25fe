"""Fakes for the runtime rooms' unit tests: a clock whose time moves only when told, a writer
that records what it was asked to write, an Event sink that records Events."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import itertools
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, cast

import msgspec

from kube_reloader.core import hashing, planning
from kube_reloader.core.annotations import Keys
from kube_reloader.core.objects import ObjectKey, ResourceType
from kube_reloader.core.planning import Change, Plan, workload_from_manifest
from kube_reloader.ctrlmetrics import VersionTwo
from kube_reloader.kube import errors
from kube_reloader.kube.client import Client
from kube_reloader.kube.pods import PodCondition, PodMeta, PodObject, PodStatus
from kube_reloader.kube.projections import OwnerReference
from kube_reloader.kube.resources import Resource
from kube_reloader.kube.watching import Reflector
from kube_reloader.metrics import Recorder
from kube_reloader.runtime.fencing import Fence
from kube_reloader.runtime.reporting import Sink
from kube_reloader.runtime.reports import Reports

EPOCH = 1_780_000_000.0
AUTO = {"reloader.stakater.com/auto": "true"}


class FakeTimer:
    def __init__(self, due: float, callback: Callable[[], None]) -> None:
        self.due = due
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


async def until(predicate: Callable[[], bool], what: str) -> None:
    """Let the event loop run until `predicate` holds (no wall-clock time involved)."""
    for _ in range(1000):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"never happened: {what}")


class FakeClock:
    """Time stands still until `advance`; timers fire in due order as it passes them."""

    def __init__(self) -> None:
        self.now = 0.0
        self.timers: list[FakeTimer] = []

    def wall(self) -> float:
        return EPOCH + self.now

    def monotonic(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Callable[[], None]) -> FakeTimer:
        timer = FakeTimer(self.now + max(0.0, delay), callback)
        self.timers.append(timer)
        return timer

    def pending(self) -> list[float]:
        """Delays of the timers still to fire, from now."""
        return sorted(t.due - self.now for t in self.timers if not t.cancelled)

    def advance(self, seconds: float) -> None:
        end = self.now + seconds
        while True:
            due = [t for t in self.timers if not t.cancelled and t.due <= end]
            if not due:
                break
            timer = min(due, key=lambda t: t.due)
            self.timers.remove(timer)
            self.now = max(self.now, timer.due)
            timer.callback()
        self.now = end


@dataclass
class FakeWriter:
    """Records every write; `fail` raises the given exceptions in turn on `reload`."""

    objects: dict[ObjectKey, dict[str, Any]] = field(default_factory=dict)
    reloads: list[tuple[ObjectKey, list[str]]] = field(default_factory=list)
    pauses: list[ObjectKey] = field(default_factory=list)
    resumes: list[ObjectKey] = field(default_factory=list)
    reads: list[ObjectKey] = field(default_factory=list)
    fail: list[BaseException] = field(default_factory=list)
    answer: dict[str, Any] | None = None
    #: the pause each reload was written with (`--compat=v2`), None for none
    paused_with: list[dict[str, Any] | None] = field(default_factory=list)

    async def reload(
        self, workload: planning.Workload, plans: list[Plan], *, now: dt.datetime,
        committed: Callable[[], None] | None = None, pause: dict[str, Any] | None = None,
    ) -> dict[str, Any] | None:  # fmt: skip
        if self.fail:
            raise self.fail.pop(0)
        self.reloads.append((workload.key, [p.change.name for p in plans]))
        self.paused_with.append(pause)
        return self.answer

    async def read(self, key: ObjectKey) -> dict[str, Any]:
        self.reads.append(key)
        return self.objects[key]

    async def pause(self, key: ObjectKey, paused_at_key: str, now: dt.datetime) -> None:
        self.pauses.append(key)

    async def resume(self, key: ObjectKey, paused_at_key: str) -> None:
        self.resumes.append(key)


@dataclass
class FakeEvents:
    sent: list[tuple[ObjectKey, str, str]] = field(default_factory=list)
    #: each sent Event's component and action ("" for a core/v1 Event)
    sources: list[tuple[str, str]] = field(default_factory=list)
    #: each sent Event's regarded resourceVersion ("" when not given)
    versions: list[str] = field(default_factory=list)

    async def send(
        self, workload: planning.Workload, event_type: str, reason: str, message: str,
        component: str, action: str = "", version: str = "",
    ) -> None:  # fmt: skip
        self.sent.append((workload.key, reason, message))
        self.sources.append((component, action))
        self.versions.append(version)

    def reasons(self) -> list[str]:
        return [reason for _key, reason, _message in self.sent]


class Spawned:
    """A spawn function that keeps the coroutines; `run()` awaits them all."""

    def __init__(self) -> None:
        self.coros: list[tuple[str, Coroutine[Any, Any, None]]] = []

    def __call__(self, name: str, coro: Coroutine[Any, Any, None]) -> None:
        self.coros.append((name, coro))

    async def run(self) -> list[str]:
        names = []
        while self.coros:
            name, coro = self.coros.pop(0)
            names.append(name)
            await coro
        return names

    def close(self) -> None:
        for _name, coro in self.coros:
            coro.close()


#: Reloader v2's controllers with default flags
V2_CONTROLLERS = ("configmap", "secret", "deployment")


@dataclass
class Room:
    """What every room is built from: fake clock, fence, and a domain reporter of each kind
    over one sink with fake Events (each room takes the ones it reports in)."""

    clock: FakeClock = field(default_factory=FakeClock)
    fence: Fence = field(default_factory=Fence)
    events: FakeEvents = field(default_factory=FakeEvents)
    spawned: Spawned = field(default_factory=Spawned)
    metrics: Recorder = field(default_factory=lambda: Recorder(by_namespace=False))
    #: reloads told as Reloader v2 tells them (`--compat=v2`)
    v2: bool = False
    reports: Reports = field(init=False)

    def __post_init__(self) -> None:
        if self.v2 and self.metrics.ctrl is None:  # v2's controllers, as a default run has
            self.metrics = Recorder(by_namespace=False, v2=VersionTwo(V2_CONTROLLERS))
        sink = Sink(
            self.metrics, self.events, self.fence, self.spawned, self.clock, alerts=None,
            v2=self.v2,
        )  # fmt: skip
        self.reports = Reports.over(sink)

    def sample(self, name: str, **labels: str) -> float:
        value = self.metrics.registry.get_sample_value(name, labels or None)
        return value or 0.0


async def no_fan_out(change: Change, observed: float) -> None:
    """A fan-out that decides nothing."""


async def nothing_to_replay() -> None:
    """An optional kind's list ended: nothing waits for it."""


def intake_ports(fan_out: Callable[[Change, float], Awaitable[None]] = no_fan_out) -> Any:
    """What an `Intake` tells the rooms after it, told nobody but `fan_out`."""
    return {
        "fan_out": fan_out,
        "workload_seen": lambda _w: None,
        "workload_gone": lambda _k: None,
        "optional_synced": nothing_to_replay,
        "namespace_changed": lambda _ns: None,
    }


def workload(
    name: str = "web", *, kind: str = "Deployment", annotations: dict[str, str] | None = None,
    configmap: str = "cm", status: Any = None,
) -> planning.Workload:  # fmt: skip
    w = workload_from_manifest({
        "kind": kind,
        "metadata": {"name": name, "namespace": "ns", "annotations": annotations or AUTO},
        "spec": {"template": {"spec": {"containers": [
            {"name": "app", "envFrom": [{"configMapRef": {"name": configmap}}]}]}}},
    })  # fmt: skip
    return w if status is None else dataclasses.replace(w, status=status)


def optional_reflector(resource: Resource, namespace: str | None = None) -> Reflector[Any]:
    """An optional kind's reflector that never runs: its `synced` is set by the test."""
    return Reflector(cast(Client, None), resource, type=object, namespace=namespace)


def change(name: str = "cm", content: str = "v1") -> Change:
    return Change(ResourceType.CONFIGMAP, "ns", name, hashing.configmap_hash({"k": content}))


def stamp(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class PodWriter(FakeWriter):
    """A writer over a Deployment's pods: an eviction marks the pod terminating; `replace`
    plays the ReplicaSet controller and the kubelet."""

    pod_list: list[PodObject] = field(default_factory=list)
    evictions: list[str] = field(default_factory=list)
    refuse: int = 0
    uids: Any = field(default_factory=itertools.count)
    selector: str = "app=web"
    #: the pods' controller: the Deployment's ReplicaSet, or (None) the workload itself
    owner: OwnerReference | None = None

    def add(self, created: float, *, ready_at: float | None, phase: str = "Running") -> None:
        n = next(self.uids)
        cond = () if ready_at is None else (PodCondition("Ready", "True", stamp(ready_at)),)
        owner = self.owner or OwnerReference(apiVersion="apps/v1", kind="ReplicaSet",
                                             name="web-5d8f", uid="rs-1", controller=True)  # fmt: skip
        meta = PodMeta(name=f"web-5d8f-{n}", namespace="ns", uid=f"pod-{n}",
                       labels={"app": "web", "pod-template-hash": "5d8f"},
                       ownerReferences=(owner,), creationTimestamp=stamp(created))  # fmt: skip
        self.pod_list.append(PodObject(meta, PodStatus(cond, phase)))

    async def pods(self, namespace: str, selector: str) -> list[PodObject]:
        assert selector == self.selector
        return list(self.pod_list)

    async def evict(self, namespace: str, name: str, uid: str) -> None:
        if self.refuse:
            self.refuse -= 1
            raise errors.TooManyRequests(
                429, "Cannot evict pod as it would violate the pod's disruption budget."
            )
        self.evictions.append(uid)
        for i, p in enumerate(self.pod_list):
            if p.metadata.uid == uid:
                meta = msgspec.structs.replace(p.metadata, deletionTimestamp="now")
                self.pod_list[i] = msgspec.structs.replace(p, metadata=meta)

    def replace(self, now: float, *, ready: bool = True) -> None:
        """Terminating pods are gone; each gets a replacement, Ready at once if `ready`."""
        gone = [p for p in self.pod_list if p.metadata.deletionTimestamp]
        self.pod_list = [p for p in self.pod_list if not p.metadata.deletionTimestamp]
        for _ in gone:
            self.add(now, ready_at=now if ready else None)


KEYS = Keys()
