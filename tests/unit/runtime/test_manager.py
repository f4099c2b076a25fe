"""The manager with a fake client, controller and elector (real HTTP servers, ephemeral port):
without HA the controller writes from the start; with HA only while the lease is held, the
elector's decision flips `controller.leading` in the same step, a lost lease (or a broken
election loop) stops the process, and the lease is released only after the elector stopped."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import logging
import socket
import tracemalloc
from collections.abc import Iterator
from typing import Any

import aiohttp
import msgspec
import pytest

from kube_reloader.kube import config, credentials, errors, leases
from kube_reloader.runtime.clock import SystemClock
from kube_reloader.runtime.leadership import HASettings, LeaderElector, Timing
from kube_reloader.runtime.manager import (
    HashKeySettings,
    Manager,
    ManagerSettings,
    lease_elector,
)
from kube_reloader.runtime.options import Options
from kube_reloader.runtime.supervisor import Supervisor

from .fakes import until

pytestmark = pytest.mark.timeout(30)

CONN = config.ConnectionConfig(
    server="https://api.invalid:6443",
    credentials=credentials.StaticCredentials(credentials.AuthState(token="t")),
)
HA = HASettings(identity="pod-a", namespace="reloader", timing=Timing())
KEY = bytes(range(32))
HASH_KEY = HashKeySettings(namespace="reloader", secret="kube-reloader-hash-key")


class FakeClient:
    def __init__(
        self, conn: config.ConnectionConfig, *, user_agent: str, observer: Any, monotonic: Any
    ) -> None:
        self.conn = conn  # the one `run` was given
        self.user_agent = user_agent
        self.observer = observer
        self.monotonic = monotonic
        self.secret: dict[str, Any] | Exception = {}  # what a GET of the hash key answers
        self.reads: list[tuple[str, str, str | None]] = []
        self.open = False

    async def __aenter__(self) -> FakeClient:
        self.open = True
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.open = False

    async def get(self, resource: Any, name: str, *, namespace: str | None = None) -> Any:
        self.reads.append((resource.plural, name, namespace))
        if isinstance(self.secret, Exception):
            raise self.secret
        return self.secret


class FakeController:
    """What the manager relies on, and a record of how it was told to lead."""

    def __init__(self, options: Options, clock: Any) -> None:
        self.options = options
        self.clock = clock
        self.ready = asyncio.Event()
        self.leading = asyncio.Event()
        self.leading.set()
        self.supervisor = Supervisor()
        self.stats = type("Stats", (), {"reloads": 3, "changes": 5})()
        self.calls: list[str] = []
        self.running = asyncio.Event()
        self.leading_when_run_returned: bool | None = None

    def start_leading(self) -> None:
        self.calls.append("start")
        self.leading.set()

    def stop_leading(self) -> None:
        self.calls.append("stop")
        self.leading.clear()

    async def run(self, stop: asyncio.Event) -> None:
        # deliberately leaves its supervisor's tasks running: the manager must stop them itself
        self.running.set()
        await stop.wait()
        self.leading_when_run_returned = self.leading.is_set()


class FakeElector:
    """Steps through a script the test feeds it: "win", "lose" or "crash"."""

    def __init__(self, rig: Rig, ha: HASettings, started: Any, stopped: Any) -> None:
        self.rig = rig
        self.ha = ha
        self.on_started_leading = started
        self.on_stopped_leading = stopped
        self.leading = asyncio.Event()
        self.lost = asyncio.Event()
        self.steps: asyncio.Queue[str] = asyncio.Queue()
        self.running = False
        #: `controller.leading` right after each callback returned, with no await in between
        self.seen: list[bool] = []
        self.released_while_running: bool | None = None

    async def run(self) -> None:
        self.running = True
        try:
            while True:
                step = await self.steps.get()
                if step == "win":
                    self.leading.set()
                    self.on_started_leading()
                    self.seen.append(self.rig.controller.leading.is_set())
                elif step == "lose":
                    self.leading.clear()
                    self.on_stopped_leading()
                    self.seen.append(self.rig.controller.leading.is_set())
                    self.lost.set()
                    return
                else:
                    raise RuntimeError("the election loop broke")
        finally:
            self.running = False

    async def release(self) -> None:
        self.released_while_running = self.running


class Rig:
    """A manager wired to the fakes, run as a task until `stop` is set."""

    def __init__(self, **settings: Any) -> None:
        settings.setdefault("metrics_addr", "127.0.0.1:0")
        self.settings = ManagerSettings(options=Options(), **settings)
        self.clients: list[FakeClient] = []
        self.controllers: list[FakeController] = []
        self.electors: list[FakeElector] = []
        self.built = asyncio.Event()
        self.stop = asyncio.Event()
        self.secret: dict[str, Any] | Exception = errors.NotFound(404, "no such Secret")
        self.manager = Manager(
            self.settings,
            new_client=self._client,  # type: ignore[arg-type]
            new_controller=self._controller,  # type: ignore[arg-type]
            new_elector=self._elector,  # type: ignore[arg-type]
        )

    @property
    def controller(self) -> FakeController:
        return self.controllers[0]

    @property
    def elector(self) -> FakeElector:
        return self.electors[0]

    def _client(self, conn: config.ConnectionConfig, **kw: Any) -> FakeClient:
        self.clients.append(FakeClient(conn, **kw))
        self.clients[-1].secret = self.secret
        return self.clients[-1]

    def _controller(self, client: Any, options: Options, *, clock: Any, metrics: Any) -> Any:
        controller = FakeController(options, clock)
        self.controllers.append(controller)
        self.built.set()
        return controller

    def _elector(self, client: Any, ha: HASettings, **cb: Any) -> FakeElector:
        self.electors.append(
            FakeElector(self, ha, cb["on_started_leading"], cb["on_stopped_leading"])
        )
        return self.electors[-1]

    async def start(self) -> asyncio.Task[int]:
        task = asyncio.create_task(self.manager.run(CONN, self.stop))
        built = asyncio.create_task(self.built.wait())
        await asyncio.wait({task, built}, timeout=10, return_when=asyncio.FIRST_COMPLETED)
        built.cancel()
        assert not task.done(), f"the manager ended at start: {task.result()}"
        await asyncio.wait_for(self.controller.running.wait(), 10)
        return task

    async def win(self) -> None:
        self.elector.steps.put_nowait("win")
        await until(lambda: self.manager.health.leader, "the win to be reported")

    def leader_gauge(self) -> float | None:
        return self.manager.recorder.registry.get_sample_value("kube_reloader_leader")

    async def probe(self, path: str, server: int = 0) -> tuple[int, str]:
        port = self.manager.servers[server].port
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{port}{path}") as resp,
        ):
            return resp.status, await resp.text()


async def test_without_ha_the_controller_writes_from_the_start_and_the_probes_follow_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="kube_reloader")
    rig = Rig()
    task = await rig.start()
    controller = rig.controller
    assert controller.leading.is_set()
    assert rig.electors == []
    assert len(rig.manager.servers) == 1, "no diagnostics listener unless asked for"
    assert (rig.clients[0].open, rig.clients[0].conn) == (True, CONN)
    assert controller.clock is rig.manager.clock, "one clock for the whole process"
    assert rig.clients[0].user_agent.startswith("kube-reloader/")
    assert rig.clients[0].monotonic == rig.manager.clock.monotonic
    for verb, code in [("GET", "200"), ("GET", "200"), ("PATCH", "409")]:
        rig.clients[0].observer.api_request(verb, code, "h:6443")  # what the client reports
    rig.clients[0].observer.api_request_done("GET", "h:6443", 0.02)
    requests = rig.manager.recorder.registry.get_sample_value
    assert requests("kube_reloader_api_requests_total", {"verb": "GET", "code": "200"}) == 2
    assert requests("kube_reloader_api_requests_total", {"verb": "PATCH", "code": "409"}) == 1
    rest = {"code": "200", "method": "GET", "host": "h:6443"}
    assert requests("rest_client_requests_total", rest) == 2
    assert requests("rest_client_request_duration_seconds_count",
                    {"verb": "GET", "host": "h:6443"}) == 1  # fmt: skip
    assert await rig.probe("/readyz") == (503, "caches not synced (single)")
    controller.ready.set()
    await until(lambda: rig.manager.health.synced, "readiness after the sync")
    assert await rig.probe("/readyz") == (200, "ok (single)")
    assert rig.manager.health.failing == controller.supervisor.unhealthy
    assert rig.manager.health.dead == controller.supervisor.dead
    rig.stop.set()
    assert await asyncio.wait_for(task, 10) == 0
    assert not rig.clients[0].open
    assert controller.calls == [], "a single replica is never told to stop writing"
    stopped = [r for r in caplog.records if r.getMessage() == "stopped"]
    assert [(r.reloads, r.changes) for r in stopped] == [(3, 5)]  # type: ignore[attr-defined]


async def test_with_ha_a_standby_does_not_write_until_the_elector_wins_the_lease() -> None:
    rig = Rig(ha=HA)
    task = await rig.start()
    controller, elector = rig.controller, rig.elector
    assert elector.ha == HA
    assert not controller.leading.is_set(), "a standby must not write"
    controller.ready.set()
    await until(lambda: rig.manager.health.synced, "readiness after the sync")
    assert await rig.probe("/readyz") == (200, "ok (standby)")
    await rig.win()
    assert elector.seen == [True], "the elector's callback itself lets the controller write"
    assert controller.calls == ["start"]
    assert rig.leader_gauge() == 1
    assert await rig.probe("/readyz") == (200, "ok (leader)")
    rig.stop.set()
    assert await asyncio.wait_for(task, 10) == 0
    assert rig.leader_gauge() == 0


async def test_the_lease_is_released_only_after_the_elector_stopped() -> None:
    rig = Rig(ha=HA)
    task = await rig.start()
    await rig.win()
    rig.stop.set()
    assert await asyncio.wait_for(task, 10) == 0
    assert rig.elector.released_while_running is False


async def test_a_lost_lease_stops_writing_at_once_stops_the_process_and_exits_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="kube_reloader")
    rig = Rig(ha=HA)
    task = await rig.start()
    controller, elector = rig.controller, rig.elector
    await rig.win()
    elector.steps.put_nowait("lose")
    assert await asyncio.wait_for(task, 10) == 1
    assert rig.stop.is_set(), "the manager itself stopped the controller"
    assert elector.seen == [True, False], "the elector's callback itself stops the writes"
    assert controller.leading_when_run_returned is False
    health = rig.manager.health
    assert (health.leader, health.lost_lease) == (False, True)
    assert rig.leader_gauge() == 0
    assert elector.released_while_running is False
    messages = [r.getMessage() for r in caplog.records]
    assert "lost the lease; stopping so that this pod restarts as a standby" in messages
    assert "stopped" not in messages


async def test_a_broken_election_loop_stops_the_leaders_writes_and_the_process(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="kube_reloader")
    rig = Rig(ha=HA)
    task = await rig.start()
    controller = rig.controller
    await rig.win()
    rig.elector.steps.put_nowait("crash")
    await until(rig.stop.is_set, "the manager to stop the process")
    assert controller.calls == ["start", "stop"]
    assert not controller.leading.is_set()
    assert (rig.manager.health.leader, rig.manager.health.lost_lease) == (False, True)
    assert rig.leader_gauge() == 0
    await asyncio.wait_for(task, 10)
    crash = next(
        r for r in caplog.records if r.getMessage() == "leader election stopped unexpectedly"
    )
    assert crash.exc_info is not None
    assert isinstance(crash.exc_info[1], RuntimeError)


async def test_an_election_loop_that_breaks_before_winning_never_lets_the_standby_write() -> None:
    rig = Rig(ha=HA)
    task = await rig.start()
    rig.elector.steps.put_nowait("crash")
    await until(rig.stop.is_set, "the manager to stop the process")
    assert "start" not in rig.controller.calls
    assert not rig.controller.leading.is_set()
    assert rig.manager.health.lost_lease
    await asyncio.wait_for(task, 10)


async def test_a_metrics_address_in_use_exits_one_before_anything_is_built(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="kube_reloader")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        rig = Rig(metrics_addr=f"127.0.0.1:{taken.getsockname()[1]}")
        assert await asyncio.wait_for(rig.manager.run(CONN, rig.stop), 10) == 1
    assert rig.clients == []
    assert rig.controllers == []
    assert "cannot listen" in [r.getMessage() for r in caplog.records]


@pytest.fixture
def untraced() -> Iterator[None]:
    """The diagnostics app starts tracemalloc, which slows every later test: stop it after."""
    tracing = tracemalloc.is_tracing()
    yield
    if not tracing:
        tracemalloc.stop()


@pytest.mark.usefixtures("untraced")
async def test_the_diagnostics_listener_is_served_when_asked_for() -> None:
    rig = Rig(pprof_addr="127.0.0.1:0")
    task = await rig.start()
    assert len(rig.manager.servers) == 2
    assert (await rig.probe("/debug/tasks", server=1))[0] == 200
    rig.stop.set()
    await asyncio.wait_for(task, 10)


async def test_the_hash_key_is_read_before_the_controller_is_built_and_given_in_its_options() -> (
    None
):
    rig = Rig(hash_key=HASH_KEY)
    rig.secret = {"data": {"key": base64.b64encode(KEY).decode()}}
    task = await rig.start()
    assert rig.clients[0].reads == [("secrets", "kube-reloader-hash-key", "reloader")]
    assert rig.controller.options.hash_key == KEY
    rig.stop.set()
    assert await asyncio.wait_for(task, 10) == 0


async def test_a_hash_key_that_cannot_be_read_exits_one_without_a_controller(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="kube_reloader")
    rig = Rig(hash_key=HASH_KEY)
    rig.secret = errors.Forbidden(403, "secrets is forbidden")
    assert await asyncio.wait_for(rig.manager.run(CONN, rig.stop), 10) == 1
    assert rig.controllers == []
    assert not rig.clients[0].open
    assert "cannot read or create the hash key" in [r.getMessage() for r in caplog.records]


def test_the_default_elector_campaigns_for_reloaders_lock_as_this_pod_on_the_given_clock() -> None:
    client: Any = object()
    started, stopped = (lambda: None), (lambda: None)
    clock = SystemClock(wall=lambda: 1_767_225_600.0)  # 2026-01-01T00:00:00Z
    build = lease_elector(clock)
    elector = build(client, HA, on_started_leading=started, on_stopped_leading=stopped)
    assert isinstance(elector, LeaderElector)
    assert isinstance(elector.store, leases.LeaseLock)
    lock = (elector.store.client, elector.store.namespace, elector.store.name)
    assert lock == (client, "reloader", "stakater-reloader-lock")
    assert (elector.identity, elector.timing) == ("pod-a", HA.timing)
    assert elector.clock == clock.monotonic
    assert elector.wall_clock() == dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    assert (elector.on_started_leading, elector.on_stopped_leading) == (started, stopped)


async def test_the_v2_health_listener_serves_healthz_and_readyz_beside_the_metrics() -> None:
    rig = Rig(health_addr="127.0.0.1:0")
    task = await rig.start()
    assert len(rig.manager.servers) == 2
    assert await rig.probe("/healthz", server=1) == (200, "ok")
    assert (await rig.probe("/readyz", server=1))[0] == 500, "not before the caches synced"
    rig.controller.ready.set()
    await until(lambda: rig.manager.health.synced, "readiness after the sync")
    assert await rig.probe("/readyz", server=1) == (200, "ok")
    assert await rig.probe("/readyz") == (200, "ok (single)"), "the metrics listener keeps its own"
    assert (await rig.probe("/metrics"))[0] == 200
    assert (await rig.probe("/metrics", server=1))[0] == 404
    rig.stop.set()
    assert await asyncio.wait_for(task, 10) == 0


async def test_without_a_metrics_address_only_the_health_listener_serves() -> None:
    rig = Rig(metrics_addr=None, health_addr="127.0.0.1:0")
    task = await rig.start()
    assert len(rig.manager.servers) == 1
    assert await rig.probe("/healthz") == (200, "ok")
    assert (await rig.probe("/metrics"))[0] == 404
    rig.stop.set()
    assert await asyncio.wait_for(task, 10) == 0


async def test_a_health_address_in_use_exits_one(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        rig = Rig(health_addr=f"127.0.0.1:{busy.getsockname()[1]}")
        assert await asyncio.wait_for(rig.manager.run(CONN, rig.stop), 10) == 1
    assert rig.controllers == []
    assert "cannot listen" in [r.getMessage() for r in caplog.records]


@pytest.mark.parametrize(("ha", "lock", "release"), [
    (HA, "stakater-reloader-lock", True),
    (msgspec.structs.replace(HA, lock_name="reloader-leader-election", release_on_cancel=False),
     "reloader-leader-election", False),
])  # fmt: skip
def test_the_default_elector_campaigns_for_the_configured_lock_and_release(
    ha: HASettings, lock: str, release: bool
) -> None:
    build = lease_elector(SystemClock())
    elector = build(object(), ha, on_started_leading=lambda: None,  # type: ignore[arg-type]
                    on_stopped_leading=lambda: None)  # fmt: skip
    assert isinstance(elector, LeaderElector)
    assert isinstance(elector.store, leases.LeaseLock)
    assert (elector.store.namespace, elector.store.name) == ("reloader", lock)
    assert elector.release_on_cancel is release
