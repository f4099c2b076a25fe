"""The start-up catch-up: reload what changed while nobody was writing, nothing else."""

from __future__ import annotations

import asyncio
import dataclasses

from kube_reloader.core import hashing
from kube_reloader.core.objects import ResourceType
from kube_reloader.kube.projections import ObjectMeta
from kube_reloader.runtime.cache import ConfigEntry
from kube_reloader.runtime.coalescing import Coalescer
from kube_reloader.runtime.kinds import BUILTIN
from kube_reloader.runtime.options import Options
from kube_reloader.runtime.resyncing import Resync
from kube_reloader.runtime.stores import Stores

from .fakes import AUTO, KEYS, Room, workload

H2 = hashing.configmap_hash({"k": "2"})


class Store:
    """A reflector's store, as the catch-up reads it."""

    def __init__(self, entries: dict[tuple[str, str], ConfigEntry]) -> None:
        self.store = entries
        self.resource = type("R", (), {"plural": "configmaps"})()


def rig(*workloads: object, changed_at: float | None) -> tuple[Room, Stores, Coalescer, Resync]:
    room, stores = Room(), Stores(KEYS)
    for w in workloads:
        stores.index.put(w)  # type: ignore[arg-type]
    entry = ConfigEntry(ObjectMeta(name="cm", namespace="ns"), ResourceType.CONFIGMAP, H2,
                        changed_at=changed_at)  # fmt: skip
    stores.configs.append(Store({("ns", "cm"): entry}))  # type: ignore[arg-type]
    co = Coalescer(room.clock)
    resync = Resync(Options(), BUILTIN, room.clock, stores, co, room.fence, room.reporter,
                    asyncio.Event())  # fmt: skip
    return room, stores, co, resync


def test_a_workload_whose_config_changed_after_its_template_is_queued_once() -> None:
    w = dataclasses.replace(workload(configmap="cm"), template_changed_at=100.0)
    _room, _stores, co, resync = rig(w, changed_at=200.0)
    assert resync.reconcile_missed() == 1
    assert w.key in co
    assert resync.reconcile_missed() == 0, "already queued: not counted twice"


def test_a_workload_changed_after_its_config_is_left_alone() -> None:
    w = dataclasses.replace(workload(configmap="cm"), template_changed_at=300.0)
    _room, _stores, co, resync = rig(w, changed_at=200.0)
    assert resync.reconcile_missed() == 0
    assert w.key not in co


def test_jobs_and_cronjobs_are_never_re_run_by_the_catch_up() -> None:
    job = dataclasses.replace(workload("j", kind="Job", configmap="cm"), template_changed_at=1.0)
    _room, _stores, co, resync = rig(job, changed_at=200.0)
    assert resync.reconcile_missed() == 0
    assert len(co) == 0


async def test_a_workload_whose_check_raises_gets_a_warning_and_the_others_are_still_checked(
) -> None:  # fmt: skip
    bad = dataclasses.replace(workload("bad", configmap="cm"), template_changed_at=1.0)
    good = dataclasses.replace(workload("good", configmap="cm"), template_changed_at=1.0)
    room, stores, co, resync = rig(bad, good, changed_at=200.0)
    real = stores.resolve

    def resolve(w: object) -> object:
        if w.name == "bad":  # type: ignore[attr-defined]
            raise RuntimeError("boom")
        return real(w)  # type: ignore[arg-type]

    stores.resolve = resolve  # type: ignore[method-assign]
    assert resync.reconcile_missed() == 1
    assert good.key in co
    assert bad.key not in co
    assert room.sample("kube_reloader_object_errors_total", stage="catch-up") == 1
    await room.spawned.run()
    assert room.events.reasons() == ["ReloadError"]


def test_a_workload_in_a_namespace_the_filter_leaves_out_is_never_caught_up() -> None:
    w = dataclasses.replace(workload(configmap="cm"), template_changed_at=100.0)
    _room, _stores, co, resync = rig(w, changed_at=200.0)
    resync.namespace_wanted = lambda ns: ns != "ns"  # --namespaces-to-ignore=ns, say
    assert resync.reconcile_missed() == 0
    assert w.key not in co


def test_an_evict_workload_is_caught_up_whatever_its_templates_time() -> None:
    annotations = {**AUTO, "kube-reloader.io/strategy": "evict"}
    w = dataclasses.replace(workload(configmap="cm", annotations=annotations),
                            template_changed_at=300.0)  # fmt: skip
    _room, _stores, co, resync = rig(w, changed_at=200.0)
    assert resync.reconcile_missed() == 1, "its pods, not its template, say what it runs"
    assert w.key in co
