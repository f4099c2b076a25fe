"""`--alert-structured` (Reloader v2): the raw sink posts one JSON object per reloaded workload
instead of text; the other sinks keep their format."""

from __future__ import annotations

import datetime as dt
import json
import re

import pytest

from kube_reloader.edges.alerts import AlertSender
from tests.unit.test_alerts import RELOAD, TEXT, Endpoint, endpoint, sending

__all__ = ["endpoint"]  # the fixture, used by name
pytestmark = pytest.mark.timeout(30)


async def test_a_structured_raw_alert_is_v2s_json_with_the_local_time(endpoint: Endpoint) -> None:
    sender = AlertSender(url=endpoint.url, sink="", additional_info="prod", structured=True)
    async with sending(sender):
        sender.reloaded(**{**RELOAD, "rtype": "CONFIGMAP"})
        await sender.drain()
    [got] = endpoint.received
    assert got.content_type == "application/json"
    body = json.loads(got.body)
    stamp = body.pop("timestamp")
    assert body == {
        "event": "reload", "workloadKind": "Deployment", "workloadName": "web",
        "workloadNamespace": "shop", "resourceKind": "ConfigMap", "resourceName": "app-config",
        "resourceNamespace": "shop", "additional": "prod",
    }  # fmt: skip
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d)", stamp)
    sent = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    assert abs((dt.datetime.now(dt.UTC) - sent).total_seconds()) < 30


async def test_a_structured_notice_keeps_the_raw_sink_json(endpoint: Endpoint) -> None:
    sender = AlertSender(url=endpoint.url, sink="raw", structured=True)
    async with sending(sender):
        sender.notify("Rollout of 'web' after the reload failed")
        await sender.drain()
    [got] = endpoint.received
    assert got.content_type == "application/json"
    body = json.loads(got.body)
    assert (body["event"], body["message"]) == (
        "notice",
        "Rollout of 'web' after the reload failed",
    )


@pytest.mark.parametrize(("sink", "structured", "content_type"), [
    ("", False, "text/plain"),
    ("slack", True, "application/json"),
])  # fmt: skip
async def test_structured_changes_only_the_raw_sink(
    endpoint: Endpoint, sink: str, structured: bool, content_type: str
) -> None:
    sender = AlertSender(url=endpoint.url, sink=sink, structured=structured)
    async with sending(sender):
        sender.reloaded(**RELOAD)
        await sender.drain()
    [got] = endpoint.received
    assert got.content_type == content_type
    if sink == "slack":
        assert json.loads(got.body)["attachments"][0]["text"] == TEXT
    else:
        assert got.body == TEXT.replace("*", "").encode()
