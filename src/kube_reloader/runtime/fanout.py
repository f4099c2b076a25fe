"""From a change to the workloads it reloads: one decision per candidate (a failure costs that
workload a Warning), coalescing into pending changes, the level-based start-up catch-up, and
webhook mode."""

from __future__ import annotations

import asyncio
import dataclasses
import time

from kube_reloader.core import matching, planning
from kube_reloader.core.objects import ObjectKey, ResourceType, WorkloadKind
from kube_reloader.core.parsing import quote
from kube_reloader.core.planning import Change, Event, Outcome
from kube_reloader.runtime.base import FAN_OUT_SLICE, MAX_REPLAY, log
from kube_reloader.runtime.tracking import Tracking


class FanOut(Tracking):
    async def _level_loop(self) -> None:
        """Each time this replica starts writing (startup, or a won election), catch up on
        the changes nobody applied while no kube-reloader was writing."""
        while True:
            await self.ready.wait()
            await self.leading.wait()
            self.reconcile_missed()
            while self.leading.is_set():  # noqa: ASYNC110 - a state change, not a handoff
                await asyncio.sleep(0.5)

    def _wanted(self, workload: planning.Workload) -> set[tuple[ResourceType, str]]:
        """The ConfigMaps/Secrets a workload may reload for: its references, plus every one
        of its namespace when it carries a named list for that type."""
        wanted = {
            r
            for r in workload.template.references()
            if r[0] is not ResourceType.SECRETPROVIDERCLASS
        }
        for rtype in (ResourceType.CONFIGMAP, ResourceType.SECRET):
            key = self.keys.named(rtype)
            if key in workload.annotations or key in workload.template.annotations:
                for refl in self._configs(rtype):
                    wanted.update((rtype, n) for ns, n in refl.store if ns == workload.namespace)
        return wanted

    def reconcile_missed(self) -> int:
        """Queue a reload for every workload whose configs changed while nobody watched;
        returns how many workloads were queued.

        CronJobs and Jobs are left out: their next run reads the current content anyway,
        and re-running them because kube-reloader restarted would surprise."""
        now = int(self.clock())
        queued = 0
        for candidate in list(self.index.workloads.values()):
            if candidate.kind in (WorkloadKind.CRONJOB, WorkloadKind.JOB):
                continue
            try:
                queued += self._catch_up(candidate, now)
            except Exception as exc:  # noqa: BLE001 - one workload never stops the catch-up
                self._object_failed("catch-up", candidate.key, exc)
                self._warn_once(
                    candidate,
                    (f"kube-reloader could not check this workload at start: "
                     f"{type(exc).__name__}",),
                    "ReloadError",
                )  # fmt: skip
        log.info("startup reconciliation done", extra={"workloads_queued": queued})
        return queued

    def _catch_up(self, candidate: planning.Workload, now: int) -> int:
        """Queue what one workload missed; 1 when it was queued, else 0."""
        workload = self._resolve_template(candidate)
        queued = 0
        for rtype, name in sorted(self._wanted(workload)):
            entry = self._config_entry(rtype, workload.namespace, name)
            if entry is None:
                continue
            change = Change(
                rtype, workload.namespace, name, entry.hash, Event.UPDATED,
                entry.metadata.annotations,
            )  # fmt: skip
            p = planning.plan(change=change, workload=workload, config=self.options.plan, now=now)
            missed, why = planning.missed_while_away(
                plan=p,
                carried_hash=planning.carried(p, workload, self.options.plan.strategy),
                config_changed_at=entry.changed_at,
                template_changed_at=workload.template_changed_at,
            )
            if not missed:
                continue
            self._log_change(
                "reloading a change missed while not watching", change,
                workload=str(workload.key), reason=why,
            )  # fmt: skip
            pending = self.pending.setdefault(workload.key, {})
            if not pending:
                queued = 1
            pending[(rtype, name)] = change
            self._schedule(workload.key, self.options.coalesce_window)
        return queued

    def _resolve_template(self, workload: planning.Workload) -> planning.Workload:
        """A workloadRef Rollout's pod template is its referenced Deployment's."""
        if not workload.workload_ref:
            return workload
        ref = self.index.workloads.get(
            ObjectKey(WorkloadKind.DEPLOYMENT.value, workload.namespace, workload.workload_ref)
        )
        if ref is None:
            return workload
        return dataclasses.replace(
            workload, template=ref.template, template_changed_at=ref.template_changed_at
        )

    async def _fan_out(self, change: Change, observed: float) -> None:
        """Decide for every candidate workload; queue the reloads. The loop yields to the
        other tasks every few milliseconds, so a change with thousands of candidates (or a
        tenant's many distinct named lists to compile) slows its own fan-out, not the
        probes, watches and writes of everyone else."""
        self._remember_for_optional(change, observed)
        now = int(self.clock())
        matched: list[ObjectKey] = []
        slice_started = time.monotonic()
        for candidate in self.index.candidates(change.namespace, change.rtype, change.name):
            if time.monotonic() - slice_started > FAN_OUT_SLICE:
                await asyncio.sleep(0)
                slice_started = time.monotonic()
            try:
                if self._decide(change, candidate, now):
                    matched.append(candidate.key)
            except Exception as exc:  # noqa: BLE001 - one decision never stops the others
                self._object_failed("decision", candidate.key, exc)
                self._warn_once(
                    candidate,
                    (f"kube-reloader could not decide on this workload: {type(exc).__name__}",),
                    "ReloadError",
                )
        if self.webhook is not None:
            if matched and self.leading.is_set():
                self.webhook.enqueue((change, tuple(matched)))
            return
        for key in matched:
            pending = self.pending.setdefault(key, {})
            if pending:
                self.metrics.coalesced.inc()
            pending[(change.rtype, change.name)] = change
            self._observed_at.setdefault((key, change.rtype, change.name), observed)
            self._schedule(key, self.options.coalesce_window)

    def _remember_for_optional(self, change: Change, observed: float) -> None:
        """While an optional kind has not finished its list, keep the changes fanned out
        (the latest per resource, bounded) to replay them to its workloads."""
        if all(r.synced.is_set() for r in self._optional_reflectors):
            return
        key = (change.namespace, change.rtype, change.name)
        self._replay.pop(key, None)
        self._replay[key] = (change, observed)
        if len(self._replay) > MAX_REPLAY:
            del self._replay[next(iter(self._replay))]

    def _decide(self, change: Change, candidate: planning.Workload, now: int) -> bool:
        """Plan `change` for one workload; True when it must reload."""
        workload = self._resolve_template(candidate)
        p = planning.plan(change=change, workload=workload, config=self.options.plan, now=now)
        self._warn_once(workload, p.decision.warnings)
        kind = workload.kind.value
        self.metrics.workloads_scanned.labels(kind=kind).inc()
        self.metrics.decisions.labels(outcome=p.outcome.value, reason=p.decision.reason.value).inc()
        if p.outcome is Outcome.RELOAD:
            self.metrics.workloads_matched.labels(kind=kind).inc()
            return True
        reason = "strategy_not_updated" if p.outcome is Outcome.NO_CONTAINER else p.outcome.value
        self.metrics.skipped.labels(reason=reason).inc()
        self.stats.skipped[p.outcome.value] = self.stats.skipped.get(p.outcome.value, 0) + 1
        log.debug(
            "not reloading",
            extra={"workload": str(workload.key), "resource": str(change),
                   "outcome": p.outcome.value,
                   "reason": "" if change.rtype is ResourceType.SECRET else p.message},
        )  # fmt: skip
        return False

    async def _send_webhooks(self) -> None:
        """Webhook mode: one POST per queued change, in order (the queue is bounded: a
        hanging endpoint costs dropped notifications, counted, never memory)."""
        assert self.webhook is not None
        while True:
            change, workloads = await self.webhook.next()
            try:
                await self._notify_webhook(change, workloads)
            except Exception as exc:  # noqa: BLE001 - one notification never stops the sender
                self._object_failed("webhook", change, exc)

    async def _notify_webhook(self, change: Change, workloads: tuple[ObjectKey, ...]) -> None:
        assert self.webhook is not None
        if await self.webhook.notify():
            self.stats.webhooks += 1
            self.metrics.side_channel.labels(channel="webhook", result="success").inc()
            self.metrics.reload_executed.labels(success="true").inc()
            self.metrics.action.labels(workload_kind="webhook", result="success").inc()
            log.info(
                "webhook sent instead of reloading",
                extra={"resource": str(change), "workloads": ",".join(map(str, workloads))},
            )
        else:
            self.metrics.side_channel.labels(channel="webhook", result="error").inc()
            self.metrics.errors.labels(type="webhook_send").inc()

    def _warn_shadowed(self, workload: planning.Workload) -> None:
        """One Warning per workload whose pod-template reload annotations can never be used."""
        shadowed = matching.shadowed_template_keys(
            workload.annotations, workload.template.annotations, self.keys
        )
        if shadowed:
            listed = ", ".join(f"{k}={quote(v)}" for k, v in sorted(shadowed.items()))
            self._warn_once(
                workload,
                (
                    f"pod-template annotations {listed} are never used: the workload's own "
                    "metadata has a reload annotation for the same type; move them to the "
                    "workload's metadata",
                ),
            )
