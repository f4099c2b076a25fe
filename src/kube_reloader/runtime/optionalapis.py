"""Optional APIs (Argo Rollouts, DeploymentConfigs, the CSI driver's pod statuses): watched
when API discovery finds them served, looked for again every 30 s otherwise
(`Options.discovery_interval`), so a CRD installed later is noticed. They never hold up
readiness (a broken CRD or a slow optional LIST must not stop every other reload)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from kube_reloader.core.objects import WorkloadKind
from kube_reloader.kube import discovery, errors, resources
from kube_reloader.kube.client import Client
from kube_reloader.kube.resources import Resource
from kube_reloader.runtime import sources
from kube_reloader.runtime.intake import Intake
from kube_reloader.runtime.kinds import KindSpec
from kube_reloader.runtime.options import Options
from kube_reloader.runtime.reporting import log
from kube_reloader.runtime.stores import Stores
from kube_reloader.runtime.supervisor import Supervisor


@dataclass(eq=False, repr=False)  # state, not a value: compared by identity
class Discovery:
    client: Client
    options: Options
    stores: Stores
    intake: Intake
    supervisor: Supervisor

    async def served(self, res: Resource) -> bool:
        try:
            return await discovery.served(self.client, res)
        except errors.KubeError as exc:
            log.warning("API discovery failed", extra={"resource": str(res), "error": str(exc)})
            return False

    async def _wait_served(self, res: Resource, *, what: str, required: bool) -> None:
        (log.error if required else log.info)(
            "API not served; will check again",
            extra={
                "resource": f"{res.plural}.{res.group}/{res.version}",
                "feature": what,
                "retry_seconds": self.options.discovery_interval,
            },
        )
        while True:
            await asyncio.sleep(self.options.discovery_interval)
            if await self.served(res):
                log.info("API found, watching it", extra={"resource": str(res), "feature": what})
                return

    async def start(self) -> None:
        """Watch, or look for, every optional API the options turn on."""
        opts, kinds = self.options, self.options.kinds
        if opts.argo_rollouts:
            await self.kind(kinds[WorkloadKind.ROLLOUT], what="--is-Argo-Rollouts", required=True)
        if opts.deployment_configs:
            spec = kinds[WorkloadKind.DEPLOYMENTCONFIG]
            await self.kind(spec, what="DeploymentConfig support", required=False)
        if opts.csi:
            await self.csi()

    async def kind(self, spec: KindSpec, *, what: str, required: bool) -> None:
        """Watch `spec`'s kind now if its API is served; otherwise poll in the background."""
        res = spec.resource
        if await self.served(res):
            for ns in sources.scopes(self.options):
                refl = sources.workloads(self.client, self.options, spec, ns)
                self.stores.optional.append(refl)
                self.intake.watch(refl, self.intake.consume_workloads)
            return

        async def later() -> None:
            await self._wait_served(res, what=what, required=required)
            await self.kind(spec, what=what, required=required)

        self.supervisor.spawn(f"discover/{res.plural}", later)

    async def csi(self) -> None:
        res = resources.SECRETPROVIDERCLASSPODSTATUSES
        if not await self.served(res):

            async def later() -> None:
                await self._wait_served(res, what="--enable-csi-integration", required=True)
                await self.csi()

            self.supervisor.spawn(f"discover/{res.plural}", later)
            return
        for ns in sources.scopes(self.options):
            spc = sources.spc_classes(self.client, self.options, ns)
            self.stores.spcs.append(spc)
            self.intake.watch(spc, self.intake.drain)
            # a status is a config source: one updated before its first list completes would
            # be seen as "added" and ignored, so its list is part of the initial sync
            status = sources.spc_statuses(self.client, self.options, ns)
            self.stores.configs.append(status)
            self.intake.watch(status, self.intake.consume_configs)
