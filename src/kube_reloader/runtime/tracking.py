"""Following what a reload started: each rollout written is tracked until it completes, fails
(progress deadline exceeded) or is stuck: no progress for its deadline (a paused Deployment
never is) — one deadline timer per workload, however many reloads; the outcome is reported
(a Warning Event and an alert when it is not a success)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kube_reloader.core import planning, rollouts
from kube_reloader.core.objects import ObjectKey
from kube_reloader.runtime.clock import Clock, Timer
from kube_reloader.runtime.rolloutreports import RolloutReports


class RolloutTracker:
    def __init__(
        self,
        clock: Clock,
        rollouts: RolloutReports,
        lookup: Callable[[ObjectKey], planning.Workload | None],
        on_finished: Callable[[ObjectKey, rollouts.RolloutState], None],
    ) -> None:
        self.clock = clock
        self.rollouts = rollouts
        self.lookup = lookup
        #: told when a followed rollout ends (the scheduler frees its slot)
        self.on_finished = on_finished
        #: key -> (generation written, started (monotonic), deadline seconds, the timer)
        self._tracking: dict[ObjectKey, tuple[int, float, float, Timer]] = {}
        #: key -> the rollout's last progress (updated, available, outdated pods): the deadline
        #: counts from the last progress, as Kubernetes' progressDeadlineSeconds does
        self._progress: dict[ObjectKey, tuple[int, int, int]] = {}

    def __contains__(self, key: object) -> bool:
        return key in self._tracking

    def started(self, workload: planning.Workload, answer: dict[str, Any]) -> None:
        """A reload of `workload` was written; `answer` is the object the API returned."""
        generation = int((answer.get("metadata") or {}).get("generation") or 0)
        fresh = self.lookup(workload.key)
        status = fresh.status if fresh is not None else None
        limit = rollouts.deadline(status)
        self.forget(workload.key)  # one timer per workload: a newer reload replaces the old one
        self._arm(workload.key, generation, self.clock.monotonic(), limit)
        if fresh is not None:
            self.observe(fresh)

    def observe(self, workload: planning.Workload) -> None:
        """A tracked workload's new state: finish its rollout when it is no longer progressing."""
        tracked = self._tracking.get(workload.key)
        if tracked is None or workload.status is None:
            return
        st = workload.status
        result = rollouts.state(workload.kind, tracked[0], st)
        if result is not rollouts.RolloutState.PROGRESSING:
            self._finish(workload, result)
            return
        progress = (st.updated, st.available, st.outdated)
        if self._progress.get(workload.key, progress) != progress:
            self._arm(workload.key, tracked[0], tracked[1], tracked[2])
        self._progress[workload.key] = progress

    def _arm(self, key: ObjectKey, generation: int, started: float, limit: float) -> None:
        old = self._tracking.get(key)
        if old is not None:
            old[3].cancel()
        timer = self.clock.call_later(limit, lambda: self._timed_out(key, generation))
        self._tracking[key] = (generation, started, limit, timer)

    def forget(self, key: ObjectKey) -> None:
        self._progress.pop(key, None)
        tracked = self._tracking.pop(key, None)
        if tracked is not None:
            tracked[3].cancel()

    def close(self) -> None:
        for tracked in self._tracking.values():
            tracked[3].cancel()  # kept: a rollout completing while draining is still reported

    def _timed_out(self, key: ObjectKey, generation: int) -> None:
        tracked = self._tracking.get(key)
        workload = self.lookup(key)
        if tracked is None or tracked[0] != generation or workload is None:
            return
        if workload.paused:  # a paused Deployment makes no progress on purpose
            self._arm(key, generation, tracked[1], tracked[2])
            return
        self._finish(workload, rollouts.RolloutState.STUCK)

    def _finish(self, workload: planning.Workload, result: rollouts.RolloutState) -> None:
        _written, started, limit, timer = self._tracking.pop(workload.key)
        self._progress.pop(workload.key, None)
        timer.cancel()
        self.rollouts.rollout_finished(workload, result, self.clock.monotonic() - started, limit)
        self.on_finished(workload.key, result)
