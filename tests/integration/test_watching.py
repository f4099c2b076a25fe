"""Watches and the reflector against the real kube-apiserver, including expired watches."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator

import msgspec
import pytest

from kube_reloader.devcluster.cluster import DevCluster
from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client, PatchType
from kube_reloader.kube.projections import Object, ObjectMeta
from kube_reloader.kube.watching import EventType, Reflector, ReflectorEvent
from tests import builders
from tests.waiting import eventually

pytestmark = pytest.mark.cluster


class ConfigMapView(msgspec.Struct, frozen=True):
    """A test projection: metadata plus the data keys, nothing else."""

    metadata: ObjectMeta
    data: dict[str, str] = {}


class Collector:
    """Runs a reflector in the background and collects its events."""

    def __init__(self, reflector: Reflector[ConfigMapView]) -> None:
        self.reflector = reflector
        self.events: list[ReflectorEvent[ConfigMapView]] = []
        self.changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        async for ev in self.reflector.events():
            self.events.append(ev)
            self.changed.set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def wait_for(self, predicate, timeout: float = 20.0):  # type: ignore[no-untyped-def]
        async def loop() -> ReflectorEvent[ConfigMapView]:
            while True:
                for ev in self.events:
                    if predicate(ev):
                        return ev
                self.changed.clear()
                await self.changed.wait()

        return await asyncio.wait_for(loop(), timeout)

    def of(self, name: str) -> list[tuple[EventType, bool]]:
        return [(e.type, e.synthesized) for e in self.events if e.key[1] == name]


@contextlib.asynccontextmanager
async def reflecting(reflector: Reflector[ConfigMapView]) -> AsyncIterator[Collector]:
    col = Collector(reflector)
    col.start()
    try:
        yield col
    finally:
        await col.stop()


async def test_watch_streams_added_modified_and_deleted_events(
    client: Client, namespace: str
) -> None:
    listed = await client.list(resources.CONFIGMAPS, namespace=namespace)
    seen: list[tuple[str, str]] = []

    async def consume() -> None:
        async for ev in client.watch(
            resources.CONFIGMAPS,
            namespace=namespace,
            resource_version=listed.resource_version,
            type=ConfigMapView,
            timeout_seconds=30,
        ):
            if ev.type == "BOOKMARK" or ev.object.metadata.name != "w":
                continue  # e.g. kube-root-ca.crt, published by kube-controller-manager
            seen.append((ev.type, ev.object.metadata.name))
            if ev.type == "DELETED":
                return

    task = asyncio.create_task(consume())
    await client.create(resources.CONFIGMAPS, builders.configmap("w", namespace, {"a": "1"}))
    await client.patch(
        resources.CONFIGMAPS,
        "w",
        {"data": {"a": "2"}},
        namespace=namespace,
        patch_type=PatchType.MERGE,
    )
    await client.delete(resources.CONFIGMAPS, "w", namespace=namespace)
    await asyncio.wait_for(task, 20)
    assert seen == [("ADDED", "w"), ("MODIFIED", "w"), ("DELETED", "w")]


async def test_watch_from_a_compacted_resource_version_raises_gone(
    private_cluster: DevCluster, private_client: Client
) -> None:
    created = await private_client.create(resources.CONFIGMAPS, builders.configmap("x", "default"))
    old_rv = created["metadata"]["resourceVersion"]
    await private_client.delete(resources.CONFIGMAPS, "x", namespace="default")
    private_cluster.compact_etcd()
    await asyncio.to_thread(private_cluster.restart, "kube-apiserver")  # drops the watch cache
    with pytest.raises(errors.Gone, match="too old resource version"):
        async for _ in private_client.watch(
            resources.CONFIGMAPS, namespace="default", resource_version=old_rv, timeout_seconds=5
        ):
            pass


async def test_watch_carries_an_event_larger_than_a_megabyte_line_buffer(
    client: Client, namespace: str
) -> None:
    listed = await client.list(resources.CONFIGMAPS, namespace=namespace)
    big = "x" * (900 * 1024)

    async def first() -> ConfigMapView:
        async for ev in client.watch(
            resources.CONFIGMAPS,
            namespace=namespace,
            resource_version=listed.resource_version,
            type=ConfigMapView,
            timeout_seconds=30,
        ):
            # the controller-manager may publish kube-root-ca.crt into the new namespace first
            if ev.type == "ADDED" and ev.object.metadata.name == "big":
                return ev.object  # type: ignore[no-any-return]
        raise AssertionError("watch ended")

    task = asyncio.create_task(first())
    await client.create(resources.CONFIGMAPS, builders.configmap("big", namespace, {"blob": big}))
    obj = await asyncio.wait_for(task, 20)
    assert len(obj.data["blob"]) == len(big)


async def test_reflector_lists_then_reports_live_changes(client: Client, namespace: str) -> None:
    await client.create(resources.CONFIGMAPS, builders.configmap("pre", namespace, {"a": "1"}))
    refl = Reflector(client, resources.CONFIGMAPS, type=ConfigMapView, namespace=namespace)
    async with reflecting(refl) as col:
        await col.wait_for(lambda e: e.type is EventType.SYNCED)
        assert (namespace, "pre") in refl.store
        assert col.of("pre") == [(EventType.ADDED, False)]
        await client.create(resources.CONFIGMAPS, builders.configmap("live", namespace, {"b": "1"}))
        await client.patch(
            resources.CONFIGMAPS,
            "live",
            {"data": {"b": "2"}},
            namespace=namespace,
            patch_type=PatchType.MERGE,
        )
        await client.delete(resources.CONFIGMAPS, "pre", namespace=namespace)
        await col.wait_for(lambda e: e.type is EventType.DELETED and e.key[1] == "pre")
        await col.wait_for(lambda e: e.type is EventType.MODIFIED and e.key[1] == "live")
        assert refl.store[(namespace, "live")].data == {"b": "2"}
        assert (namespace, "pre") not in refl.store
        modified = next(e for e in col.events if e.type is EventType.MODIFIED)
        assert modified.old is not None
        assert modified.old.data == {"b": "1"}


async def test_reflector_relists_after_410_and_synthesizes_the_changes_missed_in_the_gap(
    private_cluster: DevCluster, private_client: Client
) -> None:
    client = private_client
    namespace = f"gap-{secrets.token_hex(3)}"
    await client.create(
        resources.NAMESPACES,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
    )
    for name in ("keep", "change", "drop", "recreate"):
        await client.create(resources.CONFIGMAPS, builders.configmap(name, namespace, {"v": "1"}))
    first = Reflector(client, resources.CONFIGMAPS, type=ConfigMapView, namespace=namespace)
    async with reflecting(first) as col:
        await col.wait_for(lambda e: e.type is EventType.SYNCED)
    store, stale_rv = dict(first.store), first.resource_version

    # While nobody watches: one update, one delete, one delete+recreate, one create.
    await client.patch(
        resources.CONFIGMAPS,
        "change",
        {"data": {"v": "2"}},
        namespace=namespace,
        patch_type=PatchType.MERGE,
    )
    await client.delete(resources.CONFIGMAPS, "drop", namespace=namespace)
    await client.delete(resources.CONFIGMAPS, "recreate", namespace=namespace)
    await client.create(
        resources.CONFIGMAPS, builders.configmap("recreate", namespace, {"v": "new"})
    )
    await client.create(resources.CONFIGMAPS, builders.configmap("born", namespace, {"v": "1"}))
    # ...and the history the reflector would resume from is gone.
    private_cluster.compact_etcd()
    await asyncio.to_thread(private_cluster.restart, "kube-apiserver")

    resumed = Reflector(
        client, resources.CONFIGMAPS, type=ConfigMapView, namespace=namespace,
        store=store, resource_version=stale_rv,
    )  # fmt: skip
    async with reflecting(resumed) as col:
        await col.wait_for(lambda e: e.type is EventType.SYNCED)
    assert resumed.lists == 1, "the expired resume point must lead to exactly one LIST"
    assert resumed.watch_restarts >= 1
    assert col.of("keep") == []
    assert col.of("change") == [(EventType.MODIFIED, True)]
    assert col.of("drop") == [(EventType.DELETED, True)]
    assert col.of("recreate") == [(EventType.DELETED, True), (EventType.ADDED, True)]
    assert col.of("born") == [(EventType.ADDED, True)]
    assert resumed.store[(namespace, "change")].data == {"v": "2"}
    assert (namespace, "drop") not in resumed.store


async def test_reflector_resumes_from_a_valid_resource_version_without_listing(
    client: Client, namespace: str
) -> None:
    await client.create(resources.CONFIGMAPS, builders.configmap("a", namespace))
    first = Reflector(client, resources.CONFIGMAPS, type=ConfigMapView, namespace=namespace)
    async with reflecting(first) as col:
        await col.wait_for(lambda e: e.type is EventType.SYNCED)
    await client.create(resources.CONFIGMAPS, builders.configmap("b", namespace))
    resumed = Reflector(
        client, resources.CONFIGMAPS, type=ConfigMapView, namespace=namespace,
        store=first.store, resource_version=first.resource_version,
    )  # fmt: skip
    async with reflecting(resumed) as col:
        await col.wait_for(lambda e: e.key[1] == "b")
    assert resumed.lists == 0
    assert col.of("b") == [(EventType.ADDED, False)]
    assert col.of("a") == []


async def test_reflector_survives_the_server_closing_the_watch(
    client: Client, namespace: str
) -> None:
    refl = Reflector(
        client, resources.CONFIGMAPS, type=ConfigMapView, namespace=namespace, watch_timeout=(1, 1)
    )
    async with reflecting(refl) as col:
        await col.wait_for(lambda e: e.type is EventType.SYNCED)

        async def closed_twice() -> bool:
            return refl.watch_restarts >= 2  # the server closed the watch twice

        await eventually(closed_twice, what="two server-side watch timeouts", timeout=20)
        await client.create(resources.CONFIGMAPS, builders.configmap("late", namespace))
        await col.wait_for(lambda e: e.key[1] == "late")
    assert refl.watch_restarts >= 2
    assert refl.errors == 0, "closed by the server, not failed"
    assert refl.lists == 1


async def test_reflector_on_a_forbidden_resource_retries_with_backoff_instead_of_crashing(
    client: Client, namespace: str
) -> None:
    missing = resources.Resource("example.invalid", "v1", "nothings", "Nothing")
    failures: list[BaseException] = []
    refl = Reflector(client, missing, type=Object, namespace=namespace, on_error=failures.append)
    from kube_reloader.kube.watching import Backoff

    refl.backoff = Backoff(base=0.05, cap=0.1)

    async def run() -> None:
        async for _ in refl.events():
            pass

    task = asyncio.create_task(run())

    async def retried() -> bool:
        return len(failures) >= 2

    await eventually(retried, what="two failed lists", timeout=10)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert len(failures) >= 2
    assert all(isinstance(f, errors.NotFound) for f in failures)
    assert not refl.synced.is_set()
