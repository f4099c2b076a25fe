"""CSI on the real node: the Secrets Store CSI driver (built from the Go module proxy,
`devcluster/csi.py`) mounts a SecretProviderClass volume into real pods and its rotation
writes each pod's SecretProviderClassPodStatus, as in production; then the differential
tier's CSI cases run against it: the same cases against the real Stakater Reloader and
kube-reloader in the matching mode (`--enable-csi-integration` on both), each on a namespace
of its own, and the same outcome asserted case by case.

Every case's Deployment mounts one SecretProviderClass (`spc`, served by the driver's
`kube-reloader-files` provider) unless the case says not, with annotations on the workload
and its pod template. The provider's file changes once; the driver's rotation writes the new
version into every pod's status (one update per pod); a controller has seen the change once
every status shows it and the named case has rolled, and has written all it will once it
shows nothing queued or in a worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kube_reloader.devcluster import csi
from kube_reloader.devcluster.cluster import DevCluster
from kube_reloader.devcluster.nodeconfig import PAUSE_IMAGE
from kube_reloader.kube import resources
from kube_reloader.kube.client import Client
from tests.integration.test_differential import (
    AUTO,
    COMPAT,
    check_metrics,
    namespaces,
    outcome,
    reload_events,
    series,
)
from tests.node.nodeharness import on_real_node, ready
from tests.peers import binary, start_peer
from tests.sidebyside import kube_reloader, peer_outstanding, peer_started, until_done
from tests.waiting import eventually

pytestmark = [pytest.mark.timeout(1200)]

SPC_AUTO = "secretproviderclass.reloader.stakater.com/auto"
SPC_RELOAD = "secretproviderclass.reloader.stakater.com/reload"
SPC_EXCLUDE = "secretproviderclasses.exclude.reloader.stakater.com/reload"
SPC = "spc"
FILE = "token"
MOUNT = "/mnt/secrets-store"


@pytest.fixture(scope="module")
def csi_driver(node_cluster: DevCluster, kubeconfig_path: Path) -> Iterator[csi.CSIDriverOnNode]:
    with csi.running(
        node_cluster.state_dir, kubeconfig_path, report=lambda line: print(line, flush=True)
    ) as driver:
        yield driver


def version(data: bytes) -> str:
    """The version kube-reloader-files gives a file: its SHA-256's first 16 hex digits."""
    return hashlib.sha256(data).hexdigest()[:16]


def provider_class(name: str, objects: str) -> dict[str, Any]:
    return {
        "apiVersion": "secrets-store.csi.x-k8s.io/v1", "kind": "SecretProviderClass",
        "metadata": {"name": name},
        "spec": {"provider": csi.PROVIDER, "parameters": {"objects": objects}},
    }  # fmt: skip


def deployment(name: str, *, spc: str | None = SPC, wa: Mapping[str, str] = {},
               pa: Mapping[str, str] = {}) -> dict[str, Any]:  # fmt: skip
    """One pod of the pause image on the real node, mounting SecretProviderClass `spc`."""
    container: dict[str, Any] = {"name": "app", "image": PAUSE_IMAGE, "imagePullPolicy": "Never"}
    spec: dict[str, Any] = {"containers": [container], "terminationGracePeriodSeconds": 1}
    if spc is not None:
        container["volumeMounts"] = [{"name": "secrets", "mountPath": MOUNT, "readOnly": True}]
        spec["volumes"] = [{"name": "secrets", "csi": {
            "driver": csi.DRIVER, "readOnly": True,
            "volumeAttributes": {"secretProviderClass": spc},
        }}]  # fmt: skip
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "annotations": dict(wa)},
        "spec": {
            "replicas": 1, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}, "annotations": dict(pa)},
                         "spec": on_real_node(spec)},
        },
    }  # fmt: skip


async def statuses(api: Client, namespace: str) -> list[dict[str, Any]]:
    """The SecretProviderClassPodStatus objects of `namespace`'s live pods."""
    live = {p["metadata"]["name"] for p in (await api.list(resources.PODS, namespace=namespace)).items
            if not p["metadata"].get("deletionTimestamp")}  # fmt: skip
    listed = await api.list(resources.SECRETPROVIDERCLASSPODSTATUSES, namespace=namespace)
    return [s for s in listed.items if (s.get("status") or {}).get("podName") in live]


def versions(status: Mapping[str, Any]) -> dict[str, str]:
    return {o["id"]: o["version"] for o in (status.get("status") or {}).get("objects") or []}


async def all_mounted(api: Client, namespace: str, pods: int, data: bytes) -> bool:
    """Whether every live pod of `namespace` is ready and `pods` of them have a status that
    shows `data`'s version."""
    listed = await api.list(resources.PODS, namespace=namespace)
    live = [p for p in listed.items if not p["metadata"].get("deletionTimestamp")]
    shown = [s for s in await statuses(api, namespace) if versions(s) == {FILE: version(data)}]
    return bool(live) and all(ready(p) for p in live) and len(shown) >= pods


async def test_the_driver_mounts_the_providers_file_and_its_rotation_writes_the_new_version(
    csi_driver: csi.CSIDriverOnNode, client: Client
) -> None:
    async with namespaces(client, 1) as (ns,):
        csi_driver.put(ns, FILE, b"first")
        await client.create(
            resources.SECRETPROVIDERCLASSES, provider_class(SPC, FILE), namespace=ns
        )
        await client.create(resources.DEPLOYMENTS, deployment("app"), namespace=ns)
        await eventually(lambda: all_mounted(client, ns, 1, b"first"), timeout=90,
                         what="the pod running with its volume mounted")  # fmt: skip
        (status,) = await statuses(client, ns)
        target = Path(status["status"]["targetPath"])
        assert (target / FILE).read_bytes() == b"first", "the tmpfs the container mounts"
        assert status["status"]["mounted"] is True
        assert status["status"]["secretProviderClassName"] == SPC
        assert status["metadata"]["labels"]["internal.secrets-store.csi.k8s.io/node-name"]

        csi_driver.put(ns, FILE, b"second")
        await eventually(lambda: all_mounted(client, ns, 1, b"second"), timeout=30,
                         what="the rotation to write the new version")  # fmt: skip
        assert (target / FILE).read_bytes() == b"second"


@dataclass(frozen=True)
class Case:
    """A Deployment mounting `spc` (None: none), `{spc}` in annotation values standing for it.
    `kept_out`: kube-reloader does otherwise on purpose (docs/migration.md): this reason."""

    id: str
    wa: Mapping[str, str] = field(default_factory=dict)
    pa: Mapping[str, str] = field(default_factory=dict)
    spc: str | None = SPC
    kept_out: Mapping[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"d-{self.id.lower()}"


NOT_MOUNTED = "a SecretProviderClass change reloads the auto workloads that mount it"
CASES = [
    Case("named", wa={SPC_RELOAD: "{spc}"}),
    Case("named-on-the-pod-template", pa={SPC_RELOAD: "{spc}"}),
    Case("named-another", wa={SPC_RELOAD: "other"}),
    Case("typed-auto-true", wa={SPC_AUTO: "true"}),
    Case("typed-auto-True-in-title-case", wa={SPC_AUTO: "True"}),
    Case("auto-true", wa={AUTO: "true"}),
    Case("auto-on-the-pod-template", pa={AUTO: "true"}),
    Case("auto-false", wa={AUTO: "false"}),
    Case("auto-excluded", wa={AUTO: "true", SPC_EXCLUDE: "{spc}"}),
    Case("no-annotation"),
    Case("auto-not-mounting", wa={AUTO: "true"}, spc=None,
         kept_out={"reloader-v2": NOT_MOUNTED}),
]  # fmt: skip
assert len({c.name for c in CASES}) == len(CASES)

#: peers that may roll a workload more than once for one rotation, and why; for those the
#: case is compared as rolled once (kube-reloader must have rolled it exactly once, with one
#: Event) and the peer's extra rolls are printed. Reloader v2 gets one reconcile per pod's
#: status (the driver writes each); each lists the workloads from its informer cache and
#: patches them without a resourceVersion precondition, and a reload writes last-reloaded-from
#: with a new `reloadedAt`. A reconcile that lists before the cache has the previous one's
#: patch sees the old template, reloads it again: a second rollout, a second Event
#: (workload/lister.go:60, controller/retry.go:96-121, reload/service.go:164-201,
#: workload/base.go:159). Reloader v1 lists from the API server and stays exact.
PEER_REPEATS = {"reloader-v2": "lists workloads from a cache that may lack its last patch"}


def filled(case: Case, values: Mapping[str, str]) -> dict[str, str]:
    return {k: v.replace("{spc}", SPC) for k, v in values.items()}


async def create_cases(api: Client, namespace: str, driver: csi.CSIDriverOnNode) -> None:
    driver.put(namespace, FILE, b"1")
    await api.create(
        resources.SECRETPROVIDERCLASSES, provider_class(SPC, FILE), namespace=namespace
    )
    await asyncio.gather(*(
        api.create(resources.DEPLOYMENTS, deployment(c.name, spc=c.spc, wa=filled(c, c.wa),
                                                     pa=filled(c, c.pa)), namespace=namespace)
        for c in CASES
    ))  # fmt: skip


#: each configuration's flags, the peer's and kube-reloader's
CONFIGS = {
    "default": [],
    "annotations": ["--reload-strategy=annotations"],
    "auto-reload-all": ["--auto-reload-all"],
}


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("peer", ["reloader-v2", "reloader-v1"])
async def test_kube_reloader_reloads_on_a_csi_rotation_as_the_real_peer_case_by_case(
    csi_driver: csi.CSIDriverOnNode, client: Client, kubeconfig_path: Path, tmp_path: Path,
    peer: str, config: str,
) -> None:  # fmt: skip
    binary(peer)  # skip before creating anything when the peer cannot be built
    api, flags = client, ["--enable-csi-integration", *CONFIGS[config]]
    mounting = sum(c.spc is not None for c in CASES)
    async with namespaces(api, 2) as spaces:
        theirs_ns, ours_ns = spaces
        for ns in spaces:
            await create_cases(api, ns, csi_driver)
        for ns in spaces:
            await eventually(lambda ns=ns: all_mounted(api, ns, mounting, b"1"), timeout=180,
                             what=f"every case's pod running, its volume mounted, in {ns}")  # fmt: skip
        before = {ns: await generations(api, ns) for ns in spaces}  # a roll at start counts
        with (
            start_peer(peer, kubeconfig_path, theirs_ns, tmp_path, flags=flags) as them,
            kube_reloader("kube-reloader", kubeconfig_path, ours_ns, tmp_path,
                          [*flags, f"--compat={COMPAT[peer]}"]) as ours,
        ):  # fmt: skip
            await asyncio.gather(them.wait_ready(api, timeout=90), ours.wait_leading(timeout=60))
            await until_done(lambda: peer_started(them, api, theirs_ns), f"{peer} started")
            await until_done(ours.started, "kube-reloader started")
            await rotate(api, csi_driver, spaces, before, mounting)
            await until_done(lambda: peer_outstanding(them), f"{peer} done with the rotation")
            await until_done(ours.outstanding, "kube-reloader done with the rotation")
            found = {}
            for ns in spaces:
                listed = await api.list(resources.DEPLOYMENTS, namespace=ns)
                found[ns] = {d["metadata"]["name"]: outcome(d, before[ns][d["metadata"]["name"]])
                             for d in listed.items}  # fmt: skip
                events = await events_per_roll(
                    api, ns, {n for n, o in found[ns].items() if o["rolled"]}
                )
                for name, o in found[ns].items():
                    o["events"] = events.get(name, [])

            async def same_series() -> tuple[str, str] | None:  # the last events counted
                exposed = (await them.metrics(), await ours.metrics())
                want, got = (
                    series(exposed[0], peer, ours=False),
                    series(exposed[1], peer, ours=True),
                )
                return exposed if want == got else None

            with contextlib.suppress(AssertionError):  # the check below says what differs
                await eventually(same_series, timeout=10, what="the same metric series")
            exposed = (await them.metrics(), await ours.metrics())
    compare(peer, config, found[theirs_ns], found[ours_ns])
    check_metrics(peer, f"CSI {config}", *exposed)


async def generations(api: Client, namespace: str) -> dict[str, int]:
    listed = await api.list(resources.DEPLOYMENTS, namespace=namespace)
    return {d["metadata"]["name"]: int(d["metadata"]["generation"]) for d in listed.items}


async def events_per_roll(api: Client, namespace: str, rolled: set[str]) -> dict[str, list[Any]]:
    """The reload Events in `namespace`, once each Deployment of `rolled` has one (the
    controllers write them after the reload, from a queue of their own; a peer's repeat may
    still be on its way, and `once` counts it out)."""
    found: dict[str, list[Any]] = {}

    async def written() -> bool:
        nonlocal found
        listed = await api.list(resources.EVENTS_V1, namespace=namespace)
        found = reload_events(list(listed.items), namespace)
        return rolled <= set(found)

    await eventually(written, timeout=30, what=f"reload Events of {sorted(rolled)} in {namespace}")
    return found


def once(o: Mapping[str, Any]) -> dict[str, Any]:
    """A peer's outcome as if it had rolled once: each of its Events' kinds once, counted once
    (a repeat is a second Event or a count of 2, see `reload_events`)."""
    return {**o, "rolled": 1, "events": sorted({(*e[:6], 1, *e[7:]) for e in o["events"]})}


def compare(peer: str, config: str, theirs: Mapping[str, Any], mine: Mapping[str, Any]) -> None:
    """Case by case, kube-reloader's outcome is the peer's (`PEER_REPEATS` aside)."""
    print(f"differential CSI {peer} {config}: case | {peer} rolled | kube-reloader rolled")
    for case in CASES:
        print(f"  {case.id} | {theirs[case.name]['rolled']} | {mine[case.name]['rolled']}")
    print(f"  {CASES[0].id}: {json.dumps(mine[CASES[0].name])}", flush=True)
    seen = dict(theirs)
    for case in CASES:
        if peer in PEER_REPEATS and theirs[case.name]["rolled"] > 1:
            print(f"  {case.id}: {peer} rolled {theirs[case.name]['rolled']} times for one "
                  f"rotation ({PEER_REPEATS[peer]})", flush=True)  # fmt: skip
            seen[case.name] = once(theirs[case.name])
    differs = {
        case.id: {"peer": theirs[case.name], "kube-reloader": mine[case.name]}
        for case in CASES if peer not in case.kept_out and seen[case.name] != mine[case.name]
    }  # fmt: skip
    assert not differs, json.dumps(differs, indent=1)
    assert (seen[CASES[0].name]["rolled"], mine[CASES[0].name]["rolled"]) == (1, 1)
    for case in CASES:
        if peer in case.kept_out:  # the peer does what the docs say, kube-reloader does not
            assert (seen[case.name]["rolled"], mine[case.name]["rolled"]) == (1, 0), (
                case.id, case.kept_out[peer],
            )  # fmt: skip


async def rotated(api: Client, namespace: str, before: Mapping[str, int]) -> bool:
    """Whether every status of the namespace's pods of the time before shows the new version
    (the driver wrote every update) and the named case rolled."""
    named = await api.get(resources.DEPLOYMENTS, CASES[0].name, namespace=namespace)
    if int(named["metadata"]["generation"]) <= before[CASES[0].name]:
        return False
    listed = await api.list(resources.SECRETPROVIDERCLASSPODSTATUSES, namespace=namespace)
    return all(versions(s) == {FILE: version(b"2")} for s in listed.items)


async def settled(api: Client, namespace: str, mounting: int) -> bool:
    """Whether the namespace's statuses are those of its live pods only, one per mounting
    pod (the garbage collector deleted those of the pods a rollout replaced)."""
    listed = await api.list(resources.SECRETPROVIDERCLASSPODSTATUSES, namespace=namespace)
    return len(listed.items) == mounting and len(await statuses(api, namespace)) == mounting


async def rotate(
    api: Client, driver: csi.CSIDriverOnNode, spaces: list[str], before: Mapping[str, Mapping[str, int]],
    mounting: int,
) -> None:  # fmt: skip
    """The provider's file changed in every namespace; then until the driver's rotation shows
    in every status, the named case rolled, and no status of a replaced pod is left (no watch
    event to come)."""
    for ns in spaces:
        driver.put(ns, FILE, b"2")
    for ns in spaces:
        await eventually(lambda ns=ns: rotated(api, ns, before[ns]), timeout=60,
                         what=f"the rotation shown and the named case rolled in {ns}")  # fmt: skip
    for ns in spaces:
        await eventually(lambda ns=ns: settled(api, ns, mounting), timeout=60,
                         what=f"the statuses of {ns}'s replaced pods deleted")  # fmt: skip
