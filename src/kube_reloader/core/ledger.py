"""The book of the rollout slots: who holds one, who waits in line for one, who follows whom.

`runtime.scheduler` keeps one for the controller and `core.impacting` one for a preview, so
both decide from the same book by the same code: `facts` feeds `scheduling.decide`, `settle`
writes what the verdict does to the book, `waiting_on` reads `reload-after` (and warns of a
cycle in the same words), `free` and `call` hand a freed slot to the next in line. Pure: no
clock, no I/O; the runtime keeps the slots' deadlines and the timers, and tells the book when a
rollout ends.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kube_reloader.core import planning, rollouts, scheduling, strategies
from kube_reloader.core.kindtraits import traits
from kube_reloader.core.objects import ObjectKey
from kube_reloader.core.scheduling import Facts, Hold, Verdict

#: a `reload-after` entry that follows this workload back: that order is ignored
CYCLE = (
    "kube-reloader.io/reload-after: {kind}/{name} follows this workload too (a cycle); "
    "that order is ignored"
)


def adopts(w: planning.Workload) -> bool:
    """Does a rollout found in flight (at start, on winning the lease, or by `impact`) hold a
    slot? Yes when it is progressing and its template carries a reload."""
    return rollouts.rolling(str(w.kind), w.status) and strategies.carries_reload(w.template)


@dataclass
class Ledger:
    #: `--max-concurrent-rollouts` (0: no cap)
    cap: int
    #: workloads whose rollout holds a slot: admitted (writing) or rolling out
    in_flight: set[ObjectKey] = field(default_factory=set)
    #: waiting for a slot, first come first served
    line: dict[ObjectKey, None] = field(default_factory=dict)
    #: called from the line: a slot is theirs when they are next handled
    called: set[ObjectKey] = field(default_factory=set)
    #: followed workload -> the workloads waiting for it
    followers: dict[ObjectKey, set[ObjectKey]] = field(default_factory=dict)

    def waiting_on(
        self,
        key: ObjectKey,
        after: tuple[ObjectKey, ...],
        unfinished: Callable[[ObjectKey], bool],
        annotations_of: Callable[[ObjectKey], Mapping[str, str] | None],
    ) -> tuple[tuple[ObjectKey, ...], list[str]]:
        """The workloads of `key`'s `reload-after` it waits for (`unfinished`: not done
        rolling out this change), each remembering `key` as a follower; and a warning per
        workload that follows `key` back (a cycle: that order is ignored)."""
        waiting: list[ObjectKey] = []
        warnings: list[str] = []
        for k in after:
            if scheduling.follows(k, key, annotations_of):
                warnings.append(CYCLE.format(kind=k.kind, name=k.name))
            elif unfinished(k):
                waiting.append(k)
                self.followers.setdefault(k, set()).add(key)
        return tuple(waiting), warnings

    def unfinished(
        self,
        key: ObjectKey,
        workload: planning.Workload | None,
        *,
        due: Callable[[], bool],
        pod_level: bool,
        pending: bool,
    ) -> bool:
        """Has the followed workload `key` still to roll (or be rolling) the change? Yes while
        it holds a slot or waits for one. A reload that leaves a hash on its template is due
        until the template carries it (`due`: its plan is still a reload); one that leaves
        none (its pods acted on, `pod_level`; a CronJob's next run) only while its change
        waits (`pending`: not handled yet, or held). Else: while its rollout progresses."""
        if key in self.in_flight or key in self.line or key in self.called:
            return True
        if workload is None:
            return False  # nothing to wait for
        carries = not pod_level and not traits(workload.kind).scheduled
        if (carries or pending) and due():
            return True
        return rollouts.rolling(str(workload.kind), workload.status)

    def facts(
        self,
        key: ObjectKey,
        *,
        now: float,
        urgent: bool,
        halted: tuple[str, ...],
        job_active: int,
        waiting_on: tuple[ObjectKey, ...],
    ) -> Facts:
        """What `scheduling.decide` knows of `key`: the given facts and its slot's."""
        sl = scheduling.slots(key, self.cap, self.in_flight, self.line, self.called)
        return Facts(
            now=now,
            urgent=urgent,
            halted=halted,
            job_active=job_active,
            waiting_on=waiting_on,
            cap=self.cap,
            in_flight=sl.in_flight,
            ahead=sl.ahead,
            namespace_in_flight=sl.namespace_in_flight,
            namespace_share=sl.share,
            other_namespaces=sl.others,
        )

    def settle(
        self, key: ObjectKey, verdict: Verdict, *, takes_slot: bool = True
    ) -> list[ObjectKey]:
        """What `verdict` does to the book: written, it leaves the line and (`takes_slot`: its
        rollout is followed) holds a slot; held for a slot, it joins the line; held for
        anything else, it leaves the line, and a slot it was called for goes to the next.
        Returns the workloads called from the line."""
        if verdict.write:
            self.leave_line(key)
            if takes_slot:
                self.in_flight.add(key)
            return []
        if verdict.hold is Hold.SLOTS:
            self.called.discard(key)
            self.line.setdefault(key, None)
            return []
        return self.call() if self.leave_line(key) else []

    def leave_line(self, key: ObjectKey) -> bool:
        """`key` no longer waits for a slot; True when it had been called for one."""
        called = key in self.called
        self.called.discard(key)
        self.line.pop(key, None)
        return called

    def free(self, key: ObjectKey, *, keep: bool = False) -> list[ObjectKey]:
        """`key` no longer holds a slot (`keep`: it takes one again when next handled, as a
        write re-planned after a conflict does). Returns the workloads called from the line."""
        if key not in self.in_flight:
            return []
        self.in_flight.discard(key)
        if keep:
            self.called.add(key)
            return []
        return self.call()

    def call(self) -> list[ObjectKey]:
        """Free slots go to those in line by `core.fairness`'s turns: the namespace holding
        the fewest first (a namespace at its share is skipped), in order of arrival within
        each (`scheduling.next_in_line`). Returns the workloads called."""
        called: list[ObjectKey] = []
        cap = self.cap
        while self.line and (cap <= 0 or len(self.in_flight) + len(self.called) < cap):
            holding = Counter(k.namespace for k in (*self.in_flight, *self.called))
            key = scheduling.next_in_line(cap, holding, self.line)
            if key is None:
                break
            del self.line[key]
            self.called.add(key)
            called.append(key)
        return called

    def release_followers(self, key: ObjectKey) -> list[ObjectKey]:
        """The workloads that waited for `key`, in order; they no longer wait for it."""
        return sorted(self.followers.pop(key, ()))
