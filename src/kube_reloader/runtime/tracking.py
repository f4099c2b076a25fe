"""Following what a reload started: rollout progress and deadlines (one timer per workload),
and the Deployment pause period (pause before the write, resume on time, derived from the
object so it survives restarts)."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from typing import Any

from kube_reloader.core import pausing, planning, rollouts
from kube_reloader.core.objects import ObjectKey, WorkloadKind
from kube_reloader.kube import errors, resources
from kube_reloader.runtime.base import ControllerBase, log


class Tracking(ControllerBase):
    def _track_rollout(self, workload: planning.Workload, answer: dict[str, Any]) -> None:
        if workload.kind not in (
            WorkloadKind.DEPLOYMENT, WorkloadKind.STATEFULSET, WorkloadKind.DAEMONSET
        ):  # fmt: skip
            return
        generation = int((answer.get("metadata") or {}).get("generation") or 0)
        fresh = self.index.workloads.get(workload.key)
        status = fresh.status if fresh is not None else None
        limit = (
            rollouts.deadline(status) if status is not None else rollouts.DEFAULT_DEADLINE_SECONDS
        )
        previous = self._tracking.pop(workload.key, None)
        if previous is not None:
            previous[3].cancel()  # one timer per workload: a newer reload replaces the old one
        key = workload.key
        timer = asyncio.get_running_loop().call_later(
            limit, lambda: self._rollout_timed_out(key, generation)
        )
        self._tracking[key] = (generation, time.monotonic(), limit, timer)
        if fresh is not None:
            self._check_rollout(fresh)

    def _check_rollout(self, workload: planning.Workload) -> None:
        tracked = self._tracking.get(workload.key)
        if tracked is None or workload.status is None:
            return
        written = tracked[0]
        result = rollouts.state(workload.kind, written, workload.status)
        if result is not rollouts.RolloutState.PROGRESSING:
            self._finish_rollout(workload, result)

    def _rollout_timed_out(self, key: ObjectKey, generation: int) -> None:
        tracked = self._tracking.get(key)
        workload = self.index.workloads.get(key)
        if tracked is None or tracked[0] != generation or workload is None:
            return
        self._finish_rollout(workload, rollouts.RolloutState.STUCK)

    def _finish_rollout(self, workload: planning.Workload, result: rollouts.RolloutState) -> None:
        _written, started, limit, timer = self._tracking.pop(workload.key)
        timer.cancel()
        seconds = time.monotonic() - started
        kind, name = workload.kind.value, workload.name
        self.metrics.rollouts.labels(workload_kind=kind, result=result.value).inc()
        if result is rollouts.RolloutState.COMPLETE:
            self.metrics.rollout_duration.labels(workload_kind=kind).observe(seconds)
            log.info(
                "rollout complete",
                extra={"workload": str(workload.key), "seconds": round(seconds, 2)},
            )
            # no Event for a success: one per reload would double the controller's API writes;
            # the metric and the log line record it, failures get Warning Events
            return
        if result is rollouts.RolloutState.FAILED:
            reason, text = (
                "ReloadRolloutFailed",
                (f"Rollout of '{name}' after the reload failed: progress deadline exceeded"),
            )
        else:
            reason, text = (
                "ReloadRolloutStuck",
                (f"Rollout of '{name}' after the reload is not complete after {limit:.0f}s"),
            )
        log.warning(
            "rollout not complete", extra={"workload": str(workload.key), "result": result.value}
        )
        self._event(workload, "Warning", reason, text, "reloader")
        if self.alerts is not None and self.leading.is_set():
            self.alerts.notify(f"{text} ({kind} in namespace {workload.namespace})")

    async def _maybe_pause(self, workload: planning.Workload, now: dt.datetime) -> None:
        keys = self.keys
        decision = pausing.plan_pause(
            annotations=dict(workload.annotations), paused=workload.paused, now=now,
            period_key=keys.pause_period, paused_at_key=keys.paused_at,
        )  # fmt: skip
        if decision.action is pausing.PauseAction.INVALID:
            self._warn_once(workload, (decision.message,))
        elif decision.action is pausing.PauseAction.PAUSE:
            await self.client.patch(
                resources.DEPLOYMENTS, workload.name, pausing.pause_patch(keys.paused_at, now),
                namespace=workload.namespace, field_manager=self.options.field_manager,
            )  # fmt: skip
            self.stats.pauses += 1
            self.metrics.pauses.labels(action="pause").inc()
            log.info(
                "paused deployment",
                extra={"workload": str(workload.key), "until": str(decision.resume_at)},
            )
            assert decision.resume_at is not None
            self._schedule_resume(workload.key, decision.resume_at)

    def _track_pause(self, workload: planning.Workload) -> None:
        """Called for every Deployment seen: (re)arm the resume timer of a pause of ours."""
        _due, when = pausing.resume_due(
            annotations=dict(workload.annotations), paused=workload.paused,
            now=self._now(), period_key=self.keys.pause_period,
            paused_at_key=self.keys.paused_at,
        )  # fmt: skip
        if when is None:
            handle = self._resumes.pop(workload.key, None)
            if handle is not None:
                handle.cancel()
            return
        if workload.key not in self._resumes:
            self._schedule_resume(workload.key, when)

    def _schedule_resume(self, key: ObjectKey, when: dt.datetime) -> None:
        old = self._resumes.pop(key, None)
        if old is not None:
            old.cancel()
        delay = max(0.0, (when - self._now()).total_seconds())
        loop = asyncio.get_running_loop()
        self._resumes[key] = loop.call_later(
            delay, lambda: self._spawn(f"resume/{key}", self._resume(key))
        )

    async def _resume(self, key: ObjectKey) -> None:
        self._resumes.pop(key, None)
        if not self.leading.is_set():  # the leader resumes; check again later in case we lead
            self._schedule_resume(key, self._now() + dt.timedelta(seconds=5))
            return
        try:
            obj = await self.client.get(resources.DEPLOYMENTS, key.name, namespace=key.namespace)
            annotations = (obj.get("metadata") or {}).get("annotations") or {}
            paused = bool((obj.get("spec") or {}).get("paused"))
            if not (paused and annotations.get(self.keys.paused_at)):
                return  # resumed by someone else, or not our pause
            if not self.may_write():  # lost the lease while reading: the new leader resumes
                self._schedule_resume(key, self._now() + dt.timedelta(seconds=5))
                return
            await self.client.patch(
                resources.DEPLOYMENTS, key.name, pausing.resume_patch(self.keys.paused_at),
                namespace=key.namespace, field_manager=self.options.field_manager,
            )  # fmt: skip
            self.stats.resumes += 1
            self.metrics.pauses.labels(action="resume").inc()
            log.info("resumed deployment", extra={"workload": str(key)})
        except errors.NotFound:
            return
        except errors.KubeError as exc:
            log.warning("resume failed, retrying", extra={"workload": str(key), "error": str(exc)})
            self._schedule_resume(key, self._now() + dt.timedelta(seconds=5))
