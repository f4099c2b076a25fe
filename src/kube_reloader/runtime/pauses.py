"""The Deployment pause period: pause before the reload's write (with `--compat=v2`, in the
same write, stamped again on every reload, as Reloader v2 does), resume on time. The resume
time is derived from the object itself (the paused-at annotation), so it survives restarts and
a change of leader; this room only keeps one resume timer per paused Deployment."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from kube_reloader.core import pausing, planning
from kube_reloader.core.annotations import Keys
from kube_reloader.core.objects import ObjectKey
from kube_reloader.kube import errors
from kube_reloader.runtime.clock import Clock, Timer, utc
from kube_reloader.runtime.fencing import Fence
from kube_reloader.runtime.reporting import ProblemReports, Spawn
from kube_reloader.runtime.rolloutreports import RolloutReports
from kube_reloader.runtime.writing import Writer

#: seconds before a resume that could not be done (not leading, API error) is tried again
RESUME_RETRY = 5.0


class _InFlight:
    """Stands in a Deployment's resume timer while its resume runs (nothing to cancel)."""

    def cancel(self) -> None:
        pass


_IN_FLIGHT = _InFlight()


@dataclass(eq=False, repr=False)  # state, not a value: compared by identity
class Pauses:
    clock: Clock
    keys: Keys
    writer: Writer
    fence: Fence
    rollouts: RolloutReports
    problems: ProblemReports
    spawn: Spawn
    #: Reloader v2's pause (`--compat=v2`): in the reload's write, stamped on every reload
    v2: bool = False
    _resumes: dict[ObjectKey, Timer] = field(default_factory=dict, init=False)
    #: v2's pauses put in a write not yet accepted (`with_write`, `written`)
    _unwritten: dict[ObjectKey, str] = field(default_factory=dict, init=False)

    def __contains__(self, key: object) -> bool:
        return key in self._resumes

    async def for_write(
        self, workload: planning.Workload, now: dt.datetime
    ) -> dict[str, Any] | None:
        """Pause a Deployment about to be reloaded: v1's way, before the write (None), or
        v2's, the body to write with it (`with_write`)."""
        if self.v2:
            return self.with_write(workload, now)
        await self.before_write(workload, now)
        return None

    async def before_write(self, workload: planning.Workload, now: dt.datetime) -> None:
        """Pause a Deployment whose pause-period annotation asks for it (a bad value costs a
        Warning and no pause)."""
        decision = self._plan(workload, now, extend=False)
        if decision.action is pausing.PauseAction.PAUSE:
            await self.writer.pause(workload.key, self.keys.paused_at, now)
            assert decision.resume_at is not None
            self.rollouts.paused(workload.key, str(decision.resume_at))
            self._schedule(workload.key, decision.resume_at)

    def with_write(self, workload: planning.Workload, now: dt.datetime) -> dict[str, Any] | None:
        """Reloader v2's pause (`--compat=v2`): the body that pauses a Deployment whose
        pause-period annotation asks for it, written with the reload in one update, and
        stamped again on every reload (a pause of ours then lasts the period from now). A
        Deployment someone else paused is left to them; a bad value costs a Warning."""
        decision = self._plan(workload, now, extend=True)
        if decision.action is not pausing.PauseAction.PAUSE or decision.resume_at is None:
            return None
        self._schedule(workload.key, decision.resume_at)  # resume() reads what was written
        self._unwritten[workload.key] = str(decision.resume_at)  # told once written
        return pausing.pause_patch(self.keys.paused_at, now)

    def written(self, key: ObjectKey) -> None:
        """The reload carrying `key`'s pause (`with_write`) was accepted: the pause is told."""
        until = self._unwritten.pop(key, None)
        if until is not None:
            self.rollouts.paused(key, until)

    def _plan(
        self, workload: planning.Workload, now: dt.datetime, *, extend: bool
    ) -> pausing.PausePlan:
        """The pause decision for a Deployment about to be reloaded; a bad period costs a
        Warning (once)."""
        decision = pausing.plan_pause(
            annotations=dict(workload.annotations),
            paused=workload.paused,
            now=now,
            period_key=self.keys.pause_period,
            paused_at_key=self.keys.paused_at,
            extend=extend,
        )
        if decision.action is pausing.PauseAction.INVALID:
            self.problems.warn_once(workload, (decision.message,))
        return decision

    def observe(self, workload: planning.Workload) -> None:
        """Called for every Deployment seen: (re)arm the resume timer of a pause of ours."""
        if not pausing.paused_by_us(workload.annotations, workload.paused, self.keys.paused_at):
            self.forget(workload.key)  # without reading the clock for resume_due
            return
        _due, when = pausing.resume_due(
            annotations=workload.annotations,
            paused=workload.paused,
            now=utc(self.clock),
            period_key=self.keys.pause_period,
            paused_at_key=self.keys.paused_at,
        )
        if when is None:
            self.forget(workload.key)
        elif workload.key not in self._resumes:
            self._schedule(workload.key, when)

    def forget(self, key: ObjectKey) -> None:
        handle = self._resumes.pop(key, None)
        if handle is not None:
            handle.cancel()

    def close(self) -> None:
        self._unwritten.clear()
        for handle in self._resumes.values():
            handle.cancel()  # kept in the map: a Deployment seen while draining arms none

    def _schedule(self, key: ObjectKey, when: dt.datetime) -> None:
        self.forget(key)
        delay = max(0.0, (when - utc(self.clock)).total_seconds())
        self._resumes[key] = self.clock.call_later(delay, lambda: self._fire(key))

    def _fire(self, key: ObjectKey) -> None:
        self.spawn(f"resume/{key}", self.resume(key))

    def _later(self, key: ObjectKey) -> None:
        self._schedule(key, utc(self.clock) + dt.timedelta(seconds=RESUME_RETRY))

    async def resume(self, key: ObjectKey) -> None:
        """Resume `key` if it is still paused by us; the leader does it. While it runs, `key`
        holds an in-flight mark instead of a timer: a Deployment event seen meanwhile (its
        rollout's status) arms no second resume, which would write and count it again."""
        self._resumes[key] = _IN_FLIGHT
        try:
            await self._resume(key)
        finally:
            if self._resumes.get(key) is _IN_FLIGHT:
                del self._resumes[key]

    async def _resume(self, key: ObjectKey) -> None:
        if not self.fence.may_write():  # the leader resumes; check again later in case we lead
            self._later(key)
            return
        started = self.clock.monotonic()
        try:
            obj = await self.writer.read(key)
            annotations = (obj.get("metadata") or {}).get("annotations") or {}
            paused = bool((obj.get("spec") or {}).get("paused"))
            if not pausing.paused_by_us(annotations, paused, self.keys.paused_at):
                return  # resumed by someone else, or not our pause
            if not self.fence.may_write():  # lost the lease while reading: the leader resumes
                self._later(key)
                return
            await self.writer.resume(key, self.keys.paused_at)
            self.rollouts.resumed(key, self.clock.monotonic() - started)
        except errors.NotFound:
            return
        except errors.KubeError as exc:
            self.rollouts.resume_failed(key, str(exc), self.clock.monotonic() - started)
            self._later(key)
