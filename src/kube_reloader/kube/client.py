"""An asyncio Kubernetes API client: typed reads, every write verb, and streaming watches.

Built on a lean HTTP/1.1 wire (`wire`: keep-alive pools, streaming bodies, client
certificates) and msgspec (bytes
are decoded straight into the caller's projection type, so a watch on 10,000 Deployments
never materialises 10,000 full objects). Every failure surfaces as a `kube.errors` class.
`Client` owns a `transport.Transport` (connections, auth, retries, errors, decoding), a
`paging.Pager` (LIST) and a `streams.Watcher` (WATCH) that send through it, and delegates
to them explicitly; GET and the writes are its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any, Self, TypeVar, Unpack, overload

import msgspec

from kube_reloader.kube import wire
from kube_reloader.kube.config import ConnectionConfig
from kube_reloader.kube.paging import Pager
from kube_reloader.kube.resources import Resource
from kube_reloader.kube.streams import Watcher
from kube_reloader.kube.transport import RawObject, RequestObserver, Transport, TransportOptions

T = TypeVar("T")
R = TypeVar("R")


class PatchType(StrEnum):
    """The patch content types the API server understands."""

    STRATEGIC = "application/strategic-merge-patch+json"
    MERGE = "application/merge-patch+json"
    JSON = "application/json-patch+json"
    APPLY = "application/apply-patch+yaml"


class Client:
    """Every API verb against one API server. Use as an async context manager.

    Its parts: `transport` (how requests are sent, retried, mapped and decoded), `pager`
    (LIST) and `watcher` (WATCH), both holding that transport, which `close` closes.
    """

    transport: Transport
    pager: Pager
    watcher: Watcher

    def __init__(self, config: ConnectionConfig, **options: Unpack[TransportOptions]) -> None:
        """A client over a new `Transport(config, **options)`."""
        self._compose(Transport(config, **options))

    @classmethod
    def over(cls, transport: Transport) -> Self:
        """A client whose every request goes through `transport`, one built elsewhere (a
        `Transport` subclass that records what it sends, say)."""
        client = cls.__new__(cls)
        client._compose(transport)
        return client

    def _compose(self, transport: Transport) -> None:
        self.transport = transport
        self.pager = Pager(transport)
        self.watcher = Watcher(transport)
        # the parts' own verbs, delegated as they are (their signatures live there alone)
        #: any request; the raw response body (`Transport.request`)
        self.request = transport.request
        #: LIST page by page, every page, or every page reduced as it arrives (`Pager`)
        self.list_pages = self.pager.list_pages
        self.list = self.pager.list
        self.list_reduced = self.pager.list_reduced
        #: stream watch events, each object decoded as asked (`Watcher.watch`)
        self.watch = self.watcher.watch

    # ----------------------------------------------------------------- the transport's

    @property
    def config(self) -> ConnectionConfig:
        """The server, TLS settings, credentials and proxy the client connects with."""
        return self.transport.config

    @property
    def observer(self) -> RequestObserver | None:
        """Told about every attempt and every request (`Transport.observer`)."""
        return self.transport.observer

    @property
    def host(self) -> str:
        """The API server's host (and port), the label of the observer's reports."""
        return self.transport.host

    @property
    def pool(self) -> wire.Pool:
        """The pool of ordinary requests (`Transport.pool`)."""
        return self.transport.pool

    @property
    def stream_pool(self) -> wire.Pool:
        """The pool of watch streams (`Transport.stream_pool`)."""
        return self.transport.stream_pool

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close both connection pools (open watch streams end with `ConnectionFailed`)."""
        await self.transport.close()

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
        data = await self.transport.request("GET", resource.path(namespace, name))
        return self.transport.decode(data, type, f"{resource.kind} {namespace or ''}/{name}")

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
        data = await self.transport.request(
            "POST",
            resource.path(ns),
            params=params,
            body=msgspec.json.encode(body),
            content_type="application/json",
        )
        return self.transport.decode_raw(data, f"created {resource.kind}")

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
        data = await self.transport.request(
            "PUT",
            resource.path(ns, name, subresource),
            params=_write_params(field_manager, False),
            body=msgspec.json.encode(body),
            content_type="application/json",
        )
        return self.transport.decode_raw(data, f"{resource.kind} {ns or ''}/{name}")

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
        data = await self.transport.request(
            "PATCH",
            resource.path(namespace, name, subresource),
            params=params,
            body=msgspec.json.encode(patch),
            content_type=patch_type.value,
        )
        return self.transport.decode_raw(data, f"{resource.kind} {namespace or ''}/{name}")

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
        data = await self.transport.request(
            "DELETE",
            resource.path(namespace, name),
            body=msgspec.json.encode(options),
            content_type="application/json",
        )
        return self.transport.decode_raw(data, f"{resource.kind} {namespace or ''}/{name}")

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
        await self.transport.request(
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
