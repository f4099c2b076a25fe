"""Swapping Stakater Reloader for kube-reloader, and back, rolls nothing.

For each peer (`reloader-v1`, `reloader-v2`) and strategy, on a cluster of this module's own
(kwok nodes running the pods, an audit log): 100 Deployments, each on its own ConfigMap, are
reloaded by the peer (HA); the peer stops and kube-reloader starts in the matching mode
(`--compat=v1|v2`, same strategy, HA). It must roll nothing at its start, then roll each
Deployment exactly once on the next change; the peer started again must roll nothing at its
start and roll each exactly once on a further change. Rollouts are counted three ways:
Deployment generations, the writers' workload writes in the audit log, kube-reloader's reload
counter.

No check waits a fixed time: each waits for the writer's evidence that it has done everything
it will ever do about its start (`KubeReloader.started`, `peer_started`: its catch-up done,
every listed object past its event handlers) or about a change (`KubeReloader.outstanding`,
`peer_outstanding`: nothing waiting or queued, every item taken handled), then for the audit
log to hold every request made until then (`audit_caught_up`), and only then counts rollouts
and writes.

The mixed fleet: a peer replica and a kube-reloader replica on the same Lease (v1 with
`--compat=v1`: `stakater-reloader-lock`; v2 with `--compat=v2`: `reloader-leader-election`),
a series of ConfigMap changes, the leader (the peer) killed mid-way and started again as a
standby: the audit log shows one writer at a time, each within its own lease term, and every
change applied exactly once. The Lease's holders over time are printed (`pytest -s`).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import secrets
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kube_reloader.core import hashing
from kube_reloader.devcluster.cluster import DevCluster
from kube_reloader.kube import config, errors, resources
from kube_reloader.kube.client import Client
from tests import builders
from tests.harness import update_cm
from tests.peers import (
    LEASES,
    binary,
    lease_holder,
    start_peer,
)
from tests.sidebyside import (
    DONE_TIMEOUT,
    kube_reloader,
    peer_outstanding,
    peer_started,
    until_done,
)
from tests.waiting import eventually, rolled_out, template_env

pytestmark = [pytest.mark.cluster, pytest.mark.rollout, pytest.mark.timeout(1200)]

FLEET = 100
#: kwok nodes of the module's cluster: 250 pods each; a fleet mid-rollout has 2 pods a
#: Deployment (maxSurge 1), and the previous test's namespace may still be emptying
NODES = 2
#: ConfigMap writes (and Deployment creates) in flight at once
CONCURRENCY = 16
CONVERGE = 240.0  # every Deployment marked and rolled out after a change
LAST_RELOADED_FROM = "reloader.stakater.com/last-reloaded-from"
V1_SHAPE = frozenset({"type", "name", "namespace", "hash", "containerRefs", "observedAt"})
V2_SHAPE = frozenset({"kind", "name", "namespace", "hash", "containers", "reloadedAt"})
#: the `--compat` mode matching each peer
COMPAT = {"reloader-v1": "v1", "reloader-v2": "v2"}
KUBE_RELOADER_AGENT = "kube-reloader/"
LEASE_DURATION = dt.timedelta(seconds=15)  # both peers' default, and ours
WORKLOAD_WRITES = ("create", "patch", "update", "delete")


# ---------------------------------------------------------------------- the cluster, audited


@dataclass
class Audit:
    """The module cluster's audit log (every request's metadata, JSON lines)."""

    path: Path

    def offset(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def events(self, since: int, namespace: str) -> list[dict[str, Any]]:
        """Completed requests in `namespace` logged after byte `since`, with parsed times."""
        with self.path.open("rb") as fh:
            fh.seek(since)
            chunk = fh.read()
        out, wanted = [], namespace.encode()
        for line in chunk.splitlines():
            if wanted not in line:  # cheap: most of the log is other namespaces' requests
                continue
            try:
                e = json.loads(line)
            except ValueError:  # a line still being written
                continue
            ref = e.get("objectRef") or {}
            if e.get("stage") != "ResponseComplete" or ref.get("namespace") != namespace:
                continue
            e["received"] = dt.datetime.fromisoformat(e["requestReceivedTimestamp"])
            e["done"] = dt.datetime.fromisoformat(e["stageTimestamp"])
            out.append(e)
        return sorted(out, key=lambda e: e["received"])

    def workload_writes(
        self, since: int, namespace: str, agent: str | None = None
    ) -> list[dict[str, Any]]:
        """Successful writes of Deployments' specs (not status) in `namespace`, by user agents
        starting with `agent` (default: anyone but the control plane)."""
        return [
            e for e in self.events(since, namespace)
            if (e.get("objectRef") or {}).get("resource") == "deployments"
            and not (e.get("objectRef") or {}).get("subresource")
            and e.get("verb") in WORKLOAD_WRITES
            and (e.get("responseStatus") or {}).get("code", 0) < 300
            and (e.get("userAgent") or "").startswith(agent or "")
            and not (e.get("userAgent") or "").startswith(("kube-controller-manager", "kwok"))
            and e.get("userAgent") != "kube-reloader-tests"
        ]  # fmt: skip

    def lease_writes(
        self,
        since: int,
        namespace: str,
        lease: str,
        verbs: Sequence[str] = ("create", "update", "patch"),
    ) -> list[dict[str, Any]]:
        """Successful writes of Lease `lease` in `namespace`: an acquisition, a renewal or a
        release, each by the holder it names (with `verbs=("get",)`: its reads, an elector's
        look at who holds it)."""
        return [
            e for e in self.events(since, namespace)
            if (e.get("objectRef") or {}).get("resource") == "leases"
            and (e.get("objectRef") or {}).get("name") == lease
            and e.get("verb") in verbs
            and (e.get("responseStatus") or {}).get("code", 0) < 300
        ]  # fmt: skip


async def audit_caught_up(api: Client, audit: Audit, namespace: str) -> None:
    """Until the audit log holds a request made now: the API server logs each request as it
    completes (`--audit-log-mode=blocking`), so every request a writer completed before this
    call is in the log by then."""
    since, marker = audit.offset(), f"audit-marker-{secrets.token_hex(4)}"
    with contextlib.suppress(errors.NotFound):
        await api.get(resources.CONFIGMAPS, marker, namespace=namespace)

    async def logged() -> bool:
        return any(
            (e.get("objectRef") or {}).get("name") == marker for e in audit.events(since, namespace)
        )

    await eventually(logged, timeout=DONE_TIMEOUT, interval=0.1, what=f"{marker} audited")


@pytest.fixture(scope="module")
def swap_cluster() -> Iterator[DevCluster]:
    cluster = DevCluster(Path(tempfile.mkdtemp(prefix="kube-reloader-test-swap-")))
    try:
        state = cluster.up(nodes=NODES, audit=True, build=True)
        print(f"swap cluster ({NODES} kwok nodes, audited) ready in {state.ready_seconds:.1f}s")
        yield cluster
    finally:
        cluster.down()


@pytest.fixture
def audit(swap_cluster: DevCluster) -> Audit:
    return Audit(swap_cluster.state_dir / "audit.log")


@pytest.fixture
async def api(swap_cluster: DevCluster) -> AsyncIterator[Client]:
    conn = config.load_kubeconfig([swap_cluster.kubeconfig])
    async with Client(conn, user_agent="kube-reloader-tests") as c:
        yield c


@pytest.fixture
async def ns(api: Client) -> AsyncIterator[str]:
    name = f"t-swap-{secrets.token_hex(3)}"
    await api.create(resources.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                            "metadata": {"name": name}})  # fmt: skip
    yield name
    with contextlib.suppress(errors.NotFound):
        await api.delete(resources.NAMESPACES, name)


# ---------------------------------------------------------------------- the fleet


def env_name(configmap: str) -> str:
    return "STAKATER_" + configmap.upper().replace("-", "_") + "_CONFIGMAP"


def annotation(d: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(shape, hash) of the Deployment's last-reloaded-from: shape `v1`, `v2`, None when
    absent, or the sorted keys of anything else."""
    raw = (d["spec"]["template"]["metadata"].get("annotations") or {}).get(LAST_RELOADED_FROM)
    if raw is None:
        return None, None
    value = json.loads(raw)
    keys = frozenset(value)
    shape = "v1" if keys == V1_SHAPE else "v2" if keys == V2_SHAPE else ",".join(sorted(keys))
    return shape, value.get("hash")


def marked(d: Mapping[str, Any], mode: str, strategy: str, want: str) -> bool:
    """Whether Deployment `d` carries the mark a `mode` (v1/v2) writer leaves for its
    ConfigMap's content of hash `want`: the env var (and, v2, the v2 annotation too) or the
    annotation in `mode`'s shape alone."""
    env = template_env(d, env_name(f"c-{d['metadata']['name']}"))
    shape, carried = annotation(d)
    if strategy == "env-vars":
        return env == want and ((shape, carried) == ("v2", want) if mode == "v2" else shape is None)
    return env is None and (shape, carried) == (mode, want)


@dataclass
class Fleet:
    """Deployments `w000`..`w099` (1 replica, reloader auto), each reading ConfigMap
    `c-<name>` ({"v": <value>}) through envFrom."""

    api: Client
    namespace: str
    size: int = FLEET
    names: list[str] = field(init=False)

    def __post_init__(self) -> None:
        self.names = [f"w{i:03d}" for i in range(self.size)]
        self.sem = asyncio.Semaphore(CONCURRENCY)

    async def _each(self, names: Sequence[str], fn: Callable[[str], Awaitable[None]]) -> None:
        async def one(name: str) -> None:
            async with self.sem:
                await fn(name)

        await asyncio.gather(*(one(n) for n in names))

    async def create(self, replicas: int = 1) -> None:
        ns = self.namespace

        async def one(name: str) -> None:
            await self.api.create(resources.CONFIGMAPS,
                                  builders.configmap(f"c-{name}", ns, {"v": "0"}))  # fmt: skip
            await self.api.create(resources.DEPLOYMENTS, builders.auto_deployment(
                name, ns, configmaps=(f"c-{name}",), replicas=replicas))  # fmt: skip

        await self._each(self.names, one)

    async def change(self, value: str, names: Sequence[str] | None = None) -> None:
        await self._each(
            self.names if names is None else names,
            lambda n: update_cm(self.api, self.namespace, f"c-{n}", {"v": value}),
        )

    async def deployments(self) -> dict[str, dict[str, Any]]:
        listed = await self.api.list(resources.DEPLOYMENTS, namespace=self.namespace)
        return {d["metadata"]["name"]: d for d in listed.items}

    async def generations(self) -> dict[str, int]:
        return {n: int(d["metadata"]["generation"]) for n, d in (await self.deployments()).items()}

    async def converge(
        self, check: Callable[[dict[str, Any]], bool], what: str, timeout: float = CONVERGE
    ) -> float:
        """Until `check` holds for every Deployment; the seconds waited."""
        t0 = time.monotonic()
        behind: list[str] = []

        async def done() -> bool:
            nonlocal behind
            ds = await self.deployments()
            behind = [n for n in self.names if not check(ds[n])]
            return not behind

        try:
            await eventually(done, timeout=timeout, interval=1.0, what=what)
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {len(behind)} behind, e.g. {behind[:5]}") from None
        return time.monotonic() - t0

    async def reloaded(self, mode: str, strategy: str, value: str, what: str) -> float:
        """Until every Deployment carries `mode`'s mark for content `value` and has rolled it
        out; the seconds waited."""
        want = hashing.configmap_hash({"v": value})
        return await self.converge(
            lambda d: marked(d, mode, strategy, want) and rolled_out(d), what
        )


def rolled(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """Rollouts (generation steps) per Deployment between two snapshots."""
    return {n: after[n] - before[n] for n in before}


def per_workload(writes: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for e in writes:
        name = e["objectRef"]["name"]
        counts[name] = counts.get(name, 0) + 1
    return counts


def report(case: str, line: str) -> None:
    print(f"swap {case}: {line}", flush=True)


async def started_quietly(
    api: Client, fleet: Fleet, audit: Audit, agent: str, before: Mapping[str, int], since: int,
    started: Callable[[], Awaitable[str]], case: str, who: str,
) -> None:  # fmt: skip
    """Once `started` shows the writer has done all it will about its start: no Deployment's
    generation moved since `before`, and `agent` wrote none since byte `since` of the audit
    log (taken before the writer started)."""
    took = await until_done(started, f"{who} done with its start")
    await audit_caught_up(api, audit, fleet.namespace)
    after = await fleet.generations()
    steps = {n: s for n, s in rolled(before, after).items() if s}
    writes = audit.workload_writes(since, fleet.namespace, agent)
    report(
        case,
        f"{who}: done with its start {took:.1f}s after it led: {len(steps)} rollouts "
        f"and {len(writes)} workload writes",
    )
    assert not steps, (
        f"{who} rolled {len(steps)} Deployments at start: {dict(list(steps.items())[:5])}"
    )
    assert not writes, (
        f"{who} wrote {len(writes)} workloads: {[e['requestURI'] for e in writes[:3]]}"
    )


async def exactly_once(
    api: Client, fleet: Fleet, audit: Audit, agent: str, before: Mapping[str, int], since: int,
    done: Callable[[], Awaitable[str]], case: str, who: str,
) -> None:  # fmt: skip
    """Once `done` shows the writer has nothing left to write (a duplicate would be a second
    reconcile of a workload: queued, waiting or in a worker until then): every Deployment
    rolled exactly once since `before`, and `agent` wrote each exactly once since byte
    `since` of the audit log."""
    took = await until_done(done, f"{who} done with the change")
    await audit_caught_up(api, audit, fleet.namespace)
    steps = rolled(before, await fleet.generations())
    writes = per_workload(audit.workload_writes(since, fleet.namespace, agent))
    others = audit.workload_writes(since, fleet.namespace)
    strangers = {e["userAgent"] for e in others if not e["userAgent"].startswith(agent)}
    not_once = {n: s for n, s in steps.items() if s != 1}
    report(case, f"{who}: drained {took:.1f}s after the fleet rolled out; "
                 f"{sum(steps.values())} rollouts of {len(steps)} Deployments, "
                 f"{sum(writes.values())} workload writes")  # fmt: skip
    assert not not_once, f"not rolled exactly once: {dict(list(not_once.items())[:5])}"
    assert writes == dict.fromkeys(fleet.names, 1), "one write per Deployment"
    assert not strangers, f"workload writes by others: {strangers}"


# ---------------------------------------------------------------------- 1-4: the swap


@pytest.mark.parametrize("strategy", ["env-vars", "annotations"])
@pytest.mark.parametrize("peer", ["reloader-v1", "reloader-v2"])
async def test_swapping_the_peer_for_kube_reloader_and_back_rolls_nothing(
    api: Client, ns: str, audit: Audit, swap_cluster: DevCluster, tmp_path: Path, peer: str,
    strategy: str,
) -> None:  # fmt: skip
    binary(peer)  # skip before creating anything when the peer cannot be built
    mode, case = COMPAT[peer], f"{peer}/{strategy}"
    kubeconfig, flags = swap_cluster.kubeconfig, [f"--reload-strategy={strategy}"]
    started = time.monotonic()
    fleet = Fleet(api, ns)
    await fleet.create()
    took = await fleet.converge(rolled_out, "the fleet rolled out")
    report(case, f"{FLEET} Deployments created and rolled out in {took:.1f}s")

    # 1. the peer reloads every Deployment
    with start_peer(peer, kubeconfig, ns, tmp_path, flags=flags) as first:
        await first.wait_ready(api, timeout=90)
        await fleet.change("1")
        took = await fleet.reloaded(mode, strategy, "1", f"{peer}'s reloads")
        report(case, f"{peer} reloaded and rolled out all {FLEET} in {took:.1f}s")
    base = await fleet.generations()
    assert set(base.values()) == {2}, "the peer rolled each Deployment once"

    # 2. kube-reloader in the peer's mode starts: no rollout
    since = audit.offset()
    with kube_reloader("kube-reloader-a", kubeconfig, ns, tmp_path,
                       [*flags, f"--compat={mode}"]) as ours:  # fmt: skip
        waited = await ours.wait_leading(timeout=60)  # v1 leaves its Lease to expire (15 s)
        report(case, f"kube-reloader leads {waited:.1f}s after its start")
        await started_quietly(
            api, fleet, audit, KUBE_RELOADER_AGENT, base, since, ours.started, case, "kube-reloader"
        )
        assert await ours.reloads() == 0

        # 3. one change: each Deployment rolls exactly once, with kube-reloader's mark
        since = audit.offset()
        await fleet.change("2")
        took = await fleet.reloaded(mode, strategy, "2", "kube-reloader's reloads")
        report(case, f"kube-reloader reloaded and rolled out all {FLEET} in {took:.1f}s")
        await exactly_once(
            api,
            fleet,
            audit,
            KUBE_RELOADER_AGENT,
            base,
            since,
            ours.outstanding,
            case,
            "kube-reloader",
        )
        assert await ours.reloads() == FLEET
    after_ours = await fleet.generations()

    # 4. the peer again: no rollout at its start, then one per change
    since = audit.offset()
    with start_peer(peer, kubeconfig, ns, tmp_path, name=f"{peer}-again", flags=flags) as again:
        t0 = time.monotonic()
        await again.wait_ready(api, timeout=90)
        report(case, f"{again.name} leads {time.monotonic() - t0:.1f}s after its start")
        await started_quietly(
            api,
            fleet,
            audit,
            again.user_agent,
            after_ours,
            since,
            lambda: peer_started(again, api, ns),
            case,
            again.name,
        )
        since = audit.offset()
        await fleet.change("3")
        took = await fleet.reloaded(mode, strategy, "3", f"{again.name}'s reloads")
        report(case, f"{again.name} reloaded and rolled out all {FLEET} in {took:.1f}s")
        await exactly_once(
            api,
            fleet,
            audit,
            again.user_agent,
            after_ours,
            since,
            lambda: peer_outstanding(again),
            case,
            again.name,
        )
    report(case, f"test took {time.monotonic() - started:.0f}s")


# ---------------------------------------------------------------------- 5: the mixed fleet


@dataclass
class LeaseHistory:
    """The Lease's holder as polled every 0.2 s: (wall time, holder, transitions) on change."""

    api: Client
    namespace: str
    lease: str
    seen: list[tuple[dt.datetime, str, int]] = field(default_factory=list)

    async def run(self) -> None:
        while True:
            try:
                obj = await self.api.get(resources.LEASES, self.lease, namespace=self.namespace)
                spec = obj.get("spec") or {}
                entry = (spec.get("holderIdentity") or "", int(spec.get("leaseTransitions") or 0))
            except errors.NotFound:
                entry = ("<none>", 0)
            if not self.seen or self.seen[-1][1:] != entry:
                self.seen.append((dt.datetime.now(dt.UTC), *entry))
            await asyncio.sleep(0.2)

    def holders(self) -> list[str]:
        out: list[str] = []
        for _, holder, _ in self.seen:
            if holder not in ("", "<none>") and (not out or out[-1] != holder):
                out.append(holder)
        return out

    def lines(self) -> list[str]:
        t0 = self.seen[0][0] if self.seen else dt.datetime.now(dt.UTC)
        return [f"  +{(at - t0).total_seconds():6.2f}s holder={h!r} transitions={n}"
                for at, h, n in self.seen]  # fmt: skip


async def read_after(
    audit: Audit, since: int, namespace: str, lease: str, reader: str, after: dt.datetime
) -> str:
    """Empty once `reader` (a user-agent prefix) has read the Lease after time `after` (its
    elector has looked at who holds it since); else what is missing."""
    reads = audit.lease_writes(since, namespace, lease, verbs=("get",))
    if any(e["userAgent"].startswith(reader) and e["received"] > after for e in reads):
        return ""
    return f"no read of the Lease by {reader} after {after:%H:%M:%S.%f}"


async def read_after_renewal(
    audit: Audit, since: int, namespace: str, lease: str, reader: str, holder: str
) -> str:
    """Empty once `reader` has read the Lease after `holder` renewed it (both since byte
    `since` of the audit log): a standby's elector has seen the record change under a live
    holder; else what is missing."""
    renewals = [
        e["done"]
        for e in audit.lease_writes(since, namespace, lease)
        if e["userAgent"].startswith(holder)
    ]
    if not renewals:
        return f"no renewal of the Lease by {holder}"
    return await read_after(audit, since, namespace, lease, reader, min(renewals))


@pytest.mark.parametrize("peer", ["reloader-v1", "reloader-v2"])
async def test_a_mixed_fleet_writes_from_one_replica_at_a_time_across_a_takeover(
    api: Client, ns: str, audit: Audit, swap_cluster: DevCluster, tmp_path: Path, peer: str
) -> None:
    binary(peer)
    started = time.monotonic()
    mode, case, lease = COMPAT[peer], f"{peer}/mixed", LEASES[peer]
    kubeconfig, flags = swap_cluster.kubeconfig, ["--reload-strategy=env-vars"]
    fleet = Fleet(api, ns, size=24)
    await fleet.create()
    await fleet.converge(rolled_out, "the fleet rolled out")
    since = audit.offset()
    history = LeaseHistory(api, ns, lease)
    poller = asyncio.create_task(history.run())
    spaced = 0.5

    async def change(names: Sequence[str]) -> None:
        for n in names:
            await fleet.change("1", [n])
            await asyncio.sleep(spaced)

    want = hashing.configmap_hash({"v": "1"})

    def applied(names: Sequence[str]) -> Callable[[], Awaitable[bool]]:
        async def probe() -> bool:
            ds = await fleet.deployments()
            return all(template_env(ds[n], env_name(f"c-{n}")) == want for n in names)

        return probe

    a, b, c = fleet.names[:8], fleet.names[8:16], fleet.names[16:]
    try:
        with contextlib.ExitStack() as stack:
            leader = stack.enter_context(
                start_peer(peer, kubeconfig, ns, tmp_path, name=f"{peer}-a", flags=flags)
            )
            await leader.wait_ready(api, timeout=90)
            leader_id = await lease_holder(api, ns, lease)
            ours_from = audit.offset()
            ours = stack.enter_context(kube_reloader(
                "kube-reloader-b", kubeconfig, ns, tmp_path, [*flags, f"--compat={mode}"]))  # fmt: skip
            await ours.wait_synced()
            await until_done(
                lambda: read_after_renewal(
                    audit, ours_from, ns, lease, KUBE_RELOADER_AGENT, leader.user_agent
                ),
                "the standby read the Lease after a renewal",
            )
            assert await lease_holder(api, ns, lease) == leader_id, "the standby took a held Lease"
            await change(a)
            await eventually(applied(a), timeout=30, what=f"{leader.name}'s reloads")
            leader.kill()
            killed_at = time.monotonic()
            await change(b)  # during the takeover
            await ours.wait_leading(timeout=60)
            led = time.monotonic() - killed_at
            ours_id = await lease_holder(api, ns, lease)
            await eventually(applied([*a, *b]), timeout=30, what="kube-reloader's catch-up")
            report(case, f"{leader.name} killed; kube-reloader led {led:.1f}s later, applied "
                         f"the {len(b)} changes of the gap {time.monotonic() - killed_at:.1f}s "
                         "after the kill")  # fmt: skip
            standby_from = audit.offset()
            standby = stack.enter_context(
                start_peer(peer, kubeconfig, ns, tmp_path, name=f"{peer}-c", flags=flags)
            )
            await until_done(  # the restarted peer is up and contending
                lambda: read_after_renewal(
                    audit, standby_from, ns, lease, standby.user_agent, KUBE_RELOADER_AGENT
                ),
                f"{standby.name} read the Lease after a renewal",
            )
            assert standby.alive(), standby.log_text()[-2000:]
            await change(c)
            await eventually(applied(fleet.names), timeout=30, what="reloads after the restart")
            await until_done(ours.outstanding, "kube-reloader done with the changes")
            await audit_caught_up(api, audit, ns)
            # no evidence of a standby's inaction exists; it has had as long as kube-reloader
            # took to apply each change, and one more look at the held Lease after the last
            last_write = max(e["done"] for e in audit.workload_writes(since, ns))
            await until_done(
                lambda: read_after(audit, standby_from, ns, lease, standby.user_agent, last_write),
                f"{standby.name} read the Lease after the last write",
            )
            assert await lease_holder(api, ns, lease) == ours_id
            poller.cancel()  # before the replicas stop (kube-reloader releases the Lease)
    finally:
        poller.cancel()
        await asyncio.gather(poller, return_exceptions=True)
        report(case, f"Lease {ns}/{lease} over time:\n" + "\n".join(history.lines()))

    writes = audit.workload_writes(since, ns)
    lease_writes = audit.lease_writes(since, ns, lease)

    def by(agent: str) -> list[dict[str, Any]]:
        return [e for e in writes if e["userAgent"].startswith(agent)]

    def leased(agent: str) -> list[dt.datetime]:
        return [e["done"] for e in lease_writes if e["userAgent"].startswith(agent)]

    by_leader, by_ours, by_standby = (
        by(leader.user_agent),
        by(KUBE_RELOADER_AGENT),
        by(standby.user_agent),
    )
    writers = [e["userAgent"].split("/")[0] for e in writes]
    runs = [w for i, w in enumerate(writers) if i == 0 or writers[i - 1] != w]
    report(case, f"workload writes: {len(by_leader)} by {leader.name}, {len(by_ours)} by "
                 f"kube-reloader, {len(by_standby)} by {standby.name}; writer runs {runs}; "
                 f"Lease writes by agent: "
                 f"{ {a: len(leased(a)) for a in (leader.user_agent, KUBE_RELOADER_AGENT, standby.user_agent)} }")  # fmt: skip
    assert history.holders() == [leader_id, ours_id], history.lines()
    assert runs == [leader.name, "kube-reloader"], "one writer at a time, in lease order"
    assert by_leader, f"{leader.name} wrote before it was killed"
    assert by_ours, "kube-reloader wrote after the takeover"
    assert not by_standby, f"{standby.name} wrote as a standby"
    assert not leased(standby.user_agent), "the restarted peer never took kube-reloader's Lease"
    assert leased(leader.user_agent), f"{leader.name} took the Lease"
    assert leased(KUBE_RELOADER_AGENT), "kube-reloader took the Lease"
    # the leader's term: from its acquisition to the expiry of its last renewal
    term = (min(leased(leader.user_agent)), max(leased(leader.user_agent)) + LEASE_DURATION)
    took_over = min(leased(KUBE_RELOADER_AGENT))  # a standby writes no Lease: its acquisition
    assert term[0] < min(e["received"] for e in by_leader), f"{leader.name} wrote before leading"
    assert max(e["done"] for e in by_leader) < min(term[1], took_over), "a write out of its term"
    assert took_over < min(e["received"] for e in by_ours), "kube-reloader wrote before leading"
    assert per_workload(writes) == dict.fromkeys(fleet.names, 1), "each change applied once"
    report(case, f"test took {time.monotonic() - started:.0f}s")
