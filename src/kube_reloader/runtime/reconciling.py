"""Workers: take a workload, re-plan its pending changes against its latest state, apply the
rate limits, write (cancellable when leadership is lost), retry with backoff, report."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from typing import Any

import msgspec

from kube_reloader.core import limiting, pausing, planning
from kube_reloader.core.objects import ObjectKey, ResourceType, WorkloadKind
from kube_reloader.core.planning import Change, Outcome
from kube_reloader.kube import errors
from kube_reloader.runtime import writing
from kube_reloader.runtime.base import MAX_BACKOFF, PROJECTIONS, WORKLOAD_RESOURCES, log
from kube_reloader.runtime.cache import (
    workload_entry,
)
from kube_reloader.runtime.fanout import FanOut


class Reconciling(FanOut):
    async def _worker(self) -> None:
        while True:
            await self.leading.wait()  # standbys keep caches and queue warm, but never write
            key = await self.queue.get()
            queued = self._queued_at.pop(key, None)
            if queued is not None:
                self.metrics.queue_latency.observe(time.monotonic() - queued)
            self.metrics.queue_depth.set(len(self.queue))
            started = time.monotonic()
            result = "success"
            # the write runs as its own task so that losing the lease can cancel it in flight
            write = self.supervisor.task(f"reconcile/{key}", self._reconcile(key))
            self._writing.add(write)
            try:
                await asyncio.shield(write)
            except asyncio.CancelledError:
                me = asyncio.current_task()
                if not write.cancelled() or (me is not None and me.cancelling()):
                    write.cancel()
                    raise  # the worker itself is being stopped
                result = "cancelled"
                self._retry(key)  # cancelled on lost leadership: the changes wait, kept
            except Exception as exc:  # noqa: BLE001 - a bug must not kill the worker: retry
                result = "error"
                self.metrics.errors.labels(type="handler_error").inc()
                self._object_failed("reconcile", key, exc)
                workload = self.index.workloads.get(key)
                if workload is not None:
                    self._warn_once(
                        workload,
                        (f"kube-reloader failed to reload this workload and will retry: "
                         f"{type(exc).__name__}",),
                        "ReloadError",
                    )  # fmt: skip
                self._retry(key)
            finally:
                self._writing.discard(write)
                self.queue.done(key)
                self.metrics.reconcile.labels(result=result).inc()
                self.metrics.reconcile_duration.labels(result=result).observe(
                    time.monotonic() - started
                )

    def _retry(self, key: ObjectKey) -> None:
        n = self.failures.get(key, 0) + 1
        self.failures[key] = n
        self.stats.retries += 1
        self.metrics.retries.inc()
        self.metrics.deferred.labels(reason="retry_backoff").inc()
        self._queued_at.setdefault(key, time.monotonic())
        self.queue.add_after(key, min(MAX_BACKOFF, 0.2 * 2 ** (n - 1)))

    async def _reconcile(self, key: ObjectKey) -> None:
        changes = self.pending.pop(key, {})
        if not changes:
            return
        try:
            await self._reconcile_changes(key, changes)
        except BaseException:
            # a crash or a cancellation never loses the changes (newer ones that arrived
            # meanwhile win); the worker retries with backoff
            self.pending[key] = {**changes, **self.pending.get(key, {})}
            raise

    async def _reconcile_changes(
        self, key: ObjectKey, changes: dict[tuple[ResourceType, str], Change]
    ) -> None:
        cached = self.index.workloads.get(key)
        if cached is None:
            log.info("workload gone, dropping its reloads", extra={"workload": str(key)})
            self._forget(key, changes)
            return
        workload = self._resolve_template(cached)
        now = int(self.clock())
        plans = [
            planning.plan(change=c, workload=workload, config=self.options.plan, now=now)
            for c in changes.values()
        ]
        todo = [p for p in plans if p.outcome is Outcome.RELOAD]
        if not todo:
            self.failures.pop(key, None)
            self._forget(key, changes)
            return
        if self._defer(key, workload, changes):
            return
        resource = WORKLOAD_RESOURCES[workload.kind]
        when = self._now()
        write_started = time.monotonic()
        if not self.may_write():
            raise asyncio.CancelledError  # no longer leading: the changes are kept, and wait
        try:
            if workload.kind is WorkloadKind.DEPLOYMENT:
                await self._maybe_pause(workload, when)
            if not self.may_write():
                raise asyncio.CancelledError
            answer = await writing.write(
                self.client, workload, todo, field_manager=self.options.field_manager, now=when,
                committed=self._commit_write,
            )  # fmt: skip
            self.stats.patches += 1
        except errors.Conflict as exc:
            # the object changed under us: re-read it, refresh the cache, re-plan at once
            self.pending[key] = {**changes, **self.pending.get(key, {})}
            log.info("conflict, re-reading", extra={"workload": str(key), "error": str(exc)})
            try:
                fresh = await self.client.get(resource, key.name, namespace=key.namespace)
                self._refresh_cache(workload.kind, fresh)
            except errors.NotFound:
                self.pending.pop(key, None)
                return
            except errors.KubeError:
                self._retry(key)
                return
            self.queue.add(key)
            return
        except errors.Transient as exc:
            # put the changes back (newer ones that arrived meanwhile win) and back off
            self.pending[key] = {**changes, **self.pending.get(key, {})}
            log.warning(
                "reload failed, will retry", extra={"workload": str(key), "error": str(exc)}
            )
            self._retry(key)
            return
        except errors.NotFound:
            log.info("workload gone, dropping its reloads", extra={"workload": str(key)})
            self._forget(key, changes)
            return
        except errors.KubeError as exc:
            self.failures.pop(key, None)
            self._forget(key, changes)
            self.stats.failures += 1
            self.metrics.errors.labels(type="update_workload").inc()
            for p in todo:
                self.metrics.reload_done(
                    kind=key.kind, namespace=key.namespace, success=False, seconds=None
                )
                log.error(
                    "reload failed",
                    extra={"workload": str(key), "resource": str(p.change), "error": str(exc)},
                )
                self._event(
                    workload, "Warning", "ReloadFail",
                    f"Update for '{key.name}' of type '{key.kind}' in namespace '{key.namespace}' "
                    f"failed with error {exc}",
                    f"reloader-{p.change.rtype.plural}",
                )  # fmt: skip
            return
        self.failures.pop(key, None)
        self._last_reload[key] = time.monotonic()
        if answer is not None and answer.get("kind") == workload.kind.value:
            self._refresh_cache(workload.kind, answer)
            self._track_rollout(workload, answer)
        accepted = time.monotonic()
        self.metrics.action_latency.labels(workload_kind=key.kind).observe(accepted - write_started)
        for p in todo:
            self.stats.reloads += 1
            c = p.change
            seen = self._observed_at.pop((key, c.rtype, c.name), None)
            self.metrics.reload_done(
                kind=key.kind,
                namespace=key.namespace,
                success=True,
                seconds=None if seen is None else accepted - seen,
            )
            self._log_change("reloaded workload", c, workload=str(key), reason=p.message)
            self._event(
                workload, "Normal", "Reloaded",
                f"Changes detected in '{c.name}' of type '{c.rtype.value}' in namespace "
                f"'{c.namespace}', Updated '{key.name}' of type '{key.kind}' in namespace "
                f"'{key.namespace}'",
                f"reloader-{c.rtype.plural}",
            )  # fmt: skip
            if self.alerts is not None:
                self.alerts.reloaded(
                    resource=c.name, rtype=c.rtype.value, namespace=c.namespace,
                    workload=key.name, kind=key.kind,
                )  # fmt: skip

    def _defer(
        self,
        key: ObjectKey,
        workload: planning.Workload,
        changes: dict[tuple[ResourceType, str], Change],
    ) -> bool:
        """Apply the rate limits: True when the reload was deferred (its changes kept)."""
        now = time.monotonic()
        wait = limiting.min_interval_wait(
            self._last_reload.get(key), now, self.options.min_interval
        )
        reason = "min_interval"
        if wait <= 0:
            wait = self._bucket.take(now)
            reason = "rate_limit"
        if wait <= 0:
            return False
        self.pending[key] = {**changes, **self.pending.get(key, {})}
        self.metrics.deferred.labels(reason=reason).inc()
        until = self._now() + dt.timedelta(seconds=wait)
        log.info(
            "reload deferred",
            extra={"workload": str(key), "reason": reason, "until": pausing.format_time(until)},
        )
        if reason == "min_interval":
            self._event(
                workload, "Normal", "ReloadDeferred",
                f"Reload of '{key.name}' deferred until {pausing.format_time(until)}: at most one "
                f"reload every {self.options.min_interval:g}s per workload",
                "reloader",
            )  # fmt: skip
        self._schedule(key, wait)
        return True

    def _forget(self, key: ObjectKey, changes: dict[tuple[ResourceType, str], Change]) -> None:
        for rtype, name in changes:
            self._observed_at.pop((key, rtype, name), None)
        self._queued_at.pop(key, None)

    def _refresh_cache(self, kind: WorkloadKind, answer: dict[str, Any]) -> None:
        """The write's answer is the new object: index it now, before its watch event."""
        try:
            obj = msgspec.convert(answer, PROJECTIONS[kind])
        except (msgspec.ValidationError, TypeError):
            return
        self.index.put(workload_entry(kind, obj, self.keys).workload)
