"""The writer: every write the controller makes to a workload goes through it — the reload
itself (through the kind's `Strategy`), the Deployment pause and resume, the re-read after a
conflict, a pod-level reload's evictions (with the pod reads they are decided on) and an
in-place reload's pod annotations (with the ConfigMap files its digests are computed from) —
with the controller's field manager."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any, Protocol

from kube_reloader.core import pausing, planning
from kube_reloader.core.objects import ObjectKey, ResourceType
from kube_reloader.core.planning import Plan
from kube_reloader.kube import configfiles, resources
from kube_reloader.kube.client import Client, PatchType
from kube_reloader.kube.pods import PodObject
from kube_reloader.runtime.kinds import Kinds
from kube_reloader.runtime.writeseam import Target


class Writer(Protocol):
    async def reload(
        self,
        workload: planning.Workload,
        plans: list[Plan],
        *,
        now: dt.datetime,
        committed: Callable[[], None] | None = None,
        pause: dict[str, Any] | None = None,
    ) -> dict[str, Any] | None: ...

    async def read(self, key: ObjectKey) -> dict[str, Any]: ...

    async def pause(self, key: ObjectKey, paused_at_key: str, now: dt.datetime) -> None: ...

    async def resume(self, key: ObjectKey, paused_at_key: str) -> None: ...

    async def pods(self, namespace: str, selector: str) -> list[PodObject]: ...

    async def evict(self, namespace: str, name: str, uid: str) -> None: ...

    async def annotate_pod(
        self, namespace: str, name: str, uid: str, key: str, value: str
    ) -> None: ...

    async def config_files(
        self, rtype: ResourceType, namespace: str, name: str
    ) -> dict[str, bytes]: ...


class KubeWriter:
    def __init__(
        self, client: Client, kinds: Kinds, field_manager: str, *, v2: bool = False
    ) -> None:
        self.client = client
        self.kinds = kinds
        self.field_manager = field_manager
        #: Reloader v2's writes (`--compat=v2`)
        self.v2 = v2

    async def reload(
        self,
        workload: planning.Workload,
        plans: list[Plan],
        *,
        now: dt.datetime,
        committed: Callable[[], None] | None = None,
        pause: dict[str, Any] | None = None,
    ) -> dict[str, Any] | None:
        """Apply the reloading plans with the kind's strategy; returns the written object
        when the answer is the workload itself. `committed` is called once the write can no
        longer be abandoned half-way (a Job deleted, not yet re-created); `pause` (a
        Deployment's pause body, `--compat=v2`) goes into the same write."""
        spec = self.kinds[workload.kind]
        target = Target(
            workload, spec.resource, self.field_manager, now, committed, pause, v2=self.v2
        )
        return await spec.strategy(workload).apply(self.client, target, plans)

    async def read(self, key: ObjectKey) -> dict[str, Any]:
        res = self.kinds[key.kind].resource
        return await self.client.get(res, key.name, namespace=key.namespace)

    async def pause(self, key: ObjectKey, paused_at_key: str, now: dt.datetime) -> None:
        await self.client.patch(
            resources.DEPLOYMENTS,
            key.name,
            pausing.pause_patch(paused_at_key, now),
            namespace=key.namespace,
            field_manager=self.field_manager,
        )

    async def resume(self, key: ObjectKey, paused_at_key: str) -> None:
        await self.client.patch(
            resources.DEPLOYMENTS,
            key.name,
            pausing.resume_patch(paused_at_key),
            namespace=key.namespace,
            field_manager=self.field_manager,
        )

    async def pods(self, namespace: str, selector: str) -> list[PodObject]:
        """The pods a rotation looks at (a LIST by label selector, decoded small)."""
        listed = await self.client.list(
            resources.PODS, namespace=namespace, label_selector=selector or None, type=PodObject
        )
        return list(listed.items)

    async def evict(self, namespace: str, name: str, uid: str) -> None:
        """Evict pod `name` while it is `uid` (a disruption budget's 429 is raised at once)."""
        await self.client.evict(resources.PODS, name, namespace=namespace, uid=uid)

    async def annotate_pod(self, namespace: str, name: str, uid: str, key: str, value: str) -> None:
        """Set one annotation on pod `name` while it is `uid` (an in-place reload's request),
        by merge patch carrying the UID: a pod re-created under the name refuses it."""
        body = {"metadata": {"uid": uid, "annotations": {key: value}}}
        await self.client.patch(
            resources.PODS,
            name,
            body,
            namespace=namespace,
            patch_type=PatchType.MERGE,
            field_manager=self.field_manager,
        )

    async def config_files(
        self, rtype: ResourceType, namespace: str, name: str
    ) -> dict[str, bytes]:
        """The files a ConfigMap volume would hold, by key (a LIST by name: the chart grants
        list, not get, on ConfigMaps). The caller hashes and drops them. ValueError for
        anything but a ConfigMap: a Secret's content is never read."""
        if rtype is not ResourceType.CONFIGMAP:
            raise ValueError(f"only ConfigMaps are read for their files, not {rtype.value}")
        return await configfiles.config_files(self.client, namespace, name)
