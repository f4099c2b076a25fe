"""A room gets whom it tells in its constructor: one left out fails when the room is built (a
TypeError), never later as a message told to nobody."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from kube_reloader.metrics import Recorder
from kube_reloader.runtime.coalescing import Coalescer
from kube_reloader.runtime.fanout import FanOut
from kube_reloader.runtime.intake import Intake
from kube_reloader.runtime.kinds import BUILTIN
from kube_reloader.runtime.options import Options
from kube_reloader.runtime.reporting import Sink
from kube_reloader.runtime.resyncing import Resync
from kube_reloader.runtime.rotations import Rotations
from kube_reloader.runtime.stores import Stores
from kube_reloader.runtime.supervisor import Supervisor
from kube_reloader.runtime.tracking import RolloutTracker

from .fakes import KEYS, FakeEvents, FakeWriter, Room, intake_ports

ROOM = Room()
R = ROOM.reports
STORES = Stores(KEYS)


def tracker() -> object:
    return RolloutTracker(ROOM.clock, R.rollouts, STORES.workload)  # type: ignore[call-arg]


def rotations() -> object:
    return Rotations(ROOM.clock, FakeWriter(), ROOM.fence, R.rollouts, R.problems,  # type: ignore[call-arg]
                     Supervisor(), STORES.workload)  # fmt: skip


def intake() -> object:
    ports = intake_ports()
    del ports["workload_gone"]
    return Intake(Options(), ROOM.clock, STORES, R.changes, R.problems, Supervisor(),
                  asyncio.Event(), **ports)  # fmt: skip


def resync() -> object:
    return Resync(Options(), BUILTIN, ROOM.clock, STORES, Coalescer(ROOM.clock), ROOM.fence,  # type: ignore[call-arg]
                  R.changes, R.problems, asyncio.Event(), lambda _ns: True,
                  lambda _w: False)  # fmt: skip


def fanout() -> object:
    return FanOut(Options(), ROOM.clock, STORES, Coalescer(ROOM.clock), ROOM.fence,  # type: ignore[call-arg]
                  R.changes, R.queue, R.reloads, R.webhooks, R.problems)  # fmt: skip


def sink() -> object:
    metrics = Recorder(by_namespace=False)
    return Sink(metrics, FakeEvents(), ROOM.fence, ROOM.spawned, ROOM.clock)  # type: ignore[call-arg]


LEFT_OUT = {
    "the tracker without the scheduler's finished": (tracker, "on_finished"),
    "rotations without the scheduler's rotation_done": (rotations, "on_done"),
    "the intake without workload_gone": (intake, "workload_gone"),
    "the catch-up without its look at the pods": (resync, "freshness"),
    "the fan-out without its webhook (None: none)": (fanout, "webhook"),
    "the reports' sink without its alerts (None: none)": (sink, "alerts"),
}


@pytest.mark.parametrize(("build", "missing"), LEFT_OUT.values(), ids=LEFT_OUT.keys())
def test_a_room_built_without_whom_it_tells_fails_at_once(
    build: Callable[[], object], missing: str
) -> None:
    with pytest.raises(TypeError, match=missing):
        build()
