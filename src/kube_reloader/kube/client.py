"""An asyncio Kubernetes API client: typed reads, every write verb, and streaming watches.

Built on aiohttp (connection reuse, streaming bodies, client certificates) and msgspec (bytes
are decoded straight into the caller's projection type, so a watch on 10,000 Deployments
never materialises 10,000 full objects). Every failure surfaces as a `kube.errors` class.
`Client` puts together its connections (`transport`), LIST paging (`paging`) and watch
streams (`streams`); GET and the writes are its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any, TypeVar, overload

import msgspec

from kube_reloader.kube.paging import Lister
from kube_reloader.kube.resources import Resource
from kube_reloader.kube.streams import Watcher
from kube_reloader.kube.transport import RawObject

T = TypeVar("T")


class PatchType(StrEnum):
    """The patch content types the API server understands."""

    STRATEGIC = "application/strategic-merge-patch+json"
    MERGE = "application/merge-patch+json"
    JSON = "application/json-patch+json"
    APPLY = "application/apply-patch+yaml"


class Client(Lister, Watcher):
    """Every API verb against one API server. Use as an async context manager.

    Its connections, and how requests are sent, retried and their failures mapped, are
    `Transport`'s; LIST is `Lister`'s and WATCH `Watcher`'s.
    """

    # ----------------------------------------------------------------- reads

    @overload
    async def get(
        self, resource: Resource, name: str, *, namespace: str | None = None
    ) -> RawObject: ...

    @overload
    async def get(
        self, resource: Resource, name: str, *, namespace: str | None = None, type: type[T]
    ) -> T: ...

    async def get(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        type: Any = RawObject,
    ) -> Any:
        """GET one object, decoded as `type` (a plain dict by default)."""
        data = await self.request("GET", resource.path(namespace, name))
        return self._decode(data, type, f"{resource.kind} {namespace or ''}/{name}")

    # ----------------------------------------------------------------- writes

    async def create(
        self,
        resource: Resource,
        body: Mapping[str, Any],
        *,
        namespace: str | None = None,
        field_manager: str | None = None,
        dry_run: bool = False,
    ) -> RawObject:
        """POST a new object; `namespace` defaults to the body's own."""
        ns = namespace or _body_namespace(body)
        params = _write_params(field_manager, dry_run)
        data = await self.request(
            "POST",
            resource.path(ns),
            params=params,
            body=msgspec.json.encode(body),
            content_type="application/json",
        )
        return self._decode_raw(data, f"created {resource.kind}")

    async def update(
        self,
        resource: Resource,
        body: Mapping[str, Any],
        *,
        namespace: str | None = None,
        field_manager: str | None = None,
        subresource: str | None = None,
    ) -> RawObject:
        """PUT a whole object (optimistic concurrency through its resourceVersion)."""
        name = str((body.get("metadata") or {}).get("name") or "")
        ns = namespace or _body_namespace(body)
        data = await self.request(
            "PUT",
            resource.path(ns, name, subresource),
            params=_write_params(field_manager, False),
            body=msgspec.json.encode(body),
            content_type="application/json",
        )
        return self._decode_raw(data, f"{resource.kind} {ns or ''}/{name}")

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.STRATEGIC,
        field_manager: str | None = None,
        force: bool | None = None,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> RawObject:
        """PATCH one object with any patch type; returns the object after the patch."""
        params = _write_params(field_manager, dry_run)
        if force is not None:
            params["force"] = "true" if force else "false"
        data = await self.request(
            "PATCH",
            resource.path(namespace, name, subresource),
            params=params,
            body=msgspec.json.encode(patch),
            content_type=patch_type.value,
        )
        return self._decode_raw(data, f"{resource.kind} {namespace or ''}/{name}")

    async def delete(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        propagation_policy: str | None = None,
        grace_period_seconds: int | None = None,
        preconditions_uid: str | None = None,
    ) -> RawObject:
        """DELETE one object (`propagation_policy`: Foreground, Background or Orphan)."""
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if preconditions_uid:
            options["preconditions"] = {"uid": preconditions_uid}
        data = await self.request(
            "DELETE",
            resource.path(namespace, name),
            body=msgspec.json.encode(options),
            content_type="application/json",
        )
        return self._decode_raw(data, f"{resource.kind} {namespace or ''}/{name}")

    async def evict(self, resource: Resource, name: str, *, namespace: str, uid: str) -> None:
        """POST a `policy/v1` Eviction for pod `name`, only while it is still `uid` (never
        its replacement of the same name). A PodDisruptionBudget's refusal raises
        `TooManyRequests` at once, not retried here: the caller decides when to ask again."""
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
            "deleteOptions": {"preconditions": {"uid": uid}},
        }
        await self.request(
            "POST",
            resource.path(namespace, name, "eviction"),
            body=msgspec.json.encode(body),
            content_type="application/json",
            retry=False,
        )


def _write_params(field_manager: str | None, dry_run: bool) -> dict[str, str]:
    params: dict[str, str] = {}
    if field_manager:
        params["fieldManager"] = field_manager
    if dry_run:
        params["dryRun"] = "All"
    return params


def _body_namespace(body: Mapping[str, Any]) -> str | None:
    ns = (body.get("metadata") or {}).get("namespace")
    return str(ns) if ns else None
