"""The reload controller: reflectors feed caches, changes fan out to workloads, workers write.

Data flow:
1. Reflectors mirror ConfigMaps and Secrets (reduced to hashes at decode time), optionally
   SecretProviderClassPodStatuses (CSI), and the watched workload kinds (reduced to the core's
   `Workload` value), per watched namespace. Optional kinds (Argo Rollouts, DeploymentConfigs,
   CSI) start when API discovery finds them, so a CRD installed later is noticed.
2. After the initial sync, a content change (hash differs), a creation (with
   `--reload-on-create`) or a deletion (with `--reload-on-delete`) becomes a `core.Change`.
3. The change fans out through the reverse index to candidate workloads; `core.planning.plan`
   decides for each; every workload that must change is queued by key with its changes (or,
   in webhook mode, one notification is sent instead).
4. A worker takes a workload key, re-plans all its pending changes against the latest cached
   workload (level-based: a duplicate or stale change writes nothing), writes them in one go
   (`writing`), records Events, logs and alerts, and refreshes the cache from the answer.
   Deployments with a pause period are paused first and resumed on time; the resume time is
   derived from the object, so it survives restarts. Transient failures back off and retry.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from kube_reloader.alerts import AlertSender, WebhookNotifier
from kube_reloader.core.objects import ResourceType, WorkloadKind
from kube_reloader.kube import projections, resources
from kube_reloader.kube.watching import Reflector
from kube_reloader.runtime import writing
from kube_reloader.runtime.base import CONTENT_TYPES, config_transform, log
from kube_reloader.runtime.intake import Intake
from kube_reloader.runtime.memory import release_free_memory


class Controller(Intake):
    """The reload controller (see the module docstring); its parts live in the modules it
    inherits from."""

    def _build_reflectors(self) -> None:
        keys = self.keys
        selector = self.options.resource_label_selector or None
        for ns in self._scopes():
            for rtype in self.options.resources:
                res = resources.CONFIGMAPS if rtype is ResourceType.CONFIGMAP else resources.SECRETS
                self._config_reflectors.append(
                    Reflector(
                        self.client,
                        res,
                        type=CONTENT_TYPES[rtype],
                        namespace=ns,
                        label_selector=selector,
                        transform=config_transform(rtype, keys, self.options.hash_key),
                        poll_interval=self.options.poll_interval,
                    )
                )
            for kind in self.options.workload_kinds:
                self._workload_reflectors.append(self._workload_reflector(kind, ns))
        if self.options.namespace_selector and not self.options.namespaces:
            self._ns_reflector = Reflector(
                self.client,
                resources.NAMESPACES,
                type=projections.Object,
                label_selector=self.options.namespace_selector,
            )

    async def run(self, stop: asyncio.Event) -> None:
        """Run until `stop` is set; then stop taking work and finish in-flight writes."""
        self._build_reflectors()
        if self.options.alerts is not None:
            a = self.options.alerts
            self.alerts = AlertSender(
                url=a.url, sink=a.sink, additional_info=a.additional_info, proxy=a.proxy or None
            )
            self.alerts.start()
            self.supervisor.spawn("alerts", self.alerts.run)
        if self.options.webhook_url:
            self.webhook = WebhookNotifier(self.options.webhook_url)
            self.supervisor.spawn("webhook", self._send_webhooks)
        for r in self._workload_reflectors:
            self._watch(r, self._consume_workloads)
        for c in self._config_reflectors:
            self._watch(c, self._consume_configs)
        if self._ns_reflector is not None:
            self._watch(self._ns_reflector, self._consume_namespaces)
        # Optional APIs are watched when served and polled for otherwise; they never hold up
        # readiness (a broken CRD or a slow optional LIST must not stop every other reload).
        if self.options.argo_rollouts:
            await self._optional_kind(WorkloadKind.ROLLOUT, required=True)
        if self.options.deployment_configs:
            await self._optional_kind(WorkloadKind.DEPLOYMENTCONFIG, required=False)
        if self.options.csi:
            await self._optional_csi()
        for i in range(self.options.workers):
            self.supervisor.spawn(f"worker@{i}", self._worker)
        if self.options.reconcile_on_start and self.webhook is None:
            self.supervisor.spawn("catch-up", self._level_loop)
        started = time.monotonic()
        self.supervisor.spawn("sync", lambda: self._wait_synced(started))
        await stop.wait()
        log.info("stopping", extra={"in_flight": self.queue.active, "queued": len(self.queue)})
        for h in [*self._resumes.values(), *self._scheduled.values()]:
            h.cancel()
        for tracked in self._tracking.values():
            tracked[3].cancel()
        self.queue.close()
        # let in-flight writes finish (bounded), then cancel everything else; a Job deleted
        # and not yet re-created gets the time its re-creation may take
        started_drain = time.monotonic()
        while self.queue.active:
            waited = time.monotonic() - started_drain
            if waited > 10 and (not self._committed or waited > writing.JOB_RECREATE_SECONDS):
                break
            await asyncio.sleep(0.05)
        if self.alerts is not None:
            await self.alerts.drain()
        await self.supervisor.close()
        if self.alerts is not None:
            await self.alerts.stop()
        if self.webhook is not None:
            await self.webhook.close()

    async def _wait_synced(self, started: float) -> None:
        reflectors: list[Any] = [*self._workload_reflectors, *self._config_reflectors]
        if self._ns_reflector is not None:
            reflectors.append(self._ns_reflector)
        await asyncio.gather(*(r.synced.wait() for r in reflectors))
        self.ready.set()
        self.metrics.ready.set(1)
        stashed, self._stashed = self._stashed, {}
        for change, observed in stashed.values():
            await self._fan_out(change, observed)
        # The initial LISTs' pages are garbage now; hand their memory back to the OS.
        release_free_memory()
        log.info(
            "caches synced",
            extra={
                "seconds": round(time.monotonic() - started, 3),
                "workloads": len(self.index),
                "configs": sum(len(r.store) for r in self._config_reflectors),
            },
        )
