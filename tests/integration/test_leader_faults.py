"""Leader election under faults, against a real API server of this module's own (with an audit
log): a leader whose API connection hangs stops writing within the renew deadline and a standby
takes over only once the lease expired by its own observation; skewed clocks never make a live
lease look expired; and across a takeover the API server sees the writes of one replica at a
time, each change reloaded exactly once."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import secrets
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import msgspec
import pytest

from kube_reloader.core import hashing, planning
from kube_reloader.core.matching import MatchConfig
from kube_reloader.core.strategies import Strategy
from kube_reloader.devcluster.cluster import DevCluster
from kube_reloader.edges.serving import Health
from kube_reloader.kube import config, leases, resources
from kube_reloader.kube.client import Client
from kube_reloader.metrics import Recorder
from kube_reloader.runtime.clock import SystemClock
from kube_reloader.runtime.controller import Controller
from kube_reloader.runtime.leadership import (
    LOCK_NAME,
    HASettings,
    LeaderElector,
    Observation,
    Timing,
)
from kube_reloader.runtime.manager import follow_lease, lease_elector
from kube_reloader.runtime.options import Options
from tests.harness import auto_deployment_on_configmap, env_of, update_cm
from tests.waiting import alongside, eventually

# serial: lease timings (a cluster of its own, restarted under the controller)
pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240), pytest.mark.serial]
TIMING = Timing(lease_duration=4, renew_deadline=3, retry_period=0.5)
SLACK = 0.3  # event-loop scheduling on a busy 2-core machine


class StallingProxy:
    """TCP from 127.0.0.1:<port> to the API server. `stall()` stops forwarding, both ways and
    for new connections too, without closing anything: a hung connection. `heal()` drops the
    stalled connections (their bytes with them) and forwards new ones again."""

    def __init__(self, server: str) -> None:
        url = urlsplit(server)
        self.target = (url.hostname or "127.0.0.1", url.port or 443)
        self.stalled = False
        self.frozen: list[tuple[list[asyncio.StreamWriter], list[asyncio.Task[None]]]] = []
        self.live: list[tuple[list[asyncio.StreamWriter], list[asyncio.Task[None]]]] = []

    async def __aenter__(self) -> StallingProxy:
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        self._drop(self.frozen + self.live)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn: tuple[list[asyncio.StreamWriter], list[asyncio.Task[None]]] = ([writer], [])
        if self.stalled:
            self.frozen.append(conn)  # accepted, never forwarded: the TLS handshake hangs
            return
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        conn[0].append(up_writer)
        conn[1].extend(asyncio.create_task(self._pipe(conn, r, w))
                       for r, w in ((reader, up_writer), (up_reader, writer)))  # fmt: skip
        self.live.append(conn)

    async def _pipe(self, conn: Any, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await src.read(65536):
                if conn in self.frozen:  # hold the chunk and read no more, until dropped
                    await asyncio.get_running_loop().create_future()
                dst.write(data)
                await dst.drain()
            dst.close()

    def route(self, direct: config.ConnectionConfig) -> config.ConnectionConfig:
        """`direct`, through this proxy (TLS stays end to end)."""
        return msgspec.structs.replace(direct, server=f"https://127.0.0.1:{self.port}")

    def stall(self) -> None:
        self.stalled = True
        self.frozen += self.live
        self.live = []

    def heal(self) -> None:
        self._drop(self.frozen)
        self.frozen = []
        self.stalled = False

    @staticmethod
    def _drop(conns: list[tuple[list[asyncio.StreamWriter], list[asyncio.Task[None]]]]) -> None:
        for writers, tasks in conns:
            for t in tasks:
                t.cancel()
            for w in writers:
                w.transport.abort()


class Flag(asyncio.Event):
    """A replica's "may write" flag that logs each change: (monotonic time, replica, leading)."""

    def __init__(self, name: str, log: list[tuple[float, str, bool]]) -> None:
        super().__init__()
        self.name, self.log = name, log

    def set(self) -> None:
        if not self.is_set():
            self.log.append((time.monotonic(), self.name, True))
        super().set()

    def clear(self) -> None:
        if self.is_set():
            self.log.append((time.monotonic(), self.name, False))
        super().clear()


def overlap(log: list[tuple[float, str, bool]]) -> float:
    """The longest time two replicas' flags were set at once (0.0: never)."""
    spans: list[tuple[str, float, float]] = []
    opened: dict[str, float] = {}
    for at, name, on in log:
        if on:
            opened[name] = at
        elif name in opened:
            spans.append((name, opened.pop(name), at))
    spans += [(name, at, time.monotonic()) for name, at in opened.items()]
    return max([0.0] + [min(e1, e2) - max(s1, s2) for n1, s1, e1 in spans
                        for n2, s2, e2 in spans if n1 < n2])  # fmt: skip


def when(log: list[tuple[float, str, bool]], name: str, on: bool) -> float:
    return next(at for at, n, o in log if n == name and o is on)


@pytest.fixture(scope="module")
def audited() -> Iterator[DevCluster]:
    cluster = DevCluster(Path(tempfile.mkdtemp(prefix="kube-reloader-test-leader-")))
    try:
        cluster.up(minimal=True, audit=True, build=True)
        yield cluster
    finally:
        cluster.down()


@pytest.fixture
def conn(audited: DevCluster) -> config.ConnectionConfig:
    return config.load_kubeconfig([audited.kubeconfig])


@pytest.fixture
async def api(conn: config.ConnectionConfig) -> AsyncIterator[Client]:
    async with Client(conn, user_agent="kube-reloader-tests") as c:
        yield c


@pytest.fixture
async def ns(api: Client) -> str:
    name = f"t-{secrets.token_hex(4)}"
    await api.create(resources.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                            "metadata": {"name": name}})  # fmt: skip
    return name


def elector(client: Client, ns: str, flag: Flag, wall_skew: float = 0.0) -> LeaderElector:
    skew = dt.timedelta(seconds=wall_skew)
    return LeaderElector(
        leases.LeaseLock(client, ns, LOCK_NAME), identity=flag.name, timing=TIMING,
        clock=time.monotonic, wall_clock=lambda: dt.datetime.now(dt.UTC) + skew,
        on_started_leading=flag.set, on_stopped_leading=flag.clear,
    )  # fmt: skip


async def renewal_seen(standby: LeaderElector, holder: str) -> None:
    """Wait until `standby` has read the lease held by `holder` and then seen it renewed."""

    async def held() -> Observation | None:
        seen = standby.observed
        return seen if seen is not None and seen.record.holder == holder else None

    first = await eventually(held, what=f"the standby reading {holder}'s lease", timeout=15)

    async def renewed() -> bool:
        seen = standby.observed
        return seen is not None and seen.at != first.at

    await eventually(renewed, what=f"the standby seeing {holder}'s lease renewed", timeout=15)


async def test_a_leader_whose_connection_hangs_stops_within_the_renew_deadline_before_the_standby_leads(
    conn: config.ConnectionConfig, ns: str
) -> None:
    log: list[tuple[float, str, bool]] = []
    a, b = Flag("replica-a", log), Flag("replica-b", log)
    async with contextlib.AsyncExitStack() as stack:
        proxy = await stack.enter_async_context(StallingProxy(conn.server))
        via_proxy = await stack.enter_async_context(Client(proxy.route(conn)))
        direct = await stack.enter_async_context(Client(conn))
        leader = elector(via_proxy, ns, a)
        leader_task = await stack.enter_async_context(alongside(leader.run()))
        await asyncio.wait_for(a.wait(), 15)
        standby = elector(direct, ns, b)
        await stack.enter_async_context(alongside(standby.run()))
        await renewal_seen(standby, "replica-a")
        stalled_at = time.monotonic()
        proxy.stall()
        await asyncio.wait_for(b.wait(), 15)
        assert leader_task.done(), "the leader gave up on its own"
        assert leader.lost.is_set()
    stopped, took = when(log, "replica-a", False), when(log, "replica-b", True)
    print(f"hung leader: stopped writing {stopped - stalled_at:.2f}s after the stall "
          f"({stopped - leader.renewed_at:.2f}s after its last renew began); standby led "
          f"{took - stalled_at:.2f}s after the stall; overlap {overlap(log):.2f}s")  # fmt: skip
    assert stopped - leader.renewed_at <= TIMING.renew_deadline + SLACK
    assert took - leader.renewed_at > TIMING.lease_duration, "only once expired, as it saw it"
    assert stopped < took
    assert overlap(log) == 0.0


@pytest.mark.parametrize(
    ("skewed", "skew"), [("standby", 30.0), ("standby", -30.0), ("leader", -30.0)]
)
async def test_a_skewed_clock_never_takes_a_live_lease_and_still_takes_an_expired_one(
    conn: config.ConnectionConfig, ns: str, skewed: str, skew: float
) -> None:
    log: list[tuple[float, str, bool]] = []
    a, b = Flag("replica-a", log), Flag("replica-b", log)
    async with Client(conn) as client_a, Client(conn) as client_b:
        leader = elector(client_a, ns, a, skew if skewed == "leader" else 0.0)
        standby = elector(client_b, ns, b, skew if skewed == "standby" else 0.0)
        async with alongside(leader.run()) as leader_task:
            await asyncio.wait_for(a.wait(), 15)
            async with alongside(standby.run()):
                await asyncio.sleep(2.5 * TIMING.lease_duration)
                assert not b.is_set(), "the standby never took the live lease"
                assert a.is_set()
                lease = await client_b.get(resources.LEASES, LOCK_NAME, namespace=ns)
                assert lease["spec"]["holderIdentity"] == "replica-a"
                leader_task.cancel()  # the leader dies without releasing the lease
                a.clear()
                crashed_at = time.monotonic()
                await asyncio.wait_for(b.wait(), 15)
    took = when(log, "replica-b", True)
    print(
        f"{skewed} clock {skew:+.0f}s: standby led {took - crashed_at:.2f}s after the leader died"
    )
    assert took - leader.renewed_at > TIMING.lease_duration
    assert took - crashed_at <= TIMING.lease_duration + 2 * TIMING.retry_period + 2 * SLACK


# ---------------------------------------------------------------------- writes in the audit log


def audit_writes(path: Path, ns: str, agents: tuple[str, ...]) -> list[dict[str, Any]]:
    """The write requests `agents` made in `ns`, with parsed timestamps, in order."""
    out = []
    for line in path.read_text().splitlines():
        e = json.loads(line)
        ref = e.get("objectRef") or {}
        if e.get("userAgent") in agents and ref.get("namespace") == ns and e.get("verb") in (
            "create", "patch", "update", "delete"
        ) and e.get("stage") == "ResponseComplete":  # fmt: skip
            e["received"] = dt.datetime.fromisoformat(e["requestReceivedTimestamp"])
            e["done"] = dt.datetime.fromisoformat(e["stageTimestamp"])
            out.append(e)
    return sorted(out, key=lambda e: e["received"])


@contextlib.asynccontextmanager
async def replica(client: Client, ns: str, name: str, log: list[tuple[float, str, bool]]
                  ) -> AsyncIterator[tuple[Controller, LeaderElector]]:  # fmt: skip
    """One kube-reloader replica in-process, wired to its elector as `Manager` wires them."""
    opts = Options(plan=planning.Config(match=MatchConfig(), strategy=Strategy.ENV_VARS),
                   namespaces=(ns,))  # fmt: skip
    recorder = Recorder()
    controller = Controller(client, opts, metrics=recorder)
    # the fence's flag is the one every write checks: log it (a standby until elected)
    controller.fence.leading = controller.leading = Flag(name, log)
    elected = lease_elector(SystemClock())(
        client, HASettings(identity=name, namespace=ns, timing=TIMING),
        on_started_leading=controller.start_leading, on_stopped_leading=controller.stop_leading,
    )  # fmt: skip
    stop = asyncio.Event()
    tasks = [asyncio.create_task(controller.run(stop)),
             asyncio.create_task(follow_lease(elected, controller, Health(), recorder, stop))]  # fmt: skip
    try:
        await asyncio.wait_for(controller.ready.wait(), 30)
        yield controller, elected
    finally:  # as the manager ends: stop the controller, then the elector, then release the lease
        stop.set()
        await asyncio.wait_for(tasks[0], 30)
        tasks[1].cancel()
        await asyncio.gather(tasks[1], return_exceptions=True)
        await elected.release()


async def test_across_a_takeover_one_replica_writes_at_a_time_and_each_change_reloads_once(
    api: Client, conn: config.ConnectionConfig, ns: str, audited: DevCluster
) -> None:
    names = [f"w{i}" for i in range(14)]
    for n in names:
        await auto_deployment_on_configmap(
            api, ns, name=n, configmap=f"c-{n}", data={"v": "0"}, replicas=0
        )
    want = hashing.configmap_hash({"v": "1"})

    async def applied(batch: list[str]) -> bool:
        envs = [await env_of(api, "Deployment", ns, n) for n in batch]
        return all(
            e.get(f"STAKATER_C_{n.upper()}_CONFIGMAP") == want
            for n, e in zip(batch, envs, strict=True)
        )

    async def change(batch: list[str], every: float) -> None:
        for n in batch:
            await update_cm(api, ns, f"c-{n}", {"v": "1"})
            await asyncio.sleep(every)

    log: list[tuple[float, str, bool]] = []
    agents = ("replica-a/leader-faults", "replica-b/leader-faults")
    async with contextlib.AsyncExitStack() as stack:
        proxy = await stack.enter_async_context(StallingProxy(conn.server))
        via_proxy = await stack.enter_async_context(Client(proxy.route(conn), user_agent=agents[0]))
        direct = await stack.enter_async_context(Client(conn, user_agent=agents[1]))
        _, first = await stack.enter_async_context(replica(via_proxy, ns, "replica-a", log))
        await asyncio.wait_for(first.leading.wait(), 15)
        await stack.enter_async_context(replica(direct, ns, "replica-b", log))
        await change(names[:4], 0.3)
        await eventually(lambda: applied(names[:4]), what="the leader's reloads", timeout=15)
        await change(names[4:5], 0)
        stalled_at = time.monotonic()
        proxy.stall()
        await change(names[5:11], 0.7)  # during the takeover
        await eventually(lambda: applied(names[:11]), what="the standby's catch-up", timeout=30)
        proxy.heal()
        await change(names[11:], 0.3)
        await eventually(lambda: applied(names), what="reloads after the heal", timeout=15)
        await asyncio.sleep(2)  # a duplicate would show by now
    writes = audit_writes(audited.state_dir / "audit.log", ns, agents)
    work = [e for e in writes if e["objectRef"]["resource"] != "leases"]
    by_a = [e for e in work if e["userAgent"] == agents[0]]
    by_b = [e for e in work if e["userAgent"] == agents[1]]
    acquired_b = min(e["done"] for e in writes if e["userAgent"] == agents[1]
                     and e["objectRef"]["resource"] == "leases" and e["responseStatus"]["code"] < 300)  # fmt: skip
    patches = {n: sum(1 for e in work if e["objectRef"]["resource"] == "deployments"
                      and e["objectRef"].get("name") == n) for n in names}  # fmt: skip
    stopped = when(log, "replica-a", False)
    print(f"takeover: replica-a made {len(by_a)} writes, replica-b {len(by_b)}; replica-a stopped "
          f"{stopped - stalled_at:.2f}s after the stall, replica-b led "
          f"{when(log, 'replica-b', True) - stalled_at:.2f}s after it; overlap {overlap(log):.2f}s")  # fmt: skip
    assert by_a, "the first leader wrote before the stall"
    assert by_b, "the new leader wrote after the takeover"
    assert max(e["done"] for e in by_a) < min(e["received"] for e in by_b)
    assert max(e["done"] for e in by_a) < acquired_b
    assert overlap(log) == 0.0
    assert stopped - stalled_at <= TIMING.renew_deadline + SLACK
    assert patches == dict.fromkeys(names, 1), "each change reloaded exactly once"
