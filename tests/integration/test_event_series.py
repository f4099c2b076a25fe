"""Reloader v2's Events against the real API server: a repeated isomorphic Event becomes a
series of the first one by a strategic-merge PATCH that events.k8s.io/v1 validation accepts,
and a reload's Event names the workload's resourceVersion."""

from __future__ import annotations

import datetime as dt

import pytest

from kube_reloader.core import eventseries, planning
from kube_reloader.kube import resources
from kube_reloader.kube.client import Client
from kube_reloader.runtime.clock import SystemClock
from kube_reloader.runtime.eventing import EventRecorder
from tests import builders

pytestmark = [pytest.mark.cluster]


async def test_a_repeated_reload_failure_is_counted_in_the_series_of_its_first_event(
    client: Client, namespace: str
) -> None:
    created = await client.create(
        resources.DEPLOYMENTS, builders.deployment("web", namespace), namespace=namespace
    )
    web = planning.workload_from_manifest(created)
    version = created["metadata"]["resourceVersion"]
    rec = EventRecorder(client, SystemClock(), lambda kind: "apps/v1", instance="reloader-test")
    note = "Failed to reload due to ConfigMap c change: boom"
    for _ in range(3):
        await rec.send(web, "Warning", "ReloadFailed", note, "reloader", "Reloading", version)
    listed = await client.list(resources.EVENTS_V1, namespace=namespace)
    (event,) = [e for e in listed.items if e["reason"] == "ReloadFailed"]
    assert event["regarding"]["resourceVersion"] == version
    assert event["series"]["count"] == 2, "the third is counted in memory until a sweep"
    quiet = event_wall(event) + 2 * eventseries.FINISH_SECONDS  # long after: the series ended
    (ended,) = rec.v2.series.sweep(quiet)
    await rec.v2.write_series(ended)
    again = await client.get(resources.EVENTS_V1, event["metadata"]["name"], namespace=namespace)
    assert again["series"]["count"] == 3
    assert again["note"] == note


def event_wall(event: dict[str, object]) -> float:
    stamp = str(event["eventTime"]).replace("Z", "+00:00")
    return dt.datetime.fromisoformat(stamp).timestamp()
