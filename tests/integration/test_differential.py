"""The differential tier: the same cases against the real Stakater Reloader and against
kube-reloader in the matching mode (`--compat=v1` beside v1.4.21, `--compat=v2` beside v2), each
alone on a namespace of its own, and the same outcome asserted case by case.

A case is a Deployment on a ConfigMap (or Secret) of its own (referenced through `envFrom`
unless the case says not), with annotations on the workload's metadata, its pod template and
the ConfigMap. In each round every ConfigMap and Secret changes (or is deleted), the two
sentinels' last (an `auto` Deployment on a ConfigMap, one on a Secret): a controller has seen
every change once both sentinels have rolled in its namespace (each watch delivers in order),
and has written all it will once it also shows nothing queued or in a worker
(`tests.sidebyside`). Then, per case, the peer's outcome is asserted: how many times the
Deployment was written (its generation; a pause is a write of its own in v1, part of the
reload's in v2), whether it is paused, the reload env vars of each container, the pod
template's annotations (`last-reloaded-from` without its namespace and time) and its reload
Events (API group, type, reason, note, action, reporting controller, count). Last, the two
processes' /metrics: every series of Reloader's families (and, against v2,
controller-runtime's and the leader election's) with the same labels, bucket edges included
(values differ with how each queues and coalesces; the series left out say why).

Run for five configurations: default flags, `--auto-reload-all`, the annotations strategy,
and `--reload-on-delete` with either strategy (a round of updates, then one of deletes). The
outcomes are printed as a table (`pytest -s`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import secrets
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client, PatchType
from tests.harness import update_cm
from tests.peers import PeerProcess, binary, start_peer
from tests.sidebyside import (
    KubeReloader,
    kube_reloader,
    peer_outstanding,
    peer_started,
    until_done,
)
from tests.waiting import eventually, exists

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]

AUTO = "reloader.stakater.com/auto"
CM_AUTO = "configmap.reloader.stakater.com/auto"
CM_RELOAD = "configmap.reloader.stakater.com/reload"
CM_EXCLUDE = "configmaps.exclude.reloader.stakater.com/reload"
SECRET_AUTO = "secret.reloader.stakater.com/auto"
SECRET_RELOAD = "secret.reloader.stakater.com/reload"
SECRET_EXCLUDE = "secrets.exclude.reloader.stakater.com/reload"
PAUSE_PERIOD = "deployment.reloader.stakater.com/pause-period"
PAUSED_AT = "deployment.reloader.stakater.com/paused-at"
SEARCH = "reloader.stakater.com/search"
MATCH = "reloader.stakater.com/match"
IGNORE = "reloader.stakater.com/ignore"
LAST_RELOADED_FROM = "reloader.stakater.com/last-reloaded-from"
#: the fields of last-reloaded-from that differ between two namespaces and two moments
UNCOMPARED = ("namespace", "observedAt", "reloadedAt")
#: the reasons of the Events a reload or a failed one records (v1: ReloadFail; v2: ReloadFailed)
RELOAD_REASONS = ("Reloaded", "ReloadFail", "ReloadFailed")
#: template annotations kube-reloader writes and the peers do not, on purpose (docs/migration.md):
#: the per-config record of the annotations strategy, without which a workload on two configs
#: cannot tell after a restart which content it already runs (last-reloaded-from names one)
KEPT_ON_PURPOSE = ("kube-reloader.io/reloaded-hashes",)
COMPAT = {"reloader-v1": "v1", "reloader-v2": "v2"}
#: the metric families whose series (every label set, bucket edges included; values aside:
#: counts follow how each process queues and coalesces) must be the peer's
COMPARED_METRICS = ("reloader_", "controller_runtime_", "workqueue_", "leader_election_")
#: series kube-reloader has and the peer has not, on purpose (docs/monitoring.md): v2
#: declares its work-queue histogram and never observes it; here it is the write queue's
EXTRA_SERIES = {"reloader-v2": ("reloader_workqueue_latency_seconds",), "reloader-v1": ()}
#: series left out of the comparison, with the reason docs/monitoring.md gives: v1 counts
#: `strategy_not_updated` for every `auto` workload of the namespace that does not use the
#: changed resource (it lists them all and asks each); kube-reloader looks only at the
#: workloads a change can reach, so it counts that reason only for one of those
UNCOMPARED_SERIES = {
    "reloader-v1": ('reloader_skipped_total{reason="strategy_not_updated"}',),
    "reloader-v2": (),
}
#: controller-runtime families Reloader v2 shows that kube-reloader has not (no webhook server)
NOT_REPRODUCED = ("controller_runtime_webhook_panics_total",
                  "controller_runtime_conversion_webhook_panics_total")  # fmt: skip
#: each configuration's flags (the peer's and kube-reloader's) and its rounds of changes
CONFIGS: dict[str, tuple[list[str], tuple[str, ...]]] = {
    "default": ([], ("update",)),
    "auto-reload-all": (["--auto-reload-all"], ("update",)),
    "annotations": (["--reload-strategy=annotations"], ("update",)),
    "delete-env-vars": (["--reload-on-delete=true"], ("update", "delete")),
    "delete-annotations": (
        ["--reload-on-delete=true", "--reload-strategy=annotations"],
        ("update", "delete"),
    ),
}


@dataclass(frozen=True)
class Case:
    """`{cm}` in an annotation value is the name of the case's ConfigMap (or Secret)."""

    id: str
    wa: Mapping[str, str] = field(default_factory=dict)
    pa: Mapping[str, str] = field(default_factory=dict)
    #: the annotations of the ConfigMap (or Secret)
    cm: Mapping[str, str] = field(default_factory=dict)
    referenced: bool = True
    secret: bool = False

    @property
    def resource(self) -> resources.Resource:
        return resources.SECRETS if self.secret else resources.CONFIGMAPS


CASES = [
    Case("auto-true", wa={AUTO: "true"}),
    Case("auto-True-in-title-case", wa={AUTO: "True"}),
    Case("auto-1-on-the-pod-template", pa={AUTO: "1"}),
    Case("typed-auto-t", wa={CM_AUTO: "t"}),
    Case("typed-auto-true-on-the-pod-template", pa={CM_AUTO: "true"}),
    Case("auto-false", wa={AUTO: "false"}),
    Case("auto-no", wa={AUTO: "no"}),
    Case("auto-False-in-title-case", wa={AUTO: "False"}),
    Case("typed-auto-false", wa={CM_AUTO: "false"}),
    Case("no-annotation"),
    Case("named", wa={CM_RELOAD: "{cm}"}),
    Case("named-regex-unreferenced", wa={CM_RELOAD: "nothing, {cm}"}, referenced=False),
    Case("named-on-the-pod-template", pa={CM_RELOAD: "{cm}"}),
    Case("search-and-match", wa={SEARCH: "true"}, cm={MATCH: "true"}),
    Case("search-without-match", wa={SEARCH: "true"}),
    Case("ignored-configmap", wa={AUTO: "true"}, cm={IGNORE: "true"}),
    Case("exclude-and-auto-on-the-workload", wa={AUTO: "true", CM_EXCLUDE: "{cm}"}),
    Case("exclude-on-the-workload-auto-on-the-template", wa={CM_EXCLUDE: "{cm}"}, pa={AUTO: "true"}),
    Case("exclude-and-auto-on-the-template", pa={AUTO: "true", CM_EXCLUDE: "x, {cm}"}),
    Case("exclude-on-the-template-auto-on-the-workload", wa={AUTO: "true"}, pa={CM_EXCLUDE: "{cm}"}),
    Case("pause-period", wa={AUTO: "true", PAUSE_PERIOD: "1h"}),  # no resume within the test
    Case("secret-auto", wa={AUTO: "true"}, secret=True),
    Case("secret-typed-auto-True", wa={SECRET_AUTO: "True"}, secret=True),
    Case("secret-typed-auto-of-configmaps", wa={CM_AUTO: "true"}, secret=True),
    Case("secret-named", wa={SECRET_RELOAD: "{cm}"}, secret=True),
    Case("secret-exclude-on-the-template", pa={AUTO: "true", SECRET_EXCLUDE: "{cm}"}, secret=True),
]  # fmt: skip
#: changed last in each round, one per watch: once both rolled, every change was seen
SENTINELS = (
    Case("sentinel", wa={AUTO: "true"}),
    Case("sentinel-secret", wa={AUTO: "true"}, secret=True),
)


@dataclass(frozen=True)
class BatchCase:
    """A Job or CronJob (`auto` on its metadata) on a ConfigMap of its own, through `envFrom`.
    `kept_out`: kube-reloader does otherwise on purpose (docs/migration.md): this reason."""

    id: str
    kind: str
    wa: Mapping[str, str] = field(default_factory=lambda: {AUTO: "true"})
    suspend: bool = False
    #: a Job a CronJob made (its controller owner reference)
    owned: bool = False
    kept_out: str = ""
    secret: bool = False
    cm: Mapping[str, str] = field(default_factory=dict)

    @property
    def resource(self) -> resources.Resource:
        return resources.CONFIGMAPS


BATCH = [
    BatchCase("job-auto", "Job"),
    BatchCase("job-no-annotation", "Job", wa={}),
    BatchCase("cronjob-auto", "CronJob"),
    BatchCase("cronjob-suspended", "CronJob", suspend=True,
              kept_out="a suspended CronJob gets no Job: the user suspended it"),
    BatchCase("job-of-a-cronjob", "Job", owned=True,
              kept_out="a Job a CronJob made is not re-run: the CronJob makes its own"),
]  # fmt: skip
ALL: list[Case | BatchCase] = [*CASES, *SENTINELS, *BATCH]
assert len({c.id.lower() for c in ALL}) == len(ALL)


def cm_name(case: Case | BatchCase) -> str:
    return f"c-{case.id.lower()}"


def deployment_name(case: Case) -> str:
    return f"d-{case.id.lower()}"


def _fill(values: Mapping[str, str], case: Case | BatchCase) -> dict[str, str]:
    return {k: v.replace("{cm}", cm_name(case)) for k, v in values.items()}


def deployment(case: Case) -> dict[str, Any]:
    name = deployment_name(case)
    app: dict[str, Any] = {"name": "app", "image": "busybox:1.36"}
    if case.referenced:
        ref = "secretRef" if case.secret else "configMapRef"
        app["envFrom"] = [{ref: {"name": cm_name(case)}}]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "annotations": _fill(case.wa, case)},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}, "annotations": _fill(case.pa, case)},
                "spec": {"containers": [app, {"name": "side", "image": "busybox:1.36"}]},
            },
        },
    }


def batch_name(case: BatchCase) -> str:
    return f"{'j' if case.kind == 'Job' else 'cj'}-{case.id.lower()}"


def pod_spec(case: BatchCase) -> dict[str, Any]:
    app = {
        "name": "app",
        "image": "busybox:1.36",
        "envFrom": [{"configMapRef": {"name": cm_name(case)}}],
    }
    return {"restartPolicy": "Never", "containers": [app]}


async def create_batch(api: Client, namespace: str, case: BatchCase) -> None:
    meta: dict[str, Any] = {"name": batch_name(case), "annotations": dict(case.wa)}
    if case.kind == "CronJob":
        await api.create(resources.CRONJOBS, {
            "apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta,
            "spec": {"schedule": "0 0 1 1 *", "suspend": case.suspend,
                     "jobTemplate": {"spec": {"template": {"spec": pod_spec(case)}}}},
        }, namespace=namespace)  # fmt: skip
        return
    if case.owned:  # its owner: a CronJob that reloads nothing itself
        owner = await api.create(resources.CRONJOBS, {
            "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": f"owner-{case.id}"},
            "spec": {"schedule": "0 0 1 1 *", "suspend": True,
                     "jobTemplate": {"spec": {"template": {"spec": pod_spec(case)}}}},
        }, namespace=namespace)  # fmt: skip
        meta["ownerReferences"] = [{
            "apiVersion": "batch/v1", "kind": "CronJob", "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True,
        }]  # fmt: skip
    await api.create(resources.JOBS, {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
        "spec": {"backoffLimit": 0, "template": {"spec": pod_spec(case)}},
    }, namespace=namespace)  # fmt: skip


async def create_cases(api: Client, namespace: str) -> None:
    """Every case's ConfigMap, then its workload (a template newer than its config: no
    controller has anything to catch up at its start)."""
    for case in ALL:
        await api.create(case.resource, {
            "apiVersion": "v1", "kind": case.resource.kind,
            "metadata": {"name": cm_name(case), "annotations": _fill(case.cm, case)},
            "stringData" if case.secret else "data": {"a": "1"},
        }, namespace=namespace)  # fmt: skip
    await asyncio.gather(*(
        api.create(resources.DEPLOYMENTS, deployment(c), namespace=namespace)
        for c in [*CASES, *SENTINELS]
    ))  # fmt: skip
    for batch in BATCH:
        await create_batch(api, namespace, batch)


def env_of(template: Mapping[str, Any]) -> list[tuple[str, Any]]:
    return sorted(
        (e["name"], e.get("value"))
        for c in template["spec"]["containers"] for e in c.get("env") or []
        if e["name"].startswith("STAKATER_")
    )  # fmt: skip


async def job_uids(api: Client, namespace: str) -> dict[str, str]:
    listed = await api.list(resources.JOBS, namespace=namespace)
    return {j["metadata"]["name"]: j["metadata"]["uid"] for j in listed.items}


async def batch_outcomes(api: Client, namespace: str, before: Mapping[str, str]) -> dict[str, Any]:
    """Per batch case: a Job re-created (a new uid) and its variables; a CronJob's Jobs made
    since (their variables)."""
    jobs = list((await api.list(resources.JOBS, namespace=namespace)).items)
    out: dict[str, Any] = {}
    for case in BATCH:
        name = batch_name(case)
        if case.kind == "CronJob":
            made = [j for j in jobs if any(o.get("name") == name for o in
                                           j["metadata"].get("ownerReferences") or [])]  # fmt: skip
            out[name] = {"jobs": sorted(str(env_of(j["spec"]["template"])) for j in made)}
            continue
        job = next((j for j in jobs if j["metadata"]["name"] == name), None)
        out[name] = {
            "recreated": job is None or job["metadata"]["uid"] != before.get(name),
            "env": None if job is None else env_of(job["spec"]["template"]),
        }
    return out


async def generations(api: Client, namespace: str) -> dict[str, int]:
    listed = await api.list(resources.DEPLOYMENTS, namespace=namespace)
    return {d["metadata"]["name"]: int(d["metadata"]["generation"]) for d in listed.items}


def outcome(d: Mapping[str, Any], before: int) -> dict[str, Any]:
    """What a controller did to Deployment `d` (generation `before` ahead of the change)."""
    template = d["spec"]["template"]
    env = {
        c["name"]: sorted(
            (e["name"], e.get("value")) for e in c.get("env") or [] if e["name"].startswith("STAKATER_")
        )
        for c in template["spec"]["containers"]
    }  # fmt: skip
    annotations = dict(template["metadata"].get("annotations") or {})
    raw = annotations.pop(LAST_RELOADED_FROM, None)
    mark = None
    if raw is not None:
        mark = {k: v for k, v in json.loads(raw).items() if k not in UNCOMPARED}
    for key in KEPT_ON_PURPOSE:
        annotations.pop(key, None)
    return {
        "rolled": int(d["metadata"]["generation"]) - before,
        "env": env,
        "mark": mark,
        "annotations": annotations,
        "paused": bool(d["spec"].get("paused")),
        "paused-at": PAUSED_AT in (d["metadata"].get("annotations") or {}),
    }


@contextlib.asynccontextmanager
async def namespaces(api: Client, count: int) -> AsyncIterator[list[str]]:
    """`count` fresh namespaces, each yielded once kube-root-ca.crt is in it; deleted after."""
    names = [f"t-diff-{secrets.token_hex(3)}" for _ in range(count)]
    for name in names:
        await api.create(resources.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                                "metadata": {"name": name}})  # fmt: skip
    for name in names:

        async def published(name: str = name) -> bool:
            return await exists(api, resources.CONFIGMAPS, "kube-root-ca.crt", name)

        await eventually(published, timeout=60, what=f"kube-root-ca.crt in {name}")
    try:
        yield names
    finally:
        for name in names:
            with contextlib.suppress(errors.NotFound):
                await api.delete(resources.NAMESPACES, name)


def reload_events(items: list[dict[str, Any]], namespace: str) -> dict[str, list[tuple[Any, ...]]]:
    """Each Deployment's reload Events (as `events.k8s.io/v1` lists every Event): type,
    reason, note (the namespace's name replaced), action, reporting controller, whether it
    was recorded through `events.k8s.io` (it has an eventTime) or core/v1, how many
    occurrences it counts (a repeat is counted on the first: core/v1's count, a series') and
    whether it names the object's resourceVersion."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    for e in items:
        regarding = e.get("regarding") or {}
        if regarding.get("kind") != "Deployment" or e.get("reason") not in RELOAD_REASONS:
            continue
        note = str(e.get("note") or "").replace(namespace, "<namespace>")
        count = (e.get("series") or {}).get("count") or e.get("deprecatedCount") or 1
        seen = (e.get("type"), e["reason"], note, e.get("action") or "",
                e.get("reportingController") or "", bool(e.get("eventTime")), count,
                bool(regarding.get("resourceVersion")))  # fmt: skip
        out.setdefault(regarding["name"], []).append(seen)
    return {name: sorted(found) for name, found in out.items()}


async def events_of(api: Client, namespace: str, reloads: int) -> dict[str, list[tuple[Any, ...]]]:
    """The reload Events in `namespace`, once they count `reloads` occurrences (the controllers
    write them after the reload, from a queue of their own)."""
    found: dict[str, list[tuple[Any, ...]]] = {}

    async def written() -> bool:
        nonlocal found
        listed = await api.list(resources.EVENTS_V1, namespace=namespace)
        found = reload_events(list(listed.items), namespace)
        return sum(int(seen[6]) for events in found.values() for seen in events) >= reloads

    await eventually(written, timeout=30, what=f"{reloads} reload Events in {namespace}")
    return found


async def rolled_since(api: Client, namespace: str, name: str, generation: int) -> bool:
    d = await api.get(resources.DEPLOYMENTS, name, namespace=namespace)
    return int(d["metadata"]["generation"]) > generation


async def outcomes(api: Client, namespace: str, before: Mapping[str, int]) -> dict[str, Any]:
    listed = await api.list(resources.DEPLOYMENTS, namespace=namespace)
    return {d["metadata"]["name"]: outcome(d, before[d["metadata"]["name"]]) for d in listed.items}


def table(peer: str, config: str, theirs: Mapping[str, Any], ours: Mapping[str, Any]) -> str:
    rows = [f"differential {peer} {config}: case | {peer} rolled | kube-reloader rolled"]
    for case in CASES:
        name = deployment_name(case)
        same = "" if theirs[name] == ours[name] else "  <- differs"
        rows.append(f"  {case.id} | {theirs[name]['rolled']} | {ours[name]['rolled']}{same}")
    return "\n".join(rows)


async def change_all(api: Client, namespace: str, round_: str) -> None:
    """Every case's ConfigMap (or Secret) changed, or deleted, the sentinels' last."""
    changed: list[Case | BatchCase] = [*CASES, *BATCH, *SENTINELS]
    for case in changed:
        if round_ == "delete":
            await api.delete(case.resource, cm_name(case), namespace=namespace)
        elif case.secret:
            await api.patch(case.resource, cm_name(case), {"stringData": {"a": "2"}},
                            namespace=namespace, patch_type=PatchType.MERGE)  # fmt: skip
        else:
            await update_cm(api, namespace, cm_name(case), {"a": "2"})


async def run_rounds(
    api: Client,
    them: PeerProcess,
    ours: KubeReloader,
    spaces: tuple[str, str],
    rounds: tuple[str, ...],
) -> None:
    """Each round's changes in both namespaces, then until both controllers are done with it
    (both sentinels rolled, nothing left queued or in a worker)."""
    for round_ in rounds:
        start = {ns: await generations(api, ns) for ns in spaces}
        for ns in spaces:
            await change_all(api, ns, round_)
        for ns in spaces:
            for sentinel in SENTINELS:
                name, was = deployment_name(sentinel), start[ns][deployment_name(sentinel)]

                async def seen(ns: str = ns, name: str = name, was: int = was) -> bool:
                    return await rolled_since(api, ns, name, was)

                await eventually(seen, timeout=30, what=f"{name} rolled in {ns}")
        await until_done(lambda: peer_outstanding(them), f"{them.name} done with {round_}")
        await until_done(ours.outstanding, f"kube-reloader done with {round_}")


LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def series(text: str, peer: str, *, ours: bool) -> set[str]:
    """Every compared series of an exposition: its name and labels (in name order; a
    bucket's edge as a float: Go writes 1, Python 1.0), without its value."""
    found = set()
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(COMPARED_METRICS):
            continue
        family, _, rest = line.rsplit(" ", 1)[0].partition("{")
        if family.startswith(NOT_REPRODUCED) or (ours and family.startswith(EXTRA_SERIES[peer])):
            continue
        labels = sorted((k, repr(float(v)) if k == "le" else v) for k, v in LABEL.findall(rest))
        found.add(family + "{" + ",".join(f'{k}="{v}"' for k, v in labels) + "}")
    return found - set(UNCOMPARED_SERIES[peer])


def check_metrics(peer: str, config: str, theirs: str, mine: str) -> None:
    """The same series as the peer's, label for label."""
    want, got = series(theirs, peer, ours=False), series(mine, peer, ours=True)
    print(f"differential {peer} {config}: {len(want)} series compared", flush=True)
    assert got == want, json.dumps(
        {"peer only": sorted(want - got), "kube-reloader only": sorted(got - want)}, indent=1
    )


def check_batch(peer: str, config: str, theirs: Mapping[str, Any], mine: Mapping[str, Any]) -> None:
    """The Jobs and CronJobs: the peer's outcome, or, for a case kept out on purpose,
    kube-reloader's own (nothing re-run, no Job made), the peer's printed beside it."""
    for case in BATCH:
        name = batch_name(case)
        print(f"differential {peer} {config}: {case.id}: {theirs[name]} | {mine[name]}", flush=True)
        if case.kept_out:
            nothing: dict[str, Any] = (
                {"jobs": []} if case.kind == "CronJob" else {"recreated": False}
            )
            assert {k: mine[name][k] for k in nothing} == nothing, (case.id, case.kept_out)
        else:
            assert mine[name] == theirs[name], case.id


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("peer", ["reloader-v2", "reloader-v1"])
async def test_kube_reloader_decides_and_writes_as_the_real_peer_case_by_case(
    client: Client, kubeconfig_path: Path, tmp_path: Path, peer: str, config: str
) -> None:
    binary(peer)  # skip before creating anything when the peer cannot be built
    api, (flags, rounds) = client, CONFIGS[config]
    async with namespaces(api, 2) as (theirs_ns, ours_ns):
        await asyncio.gather(create_cases(api, theirs_ns), create_cases(api, ours_ns))
        with (
            start_peer(peer, kubeconfig_path, theirs_ns, tmp_path, flags=flags) as them,
            kube_reloader("kube-reloader", kubeconfig_path, ours_ns, tmp_path,
                          [*flags, f"--compat={COMPAT[peer]}"]) as ours,
        ):  # fmt: skip
            await asyncio.gather(them.wait_ready(api, timeout=90), ours.wait_leading(timeout=60))
            await until_done(lambda: peer_started(them, api, theirs_ns), f"{peer} started")
            await until_done(ours.started, "kube-reloader started")
            before = {ns: await generations(api, ns) for ns in (theirs_ns, ours_ns)}
            uids = {ns: await job_uids(api, ns) for ns in (theirs_ns, ours_ns)}
            await run_rounds(api, them, ours, (theirs_ns, ours_ns), rounds)
            theirs = await outcomes(api, theirs_ns, before[theirs_ns])
            mine = await outcomes(api, ours_ns, before[ours_ns])
            for ns, found in ((theirs_ns, theirs), (ours_ns, mine)):
                # at most one reload a round (a v1 pause is a write of its own)
                reloads = sum(min(o["rolled"], len(rounds)) for o in found.values())
                events = await events_of(api, ns, reloads)
                for name, o in found.items():
                    o["events"] = events.get(name, [])
            batch = [await batch_outcomes(api, ns, uids[ns]) for ns in (theirs_ns, ours_ns)]
            exposed = (await them.metrics(), await ours.metrics())
    print(table(peer, config, theirs, mine), flush=True)
    differs = {
        case.id: {"peer": theirs[deployment_name(case)], "kube-reloader": mine[deployment_name(case)]}
        for case in [*CASES, *SENTINELS]
        if theirs[deployment_name(case)] != mine[deployment_name(case)]
    }  # fmt: skip
    assert not differs, json.dumps(differs, indent=1)
    assert all(theirs[deployment_name(c)]["rolled"] == len(rounds) for c in SENTINELS)
    check_batch(peer, config, *batch)
    check_metrics(peer, config, *exposed)
