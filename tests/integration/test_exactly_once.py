"""Exactly-once reloads under bursts, flapping configs, restarts and API faults."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kube_reloader.core import hashing
from kube_reloader.kube import resources
from kube_reloader.kube.client import Client
from tests import builders
from tests.harness import (
    app,
    auto_deployment_on_configmap,
    env_of,
    find_event,
    generation,
    running,
    update_cm,
)
from tests.waiting import eventually, next_second

pytestmark = pytest.mark.cluster


async def test_five_configmaps_changed_within_100ms_give_exactly_one_rollout(
    client: Client, namespace: str
) -> None:
    names = [f"c{i}" for i in range(5)]
    for n in names:
        await client.create(resources.CONFIGMAPS, builders.configmap(n, namespace, {"v": "0"}))
    await client.create(
        resources.DEPLOYMENTS,
        builders.auto_deployment("w", namespace, configmaps=tuple(names), replicas=0),
    )
    before = await generation(client, namespace, "w")
    async with running(client, namespace) as ctl:
        await asyncio.gather(*(update_cm(client, namespace, n, {"v": "1"}) for n in names))
        want = {
            f"STAKATER_{n.upper()}_CONFIGMAP": hashing.configmap_hash({"v": "1"}) for n in names
        }

        async def all_set() -> bool:
            env = await env_of(client, "Deployment", namespace, "w")
            return all(env.get(k) == v for k, v in want.items())

        await eventually(all_set, what="all five hashes")
        await asyncio.sleep(0.5)
        assert ctl.stats.patches == 1
    assert await generation(client, namespace, "w") == before + 1


async def test_a_config_flapping_50_times_in_10s_rolls_a_bounded_number_of_times_and_ends_current(
    client: Client, namespace: str
) -> None:
    await auto_deployment_on_configmap(
        client, namespace, configmap="cert", data={"v": "0"}, replicas=0
    )
    before = await generation(client, namespace, "w")
    async with running(client, namespace, min_interval=3.0) as ctl:
        started = time.monotonic()
        for i in range(1, 51):
            await update_cm(client, namespace, "cert", {"v": str(i)})
            await asyncio.sleep(0.2)
        flapped = time.monotonic() - started  # 10 s, more on a loaded machine
        want = hashing.configmap_hash({"v": "50"})

        async def final() -> bool:
            return (await env_of(client, "Deployment", namespace, "w")).get(
                "STAKATER_CERT_CONFIGMAP"
            ) == want

        await eventually(final, what="the last content applied", timeout=20)
        rollouts = await generation(client, namespace, "w") - before
        # at most one reload per 3 s while it flaps (4 in 10 s), plus the final one
        assert 1 <= rollouts <= int(flapped // 3.0) + 2, (rollouts, round(flapped, 1))
        deferred = ctl.metrics.exposition().decode()
        assert 'kube_reloader_deferred_total{reason="min_interval"}' in deferred

        async def event() -> dict[str, Any] | None:
            return await find_event(client, namespace, lambda e: e["reason"] == "ReloadDeferred")

        e = await eventually(event, what="a ReloadDeferred event")
        assert "at most one reload every 3s per workload" in e["message"]


def _counter(exposition: str, series: str) -> float:
    for line in exposition.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return 0.0


async def test_a_fan_out_past_the_burst_is_written_once_each_at_the_rate_held_back_a_few_times(
    client: Client, namespace: str
) -> None:
    """Each workload the rate holds back is told when its turn comes: deferred a few times
    (the next token, then its turn), not once for every token (n²/2 for a fan-out of n)."""
    n, rate, burst = 40, 10.0, 4.0
    await client.create(resources.CONFIGMAPS, builders.configmap("shared", namespace, {"v": "0"}))
    await asyncio.gather(
        *(client.create(resources.DEPLOYMENTS, _deployment(f"w{i}", namespace, "shared")) for i in range(n))
    )  # fmt: skip
    async with running(
        client, namespace, reload_rate=rate, reload_burst=burst, min_interval=0.0
    ) as ctl:
        started = time.monotonic()
        await update_cm(client, namespace, "shared", {"v": "1"})

        async def all_done() -> bool:
            return ctl.stats.reloads >= n

        await eventually(all_done, what="40 reloads", timeout=60)
        took = time.monotonic() - started
        assert ctl.stats.patches == n, "each written once"
        series = 'kube_reloader_deferred_total{reason="rate_limit"}'
        deferred = _counter(ctl.metrics.exposition().decode(), series)
        assert n - burst <= deferred <= 3 * n, deferred
        assert took >= (n - burst) / rate - 1.0, "never faster than the rate"


# ------------------------------------------------------------------ restarts


def _deployment(
    name: str, namespace: str, cm: str, env: list[dict[str, str]] | None = None, **meta: Any
) -> dict[str, Any]:
    d = builders.auto_deployment(name, namespace, configmaps=(cm,), replicas=0, **meta)
    if env:
        d["spec"]["template"]["spec"]["containers"][0]["env"] = env
    return d


async def test_starting_with_100_up_to_date_workloads_writes_nothing(
    client: Client, namespace: str
) -> None:
    sem = asyncio.Semaphore(16)

    async def make(i: int) -> None:
        async with sem:
            await client.create(
                resources.CONFIGMAPS, builders.configmap(f"c{i}", namespace, {"v": str(i)})
            )
            env = None
            if i % 2 == 0:  # half were reloaded before and carry the current hash
                env = [
                    {
                        "name": f"STAKATER_C{i}_CONFIGMAP",
                        "value": hashing.configmap_hash({"v": str(i)}),
                    }
                ]
            await client.create(
                resources.DEPLOYMENTS, _deployment(f"w{i}", namespace, f"c{i}", env)
            )

    await asyncio.gather(*(make(i) for i in range(100)))
    async with running(client, namespace) as ctl:
        await asyncio.sleep(1.5)
        assert ctl.stats.patches == 0
        assert ctl.stats.reloads == 0
        assert len(ctl.index) == 100


@pytest.mark.parametrize("strategy", ["env-vars", "annotations"])
async def test_changes_made_while_the_controller_was_down_are_applied_once(
    client: Client, namespace: str, strategy: str
) -> None:
    from kube_reloader.core.strategies import Strategy

    strat = Strategy(strategy)
    await client.create(resources.CONFIGMAPS, builders.configmap("seen", namespace, {"v": "1"}))
    await client.create(resources.CONFIGMAPS, builders.configmap("quiet", namespace, {"v": "1"}))
    await client.create(resources.DEPLOYMENTS, _deployment("reloaded-before", namespace, "seen"))
    await client.create(resources.DEPLOYMENTS, _deployment("never-reloaded", namespace, "quiet"))
    await client.create(
        resources.CONFIGMAPS, builders.configmap("untouched", namespace, {"v": "1"})
    )
    await client.create(resources.DEPLOYMENTS, _deployment("current", namespace, "untouched"))
    async with running(client, namespace, strategy=strat):
        await update_cm(client, namespace, "seen", {"v": "2"})

        async def first() -> bool:
            return await generation(client, namespace, "reloaded-before") == 2

        await eventually(first, what="the first reload")
    # nobody is watching now
    await next_second()  # managedFields times have one-second resolution
    await update_cm(client, namespace, "seen", {"v": "3"})
    await update_cm(client, namespace, "quiet", {"v": "3"})
    gens = {
        n: await generation(client, namespace, n)
        for n in ("reloaded-before", "never-reloaded", "current")
    }
    async with running(client, namespace, strategy=strat) as ctl:

        async def caught_up() -> bool:
            return all([
                await generation(client, namespace, "reloaded-before") == gens["reloaded-before"] + 1,
                await generation(client, namespace, "never-reloaded") == gens["never-reloaded"] + 1,
            ])  # fmt: skip

        await eventually(caught_up, what="both missed changes applied")
        await asyncio.sleep(1.0)
        assert ctl.stats.reloads == 2
    after = {n: await generation(client, namespace, n) for n in gens}
    assert after == {"reloaded-before": gens["reloaded-before"] + 1, "never-reloaded": gens["never-reloaded"] + 1,
                     "current": gens["current"]}  # fmt: skip


async def test_reconcile_on_start_false_keeps_reloaders_behaviour(
    client: Client, namespace: str
) -> None:
    await client.create(resources.CONFIGMAPS, builders.configmap("c", namespace, {"v": "1"}))
    await client.create(resources.DEPLOYMENTS, _deployment("w", namespace, "c"))
    await next_second()  # managedFields times have one-second resolution
    await update_cm(client, namespace, "c", {"v": "2"})  # before any controller runs
    async with running(client, namespace, reconcile_on_start=False) as ctl:
        await asyncio.sleep(1.0)
        assert ctl.stats.patches == 0
    async with running(client, namespace) as ctl:

        async def applied() -> bool:
            return "STAKATER_C_CONFIGMAP" in await env_of(client, "Deployment", namespace, "w")

        await eventually(applied, what="the level-based start to apply it")


# ------------------------------------------------------------------ SIGKILL, API server and etcd restarts


async def test_sigkill_during_a_burst_then_restart_applies_every_latest_hash_without_extra_rollouts(
    client: Client, namespace: str, kubeconfig_path: Any, tmp_path: Any
) -> None:
    import os
    import signal
    import subprocess
    import sys

    n_workloads, rounds = 50, 4
    sem = asyncio.Semaphore(16)

    async def make(i: int) -> None:
        async with sem:
            await client.create(
                resources.CONFIGMAPS, builders.configmap(f"c{i}", namespace, {"v": "0"})
            )
            await client.create(resources.DEPLOYMENTS, _deployment(f"w{i}", namespace, f"c{i}"))

    await asyncio.gather(*(make(i) for i in range(n_workloads)))
    before = {i: await generation(client, namespace, f"w{i}") for i in range(n_workloads)}
    env = {**os.environ, "KUBECONFIG": str(kubeconfig_path)}
    args = [sys.executable, "-m", "kube_reloader", f"--namespaces={namespace}", "--metrics-addr=127.0.0.1:0",
            "--log-format=json", "--reload-min-interval=0"]  # fmt: skip

    def start(name: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            args, env=env, stdout=(tmp_path / name).open("w"), stderr=subprocess.STDOUT
        )

    proc = start("first.log")
    try:

        async def synced() -> bool:
            return '"caches synced"' in (tmp_path / "first.log").read_text()

        await eventually(synced, what="the first controller's caches synced", timeout=30)
        updates = 0
        for r in range(1, rounds + 1):
            for i in range(n_workloads):
                await update_cm(client, namespace, f"c{i}", {"v": str(r)})
                updates += 1
                if updates == 100:
                    proc.send_signal(signal.SIGKILL)
                    proc.wait()
        assert updates == 200
        proc = start("second.log")
        want = hashing.configmap_hash({"v": str(rounds)})

        async def converged() -> bool:
            for i in range(n_workloads):
                if (await env_of(client, "Deployment", namespace, f"w{i}")).get(
                    f"STAKATER_C{i}_CONFIGMAP"
                ) != want:
                    return False
            return True

        await eventually(converged, what="every workload on the latest hash", timeout=60)
        await asyncio.sleep(1.5)
        rolled = {
            i: await generation(client, namespace, f"w{i}") - before[i] for i in range(n_workloads)
        }
        assert all(1 <= r <= rounds for r in rolled.values()), rolled
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


@pytest.mark.parametrize("component", ["kube-apiserver", "etcd"])
async def test_no_reload_is_lost_when_the_api_server_or_etcd_restarts_during_updates(
    private_cluster: Any, private_client: Client, component: str
) -> None:
    from kube_reloader.kube import errors

    client = private_client
    ns = f"restart-{component}"
    await _private_ns(client, ns, 5)

    async def update(i: int, value: str) -> None:  # the API may be down: keep trying
        await _update_retrying(client, ns, f"c{i}", {"v": value})

    async with running(client, ns) as ctl:
        await update(0, "1")
        restart = asyncio.create_task(asyncio.to_thread(private_cluster.restart, component))
        for i in range(5):
            await update(i, "2")
            await asyncio.sleep(0.3)
        await restart
        for i in range(5):
            await update(i, "3")
        want = hashing.configmap_hash({"v": "3"})

        async def converged() -> bool:
            try:
                for i in range(5):
                    if (await env_of(client, "Deployment", ns, f"w{i}")).get(
                        f"STAKATER_C{i}_CONFIGMAP"
                    ) != want:
                        return False
            except errors.Transient:
                return False
            return True

        await eventually(
            converged, what=f"all changes applied across a {component} restart", timeout=90
        )
        assert ctl.stats.failures == 0


# ------------------------------------------------------------------ secrets never leak


async def test_a_planted_secret_value_appears_in_no_log_event_metric_or_error(
    client: Client, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    import base64
    import logging

    from kube_reloader.logs import JsonFormatter, TextFormatter

    planted = "PLANTED-s3cr3t-" + namespace
    caplog.set_level(logging.DEBUG)
    await client.create(
        resources.SECRETS, builders.secret("db", namespace, {"password": "old-" + planted})
    )
    await client.create(
        resources.DEPLOYMENTS,
        builders.auto_deployment("w", namespace, secrets=("db",), replicas=0),
    )
    # a workload with broken annotations, so warnings and Events are produced too
    await client.create(resources.DEPLOYMENTS, builders.deployment("bad", namespace, replicas=0, template=app(env_from_secrets=("db",), labels={"app": "bad"}),
                        annotations={"secret.reloader.stakater.com/reload": "[", "reloader.stakater.com/auto": "yes"}))  # fmt: skip
    async with running(client, namespace, reload_on_delete=True, min_interval=0) as ctl:
        await client.patch(
            resources.SECRETS,
            "db",
            {"stringData": {"password": planted}},
            namespace=namespace,
            patch_type=__import__(
                "kube_reloader.kube.client", fromlist=["PatchType"]
            ).PatchType.MERGE,
        )

        async def reloaded() -> bool:
            return "STAKATER_DB_SECRET" in await env_of(client, "Deployment", namespace, "w")

        await eventually(reloaded, what="the Secret reload")
        await client.delete(resources.SECRETS, "db", namespace=namespace)

        async def removed() -> bool:
            return "STAKATER_DB_SECRET" not in await env_of(client, "Deployment", namespace, "w")

        await eventually(removed, what="the delete reload")
        exposition = ctl.metrics.exposition().decode()
    rendered = [JsonFormatter().format(r) + TextFormatter().format(r) for r in caplog.records]
    events = [
        e["message"] for e in (await client.list(resources.EVENTS, namespace=namespace)).items
    ]
    haystack = "\n".join([*rendered, *events, exposition])
    assert len(rendered) > 5
    for needle in (planted, base64.b64encode(planted.encode()).decode(), "old-" + planted):
        assert needle not in haystack


# ------------------------------------------------------------------ rollout tracking


@pytest.mark.rollout
# serial: kube-controller-manager says a progress deadline passed only when its Deployment
# workers get to it; under the parallel tier's hundreds of Deployments that can take longer
# than the 30 s grace, and the rollout is then called stuck (as designed), not failed
@pytest.mark.serial
async def test_a_reload_rollout_is_followed_to_completion_or_failure(
    client: Client, namespace: str
) -> None:
    await client.create(resources.CONFIGMAPS, builders.configmap("c", namespace, {"v": "0"}))
    ok = builders.auto_deployment("ok", namespace, configmaps=("c",), replicas=2)
    stuck = builders.auto_deployment("stuck", namespace, configmaps=("c",), replicas=1)
    # new pods can never be scheduled
    stuck["spec"]["template"]["spec"]["nodeSelector"] = {"no-such-node": "true"}
    stuck["spec"]["progressDeadlineSeconds"] = 3
    stuck["spec"]["strategy"] = {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
    }
    await client.create(resources.DEPLOYMENTS, ok)
    await client.create(resources.DEPLOYMENTS, stuck)
    async with running(client, namespace) as ctl:
        await update_cm(client, namespace, "c", {"v": "1"})

        seen: dict[str, dict[str, Any]] = {}

        async def events() -> dict[str, dict[str, Any]] | None:
            nonlocal seen
            seen = {e["reason"]: e for e in (await client.list(resources.EVENTS, namespace=namespace)).items
                    if e["reason"].startswith("ReloadRollout") or e["reason"] == "ReloadRolledOut"}  # fmt: skip
            return seen if "ReloadRolloutFailed" in seen else None

        try:
            got = await eventually(events, what="the failed-rollout event", timeout=60)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; reload Events seen: {sorted(seen)}") from None

        async def completed() -> str | None:
            text = ctl.metrics.exposition().decode()
            ok = (
                'kube_reloader_rollouts_total{result="complete",workload_kind="Deployment"} 1.0'
                in text
            )
            return text if ok else None

        text = await eventually(completed, what="the completed rollout to be counted")
    assert "ReloadRolledOut" not in got, "success is a metric and a log line, not an Event"
    assert got["ReloadRolloutFailed"]["involvedObject"]["name"] == "stuck"
    assert got["ReloadRolloutFailed"]["type"] == "Warning"
    assert 'kube_reloader_rollouts_total{result="complete",workload_kind="Deployment"} 1.0' in text
    assert 'kube_reloader_rollouts_total{result="failed",workload_kind="Deployment"} 1.0' in text


async def _private_ns(client: Client, name: str, workloads: int) -> None:
    import contextlib

    from kube_reloader.kube import errors

    with contextlib.suppress(errors.AlreadyExists):
        await client.create(
            resources.NAMESPACES,
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        )
    for i in range(workloads):
        with contextlib.suppress(errors.AlreadyExists):
            await client.create(resources.CONFIGMAPS, builders.configmap(f"c{i}", name, {"v": "0"}))
            await client.create(resources.DEPLOYMENTS, _deployment(f"w{i}", name, f"c{i}"))


async def _update_retrying(client: Client, ns: str, name: str, data: dict[str, str]) -> None:
    """Update a ConfigMap the way a user's tooling would while the API server restarts."""
    from kube_reloader.kube import errors

    for _ in range(300):
        try:
            await update_cm(client, ns, name, data)
            return
        except (errors.Transient, errors.ConnectionFailed):
            await asyncio.sleep(0.2)
    raise AssertionError("the API server never came back")


async def test_an_expired_watch_after_etcd_compaction_loses_and_repeats_nothing(
    private_cluster: Any, private_client: Client
) -> None:
    client, ns = private_client, "compaction"
    await _private_ns(client, ns, 3)
    async with running(client, ns) as ctl:
        await update_cm(client, ns, "c0", {"v": "1"})
        private_cluster.stop_component("kube-apiserver")
        private_cluster.start_component("kube-apiserver")
        # changes while the controller's watches are broken, then history compacted away
        for i in range(3):
            await _update_retrying(client, ns, f"c{i}", {"v": "2"})
        private_cluster.compact_etcd()
        await asyncio.to_thread(private_cluster.restart, "kube-apiserver")
        want = hashing.configmap_hash({"v": "2"})

        async def converged() -> bool:
            for i in range(3):
                if (await env_of(client, "Deployment", ns, f"w{i}")).get(
                    f"STAKATER_C{i}_CONFIGMAP"
                ) != want:
                    return False
            return True

        await eventually(converged, what="every change applied after the expired watch", timeout=60)
        await asyncio.sleep(1.0)
        gens = [await generation(client, ns, f"w{i}") for i in range(3)]
        assert gens[1:] == [2, 2], "one rollout each for w1 and w2"
        assert gens[0] in (2, 3), "w0: its two changes may or may not have been merged"
        assert sum(r.relists for r in ctl.all_reflectors()) > 0, "the expired watches were relisted"


async def test_an_api_server_down_for_a_minute_is_waited_out(
    private_cluster: Any, private_client: Client
) -> None:
    client, ns = private_client, "outage"
    await _private_ns(client, ns, 1)
    async with running(client, ns) as ctl:
        private_cluster.stop_component("kube-apiserver")
        await asyncio.sleep(60)
        private_cluster.start_component("kube-apiserver")
        await _update_retrying(client, ns, "c0", {"v": "after-outage"})
        want = hashing.configmap_hash({"v": "after-outage"})

        async def applied() -> bool:
            return (await env_of(client, "Deployment", ns, "w0")).get(
                "STAKATER_C0_CONFIGMAP"
            ) == want

        await eventually(applied, what="a reload after a one-minute outage", timeout=60)
        assert ctl.stats.failures == 0


# ------------------------------------------------------------------ bad input


async def test_bad_input_never_stops_other_reloads(client: Client, namespace: str) -> None:
    await client.create(resources.CONFIGMAPS, builders.configmap("c", namespace, {"v": "0"}))
    bad = {
        # RE2 rejects both entries (Go would too): Warning, entries skipped, nothing matches
        "bad-regex": {"configmap.reloader.stakater.com/reload": "(?=c)c,[c"},
        "spaces": {"reloader.stakater.com/auto": " true"},
        "casing": {"reloader.stakater.com/auto": "TRUE "},
        "missing-config": {"reloader.stakater.com/auto": "true"},
        "unknown-strategy": {
            "reloader.stakater.com/auto": "true",
            "reloader.stakater.com/rollout-strategy": "sideways",
        },
    }
    for name, anns in bad.items():
        refs = ("does-not-exist",) if name == "missing-config" else ("c",)
        await client.create(
            resources.DEPLOYMENTS,
            builders.deployment(
                name,
                namespace,
                replicas=0,
                template=app(env_from_configmaps=refs, labels={"app": name}),
                annotations=anns,
            ),
        )
    await client.create(resources.DEPLOYMENTS, _deployment("good", namespace, "c"))
    async with running(client, namespace) as ctl:
        await update_cm(client, namespace, "c", {"v": "a" * 60 + "!"})

        async def good() -> bool:
            return "STAKATER_C_CONFIGMAP" in await env_of(client, "Deployment", namespace, "good")

        await eventually(good, what="the good workload to reload")

        async def warnings() -> set[str] | None:
            names = {e["involvedObject"]["name"] for e in (await client.list(resources.EVENTS, namespace=namespace)).items
                     if e["type"] == "Warning"}  # fmt: skip
            return names if {"bad-regex", "spaces"} <= names else None

        names = await eventually(warnings, what="Warning events on the bad workloads")
        assert ctl.stats.failures == 0
    assert "casing" in names, "'TRUE ' (trailing space) is not a Go boolean: it is warned about"
    for name in ("bad-regex", "spaces", "missing-config"):
        assert await env_of(client, "Deployment", namespace, name) == {}
    assert "STAKATER_C_CONFIGMAP" in await env_of(
        client, "Deployment", namespace, "unknown-strategy"
    )


@pytest.mark.serial  # 5,000 Deployments and their ReplicaSets load the whole cluster for a minute
async def test_five_thousand_workloads_on_one_configmap_all_reload(
    client: Client, namespace: str
) -> None:
    await client.create(resources.CONFIGMAPS, builders.configmap("shared", namespace, {"v": "0"}))
    sem = asyncio.Semaphore(48)

    async def make(i: int) -> None:
        async with sem:
            await client.create(resources.DEPLOYMENTS, _deployment(f"w{i}", namespace, "shared"))

    await asyncio.gather(*(make(i) for i in range(5000)))
    async with running(client, namespace, reload_rate=0, workers=8) as ctl:
        await update_cm(client, namespace, "shared", {"v": "1"})

        async def all_done() -> bool:
            return ctl.stats.reloads >= 5000

        await eventually(all_done, what="5,000 reloads", timeout=240, interval=1.0)
        assert ctl.stats.failures == 0
        assert ctl.stats.patches == 5000
    listed = await client.list(resources.DEPLOYMENTS, namespace=namespace)
    want = hashing.configmap_hash({"v": "1"})
    carried = [
        {e["name"]: e.get("value") for e in d["spec"]["template"]["spec"]["containers"][0].get("env") or []}.get("STAKATER_SHARED_CONFIGMAP")
        for d in listed.items
    ]  # fmt: skip
    assert carried.count(want) == 5000
