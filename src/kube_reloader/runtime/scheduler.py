"""Scheduling: between "this workload should reload" and "write it" (core/scheduling.py has
the rules). This room owns the rollout slots and their line, the circuit breaker's failures,
and who waits for what; every hold is level-based: the held changes stay in the coalescer, and
the workload is looked at again when what it waits for happens (a slot frees, a followed
workload or a Job finishes, a namespace changes, a window opens). After a restart, the
start-up catch-up re-plans every workload and the same rules hold it again; the breaker's
failures are read back from the workloads' own status (runtime/breaker.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kube_reloader.core import planning, rollouts, scheduling
from kube_reloader.core.ledger import Ledger, adopts
from kube_reloader.core.objects import ObjectKey
from kube_reloader.core.planning import Outcome, Plan
from kube_reloader.core.scheduling import Hold, Verdict
from kube_reloader.runtime import breaker
from kube_reloader.runtime.breaker import Breaker, Content
from kube_reloader.runtime.clock import Clock
from kube_reloader.runtime.coalescing import Coalescer
from kube_reloader.runtime.fleetreports import FleetReports
from kube_reloader.runtime.options import Options
from kube_reloader.runtime.reporting import ProblemReports, log
from kube_reloader.runtime.stores import Stores

#: a window opens "±30 s": look again this long after its start, so a clock that lags a
#: little does not find it still closed
WINDOW_MARGIN = 1.0
#: the longest a rollout holds a slot: the default progress deadline plus its grace (a
#: workload's own progressDeadlineSeconds, which its tenant writes, never holds one longer)
SLOT_SECONDS = rollouts.MAX_HOLD_SECONDS


@dataclass(eq=False, repr=False)  # state, not a value: compared by identity
class Scheduler:
    options: Options
    clock: Clock
    stores: Stores
    coalescer: Coalescer
    fleet: FleetReports
    problems: ProblemReports
    #: the slots, their line and who follows whom (`core.ledger`, as `impact` keeps it)
    ledger: Ledger = field(init=False)
    #: what each rolling workload was written with (for the breaker)
    _written: dict[ObjectKey, tuple[Content, ...]] = field(default_factory=dict, init=False)
    #: the circuit breaker (`--halt-after-failures`)
    breaker: Breaker = field(init=False)
    #: every held workload and why
    held: dict[ObjectKey, Hold] = field(default_factory=dict, init=False)
    #: rollouts found in flight at start (not written by this process: the tracker does not
    #: follow them, their status frees the slot)
    _adopted: set[ObjectKey] = field(default_factory=set, init=False)
    #: when each slot is given back by time alone (monotonic; whatever a workload's
    #: progressDeadlineSeconds): checked when a reload is admitted, and the reloads held for a
    #: slot or an order are woken at the first of them (`wake_after`)
    _deadlines: dict[ObjectKey, float] = field(default_factory=dict, init=False)
    #: admitted writes that met a conflict and are re-planned at once
    _again: set[ObjectKey] = field(default_factory=set, init=False)

    def __post_init__(self) -> None:
        self.breaker = Breaker(self.options.halt_after_failures, self.stores, self.fleet)
        self.ledger = Ledger(self.options.max_concurrent_rollouts)

    @property
    def in_flight(self) -> set[ObjectKey]:
        """Workloads whose rollout holds a slot: admitted (writing) or rolling out."""
        return self.ledger.in_flight

    # -- deciding ---------------------------------------------------------------------------
    def admit(self, workload: planning.Workload, todo: list[Plan]) -> Verdict:
        """Write now (a slot is taken until `wrote`/`finished`), or hold and why."""
        key = workload.key
        self.expire_due()
        self.breaker.resume(todo)
        rules, warnings = scheduling.rules_of(
            key,
            workload.annotations,
            self.stores.namespace_annotations(workload.namespace),
            freeze=self.options.freeze,
        )
        self.problems.warn_once(workload, tuple(warnings))
        facts = self._facts(workload, rules, todo)
        verdict = scheduling.decide(rules, facts)
        self._call(self.ledger.settle(key, verdict))
        if verdict.write:
            self._unhold(key)
            self._adopted.discard(key)  # written again: the tracker follows it now
            self._take(key)
            return verdict
        first = self.held.get(key) is not verdict.hold
        self.held[key] = verdict.hold or Hold.SLOTS
        self._report(workload, verdict, todo, first)
        return verdict

    def _facts(
        self, workload: planning.Workload, rules: scheduling.Rules, todo: list[Plan]
    ) -> scheduling.Facts:
        waiting, cycles = self.ledger.waiting_on(
            workload.key, rules.after, lambda k: self._unfinished(k, todo), self._annotations
        )
        self.problems.warn_once(workload, tuple(cycles))
        return self.ledger.facts(
            workload.key,
            now=self.clock.wall(),
            urgent=any(scheduling.urgent(p.change.annotations) for p in todo),
            halted=self.breaker.holding(todo),
            job_active=workload.active,
            waiting_on=waiting,
        )

    def _annotations(self, key: ObjectKey) -> Mapping[str, str] | None:
        w = self.stores.workload(key)
        return None if w is None else w.annotations

    def _unfinished(self, k: ObjectKey, todo: list[Plan]) -> bool:
        """Has the followed workload `k` still to roll (or be rolling) these changes? The
        ledger's rule (`Ledger.unfinished`), which `impact` asks too."""
        cached = self.stores.workload(k)
        w = None if cached is None else self.stores.resolve(cached)
        config, now = self.options.plan, int(self.clock.wall())

        def due() -> bool:  # not yet written (or triggered) for this content
            assert w is not None
            return any(
                planning.plan(change=p.change, workload=w, config=config, now=now).outcome
                is Outcome.RELOAD
                for p in todo  # the same namespace: the same change
            )

        pod_level = w is not None and planning.mode_of(w, config).pod_level
        return self.ledger.unfinished(
            k, w, due=due, pod_level=pod_level, pending=k in self.coalescer
        )

    # -- slots ------------------------------------------------------------------------------
    def wrote(self, key: ObjectKey, todo: list[Plan], *, written: bool, rolling: bool) -> None:
        """An admitted write ended: written or not; `rolling`: its rollout is followed (by the
        rollout tracker or a rotation), which frees the slot when it finishes."""
        if written and rolling:
            self._written[key] = breaker.contents(todo)
        if not written and key in self._again:
            self._again.discard(key)
            self._free(key, keep=True)
        elif not (written and rolling):
            self._free(key)
            if written:
                self._wake_followers(key)

    def again(self, key: ObjectKey) -> None:
        """An admitted write met a conflict and is re-planned at once: it keeps its turn (the
        slot its `wrote` frees is handed back to it first, not to the line)."""
        self._again.add(key)

    def finished(self, key: ObjectKey, result: rollouts.RolloutState | None) -> None:
        """A followed rollout (or rotation) ended; `result` None: it was dropped."""
        failed = result in (rollouts.RolloutState.FAILED, rollouts.RolloutState.STUCK)
        if failed:
            for content in self._written.get(key, ()):
                self.breaker.fail(key, content)
        self._written.pop(key, None)
        self._free(key)
        self._wake_followers(key)

    def rotation_done(self, key: ObjectKey, ok: bool | None) -> None:
        """A rotation ended: replaced every pod (True), failed (False: counts for the
        breaker), or was dropped (None: lost lease, workload gone)."""
        if ok is None:
            self.finished(key, None)
        else:
            self.finished(
                key, rollouts.RolloutState.COMPLETE if ok else rollouts.RolloutState.FAILED
            )

    def idle(self, key: ObjectKey) -> None:
        """The workload has nothing to write (up to date, or unreadable rules), or its
        reconcile failed before a decision (its called slot goes to the next in line)."""
        self._unhold(key)
        if self.ledger.leave_line(key):
            self._call(self.ledger.call())

    def wake_after(self, verdict: Verdict) -> float | None:
        """Seconds until a reload held by `verdict` must be looked at again by time alone:
        its window's opening (plus a margin), or, held for a slot or an order, the first slot
        deadline; None when only an event ends the hold. The coalescer keeps the timer."""
        if verdict.hold is Hold.WINDOW and verdict.until is not None:
            return max(0.0, verdict.until - self.clock.wall()) + WINDOW_MARGIN
        if verdict.hold in (Hold.SLOTS, Hold.ORDER) and self._deadlines:
            return max(0.0, min(self._deadlines.values()) - self.clock.monotonic())
        return None

    def expire_due(self) -> None:
        """Give back every slot whose deadline has passed (the rollout is not counted as
        failed; the next in line is called and its followers are woken)."""
        now = self.clock.monotonic()
        for key in [k for k, deadline in self._deadlines.items() if deadline <= now]:
            self._expired(key)

    def _unhold(self, key: ObjectKey) -> None:
        self.held.pop(key, None)
        self.fleet.released(key)  # its next hold or deferral is news
        self.coalescer.cancel_wake(key)

    def _free(self, key: ObjectKey, *, keep: bool = False) -> None:
        """`key` no longer holds a slot; `keep`: it is about to take one again (called)."""
        self._deadlines.pop(key, None)
        self._call(self.ledger.free(key, keep=keep))

    def _call(self, called: list[ObjectKey]) -> None:
        """Those called from the line (`core.ledger`) are handled at once: their slot is
        theirs."""
        for key in called:
            self.coalescer.schedule(key, 0)

    def adopt(self, workload: planning.Workload) -> bool:
        """A rollout in flight found at start (or on winning the lease) holds a slot: a
        template that carries a reload and is still rolling out. True when it was taken."""
        if self.options.max_concurrent_rollouts <= 0 or workload.key in self.in_flight:
            return False
        if not adopts(workload):
            return False
        key = workload.key
        self._take(key)
        self._adopted.add(key)
        log.info("rollout in flight at start holds a slot", extra={"workload": str(key)})
        return True

    def _take(self, key: ObjectKey) -> None:
        """`key` holds a slot, for at most SLOT_SECONDS (a tenant's progressDeadlineSeconds
        never holds one longer: the slot is then freed, and nothing counts as failed)."""
        self.ledger.in_flight.add(key)
        if self.options.max_concurrent_rollouts > 0 and key not in self._deadlines:
            self._deadlines[key] = self.clock.monotonic() + SLOT_SECONDS
            for follower in self.ledger.followers.get(key, ()):  # held before it took its slot
                self.coalescer.wake_at(follower, SLOT_SECONDS)

    def _expired(self, key: ObjectKey) -> None:
        self._deadlines.pop(key, None)
        if key in self.in_flight:
            extra = {"workload": str(key), "seconds": SLOT_SECONDS}
            log.info("rollout slot held too long, freed", extra=extra)
            self._adopted.discard(key)
            self._written.pop(key, None)
            self._free(key)
            self._wake_followers(key)

    # -- watching ---------------------------------------------------------------------------
    def observe(self, workload: planning.Workload) -> None:
        """A workload's new state: the breaker reads failures from it; followers and Jobs
        waiting on it are looked at again."""
        key = workload.key
        st = workload.status
        rolling = rollouts.rolling(str(workload.kind), st)
        if st is not None:
            self.breaker.observe(
                workload, self.options.plan.strategy, rolling, self.options.field_manager
            )
        if key in self._adopted and st is not None and not rolling:
            self._adopted.discard(key)
            failed = st.progress_deadline_exceeded
            self.finished(
                key, rollouts.RolloutState.FAILED if failed else rollouts.RolloutState.COMPLETE
            )
        hold = self.held.get(key)
        if (hold is Hold.JOB_RUNNING and workload.active == 0) or hold is Hold.WINDOW:
            self._wake(key)  # a window may have been changed or removed
        if key in self.ledger.followers:
            self._wake_followers(key)

    def namespace_changed(self, namespace: str) -> None:
        """A namespace's freeze or window may have changed: its held workloads look again."""
        for key, hold in list(self.held.items()):
            if key.namespace == namespace and hold in (Hold.FROZEN, Hold.WINDOW):
                self._wake(key)

    def forget(self, key: ObjectKey) -> None:
        """The workload is gone (those that follow it no longer wait for it)."""
        self._unhold(key)
        self._written.pop(key, None)
        self._again.discard(key)
        self._wake_followers(key)
        self.breaker.recovered(key)
        self._adopted.discard(key)
        if self.ledger.leave_line(key):
            self._call(self.ledger.call())
        self._free(key)

    def _wake(self, key: ObjectKey) -> None:
        """Queue a held workload now, whatever timer the coalescer runs for it."""
        if key in self.coalescer:
            self.coalescer.requeue(key)

    def _wake_followers(self, key: ObjectKey) -> None:
        for follower in self.ledger.release_followers(key):
            self._wake(follower)

    def _report(
        self, workload: planning.Workload, verdict: Verdict, todo: list[Plan], first: bool
    ) -> None:
        what = ", ".join(sorted({str(p.change) for p in todo}))
        verb = "held" if verdict.hold is Hold.HALTED else "deferred"
        text = f"Reload of '{workload.name}' for {what} {verb}: {verdict.message}"
        self.fleet.held(workload, str(verdict.hold), text, first=first)

    def counts(self) -> dict[str, int]:
        """Held workloads by reason (for the gauge)."""
        out = {h.value: 0 for h in Hold}
        for hold in self.held.values():
            out[hold.value] += 1
        return out
