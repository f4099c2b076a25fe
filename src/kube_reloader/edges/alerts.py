"""HTTP side channels: reload alerts (Slack, Teams, Google Chat, raw webhook) and webhook mode.

Alerts are queued (bounded) and sent by a background task, so a slow or dead sink never
delays a reload; a full queue drops the oldest alert and counts it. Webhook mode
(`--webhook-url`) replaces reloads: one POST of Reloader's fixed body per change, retried with
backoff (an HTTP error status is a failure too), and a failing endpoint is reported, never
fatal. Proxies: `ALERT_WEBHOOK_PROXY` for alerts, else the standard
`HTTPS_PROXY`/`HTTP_PROXY`/`NO_PROXY` variables.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar

from kube_reloader import __version__
from kube_reloader.core import alerting, limiting

if TYPE_CHECKING:  # imported when an alert or a webhook is first sent: a start costs less
    import aiohttp

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass
class SinkStats:
    sent: int = 0
    failed: int = 0
    dropped: int = 0
    last_error: str = ""
    errors: list[str] = field(default_factory=list)


async def post(
    session: aiohttp.ClientSession,
    url: str,
    body: bytes,
    content_type: str,
    *,
    proxy: str | None = None,
    seconds: float = 10.0,
) -> tuple[int, str]:
    """POST once; returns (status, first 200 characters of the answer)."""
    import aiohttp  # lazily: see the module's imports

    async with session.post(
        url,
        data=body,
        headers={"Content-Type": content_type},
        proxy=proxy,
        allow_redirects=False,
        timeout=aiohttp.ClientTimeout(total=seconds),
    ) as resp:
        text = (await resp.read())[:200].decode("utf-8", "replace")
        return resp.status, text


class AlertSender:
    """`ALERT_ON_RELOAD=true`: one alert per reloaded workload, sent in the background.
    `structured` (`--alert-structured`, raw sink only): Reloader v2's JSON instead of text."""

    def __init__(
        self,
        *,
        url: str,
        sink: str,
        additional_info: str = "",
        proxy: str | None = None,
        max_queue: int = 1000,
        attempts: int = 3,
        structured: bool = False,
    ) -> None:
        self.url = url
        self.sink = sink
        self.structured = structured and alerting.is_raw(sink)
        self.additional_info = additional_info
        self.proxy = proxy or None
        self.attempts = attempts
        self.stats = SinkStats()
        self._queue: asyncio.Queue[bytes] = asyncio.Queue(maxsize=max_queue)
        self._payload_type = (
            "application/json" if self.structured else alerting.payload(sink, "").content_type
        )
        self._session: aiohttp.ClientSession | None = None

    def start(self) -> None:
        """Open the HTTP session; the caller runs `run()` as a supervised task."""
        import aiohttp  # lazily: see the module's imports

        self._session = aiohttp.ClientSession(
            trust_env=self.proxy is None, headers={"User-Agent": f"kube-reloader/{__version__}"}
        )

    async def drain(self, seconds: float = 5.0) -> None:
        """Wait (bounded) until the queued alerts are sent; call before cancelling `run`."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._queue.join(), seconds)

    async def stop(self) -> None:
        if self._session is not None:
            await self._session.close()

    def reloaded(
        self, *, resource: str, rtype: str, namespace: str, workload: str, kind: str
    ) -> None:
        if self.structured:
            body = alerting.structured(
                workload_kind=kind,
                workload=workload,
                workload_namespace=namespace,
                resource_kind=alerting.resource_kind(rtype),
                resource=resource,
                resource_namespace=namespace,
                when=dt.datetime.now().astimezone(),
                additional_info=self.additional_info,
            ).body
        else:
            text = alerting.message(
                resource=resource,
                rtype=rtype,
                namespace=namespace,
                workload=workload,
                kind=kind,
                additional_info=self.additional_info,
            )
            body = alerting.payload(self.sink, text).body
        if self._queue.full():
            with contextlib.suppress(asyncio.QueueEmpty):
                self._queue.get_nowait()
                self._queue.task_done()
            self.stats.dropped += 1
            log.warning("alert queue full, dropped the oldest alert", extra={"sink": self.sink})
        self._queue.put_nowait(body)

    def notify(self, text: str) -> None:
        """Queue a free-form message (e.g. a failed rollout) for the same sink."""
        if self.structured:
            when = dt.datetime.now().astimezone()
            body = alerting.structured_notice(
                text, when=when, additional_info=self.additional_info
            ).body
        else:
            body = alerting.payload(self.sink, text).body
        if self._queue.full():
            self.stats.dropped += 1
            return
        self._queue.put_nowait(body)

    async def run(self) -> None:
        """Send queued alerts until cancelled."""
        import aiohttp  # lazily: see the module's imports

        assert self._session is not None
        ok_only_200 = alerting.payload(self.sink, "").ok_only_200
        while True:
            body = await self._queue.get()
            try:
                for attempt in range(self.attempts):
                    try:
                        status, answer = await post(
                            self._session, self.url, body, self._payload_type, proxy=self.proxy
                        )
                        failed = status != 200 if ok_only_200 else status >= 400
                        if not failed:
                            self.stats.sent += 1
                            break
                        error = f"HTTP {status}: {answer}"
                    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                        error = f"{type(exc).__name__}: {exc}"
                    if attempt + 1 == self.attempts:
                        self.stats.failed += 1
                        self.stats.last_error = error
                        log.warning(
                            "alert not delivered", extra={"sink": self.sink, "error": error}
                        )
                    else:
                        await asyncio.sleep(limiting.backoff(attempt, base=0.5))
            finally:
                self._queue.task_done()


class WebhookNotifier(Generic[T]):
    """`--webhook-url`: POST Reloader's payload instead of reloading, with retries.

    Changes wait in a bounded queue for one sender: against a hanging endpoint the oldest
    waiting notification is dropped (counted in `stats.dropped`), so memory stays bounded
    however many changes arrive."""

    def __init__(
        self, url: str, *, attempts: int = 5, base_delay: float = 0.5, max_queue: int = 1000
    ) -> None:
        self.url = url
        self.attempts = attempts
        self.base_delay = base_delay
        self.stats = SinkStats()
        self._session: aiohttp.ClientSession | None = None
        self._queue: asyncio.Queue[T] = asyncio.Queue(maxsize=max_queue)

    def enqueue(self, item: T) -> T | None:
        """Queue one notification; when full, the oldest waiting one is dropped (returned)."""
        dropped: T | None = None
        if self._queue.full():
            with contextlib.suppress(asyncio.QueueEmpty):
                dropped = self._queue.get_nowait()
            self.stats.dropped += 1
            if self.stats.dropped in (1, 10, 100) or self.stats.dropped % 1000 == 0:
                log.warning(
                    "webhook queue full, dropped the oldest change",
                    extra={"dropped": self.stats.dropped},
                )
        self._queue.put_nowait(item)
        return dropped

    async def next(self) -> T:
        """The next queued notification (waits for one)."""
        return await self._queue.get()

    @property
    def queued(self) -> int:
        return self._queue.qsize()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def notify(
        self, retrying: Callable[[str], None] | None = None, body: bytes = alerting.WEBHOOK_BODY
    ) -> bool:
        """Send `body` once (retrying failures, `retrying` told each error before its
        retry). True when delivered."""
        import aiohttp  # lazily: see the module's imports

        if self._session is None:
            self._session = aiohttp.ClientSession(trust_env=True)
        error = ""
        for attempt in range(self.attempts):
            try:
                status, answer = await post(
                    self._session, self.url, body, "application/json", seconds=30
                )
                if status < 400:
                    self.stats.sent += 1
                    return True
                error = f"HTTP {status}: {answer}"
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                error = f"{type(exc).__name__}: {exc}"
            if attempt + 1 < self.attempts:
                if retrying is not None:
                    retrying(error)
                jitter = random.random()  # noqa: S311 - jitter, not crypto
                await asyncio.sleep(limiting.backoff(attempt, base=self.base_delay, jitter=jitter))
        self.stats.failed += 1
        self.stats.last_error = error
        log.error("webhook not delivered", extra={"url": self.url, "error": error})
        return False
