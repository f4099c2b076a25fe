"""Reverted reloads: after a reload writes a workload's pod template, the workload is watched
for a minute (up to a second more: the watches a fan-out starts end on one timer per
second they fall in). If the template goes back to what it carried before the write (an
operator that owns the workload restored its own template, or a GitOps tool re-applied it),
the pods keep the old content: one Warning Event `ReloadReverted` says so and points to
`kube-reloader.io/strategy: evict`, which replaces the pods without writing the template.

Only a newer generation than the write's own counts (a watch event from before the write, say
of a pause just before it, can arrive after the write's answer), and only a return to the
earlier value (a newer reload of our own moves it to a newer hash).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kube_reloader.core import catchup, planning, strategies
from kube_reloader.core.kindtraits import traits
from kube_reloader.core.objects import ObjectKey
from kube_reloader.core.planning import Plan
from kube_reloader.runtime.clock import Clock, Grains, Timer
from kube_reloader.runtime.reloadreports import ReloadReports

#: seconds after a template write during which a revert is looked for
WATCH_SECONDS = 60.0


@dataclass(eq=False, repr=False)  # state, not a value: compared by identity
class Reverts:
    clock: Clock
    reloads: ReloadReports
    strategy: strategies.Strategy
    #: key -> (plan, the hash the template carried before the write) pairs, the generation
    #: the write made, and the timer
    _watching: dict[ObjectKey, tuple[list[tuple[Plan, str | None]], int, Timer]] = field(
        default_factory=dict
    )
    #: the watches' ends, one timer per second they end in
    _ends: Grains = field(init=False)

    def __post_init__(self) -> None:
        self._ends = Grains(self.clock)

    def __contains__(self, key: object) -> bool:
        return key in self._watching

    def written(self, before: planning.Workload, plans: list[Plan], generation: int) -> None:
        """`plans` were written to the template of `before` (the workload as planned), which
        the API server answered with `generation`."""
        if not traits(before.kind).reverts_watched or generation <= 0:
            return
        key = before.key
        self.forget(key)
        watched = [(p, catchup.carried(p, before, self.strategy)) for p in plans]

        def expire() -> None:
            self._watching.pop(key, None)

        timer = self._ends.call_later(WATCH_SECONDS, expire)
        self._watching[key] = (watched, generation, timer)

    def observe(self, workload: planning.Workload) -> None:
        """A watched workload's new state: warn once when a write was undone."""
        entry = self._watching.get(workload.key)
        if entry is None or workload.status is None:
            return
        if workload.status.generation <= entry[1]:
            return  # our write, or a state from before it arriving late: not a revert
        for plan, earlier in entry[0]:
            now = catchup.carried(plan, workload, self.strategy)
            if now != (plan.written or plan.change.hash) and now == earlier:
                self.forget(workload.key)
                self.reloads.reverted(workload, plan)
                return

    def forget(self, key: ObjectKey) -> None:
        entry = self._watching.pop(key, None)
        if entry is not None:
            entry[2].cancel()
