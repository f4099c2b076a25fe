"""Fleet-safe rotations on the real control plane: kube-controller-manager rolls the
Deployments and reports their progress deadlines; kwok makes pods Ready, except pods that run
the bad Secret's value (the dev cluster's readiness gate, devcluster/stages.py)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kube_reloader.core import fairness, hashing, strategies
from kube_reloader.core.objects import ResourceType
from kube_reloader.kube import resources
from kube_reloader.kube.client import Client
from tests import builders
from tests.harness import find_event, running
from tests.waiting import eventually, rolled_out, template_env

# serial: 200 Deployments and bounds on how many a bad Secret breaks: the whole cluster's pace
pytestmark = [
    pytest.mark.cluster,
    pytest.mark.rollout,
    pytest.mark.timeout(420),
    pytest.mark.serial,
]
ENV = strategies.env_var_name("db", ResourceType.SECRET)


def content(value: str) -> str:
    return hashing.secret_hash({"password": value.encode()})


def app(name: str, namespace: str, bad: str, *, annotations: dict[str, str] | None = None
        ) -> dict[str, Any]:  # fmt: skip
    d = builders.auto_deployment(name, namespace, secrets=("db",),
                                 annotations={**builders.AUTO, **(annotations or {})})  # fmt: skip
    d["spec"]["progressDeadlineSeconds"] = 5
    return builders.never_ready_if_env(d, bad)


def carried(d: dict[str, Any]) -> str | None:
    return template_env(d, ENV)


def rolling(d: dict[str, Any]) -> bool:
    """Its rollout neither complete nor failed (as the controller counts a slot)."""
    s = d.get("status", {})
    failed = any(c.get("reason") == "ProgressDeadlineExceeded" and c.get("status") == "False"
                 for c in s.get("conditions", []))  # fmt: skip
    return not failed and not rolled_out(d)


async def deployments(client: Client, namespace: str) -> list[dict[str, Any]]:
    return (await client.list(resources.DEPLOYMENTS, namespace=namespace)).items


async def all_available(client: Client, namespace: str, n: int) -> None:
    async def probe() -> bool:
        items = await deployments(client, namespace)
        return len(items) == n and all(not rolling(d) for d in items)

    await eventually(probe, what=f"{n} Deployments available", timeout=240)


@contextlib.asynccontextmanager
async def sampled(client: Client, namespace: str, bad: str) -> AsyncIterator[dict[str, Any]]:
    """Every 100 ms: how many Deployments run the bad content's rollout right now (patched
    with it, neither complete nor failed), and every one ever patched with it."""
    seen: dict[str, Any] = {"max_in_flight": 0, "patched": set()}

    async def loop() -> None:
        while True:
            items = await deployments(client, namespace)
            bad_ones = [d for d in items if carried(d) == bad]
            seen["patched"].update(d["metadata"]["name"] for d in bad_ones)
            in_flight = sum(1 for d in bad_ones if rolling(d))
            seen["max_in_flight"] = max(seen["max_in_flight"], in_flight)
            await asyncio.sleep(0.1)

    task = asyncio.create_task(loop())
    try:
        yield seen
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_bad_secret_shared_by_200_deployments_breaks_at_most_13_and_the_fix_heals_all(
    client: Client, namespace: str
) -> None:
    good, bad, fixed = "good", "bad", "fixed"
    await client.create(resources.SECRETS,
                        builders.secret("db", namespace, string_data={"password": good}))  # fmt: skip
    for i in range(200):
        await client.create(resources.DEPLOYMENTS, app(f"w{i:03}", namespace, content(bad)))
    await all_available(client, namespace, 200)
    async with running(client, namespace, max_concurrent_rollouts=10, halt_after_failures=3,
                       min_interval=0.0, reload_rate=0.0) as ctl:  # fmt: skip
        async with sampled(client, namespace, content(bad)) as seen:
            await client.patch(resources.SECRETS, "db", {"stringData": {"password": bad}},
                               namespace=namespace)  # fmt: skip

            async def halted() -> dict[str, Any] | None:
                return await find_event(client, namespace, lambda e: e.get("reason") ==
                                        "ReloadHalted" and e["involvedObject"]["kind"] ==
                                        "Secret")  # fmt: skip

            event = await eventually(halted, what="ReloadHalted on the Secret", timeout=120)
            await asyncio.sleep(3)  # the breaker holds: nothing more is patched
        assert "3 workload rollouts failed" in event["message"]
        assert seen["max_in_flight"] <= 10
        # a namespace alone holds its share of the 10 slots (core.fairness: 8, the last
        # quarter is the reserve); the breaker opens at the third failure, so a slot freed by
        # the first two may admit up to two more (and one more at worst while the failures are
        # being seen) — or none, when the three failures are seen in one pass
        alone = fairness.share(10, 0)
        assert alone == 8
        assert alone <= len(seen["patched"]) <= 13, seen["patched"]
        assert ctl.metrics.registry.get_sample_value(
            "kube_reloader_halted", {"namespace": namespace, "resource": "Secret/db"}) == 1  # fmt: skip
        before = {d["metadata"]["name"]: d["metadata"]["generation"]
                  for d in await deployments(client, namespace)}  # fmt: skip
        await client.patch(resources.SECRETS, "db", {"stringData": {"password": fixed}},
                           namespace=namespace)  # fmt: skip

        async def healed() -> list[dict[str, Any]] | None:
            items = await deployments(client, namespace)
            ok = all(carried(d) == content(fixed) and not rolling(d) for d in items)
            return items if ok and len(items) == 200 else None

        started = time.monotonic()
        items = await eventually(healed, what="all 200 on the fixed content", timeout=300)
        converged = time.monotonic() - started
        assert ctl.metrics.registry.get_sample_value(
            "kube_reloader_halted", {"namespace": namespace, "resource": "Secret/db"}) == 0  # fmt: skip
    after = {d["metadata"]["name"]: d["metadata"]["generation"] for d in items}
    assert {n: after[n] - before[n] for n in after} == dict.fromkeys(after, 1), (
        "exactly one further rollout each"
    )
    print(f"200 Deployments converged {converged:.1f}s after the fix")


async def test_a_workload_that_follows_another_is_written_only_after_its_rollout_completed(
    client: Client, namespace: str
) -> None:
    await client.create(resources.SECRETS,
                        builders.secret("db", namespace, string_data={"password": "v1"}))  # fmt: skip
    first = app("first", namespace, "never")
    first["spec"]["replicas"] = 3
    await client.create(resources.DEPLOYMENTS, first)
    await client.create(resources.DEPLOYMENTS, app(
        "second", namespace, "never", annotations={"kube-reloader.io/reload-after": "Deployment/first"}))  # fmt: skip
    await all_available(client, namespace, 2)
    async with running(client, namespace, min_interval=0.0):
        timeline: dict[str, float] = {}

        async def probe() -> bool:
            now = time.monotonic()
            for d in await deployments(client, namespace):
                name = d["metadata"]["name"]
                if carried(d) == content("v2"):
                    timeline.setdefault(f"{name} written", now)
                    if not rolling(d):
                        timeline.setdefault(f"{name} complete", now)
            return "second complete" in timeline

        await client.patch(resources.SECRETS, "db", {"stringData": {"password": "v2"}},
                           namespace=namespace)  # fmt: skip
        await eventually(probe, what="both rolled", timeout=120, interval=0.05)
    assert timeline["first complete"] <= timeline["second written"], timeline
    event = await find_event(client, namespace, lambda e: e.get("reason") == "ReloadDeferred"
                             and e["involvedObject"]["name"] == "second")  # fmt: skip
    assert event is not None
    assert "waiting for Deployment/first" in event["message"]
