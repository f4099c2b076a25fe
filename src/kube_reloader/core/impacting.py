"""`kube-reloader impact`: what one content change of a ConfigMap or Secret would do, as a value.

For every workload of the namespace, in the order the controller handles them (by kind, then
name): would it reload (`planning`), how (its strategy), and would that be written now or wait
(`scheduling.decide`: freeze, window, circuit breaker, running Job, order, rollout slot, with
its place in line). The slots fill as the controller fills them: each write whose rollout is
followed takes one until it finishes; Jobs and CronJobs, whose runs are not followed, take none.
As in the controller's scheduler, workloads that follow each other (`reload-after`, directly or
through others) ignore that order, and a workload held for one it follows is looked at again,
at the end of the queue, once that one is written and its run is not followed (Jobs, CronJobs).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kube_reloader.core import evicting, planning, scheduling
from kube_reloader.core.kindtraits import traits
from kube_reloader.core.ledger import Ledger
from kube_reloader.core.objects import ObjectKey, ResourceType
from kube_reloader.core.planning import Change, Outcome
from kube_reloader.core.records import record
from kube_reloader.core.scheduling import Hold, Verdict

Resource = tuple[ResourceType, str, str]


@record
class State:
    """What the controller holds when the change arrives."""

    #: `--max-concurrent-rollouts` (0: no cap), `--freeze`
    cap: int = 0
    freeze: bool = False
    #: workloads whose rollout holds a slot, and those already waiting for one (in order)
    in_flight: frozenset[ObjectKey] = frozenset()
    line: tuple[ObjectKey, ...] = ()
    #: resources whose content the circuit breaker holds -> that content's hash
    halted: Mapping[Resource, str] = field(default_factory=dict)


#: nothing in flight, nothing waiting, nothing halted, no cap
IDLE = State()


@record
class Row:
    workload: ObjectKey
    #: the plan's outcome (`planning.Outcome`) and its reason
    outcome: str
    reason: str
    #: how it would be reloaded: env-vars, annotations, evict, or "" when it would not be
    strategy: str = ""
    #: written now, or held (and why, until when, place in line); None: nothing to write
    verdict: Verdict | None = None
    window: str = ""
    after: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


def strategy_of(mode: evicting.Mode, config: planning.Config) -> str | None:
    """env-vars / annotations (the template written), evict, or None when unreadable."""
    policy = mode.policy
    if policy is None:
        return None
    if policy.strategy.pod_level:
        return policy.strategy.value
    return config.strategy.value


def preview(
    change: Change,
    workloads: Sequence[planning.Workload],
    *,
    config: planning.Config,
    now: float,
    state: State = IDLE,
    namespace_annotations: Mapping[str, str] | None = None,
) -> list[Row]:
    """Every workload of the change's namespace, what the change would do to it."""
    mine = sorted((w for w in workloads if w.namespace == change.namespace), key=lambda w: w.key)
    by_key = {w.key: w for w in mine}
    ns_annotations = namespace_annotations or {}
    run = _Run(change, by_key, config, now, state, ns_annotations)
    rows = {
        w.key: Row(w.key, p.outcome.value, p.message)
        for w in mine
        if (p := run.plans[w.key]).outcome is not Outcome.RELOAD
    }
    # the reloads are handled in key order, as the fan-out queues them; a workload held
    # because it follows one is looked at again (at the end of the queue) when that one is
    # written and nothing follows its rollout (Jobs, CronJobs), as the controller does
    queue = deque(w.key for w in mine if w.key not in rows)
    while queue:
        key = queue.popleft()
        row = rows[key] = run.handle(run.by_key[key])
        v = row.verdict
        if v is not None and v.write and key in run.written:
            for f in run.ledger.release_followers(key):
                held = rows[f].verdict
                if (
                    held is not None
                    and not held.write
                    and f not in queue
                    and not (held.hold is Hold.WINDOW and held.until is not None)
                ):
                    queue.append(f)  # a window's hold waits for its timer instead
    return [rows[w.key] for w in mine]


@dataclass
class _Run:
    """The controller's scheduling state while the change's reloads are handled."""

    change: Change
    by_key: dict[ObjectKey, planning.Workload]
    config: planning.Config
    now: float
    state: State
    ns_annotations: Mapping[str, str]
    plans: dict[ObjectKey, planning.Plan] = field(init=False)
    #: the slots, their line and who follows whom, as the controller's scheduler keeps them
    ledger: Ledger = field(init=False)
    #: written, and taking no slot (Jobs, CronJobs)
    written: set[ObjectKey] = field(default_factory=set, init=False)
    #: handled once, and held (their changes wait in the controller's coalescer)
    handled: set[ObjectKey] = field(default_factory=set, init=False)
    held: set[ObjectKey] = field(default_factory=set, init=False)

    def __post_init__(self) -> None:
        now = int(self.now)
        self.plans = {
            k: planning.plan(change=self.change, workload=w, config=self.config, now=now)
            for k, w in self.by_key.items()
        }
        self.ledger = Ledger(
            self.state.cap, set(self.state.in_flight), dict.fromkeys(self.state.line)
        )

    def handle(self, w: planning.Workload) -> Row:
        """One reload handled: written now, or held (the slots and the line as the
        controller's scheduler keeps them)."""
        row = self._handle(w)
        self.handled.add(w.key)
        if row.verdict is not None and not row.verdict.write:
            self.held.add(w.key)
        else:
            self.held.discard(w.key)
        return row

    def _handle(self, w: planning.Workload) -> Row:
        p, state, change = self.plans[w.key], self.state, self.change
        how = strategy_of(p.mode, self.config)
        if how is None:
            unreadable = ("kube-reloader.io/strategy is unreadable: not reloaded",)
            return Row(w.key, p.outcome.value, p.message, warnings=unreadable)
        if p.mode.pod_level and change.rtype is ResourceType.SECRETPROVIDERCLASS:
            csi = (
                "kube-reloader.io/strategy: evict does not follow Secrets Store CSI rotations; "
                "not reloaded for them",
            )
            return Row(w.key, p.outcome.value, p.message, how, warnings=csi)
        rules, warnings = scheduling.rules_of(
            w.key, w.annotations, self.ns_annotations, freeze=state.freeze
        )
        waiting, cycles = self.ledger.waiting_on(
            w.key, rules.after, self._unfinished, self._annotations
        )
        warnings.extend(cycles)
        verdict = scheduling.decide(rules, self._facts(w, waiting))
        # a pod-level reload's rotation, or a rollout, holds the slot until it ends
        followed = p.mode.pod_level or traits(w.kind).long_running
        self.ledger.settle(w.key, verdict, takes_slot=followed)
        if verdict.write and not followed:
            self.written.add(w.key)
        window = "" if rules.window is None else f"{rules.window.source} ({rules.window_from})"
        after = tuple(f"{k.kind}/{k.name}" for k in rules.after)
        return Row(
            w.key,
            p.outcome.value,
            p.message,
            how,
            verdict,
            window=window,
            after=after,
            warnings=tuple(warnings),
        )

    def _facts(self, w: planning.Workload, waiting: tuple[ObjectKey, ...]) -> scheduling.Facts:
        """What the scheduler knows of `w` now: its slot, the breaker, the Job, the order."""
        state, change = self.state, self.change
        resource = (change.rtype, change.namespace, change.name)
        halted = (str(change),) if state.halted.get(resource) == change.hash else ()
        return self.ledger.facts(
            w.key,
            now=self.now,
            urgent=scheduling.urgent(change.annotations),
            halted=halted,
            job_active=w.active,
            waiting_on=waiting,
        )

    def _annotations(self, key: ObjectKey) -> Mapping[str, str] | None:
        w = self.by_key.get(key)
        return None if w is None else w.annotations

    def _unfinished(self, k: ObjectKey) -> bool:
        """Would a workload that follows `k` wait for it? The ledger's rule
        (`Ledger.unfinished`), as `runtime.scheduler` asks it; here a change is pending while
        `k` is not handled yet, or held. One written that takes no slot (a Job, a CronJob) is
        done."""
        if k in self.written:
            return False
        w = self.by_key.get(k)
        p = self.plans.get(k)
        return self.ledger.unfinished(
            k,
            w,
            due=lambda: p is not None and p.outcome is Outcome.RELOAD,
            pod_level=p is not None and p.mode.pod_level,
            pending=k not in self.handled or k in self.held,
        )
