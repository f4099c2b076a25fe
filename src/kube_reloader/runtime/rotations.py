"""Pod-level reloads: one rotation per workload whose policy is `evict` (core/evicting.py).

A rotation never writes the workload. It reads the workload once (its pod selector and
`minReadySeconds`), then, about once a second, lists the workload's pods and does what
`evicting.next_step` says: evict pods through the Eviction API (a disruption budget's 429
is retried later with backoff, never forced), wait for replacements, end done or failed.

It keeps no state that matters beyond the change time it serves. Its targets follow from the
cluster alone — the pods created before the change (whole seconds: the first look waits until
the change's second has passed, with a margin for clock skew, so no replacement can look
older than the change) — so a restarted or newly elected controller that re-plans the change
(the start-up catch-up) carries on where the last one stopped: the pods already replaced are
newer than the change and are never evicted again. Within one run the targets are fixed at
the first look.

Only the leader evicts: each eviction is a write checked against the fence, and a replica
that loses the lease drops its rotations (the next leader's catch-up carries on).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kube_reloader.core import evicting, limiting, planning, rollouts, selectors
from kube_reloader.core.kindtraits import traits
from kube_reloader.core.objects import ObjectKey
from kube_reloader.core.planning import Plan
from kube_reloader.kube import errors
from kube_reloader.kube.pods import PodObject, owned
from kube_reloader.runtime import inplacing
from kube_reloader.runtime.clock import Clock, sleep
from kube_reloader.runtime.fencing import Fence
from kube_reloader.runtime.podviews import view
from kube_reloader.runtime.reporting import ProblemReports, log
from kube_reloader.runtime.rolloutreports import RolloutReports
from kube_reloader.runtime.supervisor import Supervisor
from kube_reloader.runtime.writing import Writer
from kube_reloader.turns import FairSlots

#: seconds between looks at a rotation's pods (slower once it is stuck: `evicting.poll_seconds`)
POLL_SECONDS = evicting.POLL_SECONDS
#: seconds past the change's whole second before the first look: the targets are fixed
#: then, and a replacement created after it cannot share the change's second even if this
#: clock runs a little ahead of the API server's
CLOCK_MARGIN = 1.0
#: rotations looking at their pods at once (each lists its pods about once a second), shared
#: among namespaces by `core.fairness` (alone a namespace may run three quarters; a namespace
#: over its share waits, its changes kept, while the others start at once)
MAX_ACTIVE = 32
#: a refused eviction (disruption budget) is asked again after this backoff
REFUSED_BASE, REFUSED_CAP = 1.0, 30.0


class _Dropped(Exception):
    """Leadership was lost while a rotation waited on the API."""


@dataclass
class Rotation:
    workload: planning.Workload
    policy: evicting.PodPolicy
    #: epoch seconds of the newest change it serves
    changed_at: float
    plans: list[Plan]
    started: float
    evicted: int = 0
    refusals: int = 0
    last_eviction: float | None = None
    evicting: set[str] = field(default_factory=set)
    #: the pods to replace, fixed at the first look after `changed_at` (for `targets_for`)
    targets: frozenset[str] = frozenset()
    targets_for: float | None = None
    #: the most pods seen at a first look: how many it should have when nothing says
    seen: int = 0
    #: when it began (epoch seconds), and when it last made progress (began or evicted)
    progress_at: float = 0.0
    last_error: str = ""
    #: the workload was deleted (or switched back to patch): end at the next look
    gone: bool = False


@dataclass(eq=False, repr=False)  # state, not a value: compared by identity
class Rotations:
    clock: Clock
    writer: Writer
    fence: Fence
    rollouts: RolloutReports
    problems: ProblemReports
    supervisor: Supervisor
    #: the cached workload (its rollout status: how many pods it should have); None: gone
    lookup: Callable[[ObjectKey], planning.Workload | None]
    #: told when a rotation ends (frees its slot): True when it replaced every pod, False
    #: when it failed, None when it was dropped (lost lease, workload gone)
    on_done: Callable[[ObjectKey, bool | None], None]
    _running: dict[ObjectKey, Rotation] = field(default_factory=dict)
    _active: FairSlots = field(default_factory=lambda: FairSlots(MAX_ACTIVE))

    def __contains__(self, key: object) -> bool:
        return key in self._running

    def __len__(self) -> int:
        return len(self._running)

    def start(
        self,
        workload: planning.Workload,
        policy: evicting.PodPolicy,
        plans: list[Plan],
        changed_at: float,
    ) -> None:
        """Replace `workload`'s pods older than `changed_at`. A rotation already running for
        it takes the newer change over (its pods older than that one are replaced too)."""
        running = self._running.get(workload.key)
        if running is not None and not running.gone:
            running.changed_at = max(running.changed_at, changed_at)
            running.plans = _merge(running.plans, plans)
            running.policy = policy
            return
        rotation = Rotation(workload, policy, changed_at, plans, self.clock.monotonic())
        rotation.progress_at = self.clock.wall()
        self._running[workload.key] = rotation
        self.supervisor.oneshot(f"rotate/{workload.key}", self._run(rotation))

    def forget(self, key: ObjectKey) -> None:
        """The workload is gone, or reloads by patch again: its rotation ends at its next
        look."""
        rotation = self._running.get(key)
        if rotation is not None:
            rotation.gone = True

    async def _run(self, rotation: Rotation) -> None:
        key = rotation.workload.key
        ok: bool | None = None
        try:
            self._tell_waiting(rotation)
            async with self._active.slot(key.namespace):  # MAX_ACTIVE, each namespace a share
                ok = await self._rotate(rotation)
        except errors.NotFound:
            log.info("workload gone, rotation ended", extra={"workload": str(key)})
        except _Dropped:
            log.info("no longer leading, rotation dropped", extra={"workload": str(key)})
        except errors.KubeError as exc:
            ok = False
            how = rotation.policy.strategy.value
            self.rollouts.rotation_failed(rotation.workload, str(exc), rotation.evicted, how=how)
        except Exception as exc:  # noqa: BLE001 - one workload's bug never stops the others
            self.problems.object_failed("rotation", key, exc)
            self.problems.warn_once(
                rotation.workload,
                (f"kube-reloader could not replace this workload's pods: {type(exc).__name__}",),
                "ReloadError",
            )
        finally:
            if self._running.get(key) is rotation:  # not a newer one started after `forget`
                del self._running[key]
                self.on_done(key, ok)

    def _tell_waiting(self, rotation: Rotation) -> None:
        """A rotation whose namespace is over its share of the slots waits: say so once, on
        the workload (its namespace's own object), with what it waits for."""
        ns = rotation.workload.namespace
        if self._active.room(ns):
            return
        waits = (
            f"the pod-level reload waits for a rotation slot: namespace {ns} runs its share "
            f"of the {MAX_ACTIVE} rotations the controller runs at once"
        )
        self.problems.warn_once(rotation.workload, (waits,), "ReloadDeferred")

    async def _rotate(self, rotation: Rotation) -> bool | None:
        """Replace the pods; True when every one was replaced, False when it failed, None
        when it stopped (lost lease, the workload gone or reloaded by patch again)."""
        w = rotation.workload
        obj = await self._read(w.key)
        raw_spec = obj.get("spec")
        spec: dict[str, Any] = raw_spec if isinstance(raw_spec, dict) else {}
        selector = self._selector(rotation, spec)
        if selector is None:
            return False
        uid = str((obj.get("metadata") or {}).get("uid") or w.uid)
        if rotation.policy.strategy is not evicting.PodStrategy.EVICT:  # in place
            return await inplacing.rotate(self, rotation, selector, uid, obj)
        return await self._evictions(rotation, obj, selector, uid)

    def _selector(self, rotation: Rotation, spec: dict[str, Any]) -> str | None:
        """The pods' label selector (None, warned: unusable)."""
        selector = rotation.policy.pod_selector
        if selector is not None:
            return selector
        if "selector" not in spec:
            return ""  # a custom kind without one: its namespace's pods, by owner
        try:
            return selectors.from_label_selector(spec.get("selector"))
        except selectors.SelectorError as err:
            self.problems.warn_once(
                rotation.workload, (f"cannot find the pods to replace: {err}",), "ReloadError"
            )
            return None

    async def _evictions(
        self, rotation: Rotation, obj: dict[str, Any], selector: str, uid: str
    ) -> bool | None:
        """Evict the pods older than the change, within `core.evicting.next_step`."""
        w = rotation.workload
        raw_spec = obj.get("spec")
        min_ready = _number(raw_spec.get("minReadySeconds") if isinstance(raw_spec, dict) else 0)
        while not rotation.gone:
            if not self.fence.may_write():
                return None  # leadership lost: the next leader's catch-up carries on
            w = self.lookup(w.key) or w
            cutoff = math.floor(rotation.changed_at) + 1 + CLOCK_MARGIN
            if self.clock.wall() < cutoff:  # a replacement must be newer than the change
                await self.pause(cutoff - self.clock.wall())
                continue
            listed = await self.list_pods(w.namespace, selector)
            pick = rotation.policy.pod_selector
            mine = [view(p) for p in listed if owned(p, w.kind, w.name, uid, pick)]
            now = self.clock.wall()
            plan, step = self._step(rotation, w, obj, mine, min_ready, now)
            rotation.evicting &= {p.uid for p in mine if not p.terminating}
            if step.phase is evicting.Phase.DONE:
                if rotation.evicted:
                    elapsed = self.clock.monotonic() - rotation.started
                    self.rollouts.rotation_done(w, rotation.plans, rotation.evicted, elapsed)
                return True
            if step.phase is evicting.Phase.FAILED:
                self.rollouts.rotation_failed(w, step.reason, rotation.evicted)
                return False
            refused = await self._evict(rotation, step.evict) if step.evict else False
            if not refused:
                await self.pause(evicting.poll_seconds(now - rotation.progress_at))
                continue
            if now - rotation.progress_at > plan.deadline:  # refused for too long
                why = f"evictions refused for {plan.deadline:g}s: {rotation.last_error}"
                self.rollouts.rotation_failed(w, why, rotation.evicted)
                return False
            await self.pause(
                limiting.backoff(min(rotation.refusals - 1, 16), base=REFUSED_BASE, cap=REFUSED_CAP)
            )
        return None  # forgotten: gone, or reloaded by patch again

    @staticmethod
    def _step(
        rotation: Rotation,
        w: planning.Workload,
        obj: dict[str, Any],
        mine: list[evicting.Pod],
        min_ready: float,
        now: float,
    ) -> tuple[evicting.Rotation, evicting.Step]:
        """How `w`'s pods may be replaced as it is now, and the next step among `mine`."""
        if rotation.targets_for != rotation.changed_at:  # fixed at the first look
            rotation.targets = evicting.targets(mine, rotation.changed_at)
            rotation.targets_for = rotation.changed_at
            rotation.seen = max(rotation.seen, len(mine))
        replicas = _replicas(w, obj, rotation.seen)
        plan = evicting.Rotation(
            replicas=replicas,
            max_unavailable=rotation.policy.max_unavailable.resolve(replicas),
            min_ready_seconds=min_ready,
            ordered=traits(w.kind).ordered,
            deadline=rollouts.held_deadline(w.status),
        )
        step = evicting.next_step(
            mine,
            rotation.targets,
            plan,
            now,
            last_eviction=rotation.last_eviction,
            started=rotation.progress_at,
            evicting=frozenset(rotation.evicting),
        )
        return plan, step

    async def _evict(self, rotation: Rotation, pods: tuple[evicting.Pod, ...]) -> bool:
        """Evict `pods` in order; True when one was refused (the rest wait for the retry)."""
        w = rotation.workload
        for pod in pods:
            if not self.fence.may_write():
                return False
            write = self.supervisor.task(
                f"evict/{w.namespace}/{pod.name}",
                self.writer.evict(w.namespace, pod.name, pod.uid),
            )
            try:
                if not await self.fence.guarded(write):
                    return False  # leadership lost: the new leader carries on
            except errors.Transient as exc:  # a disruption budget's 429, or the API failing
                rotation.refusals += 1
                rotation.last_error = str(exc)[:300]
                result = "refused" if isinstance(exc, errors.TooManyRequests) else "error"
                self.rollouts.eviction(w, pod.name, result, str(exc))
                return True
            except (errors.NotFound, errors.Conflict):
                self.rollouts.eviction(w, pod.name, "gone", "")  # already replaced
                continue
            rotation.refusals = 0
            rotation.evicted += 1
            rotation.evicting.add(pod.uid)
            rotation.last_eviction = rotation.progress_at = self.clock.wall()
            self.rollouts.eviction(w, pod.name, "evicted", "")
        return False

    async def _read(self, key: ObjectKey) -> dict[str, Any]:
        while True:
            if not self.fence.may_write():
                raise _Dropped
            try:
                return await self.writer.read(key)
            except errors.Transient as exc:
                log.warning(
                    "rotation: read failed, will retry",
                    extra={"workload": str(key), "error": str(exc)},
                )
                await self.pause(POLL_SECONDS)

    async def list_pods(self, namespace: str, selector: str) -> list[PodObject]:
        while True:
            if not self.fence.may_write():
                raise _Dropped
            try:
                return await self.writer.pods(namespace, selector)
            except errors.Transient as exc:
                log.warning(
                    "rotation: listing pods failed, will retry",
                    extra={"namespace": namespace, "error": str(exc)},
                )
                await self.pause(POLL_SECONDS)

    async def pause(self, seconds: float) -> None:
        await sleep(self.clock, seconds)


def _replicas(w: planning.Workload, obj: dict[str, Any], fallback: int) -> int:
    """Pods the workload should have: its cached rollout status (spec.replicas, or a
    DaemonSet's desired number), else the object read at start, else `fallback` (the pods
    seen at the first look — never the live count, which drops as pods are evicted)."""
    if w.status is not None and (not traits(w.kind).per_node or w.status.replicas):
        return w.status.replicas
    spec = obj.get("spec")
    if isinstance(spec, dict) and isinstance(spec.get("replicas"), int):
        return int(spec["replicas"])
    return fallback


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) and value > 0 else 0.0


def _merge(old: list[Plan], new: list[Plan]) -> list[Plan]:
    by_config = {(p.change.rtype, p.change.name): p for p in old}
    by_config.update({(p.change.rtype, p.change.name): p for p in new})
    return list(by_config.values())
