"""A ConfigMap reflector as the controller builds it (`sources.config_transform`,
`sources.config_update`) over a scripted client: an object whose content cannot be read is
skipped, counted and logged, in a LIST and in a watch, and every other object goes on."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest

from kube_reloader.core.annotations import Keys
from kube_reloader.core.objects import ResourceType
from kube_reloader.kube import resources
from kube_reloader.kube.contents import ConfigMapContent
from kube_reloader.kube.streams import WatchEvent
from kube_reloader.kube.watching import EventType, Reflector
from kube_reloader.runtime.cache import ConfigEntry
from kube_reloader.runtime.sources import config_transform, config_update


def cm(name: str, rv: str, data: object) -> ConfigMapContent:
    body = {"metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}", "resourceVersion": rv},
            "data": data}  # fmt: skip
    return msgspec.json.decode(msgspec.json.encode(body), type=ConfigMapContent)


class Scripted:
    """A client whose LIST answers `listed` (reduced as the reflector asks) and whose one
    watch streams `watched`, then stays open."""

    def __init__(self, listed: list[ConfigMapContent], watched: list[WatchEvent[Any]]) -> None:
        self.listed, self.watched = listed, watched
        self.open = asyncio.Event()  # never set: the stream stays open after its events

    async def list_reduced(self, resource: object, **options: Any) -> Any:
        items = [options["reduce"](obj) for obj in self.listed]
        return SimpleNamespace(items=items, resource_version="5")

    async def watch(self, resource: object, **options: Any) -> AsyncIterator[WatchEvent[Any]]:
        for ev in self.watched:
            yield ev
        await self.open.wait()


def reflector(client: Scripted) -> Reflector[ConfigEntry]:
    keys = Keys()
    return Reflector(
        client,  # type: ignore[arg-type] - the two verbs a reflector uses
        resources.CONFIGMAPS,
        type=ConfigMapContent,
        transform=config_transform(ResourceType.CONFIGMAP, keys, None),
        update=config_update(ResourceType.CONFIGMAP, keys, None),
    )


async def test_unreadable_content_is_skipped_and_logged_in_a_list_and_in_a_watch(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bad = {"a": 1}  # JSON, but not a map of strings: the object decodes, its content does not
    client = Scripted(
        [cm("good", "1", {"a": "1"}), cm("bad", "2", bad)],
        [WatchEvent("MODIFIED", cm("bad", "6", bad)), WatchEvent("MODIFIED", cm("good", "7", {"a": "2"}))],
    )  # fmt: skip
    refl = reflector(client)
    seen: list[tuple[EventType, str]] = []
    with caplog.at_level(logging.ERROR, logger="kube_reloader.kube.watching"):
        async for ev in refl.events():
            seen.append((ev.type, ev.key[1]))
            if ev.type is EventType.MODIFIED:
                break
    assert seen == [(EventType.ADDED, "good"), (EventType.SYNCED, ""), (EventType.MODIFIED, "good")]
    assert refl.rejected == 2
    assert set(refl.store) == {("ns", "good")}
    assert refl.resource_version == "7"
    skipped = [r for r in caplog.records if r.getMessage() == "object skipped: could not be read"]
    assert [getattr(r, "object", None) for r in skipped] == ["bad", "bad"]
