"""The controller's staleness audit room: targeted reads only (a paged LIST of pods per
namespace with a candidate, a GET per stale TLS Secret), the gauge's series follow what is
stale now, one StaleCertificate Event per workload and rotation, by the leader only."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kube_reloader.core import planning
from kube_reloader.core.annotations import Keys
from kube_reloader.core.objects import ResourceType
from kube_reloader.core.staleness import Consumed
from kube_reloader.kube import errors, podstarts
from kube_reloader.kube.projections import ObjectMeta
from kube_reloader.runtime import auditing
from kube_reloader.runtime.auditing import Auditing
from kube_reloader.runtime.cache import ConfigEntry
from kube_reloader.runtime.options import Options
from kube_reloader.runtime.stores import Stores
from tests.unit.runtime.fakes import Room, stamp

KEYS = Keys()
CHANGED = 1_000_000.0


def certificate_pem() -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "nats")])
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(1)
        .not_valid_before(dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
        .not_valid_after(dt.datetime(2026, 4, 1, tzinfo=dt.UTC))
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    return cert.public_bytes(serialization.Encoding.PEM)


PEM = certificate_pem()


class Store:
    def __init__(self, plural: str, entries: dict[tuple[str, str], ConfigEntry]) -> None:
        self.store = entries
        self.resource = type("R", (), {"plural": plural})()


def pod(owner: str, start: float, *, phase: str = "Running", kind: str = "ReplicaSet",
        deleting: bool = False, running: bool = True) -> dict[str, Any]:  # fmt: skip
    meta: dict[str, Any] = {
        "name": f"{owner}-x", "labels": {"pod-template-hash": "abc"},
        "ownerReferences": [{"kind": kind, "name": f"{owner}-abc" if kind == "ReplicaSet" else owner,
                             "uid": "u", "controller": True}],
    }  # fmt: skip
    if deleting:
        meta["deletionTimestamp"] = stamp(start + 1)
    state = {"running": {"startedAt": stamp(start)}} if running else {
        "waiting": {"reason": "CrashLoopBackOff"}}  # fmt: skip
    return {"metadata": meta, "status": {"phase": phase, "startTime": stamp(start - 5),
            "containerStatuses": [{"state": state}]}}  # fmt: skip


class Listed:
    """An ObjectList's shape: its items."""

    def __init__(self, items: list[Any]) -> None:
        self.items = items


class FakeClient:
    """Pods by namespace and Secrets by name; records every request."""

    def __init__(self) -> None:
        self.pods: dict[str, list[dict[str, Any]]] = {}
        self.secrets: dict[tuple[str, str], dict[str, Any]] = {}
        self.requests: list[str] = []
        self.refuse_pods: set[str] = set()
        self.refuse: set[str] = set()

    async def list_reduced(self, resource: Any, *, namespace: str, type: Any,
                           reduce: Callable[[Any], Any], **_: Any) -> Any:  # fmt: skip
        self.requests.append(f"LIST {resource.plural} {namespace}")
        if namespace in self.refuse_pods:
            raise errors.Forbidden(403, "pods is forbidden")
        for item in self.pods.get(namespace, []):
            reduce(msgspec.convert(item, type))
        return None

    async def get(self, resource: Any, name: str, *, namespace: str, type: Any) -> Any:
        self.requests.append(f"GET {resource.plural} {namespace}/{name}")
        found = self.secrets.get((namespace, name))
        if found is None:
            raise errors.NotFound(404, f"{name} not found")
        return msgspec.json.decode(msgspec.json.encode(found), type=type)

    async def list(self, resource: Any, *, namespace: str, field_selector: str | None = None,
                   type: Any, **_: Any) -> Any:  # fmt: skip
        self.requests.append(f"LIST {resource.plural} {namespace} {field_selector}")
        if resource.plural in self.refuse:
            raise errors.Forbidden(403, f"{resource.plural} is forbidden")
        name = (field_selector or "").removeprefix("metadata.name=")
        found = self.secrets.get((namespace, name))
        items = (
            [] if found is None else [msgspec.json.decode(msgspec.json.encode(found), type=type)]
        )
        return Listed(items)


def tls_secret(rv: str) -> dict[str, Any]:
    return {"metadata": {"name": "nats-tls", "namespace": "ns", "resourceVersion": rv},
            "type": "kubernetes.io/tls",
            "data": {"tls.crt": base64.b64encode(PEM).decode(), "tls.key": "c2VjcmV0"}}  # fmt: skip


def deployment(name: str, *, annotations: dict[str, str] | None = None, cm: str = "",
               secret: str = "") -> planning.Workload:  # fmt: skip
    container: dict[str, Any] = {"name": "app"}
    spec: dict[str, Any] = {"containers": [container]}
    if cm:
        container["envFrom"] = [{"configMapRef": {"name": cm}}]
    if secret:
        container["volumeMounts"] = [{"name": "tls", "mountPath": "/tls"}]
        spec["volumes"] = [{"name": "tls", "secret": {"secretName": secret}}]
    return planning.workload_from_manifest({
        "kind": "Deployment", "metadata": {"name": name, "namespace": "ns",
                                           "annotations": annotations or {}},
        "spec": {"template": {"spec": spec}},
    })  # fmt: skip


def entry(rtype: ResourceType, name: str, *, tls: bool = False, rv: str = "1",
          annotations: dict[str, str] | None = None) -> ConfigEntry:  # fmt: skip
    meta = ObjectMeta(name=name, namespace="ns", resourceVersion=rv, annotations=annotations or {})
    return ConfigEntry(meta, rtype, "h", changed_at=CHANGED, tls=tls)


ROOMS: list[Room] = []


@pytest.fixture(autouse=True)
def _close_rooms() -> Any:
    yield
    while ROOMS:
        ROOMS.pop().spawned.close()  # Events a test did not send


def rig(options: Options | None = None) -> tuple[Room, Stores, FakeClient, Auditing]:
    room, stores, client = Room(), Stores(KEYS), FakeClient()
    ROOMS.append(room)
    cms = Store("configmaps", {("ns", "cfg"): entry(ResourceType.CONFIGMAP, "cfg")})
    secrets = Store(
        "secrets", {("ns", "nats-tls"): entry(ResourceType.SECRET, "nats-tls", tls=True)}
    )
    stores.configs += [cms, secrets]  # type: ignore[list-item]
    for w in (deployment("nats", secret="nats-tls"), deployment("plain", cm="cfg"),
              deployment("auto", cm="cfg", annotations={"reloader.stakater.com/auto": "true"}),
              deployment("fresh", cm="cfg")):  # fmt: skip
        stores.index.put(w)
    client.pods["ns"] = [pod("nats", CHANGED - 60), pod("plain", CHANGED - 60),
                         pod("auto", CHANGED - 60), pod("fresh", CHANGED + 60)]  # fmt: skip
    client.secrets[("ns", "nats-tls")] = tls_secret("1")
    room.fence.start_leading()
    room.clock.now = CHANGED + 100 - room.clock.wall() + room.clock.now
    audit = Auditing(client, options or Options(audit_interval=60.0), room.clock, stores,  # type: ignore[arg-type]
                     room.fence, room.reports.audit, asyncio.Event())  # fmt: skip
    return room, stores, client, audit


def series(room: Room) -> dict[tuple[str, str], float]:
    out = {}
    for metric in room.metrics.registry.collect():
        if metric.name == "kube_reloader_stale_workloads":
            for s in metric.samples:
                out[(s.labels["name"], s.labels["resource"])] = s.value
    return out


async def test_the_leaders_audit_sets_one_series_per_stale_pair_and_warns_of_the_certificate() -> (
    None
):
    room, _stores, client, audit = rig()
    report = await audit.once()
    await room.spawned.run()
    assert series(room) == {("nats", "Secret/nats-tls"): 1.0, ("plain", "ConfigMap/cfg"): 1.0}
    assert client.requests == ["LIST pods ns", "LIST secrets ns metadata.name=nats-tls"]
    [(key, reason, message)] = room.events.sent
    assert (key.name, reason) == ("nats", "StaleCertificate")
    assert "valid from 2026-01-01T00:00:00Z to 2026-04-01T00:00:00Z" in message
    assert [f.validity is not None for f in report.findings if f.tls] == [True]
    assert "c2VjcmV0" not in message


async def test_a_second_audit_reuses_the_certificate_and_writes_no_second_event() -> None:
    room, _stores, client, audit = rig()
    await audit.once()
    await audit.once()
    await room.spawned.run()
    assert client.requests.count("LIST secrets ns metadata.name=nats-tls") == 1, "cached"
    assert room.events.reasons() == ["StaleCertificate"]


async def test_a_rotation_is_warned_once_even_when_its_pod_counts_change() -> None:
    room, _stores, client, audit = rig()
    client.pods["ns"].append(pod("nats", CHANGED - 30))
    await audit.once()
    client.pods["ns"] = [p for p in client.pods["ns"] if p["status"]["containerStatuses"][0]
                         ["state"]["running"]["startedAt"] != stamp(CHANGED - 30)]  # fmt: skip
    await audit.once()
    await room.spawned.run()
    assert room.events.reasons() == ["StaleCertificate"]
    assert "2 of 2 pod(s)" in room.events.sent[0][2]


async def test_a_pair_no_longer_stale_loses_its_series() -> None:
    room, _stores, client, audit = rig()
    await audit.once()
    client.pods["ns"] = [
        p for p in client.pods["ns"] if not p["metadata"]["name"].startswith("plain")
    ]
    client.pods["ns"].append(pod("plain", CHANGED + 30))
    await audit.once()
    assert series(room) == {("nats", "Secret/nats-tls"): 1.0}


async def test_a_standby_reads_nothing_keeps_no_series_and_writes_no_event() -> None:
    room, _stores, client, audit = rig()
    room.fence.stop_leading()
    task = asyncio.ensure_future(audit.loop())
    audit.ready.set()
    for _ in range(3):
        await asyncio.sleep(0)
        room.clock.advance(60.0)
        await asyncio.sleep(0)
    task.cancel()
    assert series(room) == {}
    assert client.requests == []
    assert room.spawned.coros == []


async def test_a_replica_that_stops_leading_drops_its_series() -> None:
    room, _stores, _client, audit = rig()
    await audit.once()
    assert series(room)
    room.fence.stop_leading()
    task = asyncio.ensure_future(audit.loop())
    audit.ready.set()
    await asyncio.sleep(0)
    room.clock.advance(60.0)
    await asyncio.sleep(0)
    task.cancel()
    room.spawned.close()
    assert series(room) == {}


@pytest.mark.parametrize(
    ("pods", "stale"),
    [
        ([pod("plain", CHANGED - 60, phase="Succeeded")], False),
        ([pod("plain", CHANGED - 60, phase="Pending")], False),
        ([pod("plain", CHANGED - 60, deleting=True)], False),
        ([pod("plain", CHANGED - 60, kind="Job")], False),
        ([pod("plain", CHANGED + 1), pod("plain", CHANGED - 3)], True),
        ([pod("plain", CHANGED - 60, running=False)], False),
        ([pod("plain", CHANGED - 1)], False),
    ],
    ids=[
        "ended",
        "pending",
        "terminating",
        "not its pod",
        "one old pod of two",
        "crashlooping: no container running",
        "started within the clock margin",
    ],
)
async def test_only_the_workloads_live_pods_count(pods: list[dict[str, Any]], stale: bool) -> None:
    room, _stores, client, audit = rig()
    client.pods["ns"] = pods
    await audit.once()
    assert (("plain", "ConfigMap/cfg") in series(room)) is stale


async def test_a_refused_pod_list_is_reported_and_sets_no_series() -> None:
    room, _stores, client, audit = rig()
    client.refuse_pods.add("ns")
    report = await audit.once()
    assert series(room) == {}
    assert report.errors
    assert "cannot list pods" in report.errors[0]


async def test_without_a_candidate_no_pod_is_read() -> None:
    _room, stores, client, audit = rig()
    for key in list(stores.index.workloads):
        if key.name != "auto":
            stores.index.remove(key)
    await audit.once()
    assert client.requests == [], "the rules reload it: nothing to look at"


async def test_a_configmap_outside_the_label_selector_is_read_and_reported_excluded() -> None:
    options = Options(audit_interval=60.0, resource_label_selector="team=a")
    _room, stores, client, audit = rig(options)
    stores.index.put(deployment("other", cm="unlabelled",
                                annotations={"reloader.stakater.com/auto": "true"}))  # fmt: skip
    client.pods["ns"].append(pod("other", CHANGED - 60))
    client.secrets[("ns", "unlabelled")] = {"metadata": {
        "name": "unlabelled", "namespace": "ns", "creationTimestamp": stamp(CHANGED)}}  # fmt: skip
    report = await audit.once()
    found = {f.workload.name: f.reason.value for f in report.findings}
    assert found["other"] == "excluded"


def test_pod_owners_and_start_times_are_read_from_the_projection() -> None:
    p = msgspec.convert(pod("web", CHANGED), podstarts.PodStart)
    assert podstarts.owner_of(p) == ("Deployment", "web")
    assert podstarts.start_of(p) == CHANGED
    sts = msgspec.convert(pod("db", CHANGED, kind="StatefulSet"), podstarts.PodStart)
    assert podstarts.owner_of(sts) == ("StatefulSet", "db")
    no_containers = msgspec.convert({"status": {"phase": "Running", "startTime": stamp(5.0)}},
                                    podstarts.PodStart)  # fmt: skip
    assert podstarts.start_of(no_containers) == 5.0
    bad = msgspec.convert({"status": {"phase": "Running", "startTime": "yesterday"}},
                          podstarts.PodStart)  # fmt: skip
    assert podstarts.start_of(bad) is None


async def test_the_audit_reads_configs_only_by_list_which_the_charts_rbac_grants() -> None:
    options = Options(audit_interval=60.0, resource_label_selector="team=a")
    _room, stores, client, audit = rig(options)
    stores.index.put(deployment("other", cm="unlabelled",
                                annotations={"reloader.stakater.com/auto": "true"}))  # fmt: skip
    client.pods["ns"].append(pod("other", CHANGED - 60))
    client.secrets[("ns", "unlabelled")] = {"metadata": {
        "name": "unlabelled", "namespace": "ns", "creationTimestamp": stamp(CHANGED)}}  # fmt: skip
    report = await audit.once()
    assert {f.workload.name for f in report.findings} >= {"nats", "other"}
    verbs = {r.split()[0] for r in client.requests}
    assert verbs == {"LIST"}, client.requests
    assert "LIST configmaps ns metadata.name=unlabelled" in client.requests
    assert "LIST secrets ns metadata.name=nats-tls" in client.requests


async def test_a_refused_read_of_an_unwatched_config_is_reported_not_silent() -> None:
    options = Options(audit_interval=60.0, resource_label_selector="team=a")
    _room, stores, client, audit = rig(options)
    stores.index.put(deployment("other", cm="unlabelled"))
    client.refuse.add("configmaps")
    report = await audit.once()
    assert any("ConfigMap ns/unlabelled: cannot list" in e for e in report.errors), report.errors


class SteppingClock:
    """A monotonic clock that moves only when the test says work was done."""

    def __init__(self) -> None:
        self.now = 0.0

    def wall(self) -> float:
        return CHANGED

    def monotonic(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Callable[[], None]) -> Any:
        raise AssertionError("no timer expected")


async def test_a_large_round_lets_other_tasks_run_at_least_every_slice_of_work() -> None:
    workloads = [deployment(f"w{i}", cm="cfg") for i in range(1_000)]
    clock = SteppingClock()
    since_yield = longest = planned = 0

    async def lookup(rtype: ResourceType, ns: str, name: str) -> Consumed | None:
        nonlocal planned, since_yield, longest
        planned += 1
        clock.now += 0.002  # each reference costs 2 ms of work
        since_yield += 1
        longest = max(longest, since_yield)
        return Consumed(rtype, name, None)  # never suspends, as the controller's cache does

    async def other() -> None:
        nonlocal since_yield
        while True:
            since_yield = 0
            await asyncio.sleep(0)

    task = asyncio.ensure_future(other())
    await asyncio.sleep(0)
    client = FakeClient()
    await auditing.audit(client, workloads, lookup, planning.Config(), 0,  # type: ignore[arg-type]
                         auditing.Certificates(client), clock=clock)  # type: ignore[arg-type]  # fmt: skip
    task.cancel()
    assert planned == 1_000
    assert longest * 0.002 <= 0.02, f"{longest} references (2 ms each) without a yield"


async def test_each_unwatched_resource_is_read_once_a_round_and_a_namespace_at_most_its_cap(
) -> None:  # fmt: skip
    options = Options(audit_interval=60.0, resource_label_selector="team=a")
    _room, stores, client, audit = rig(options)
    many = [f"opt{i}" for i in range(auditing.READS_PER_NAMESPACE * 3)]
    for n in range(3):  # three workloads, each referencing every one of them
        container = {"name": "app", "envFrom": [{"configMapRef": {"name": m, "optional": True}}
                                                for m in many]}  # fmt: skip
        stores.index.put(planning.workload_from_manifest({
            "kind": "Deployment", "metadata": {"name": f"wide{n}", "namespace": "ns"},
            "spec": {"template": {"spec": {"containers": [container]}}},
        }))  # fmt: skip
    report = await audit.once()
    reads = [r for r in client.requests if r.startswith("LIST configmaps ns metadata.name=")]
    assert len(reads) == auditing.READS_PER_NAMESPACE, "once each, up to the namespace's cap"
    assert len(set(reads)) == len(reads)
    assert any("not read this round" in e for e in report.errors), report.errors
    client.requests.clear()
    await audit.once()
    again = [r for r in client.requests if r.startswith("LIST configmaps ns metadata.name=")]
    assert len(again) == auditing.READS_PER_NAMESPACE, "a new round reads again, as capped"
