"""The controller does exactly what `kube-reloader impact` says, in generated namespaces.

Each case is a namespace of 1-8 workloads (Deployments, StatefulSets, DaemonSets, Jobs,
CronJobs) that do or do not reference the changed ConfigMap/Secret, with random reload
annotations, windows open or closed at the clock's time, `reload-after` lists (cycles,
missing names, garbage), Job policies and running pods, `evict` strategies, a namespace that
may be frozen or windowed, a rollout cap with rollouts already in flight, and a content the
circuit breaker may hold. `core.impacting.preview` says, per workload, write now or hold (why,
which place in line); then the real rooms (fan-out, coalescer, reconciler, scheduler) handle
the change with one worker until nothing is queued, and must have written exactly the
workloads the preview said, holding every other one for the reason it said.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import datetime as dt
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kube_reloader.cli import impact as cli
from kube_reloader.core import evicting, hashing, impacting, matching, mutating, planning
from kube_reloader.core.objects import ObjectKey, ResourceType
from kube_reloader.core.planning import Change, Plan
from kube_reloader.core.strategies import PatchType, Strategy, env_var_name
from kube_reloader.core.windows import parse_window
from kube_reloader.kube.projections import Object, ObjectMeta
from kube_reloader.runtime.coalescing import Coalescer
from kube_reloader.runtime.fanout import FanOut
from kube_reloader.runtime.kinds import BUILTIN
from kube_reloader.runtime.options import Options
from kube_reloader.runtime.pauses import Pauses
from kube_reloader.runtime.reconciling import Reconciler
from kube_reloader.runtime.reverts import Reverts
from kube_reloader.runtime.rotations import Rotation, Rotations
from kube_reloader.runtime.scheduler import Scheduler
from kube_reloader.runtime.stores import Stores
from kube_reloader.runtime.supervisor import Supervisor
from kube_reloader.runtime.throttling import Throttle
from kube_reloader.runtime.tracking import RolloutTracker

from .fakes import EPOCH, KEYS, FakeWriter, Room

NS, CFG = "ns", "cfg"
KINDS = ("Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob")
NAMES = ("a", "b", "c", "d", "e")
#: the fake clock's wall time is EPOCH: Thursday 2026-05-28 20:26:40 UTC
OPEN = ("* * * * * 1h", "0 20 * * * 2h", "0 22 * * * 1h Europe/Berlin")
CLOSED = ("0 3 * * * 1h", "0 0 1 1 * 1m", "30 20 * * mon-wed 4h")
WINDOWS = (*OPEN, *CLOSED, "at night")
OLD, NEW = hashing.configmap_hash({"k": "old"}), hashing.configmap_hash({"k": "new"})
#: rollouts in flight outside the namespace listing (another namespace, or not listed)
ELSEWHERE = (ObjectKey("Deployment", "other", "x"), ObjectKey("Deployment", "other", "y"),
             ObjectKey("Deployment", NS, "inflight"))  # fmt: skip


@dataclasses.dataclass
class Case:
    rtype: ResourceType
    manifests: list[dict[str, Any]]
    ns_annotations: dict[str, str]
    cap: int
    freeze: bool
    strategy: Strategy
    default: evicting.PodStrategy
    auto_all: bool
    urgent: bool
    in_flight: frozenset[ObjectKey]
    halted: str | None

    @property
    def change(self) -> Change:
        urgent = {"kube-reloader.io/reload-urgent": "true"} if self.urgent else {}
        return Change(self.rtype, NS, CFG, NEW, annotations=urgent)


def _template(draw: st.DrawFn, rtype: ResourceType) -> dict[str, Any]:
    name = draw(st.sampled_from((CFG,) * 5 + ("unrelated",)))
    plural = "configMap" if rtype is ResourceType.CONFIGMAP else "secret"
    container: dict[str, Any] = {"name": "app"}
    volumes: list[dict[str, Any]] = []
    if draw(st.booleans()):
        container["envFrom"] = [{f"{plural}Ref": {"name": name}}]
    else:
        container["volumeMounts"] = [{"name": "v", "mountPath": "/v"}]
        ref = {"name": name} if plural == "configMap" else {"secretName": name}
        volumes.append({"name": "v", plural: ref})
    carried = draw(st.sampled_from((None, None, OLD, OLD, NEW)))
    if carried is not None:  # reloaded before: for an older content, or for this one already
        container["env"] = [{"name": env_var_name(CFG, rtype), "value": carried}]
    return {"metadata": {"labels": {"app": "w"}},
            "spec": {"containers": [container], "volumes": volumes}}  # fmt: skip


def _after(draw: st.DrawFn, keys: list[tuple[str, str]], own: tuple[str, str]) -> str:
    pool = 3 * [f"{k.lower()}/{n}" for k, n in keys] + [
        "deployment/missing", "deployment/inflight", "Deployment/a", "nope", f"{own[0]}/{own[1]}",
    ]  # fmt: skip
    picked = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3))
    return draw(st.sampled_from((",", ", "))).join(picked)


@st.composite
def manifest(draw: st.DrawFn, key: tuple[str, str], keys: list[tuple[str, str]],
             rtype: ResourceType) -> dict[str, Any]:  # fmt: skip
    kind, name = key
    ann: dict[str, str] = {}
    trigger = draw(st.sampled_from(("auto",) * 5 + ("named", "named", "off", "none")))
    named = matching.MatchConfig().keys.named(rtype)
    ann.update({"auto": {"reloader.stakater.com/auto": "true"}, "named": {named: CFG},
                "off": {"reloader.stakater.com/auto": "false"}, "none": {}}[trigger])  # fmt: skip
    if draw(st.integers(0, 2)) == 0:
        ann["kube-reloader.io/reload-window"] = draw(st.sampled_from(WINDOWS))
    if draw(st.booleans()):
        ann["kube-reloader.io/reload-after"] = _after(draw, keys, key)
    if draw(st.integers(0, 3)) == 0:
        ann["kube-reloader.io/strategy"] = draw(
            st.sampled_from(("evict", "evict", "patch", "Evict", "restart-in-place", "signal"))
        )
    if kind == "Job" and draw(st.booleans()):
        ann["kube-reloader.io/job-policy"] = draw(
            st.sampled_from(("after-completion", "after-completion", "never", "recreate", "later"))
        )
    generation = draw(st.integers(1, 3))
    meta: dict[str, Any] = {"name": name, "namespace": NS, "annotations": ann,
                            "generation": generation, "uid": f"uid-{kind}-{name}"}  # fmt: skip
    template = _template(draw, rtype)
    doc: dict[str, Any] = {"kind": kind, "metadata": meta}
    if kind == "CronJob":
        doc["spec"] = {"schedule": "* * * * *", "suspend": draw(st.integers(0, 4)) == 0,
                       "jobTemplate": {"spec": {"template": template}}}  # fmt: skip
        return doc
    doc["spec"] = {"template": template}
    done = draw(st.booleans())
    if kind == "Job":
        doc["status"] = {"active": draw(st.sampled_from((0, 1)))}
        if draw(st.integers(0, 5)) == 0:
            meta["ownerReferences"] = [{"kind": "CronJob", "name": "c", "controller": True}]
    elif kind == "DaemonSet":
        doc["status"] = {"observedGeneration": generation, "desiredNumberScheduled": 1,
                         "updatedNumberScheduled": int(done), "numberAvailable": 1}  # fmt: skip
    else:
        doc["spec"]["replicas"] = 1
        doc["status"] = {"observedGeneration": generation, "replicas": 1,
                         "updatedReplicas": int(done), "availableReplicas": 1}  # fmt: skip
    return doc


@st.composite
def cases(draw: st.DrawFn) -> Case:
    rtype = draw(st.sampled_from((ResourceType.CONFIGMAP, ResourceType.SECRET)))
    keys = draw(st.lists(st.tuples(st.sampled_from(KINDS), st.sampled_from(NAMES)),
                         min_size=1, max_size=8, unique=True))  # fmt: skip
    docs = [draw(manifest(k, keys, rtype)) for k in keys]
    ns_ann: dict[str, str] = {}
    if draw(st.integers(0, 19)) == 0:
        ns_ann["kube-reloader.io/freeze"] = draw(st.sampled_from(("true", "false")))
    if draw(st.integers(0, 5)) == 0:
        ns_ann["kube-reloader.io/reload-window"] = draw(st.sampled_from(WINDOWS))
    listed = [ObjectKey(k, NS, n) for k, n in keys if k in ("Deployment", "StatefulSet")]
    in_flight = draw(st.frozensets(st.sampled_from((*ELSEWHERE, *listed)), max_size=3))
    return Case(
        rtype, docs, ns_ann, cap=draw(st.integers(0, 3)), freeze=draw(st.integers(0, 19)) == 0,
        strategy=draw(st.sampled_from(tuple(Strategy))),
        default=draw(st.sampled_from(tuple(evicting.PodStrategy))),
        auto_all=draw(st.booleans()), urgent=draw(st.integers(0, 4)) == 0, in_flight=in_flight,
        halted=draw(st.sampled_from((None,) * 6 + (NEW, OLD))),
    )  # fmt: skip


@dataclasses.dataclass
class AnsweringWriter(FakeWriter):
    """Answers a write as the API server would: the object written (a Job re-created), a
    newer generation not yet observed, so its rollout is followed; a CronJob's trigger
    creates a Job and answers nothing about the CronJob."""

    manifests: dict[ObjectKey, dict[str, Any]] = dataclasses.field(default_factory=dict)

    async def reload(self, workload: planning.Workload, plans: list[Plan], *, now: dt.datetime,
                     committed: Any = None, pause: Any = None) -> dict[str, Any] | None:  # fmt: skip
        await super().reload(workload, plans, now=now, committed=committed, pause=pause)
        if workload.kind == "CronJob":
            return None
        doc = copy.deepcopy(self.manifests[workload.key])
        for ptype, body in planning.combine(plans):
            assert ptype is PatchType.STRATEGIC
            doc["spec"]["template"] = mutating.apply_strategic(doc["spec"]["template"], body)
        meta = doc["metadata"]
        if workload.kind == "Job":
            meta.update(generation=1, uid=meta["uid"] + "-again")
            doc["status"] = {}
        else:
            meta["generation"] += 1
        self.manifests[workload.key] = doc
        return doc


class NoRotations(Rotations):
    """Records the rotations started; their pods are never looked at (no task runs)."""

    def start(self, workload: planning.Workload, policy: evicting.PodPolicy, plans: list[Plan],
              changed_at: float) -> None:  # fmt: skip
        key = workload.key
        self._running.setdefault(key, Rotation(workload, policy, changed_at, plans, 0.0))


@dataclasses.dataclass
class Namespaces:
    store: dict[tuple[str, str], Object]


@dataclasses.dataclass
class Done:
    written: list[ObjectKey]
    held: dict[ObjectKey, str]
    line: list[ObjectKey]


def options(c: Case) -> Options:
    plan = planning.Config(match=matching.MatchConfig(auto_reload_all=c.auto_all),
                           strategy=c.strategy)  # fmt: skip
    return Options(plan=plan, min_interval=0.0, reload_rate=0.0, coalesce_window=0.0,
                   max_concurrent_rollouts=c.cap, freeze=c.freeze, default_strategy=c.default)  # fmt: skip


def preview(c: Case) -> list[impacting.Row]:
    opts = options(c)
    halted = {} if c.halted is None else {(c.rtype, NS, CFG): c.halted}
    state = impacting.State(cap=c.cap, freeze=c.freeze, in_flight=c.in_flight, halted=halted)
    return impacting.preview(
        c.change, [cli.workload_of(d, NS) for d in c.manifests], config=opts.plan,
        now=EPOCH, state=state, namespace_annotations=c.ns_annotations,
    )  # fmt: skip


async def controller(c: Case) -> Done:
    """The real rooms, one worker, the fake clock standing still."""
    room = Room()
    assert room.clock.wall() == EPOCH
    opts = options(c)
    writer = AnsweringWriter(manifests={ObjectKey(d["kind"], NS, d["metadata"]["name"]): d
                                        for d in c.manifests})  # fmt: skip
    stores = Stores(KEYS)
    for d in c.manifests:
        stores.index.put(cli.workload_of(d, NS))
    stores.namespaces = Namespaces(  # type: ignore[assignment]
        {("", NS): Object(metadata=ObjectMeta(name=NS, annotations=dict(c.ns_annotations)))}
    )
    co = Coalescer(room.clock)
    sup = Supervisor()
    scheduler = Scheduler(opts, room.clock, stores, co, room.reports.fleet, room.reports.problems)
    tracker = RolloutTracker(room.clock, room.reports.rollouts, stores.workload, scheduler.finished)
    rotations = NoRotations(room.clock, writer, room.fence, room.reports.rollouts, room.reports.problems, sup, stores.workload,
                            scheduler.rotation_done)  # fmt: skip
    rec = Reconciler(
        opts, BUILTIN, room.clock, stores, co,
        Throttle(room.clock, min_interval=0.0, rate=0.0, burst=0.0),
        Pauses(room.clock, KEYS, writer, room.fence, room.reports.rollouts, room.reports.problems, room.spawned),
        tracker, writer, room.fence, room.reports.queue, room.reports.reloads, room.reports.problems, sup, rotations,
        Reverts(room.clock, room.reports.reloads, opts.plan.strategy), scheduler,
    )  # fmt: skip
    scheduler.ledger.in_flight |= c.in_flight
    if c.halted is not None:
        scheduler.breaker.halted[(c.rtype, NS, CFG)] = c.halted
    fanout = FanOut(
        opts,
        room.clock,
        stores,
        co,
        room.fence,
        room.reports.changes,
        room.reports.queue,
        room.reports.reloads,
        room.reports.webhooks,
        room.reports.problems,
        webhook=None,
    )
    await fanout.fan_out(c.change, 0.0)
    for _ in range(200):
        if not co.depth:
            break
        await rec.handle(await co.get())
    else:
        pytest.fail("the queue never emptied")
    room.spawned.close()
    await sup.close()
    written = [k for k, _ in writer.reloads] + sorted(rotations._running)
    held = {k: str(h) for k, h in scheduler.held.items()}
    return Done(written, held, list(scheduler.ledger.line))


def check(c: Case) -> list[impacting.Row]:
    rows = preview(c)
    done = asyncio.run(controller(c))
    assert len(done.written) == len(set(done.written)), "each workload is written once"
    for r in rows:
        k, v = r.workload, r.verdict
        said = "-" if v is None else "write" if v.write else f"held: {v.hold}"
        did = "write" if k in done.written else f"held: {done.held[k]}" if k in done.held else "-"
        assert (str(k), said) == (str(k), did), r
        if v is not None and v.position:
            assert done.line.index(k) + 1 == v.position, (str(k), done.line)
    assert set(done.written) <= {r.workload for r in rows}
    return rows


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_the_controller_writes_and_holds_exactly_what_impact_says(c: Case) -> None:
    for r in check(c):
        v = r.verdict
        event("-" if v is None else "write" if v.write else f"held: {v.hold}")


def test_the_generated_windows_are_open_and_closed_at_the_clocks_time() -> None:
    def is_open(text: str) -> bool:
        w, error = parse_window(text)
        assert w is not None, error
        return w.is_open(EPOCH)

    assert [is_open(w) for w in OPEN] == [True] * len(OPEN)
    assert [is_open(w) for w in CLOSED] == [False] * len(CLOSED)


def _simple(kind: str, name: str, **annotations: str) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "app",
                                         "envFrom": [{"configMapRef": {"name": CFG}}]}]}}  # fmt: skip
    spec = ({"jobTemplate": {"spec": {"template": template}}} if kind == "CronJob"
            else {"template": template, "replicas": 1})  # fmt: skip
    return {"kind": kind, "spec": spec, "metadata": {
        "name": name, "namespace": NS, "generation": 1, "uid": f"uid-{name}",
        "annotations": {"reloader.stakater.com/auto": "true", **annotations}}}  # fmt: skip


def test_a_workload_that_follows_a_cronjob_is_written_once_it_is_triggered() -> None:
    check(Case(
        ResourceType.CONFIGMAP,
        [_simple("CronJob", "c"),
         _simple("Deployment", "d", **{"kube-reloader.io/reload-after": "cronjob/c"})],
        {}, cap=0, freeze=False, strategy=Strategy.ENV_VARS, default=evicting.PodStrategy.PATCH,
        auto_all=False, urgent=False, in_flight=frozenset(), halted=None,
    ))  # fmt: skip
