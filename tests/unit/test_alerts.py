"""Reload alerts and webhook mode against an in-process HTTP endpoint: each sink gets its own
format, full queues drop (and count) instead of growing, failures are retried and reported
but never raised."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from kube_reloader import __version__
from kube_reloader.core import alerting
from kube_reloader.edges.alerts import AlertSender, WebhookNotifier

pytestmark = pytest.mark.timeout(30)

RELOAD = {
    "resource": "app-config",
    "rtype": "configmap",
    "namespace": "shop",
    "workload": "web",
    "kind": "Deployment",
}
TEXT = (
    "Reloader detected changes in *app-config* of type *configmap* in namespace *shop*. "
    "Hence reloaded *web* of type *Deployment* in namespace *shop*"
)


@dataclass
class Received:
    method: str
    url: str
    content_type: str
    user_agent: str
    body: bytes


@dataclass
class Endpoint:
    """Answers each POST with the next status of `statuses` (the last one repeats)."""

    url: str = ""
    statuses: list[int] = field(default_factory=lambda: [200])
    received: list[Received] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, request: web.Request) -> web.Response:
        self.received.append(
            Received(
                request.method,
                str(request.url),
                request.headers.get("Content-Type", ""),
                request.headers.get("User-Agent", ""),
                await request.read(),
            )
        )
        self.arrived.set()
        status = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        return web.Response(status=status, text=f"answer {status}")

    async def until_received(self, count: int) -> None:
        while len(self.received) < count:
            self.arrived.clear()
            await asyncio.wait_for(self.arrived.wait(), 10)


@pytest.fixture
async def endpoint() -> AsyncIterator[Endpoint]:
    ep = Endpoint()

    async def route(request: web.Request) -> web.Response:
        return await ep.handle(request)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", route)
    async with TestServer(app, host="127.0.0.1") as server:
        ep.url = f"http://127.0.0.1:{server.port}"
        yield ep


@contextlib.asynccontextmanager
async def sending(sender: AlertSender) -> AsyncIterator[AlertSender]:
    """The sender with its session open and its loop running, as the controller runs it."""
    sender.start()
    task = asyncio.create_task(sender.run())
    try:
        yield sender
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await sender.stop()


# ---------------------------------------------------------------------- alerts


async def test_a_slack_alert_is_a_json_attachment_sent_as_reloader_sends_it(
    endpoint: Endpoint,
) -> None:
    sender = AlertSender(url=f"{endpoint.url}/hook", sink="Slack ")
    async with sending(sender):
        sender.reloaded(**RELOAD)
        await sender.drain()
    [got] = endpoint.received
    assert (got.method, got.url) == ("POST", f"{endpoint.url}/hook")
    assert got.content_type == "application/json"
    assert got.user_agent == f"kube-reloader/{__version__}"
    assert json.loads(got.body) == {
        "attachments": [{"author_name": "Reloader", "color": "good", "text": TEXT}]
    }
    assert sender.stats.sent == 1


@pytest.mark.parametrize("sink", ["teams", "gchat"])
async def test_teams_and_google_chat_alerts_are_a_json_text(endpoint: Endpoint, sink: str) -> None:
    sender = AlertSender(url=endpoint.url, sink=sink)
    async with sending(sender):
        sender.reloaded(**RELOAD)
        await sender.drain()
    [got] = endpoint.received
    assert got.content_type == "application/json"
    assert json.loads(got.body) == {"text": TEXT}


async def test_any_other_sink_gets_the_plain_text_without_markup(endpoint: Endpoint) -> None:
    sender = AlertSender(url=endpoint.url, sink="", additional_info="  prod cluster ")
    async with sending(sender):
        sender.reloaded(**RELOAD)
        await sender.drain()
    [got] = endpoint.received
    assert got.content_type == "text/plain"
    assert got.body == ("prod cluster : " + TEXT.replace("*", "")).encode()


async def test_a_free_form_notice_goes_to_the_same_sink_in_its_format(endpoint: Endpoint) -> None:
    sender = AlertSender(url=endpoint.url, sink="teams")
    async with sending(sender):
        sender.notify("rollout of shop/web failed")
        await sender.drain()
    assert json.loads(endpoint.received[0].body) == {"text": "rollout of shop/web failed"}


async def test_a_full_alert_queue_drops_the_oldest_alert_and_counts_it(
    endpoint: Endpoint,
) -> None:
    sender = AlertSender(url=endpoint.url, sink="", max_queue=2)
    for workload in ("first", "second", "third"):
        sender.reloaded(**{**RELOAD, "workload": workload})
    assert sender.stats.dropped == 1
    async with sending(sender):
        await sender.drain()
    reloaded = [r.body.decode().split("reloaded ")[1].split()[0] for r in endpoint.received]
    assert reloaded == ["second", "third"]


async def test_a_notice_that_finds_the_queue_full_is_the_one_dropped(endpoint: Endpoint) -> None:
    sender = AlertSender(url=endpoint.url, sink="", max_queue=1)
    sender.reloaded(**RELOAD)
    sender.notify("rollout failed")
    assert sender.stats.dropped == 1
    async with sending(sender):
        await sender.drain()
    assert [r.body for r in endpoint.received] == [TEXT.replace("*", "").encode()]


async def test_teams_counts_any_answer_but_200_as_a_failure_where_slack_does_not(
    endpoint: Endpoint,
) -> None:
    endpoint.statuses = [202]
    teams = AlertSender(url=endpoint.url, sink="teams", attempts=1)
    slack = AlertSender(url=endpoint.url, sink="slack", attempts=1)
    for sender in (teams, slack):
        async with sending(sender):
            sender.reloaded(**RELOAD)
            await sender.drain()
    assert (teams.stats.sent, teams.stats.failed) == (0, 1)
    assert teams.stats.last_error == "HTTP 202: answer 202"
    assert (slack.stats.sent, slack.stats.failed) == (1, 0)


async def test_a_failed_alert_is_retried_then_counted_as_sent(endpoint: Endpoint) -> None:
    endpoint.statuses = [500, 200]
    sender = AlertSender(url=endpoint.url, sink="slack", attempts=2)
    async with sending(sender):
        sender.reloaded(**RELOAD)
        await endpoint.until_received(2)
        await sender.drain()
    assert (sender.stats.sent, sender.stats.failed) == (1, 0)
    assert endpoint.received[0].body == endpoint.received[1].body


async def test_an_unreachable_sink_is_reported_and_the_sender_keeps_going(
    endpoint: Endpoint,
) -> None:
    sender = AlertSender(url="http://127.0.0.1:1/hook", sink="slack", attempts=1)
    async with sending(sender):
        sender.reloaded(**RELOAD)
        await sender.drain()
        assert sender.stats.failed == 1
        assert sender.stats.last_error.startswith("ClientConnectorError")
        sender.url = endpoint.url
        sender.reloaded(**RELOAD)
        await sender.drain()
    assert sender.stats.sent == 1


async def test_alerts_go_through_the_alert_proxy_when_one_is_set(endpoint: Endpoint) -> None:
    sender = AlertSender(url="http://alerts.example.invalid/hook", sink="", proxy=endpoint.url)
    async with sending(sender):
        sender.reloaded(**RELOAD)
        await sender.drain()
    [got] = endpoint.received
    assert got.url == "http://alerts.example.invalid/hook"
    assert sender.stats.sent == 1


# ---------------------------------------------------------------------- webhook mode


async def test_the_webhook_posts_reloaders_fixed_body(endpoint: Endpoint) -> None:
    notifier: WebhookNotifier[str] = WebhookNotifier(f"{endpoint.url}/reload")
    try:
        assert await notifier.notify() is True
    finally:
        await notifier.close()
    [got] = endpoint.received
    assert (got.method, got.url) == ("POST", f"{endpoint.url}/reload")
    assert got.content_type == "application/json"
    assert got.body == alerting.WEBHOOK_BODY == b'{"webhook":"update successful"}'
    assert notifier.stats.sent == 1


async def test_a_failing_webhook_is_retried_then_reported_never_raised(endpoint: Endpoint) -> None:
    endpoint.statuses = [503]
    notifier: WebhookNotifier[str] = WebhookNotifier(endpoint.url, attempts=3, base_delay=0.001)
    try:
        assert await notifier.notify() is False
    finally:
        await notifier.close()
    assert len(endpoint.received) == 3
    assert (notifier.stats.sent, notifier.stats.failed) == (0, 1)
    assert notifier.stats.last_error == "HTTP 503: answer 503"


async def test_a_webhook_that_recovers_within_its_attempts_is_delivered(
    endpoint: Endpoint,
) -> None:
    endpoint.statuses = [502, 302]
    notifier: WebhookNotifier[str] = WebhookNotifier(endpoint.url, attempts=3, base_delay=0.001)
    try:
        assert await notifier.notify() is True
    finally:
        await notifier.close()
    assert len(endpoint.received) == 2, "a redirect is an answer, not followed"
    assert (notifier.stats.sent, notifier.stats.failed) == (1, 0)


async def test_a_full_webhook_queue_drops_the_oldest_change_and_counts_it() -> None:
    notifier: WebhookNotifier[str] = WebhookNotifier("http://unused.invalid", max_queue=2)
    for change in ("a", "b", "c", "d"):
        notifier.enqueue(change)
    assert notifier.stats.dropped == 2
    assert notifier.queued == 2
    assert [await notifier.next(), await notifier.next()] == ["c", "d"]
    assert notifier.queued == 0


async def test_each_failed_webhook_attempt_before_a_retry_is_told_with_its_error(
    endpoint: Endpoint,
) -> None:
    endpoint.statuses = [503]
    notifier: WebhookNotifier[str] = WebhookNotifier(endpoint.url, attempts=3, base_delay=0.001)
    told: list[str] = []
    try:
        assert await notifier.notify(told.append) is False
    finally:
        await notifier.close()
    assert told == ["HTTP 503: answer 503"] * 2, "the last attempt is the failure, not a retry"


def test_a_full_webhook_queue_hands_back_the_change_it_dropped() -> None:
    notifier: WebhookNotifier[str] = WebhookNotifier("http://unused.invalid", max_queue=1)
    assert [notifier.enqueue(c) for c in ("a", "b", "c")] == [None, "a", "b"]
