"""Fleet-safe rotations with the real `kube-reloader` process (and once in-process) on the
real control plane: a maintenance window survives SIGKILLs and fail-overs of HA replicas, a
namespace freeze holds everything until it is lifted, a running Job under
`job-policy: after-completion` keeps its pods, and `--max-concurrent-rollouts` counts the
rollouts already in flight when the controller starts.

Every workload starts "up to date": its template already carries the env var the controller
would have written for the current content, so the start-up catch-up leaves it alone and
only the changes the tests make count. kwok makes pods Ready at once, except pods whose
container carries the env value named by their `never-ready-if-env` annotation (the dev
cluster's readiness gate, devcluster/stages.py); kwok completes Job pods once Running."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kube_reloader.core import hashing, strategies
from kube_reloader.core.objects import ResourceType
from kube_reloader.devcluster.stages import NEVER_READY_IF_ENV
from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client, PatchType
from tests import builders
from tests.adversarial import tenant
from tests.harness import find_event, generation, running, update_cm
from tests.waiting import eventually, rolled_out, template_env

pytestmark = [pytest.mark.cluster, pytest.mark.rollout, pytest.mark.timeout(300)]

WINDOW = "kube-reloader.io/reload-window"
URGENT = "kube-reloader.io/reload-urgent"
FREEZE = "kube-reloader.io/freeze"
JOB_POLICY = "kube-reloader.io/job-policy"
LEASE = "stakater-reloader-lock"
#: short leader-election timings, so a fail-over after a SIGKILL takes about 5 s
HA_TIMING = ("--leader-election-lease-duration=4s", "--leader-election-renew-deadline=3s",
             "--leader-election-retry-period=1s")  # fmt: skip


# ----------------------------------------------------------------------------- helpers
def env_name(configmap: str) -> str:
    return strategies.env_var_name(configmap, ResourceType.CONFIGMAP)


def content(data: dict[str, str]) -> str:
    return hashing.configmap_hash(data)


def up_to_date(
    container: dict[str, Any], configmap: str, data: dict[str, str], **extra_env: str
) -> dict[str, Any]:
    """`container` already carrying the reload env var for `configmap`'s `data` (and
    `extra_env`): as the controller would have left it."""
    env = [{"name": env_name(configmap), "value": content(data)}]
    env += [{"name": k, "value": v} for k, v in extra_env.items()]
    container["env"] = env
    return container


def current_deployment(
    name: str, namespace: str, configmap: str, data: dict[str, str], *,
    annotations: dict[str, str] | None = None, **extra_env: str,
) -> dict[str, Any]:  # fmt: skip
    """Deployment `name` (auto, 1 replica) reading `configmap` through envFrom, up to date."""
    d = builders.auto_deployment(
        name, namespace, configmaps=(configmap,),
        annotations={**builders.AUTO, **(annotations or {})},
    )  # fmt: skip
    up_to_date(d["spec"]["template"]["spec"]["containers"][0], configmap, data, **extra_env)
    return d


async def create_current(
    client: Client, namespace: str, name: str, configmap: str, data: dict[str, str], *,
    annotations: dict[str, str] | None = None, cm_annotations: dict[str, str] | None = None,
) -> None:  # fmt: skip
    await client.create(resources.CONFIGMAPS, builders.configmap(
        configmap, namespace, data, annotations=cm_annotations or {}))  # fmt: skip
    await client.create(resources.DEPLOYMENTS, current_deployment(
        name, namespace, configmap, data, annotations=annotations))  # fmt: skip


async def deployment(client: Client, namespace: str, name: str) -> dict[str, Any]:
    return await client.get(resources.DEPLOYMENTS, name, namespace=namespace)


def carried(obj: dict[str, Any], configmap: str) -> str | None:
    """The reload env var's value for `configmap` in a workload's (or a Job's) template."""
    return template_env(obj, env_name(configmap))


async def all_rolled_out(client: Client, namespace: str, names: list[str]) -> None:
    """Wait until each Deployment has rolled out; on timeout, say where each one stopped
    (its status and its pods' phases), to tell a slow controller from a slow node."""
    seen: dict[str, Any] = {}

    async def probe() -> bool:
        found = [await deployment(client, namespace, n) for n in names]
        seen.update({d["metadata"]["name"]: d.get("status") for d in found})
        return all(rolled_out(d) for d in found)

    try:
        await eventually(probe, what=f"{names} rolled out", timeout=60)
    except AssertionError as exc:
        listed = (await client.list(resources.PODS, namespace=namespace)).items
        phases = {p["metadata"]["name"]: (p.get("spec", {}).get("nodeName"),
                                          (p.get("status") or {}).get("phase")) for p in listed}  # fmt: skip
        raise AssertionError(f"{exc}; statuses: {seen}; pods (node, phase): {phases}") from None


async def replicasets(client: Client, namespace: str, app: str) -> set[str]:
    items = (await client.list(resources.REPLICASETS, namespace=namespace,
                               label_selector=f"app={app}")).items  # fmt: skip
    return {rs["metadata"]["name"] for rs in items}


async def generations(client: Client, namespace: str, names: list[str]) -> dict[str, int]:
    return {n: await generation(client, namespace, n) for n in names}


async def deferred(client: Client, namespace: str, name: str, needle: str) -> dict[str, Any]:
    """The controller's ReloadDeferred Event on `name` whose message contains `needle`."""

    async def probe() -> dict[str, Any] | None:
        return await find_event(client, namespace, lambda e: e.get("reason") == "ReloadDeferred"
                                and e["involvedObject"]["name"] == name
                                and needle in e.get("message", ""))  # fmt: skip

    return await eventually(probe, what=f"ReloadDeferred on {name} ({needle!r})", timeout=20)


async def unchanged_for(
    seconds: float, probe: Callable[[], Awaitable[Any]], what: str, interval: float = 0.25
) -> Any:
    """`probe()` gives the same value for `seconds` (polled), which is returned."""
    first = await probe()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        await asyncio.sleep(interval)
        now = await probe()
        assert now == first, f"{what} changed: {first!r} -> {now!r}"
    return first


def window_opening_soon() -> tuple[str, float]:
    """A daily window (UTC) that opens at the next minute boundary plus one minute (60 to
    120 s from now) and lasts 5 minutes; and when it opens (epoch seconds)."""
    now = dt.datetime.now(dt.UTC)
    opens = now.replace(second=0, microsecond=0) + dt.timedelta(minutes=2)
    return f"{opens.minute} {opens.hour} * * * 5m", opens.timestamp()


# ------------------------------------------------------------------------ HA replicas
class Replica:
    """One `kube-reloader --enable-ha` process, scoped to `namespace` (its Lease too)."""

    def __init__(self, name: str, namespace: str, kubeconfig: Path, log_dir: Path) -> None:
        self.name = name
        self.port = tenant.free_port()
        self.log_path = log_dir / f"{name}.log"
        env = tenant.child_env({"KUBECONFIG": str(kubeconfig), "POD_NAME": name,
                                "POD_NAMESPACE": namespace})  # fmt: skip
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kube_reloader", "--enable-ha",
                 f"--namespaces={namespace}", f"--metrics-addr=127.0.0.1:{self.port}",
                 "--log-format=json", *HA_TIMING],
                env=env, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip

    def _ready(self) -> bool:
        try:
            url = f"http://127.0.0.1:{self.port}/readyz"
            with urllib.request.urlopen(url, timeout=2) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, TimeoutError, ConnectionError, OSError):
            return False

    async def ready(self) -> None:
        async def probe() -> bool:
            assert self.proc.poll() is None, f"{self.name} exited:\n{self.log()[-3000:]}"
            return await asyncio.to_thread(self._ready)

        await eventually(probe, what=f"{self.name} /readyz", timeout=60, interval=0.2)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@contextlib.contextmanager
def fleet(namespace: str, kubeconfig: Path, log_dir: Path) -> Iterator[Callable[[str], Replica]]:
    """`start(name)` starts a replica; all are stopped after the block (their logs are
    printed when it failed)."""
    started: list[Replica] = []

    def start(name: str) -> Replica:
        r = Replica(name, namespace, kubeconfig, log_dir)
        started.append(r)
        return r

    try:
        yield start
    except BaseException:
        for r in started:
            print(f"----- {r.name} (exit {r.proc.poll()}) -----\n{r.log()[-6000:]}")
        raise
    finally:
        for r in started:
            r.stop()


async def leader(client: Client, namespace: str) -> str:
    try:
        lease = await client.get(resources.LEASES, LEASE, namespace=namespace)
    except errors.NotFound:
        return ""
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


async def led_by(client: Client, namespace: str, name: str) -> None:
    async def probe() -> bool:
        return await leader(client, namespace) == name

    await eventually(probe, what=f"{name} to hold the lease", timeout=30, interval=0.2)


# -------------------------------------------------------------------------------- tests
async def test_a_change_outside_the_window_is_applied_once_when_it_opens_after_two_sigkills_and_a_failover(
    client: Client, namespace: str, kubeconfig_path: Path, tmp_path: Path
) -> None:
    v0, v1 = {"v": "0"}, {"v": "1"}
    await create_current(client, namespace, "web", "cfg", v0)
    await create_current(client, namespace, "rev", "rev-cfg", v0)
    await create_current(client, namespace, "urgent", "urgent-cfg", v0,
                         cm_annotations={URGENT: "true"})  # fmt: skip
    names = ["web", "rev", "urgent"]
    await all_rolled_out(client, namespace, names)
    # the window is chosen once the rollouts are done (their time is not taken from what the
    # fail-overs have before it opens); a metadata annotation, no new generation
    window, opens = window_opening_soon()
    for name in names:
        await client.patch(resources.DEPLOYMENTS, name,
                           {"metadata": {"annotations": {WINDOW: window}}},
                           namespace=namespace, patch_type=PatchType.MERGE)  # fmt: skip
    before = await generations(client, namespace, names)
    web_sets = await replicasets(client, namespace, "web")
    assert len(web_sets) == 1, web_sets

    with fleet(namespace, kubeconfig_path, tmp_path) as start:
        a, b = start("replica-a"), start("replica-b")
        await asyncio.gather(a.ready(), b.ready())

        async def someone() -> str:
            return await leader(client, namespace)

        first = await eventually(someone, what="a leader", timeout=30)
        reps = {a.name: a, b.name: b}
        other = next(r for n, r in reps.items() if n != first)

        await update_cm(client, namespace, "cfg", v1)  # T: outside the window
        await update_cm(client, namespace, "rev-cfg", v1)
        await update_cm(client, namespace, "rev-cfg", v0)  # reverted before the window
        await update_cm(client, namespace, "urgent-cfg", v1)

        async def urgent_rolled() -> bool:
            return carried(await deployment(client, namespace, "urgent"), "urgent-cfg") == \
                content(v1)  # fmt: skip

        await eventually(urgent_rolled, what="urgent rolled despite the window", timeout=10)
        await deferred(client, namespace, "web", "outside the maintenance window")
        await unchanged_for(3, lambda: generations(client, namespace, ["web", "rev"]),
                            "web and rev outside their window")  # fmt: skip

        reps[first].kill()  # first SIGKILL: the standby takes over
        await led_by(client, namespace, other.name)
        c = start("replica-c")
        await c.ready()
        other.kill()  # second SIGKILL: the current leader
        await led_by(client, namespace, c.name)
        d = start("replica-d")
        await d.ready()

        held = await generations(client, namespace, names)
        print(f"two SIGKILLs and fail-overs done {opens - time.time():.0f}s before the window")
        assert time.time() < opens, (
            f"the fail-overs took too long: the window opened {time.time() - opens:.0f}s ago"
        )
        assert held == {**before, "urgent": before["urgent"] + 1}, held
        assert carried(await deployment(client, namespace, "web"), "cfg") == content(v0)

        async def web_rolled() -> float | None:
            d = await deployment(client, namespace, "web")
            return time.time() if carried(d, "cfg") == content(v1) else None

        seen_at = await eventually(web_rolled, what="web rolled when its window opened",
                                   timeout=opens - time.time() + 30, interval=0.2)  # fmt: skip
        assert seen_at >= opens, f"web rolled {opens - seen_at:.1f}s before its window opened"
        print(f"web rolled {seen_at - opens:.1f}s after its window opened")

        async def web_rs() -> set[str] | None:
            sets = await replicasets(client, namespace, "web")
            return sets if len(sets - web_sets) >= 1 else None

        await eventually(web_rs, what="web's new ReplicaSet", timeout=20)
        after = await generations(client, namespace, names)
        want = {"web": before["web"] + 1, "rev": before["rev"], "urgent": before["urgent"] + 1}
        assert after == want, (before, after)
        assert len(await replicasets(client, namespace, "web") - web_sets) == 1
        assert carried(await deployment(client, namespace, "rev"), "rev-cfg") == content(v0)

        later = await unchanged_for(10, lambda: generations(client, namespace, names),
                                    "generations after the window opened")  # fmt: skip
        assert later == after
        assert len(await replicasets(client, namespace, "web") - web_sets) == 1
        assert await leader(client, namespace) == c.name


async def test_a_frozen_namespace_holds_every_reload_until_the_freeze_is_lifted(
    client: Client, namespace: str, kubeconfig_path: Path
) -> None:
    v0, v1 = {"v": "0"}, {"v": "1"}
    await create_current(client, namespace, "web", "cfg", v0)
    await all_rolled_out(client, namespace, ["web"])
    await client.patch(resources.NAMESPACES, namespace,
                       {"metadata": {"annotations": {FREEZE: "true"}}},
                       patch_type=PatchType.MERGE)  # fmt: skip
    before = await generation(client, namespace, "web")
    async with tenant.controller(kubeconfig_path, [namespace], client=client) as ctl:
        try:
            await update_cm(client, namespace, "cfg", v1)
            event = await deferred(client, namespace, "web", "frozen")
            assert f"namespace {namespace}" in event["message"], event["message"]
            await unchanged_for(6, lambda: generation(client, namespace, "web"),
                                "the frozen Deployment")  # fmt: skip
            assert await generation(client, namespace, "web") == before
            assert carried(await deployment(client, namespace, "web"), "cfg") == content(v0)

            await client.patch(resources.NAMESPACES, namespace,
                               {"metadata": {"annotations": {FREEZE: None}}},
                               patch_type=PatchType.MERGE)  # fmt: skip

            async def rolled() -> bool:
                d = await deployment(client, namespace, "web")
                return carried(d, "cfg") == content(v1)

            await eventually(rolled, what="the reload once the freeze is lifted", timeout=20)
            assert await unchanged_for(5, lambda: generation(client, namespace, "web"),
                                       "the thawed Deployment") == before + 1  # fmt: skip
        except BaseException:
            print(ctl.log()[-6000:])
            raise


def gated_job(name: str, namespace: str, configmap: str, data: dict[str, str], policy: str
              ) -> dict[str, Any]:  # fmt: skip
    """Job `name` (auto, `job-policy: policy`) reading `configmap`, up to date, whose pods
    never get Ready (so they stay Pending and the Job `active`) until the gate annotation is
    removed from the pod."""
    c = up_to_date(builders.container("app", env_from_configmaps=(configmap,)),
                   configmap, data, GATE="hold")  # fmt: skip
    job = builders.job(name, namespace, annotations={**builders.AUTO, JOB_POLICY: policy},
                       template=builders.pod_template({"job": name}, containers=[c],
                                                      restart_policy="Never"))  # fmt: skip
    return builders.never_ready_if_env(job, "hold")


async def job_state(client: Client, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        return await client.get(resources.JOBS, name, namespace=namespace)
    except errors.NotFound:
        return None


async def job_uid(client: Client, namespace: str, name: str) -> str | None:
    job = await job_state(client, namespace, name)
    return None if job is None else str(job["metadata"]["uid"])


async def job_pods(client: Client, namespace: str, uid: str) -> list[dict[str, Any]]:
    return (await client.list(resources.PODS, namespace=namespace,
                              label_selector=f"batch.kubernetes.io/controller-uid={uid}")).items  # fmt: skip


async def watch_job(
    client: Client, namespace: str, job: dict[str, Any], out: list[tuple[str, dict[str, Any]]]
) -> None:
    """Every watch event of `job` (by name) after the state given, into `out`."""
    async for ev in client.watch(
        resources.JOBS, namespace=namespace, allow_bookmarks=False,
        field_selector=f"metadata.name={job['metadata']['name']}",
        resource_version=job["metadata"]["resourceVersion"],
    ):  # fmt: skip
        out.append((ev.type, ev.object))


async def test_a_running_job_under_after_completion_keeps_its_pods_until_it_completes_then_is_re_created_once(
    client: Client, namespace: str
) -> None:
    v0, v1 = {"v": "0"}, {"v": "1"}
    await client.create(resources.CONFIGMAPS, builders.configmap("jcfg", namespace, v0))
    await client.create(resources.JOBS, gated_job("later", namespace, "jcfg", v0,
                                                  "after-completion"))  # fmt: skip
    await client.create(resources.JOBS, gated_job("now", namespace, "jcfg", v0, "recreate"))

    async def active(name: str) -> dict[str, Any] | None:
        job = await job_state(client, namespace, name)
        return job if job and (job.get("status") or {}).get("active") == 1 else None

    later = await eventually(lambda: active("later"), what="the Job later running", timeout=30)
    now_uid = (await eventually(lambda: active("now"), what="the Job now running",
                                timeout=30))["metadata"]["uid"]  # fmt: skip
    uid = str(later["metadata"]["uid"])
    pods = await job_pods(client, namespace, uid)
    assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
    pod, pod_uid = pods[0]["metadata"]["name"], pods[0]["metadata"]["uid"]
    assert pods[0]["status"].get("phase") == "Pending"

    async with running(client, namespace, min_interval=0.0):
        await update_cm(client, namespace, "jcfg", v1)

        async def recreated_now() -> str | None:
            new = await job_uid(client, namespace, "now")
            return new if new not in (None, now_uid) else None

        # the default policy (recreate) replaces a running Job at once
        new_now = await eventually(recreated_now, what="the Job now re-created", timeout=20)
        await deferred(client, namespace, "later", "after-completion")

        async def later_and_its_pod() -> tuple[str | None, list[tuple[str, bool]]]:
            pods = await job_pods(client, namespace, uid)
            alive = [(p["metadata"]["uid"], "deletionTimestamp" in p["metadata"]) for p in pods]
            return await job_uid(client, namespace, "later"), alive

        assert await unchanged_for(6, later_and_its_pod, "the running Job") == (
            uid, [(pod_uid, False)])  # fmt: skip
        job = await job_state(client, namespace, "later")
        assert job is not None
        assert carried(job, "jcfg") == content(v0)

        # let its pod finish: kwok makes it Running, then completes it (a Job pod); the
        # Job's last state before it was deleted must show its pod finished
        history: list[tuple[str, dict[str, Any]]] = []
        watching = asyncio.create_task(watch_job(client, namespace, job, history))
        try:
            await client.patch(resources.PODS, pod,
                               {"metadata": {"annotations": {NEVER_READY_IF_ENV: None}}},
                               namespace=namespace, patch_type=PatchType.MERGE)  # fmt: skip

            async def recreated() -> dict[str, Any] | None:
                job = await job_state(client, namespace, "later")
                return job if job is not None and job["metadata"]["uid"] != uid else None

            fresh = await eventually(recreated, what="the Job later re-created", timeout=60)
            assert carried(fresh, "jcfg") == content(v1)

            async def deleted() -> dict[str, Any] | None:
                return next((o for t, o in history if t == "DELETED"
                             and o["metadata"]["uid"] == uid), None)  # fmt: skip

            last = await eventually(deleted, what="the old Job's deletion", timeout=20)
        finally:
            watching.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watching
        status = last.get("status") or {}
        complete = any(c.get("type") == "Complete" and c.get("status") == "True"
                       for c in status.get("conditions", []))  # fmt: skip
        assert not status.get("active"), f"deleted with running pods: {status}"
        assert status.get("succeeded") == 1, f"deleted before its pod was counted: {status}"
        assert complete, f"deleted before Kubernetes marked it Complete: {status}"
        print(f"the old Job's last status: {status}")
        uids = await unchanged_for(
            10, lambda: asyncio.gather(job_uid(client, namespace, "later"),
                                       job_uid(client, namespace, "now")),
            "the re-created Jobs",
        )  # fmt: skip
        assert uids == [fresh["metadata"]["uid"], new_now]


async def gate(client: Client, namespace: str, name: str, value: str) -> None:
    """Set the `GATE` env var of Deployment `name`'s container (a rollout)."""
    await client.patch(resources.DEPLOYMENTS, name, {"spec": {"template": {"spec": {
        "containers": [{"name": "app", "env": [{"name": "GATE", "value": value}]}]}}}},
        namespace=namespace)  # fmt: skip


async def test_max_concurrent_rollouts_counts_rollouts_already_in_flight_at_start(
    client: Client, namespace: str, kubeconfig_path: Path
) -> None:
    v0, v1 = {"v": "0"}, {"v": "1"}
    rolling = ["r0", "r1", "r2"]
    for name in [*rolling, "fourth"]:
        cm = f"{name}-cfg"
        await client.create(resources.CONFIGMAPS, builders.configmap(cm, namespace, v0))
        d = current_deployment(name, namespace, cm, v0, GATE="ok")
        d["spec"]["progressDeadlineSeconds"] = 600
        await client.create(resources.DEPLOYMENTS, builders.never_ready_if_env(d, "stuck"))
    await all_rolled_out(client, namespace, [*rolling, "fourth"])
    for name in rolling:  # a rollout that stays in flight: its new pod never gets Ready
        await gate(client, namespace, name, "stuck")

    async def in_flight() -> bool:
        for name in rolling:
            d = await deployment(client, namespace, name)
            s = d.get("status") or {}
            if s.get("observedGeneration") != d["metadata"]["generation"] or not (
                s.get("updatedReplicas") == 1 and s.get("replicas") == 2
            ):
                return False
        return True

    await eventually(in_flight, what="three rollouts in flight", timeout=60)
    before = await generation(client, namespace, "fourth")

    async with tenant.controller(kubeconfig_path, [namespace],
                                 "--max-concurrent-rollouts=4") as ctl:  # fmt: skip
        try:

            async def adopted() -> bool:
                return ctl.log().count("rollout in flight at start holds a slot") == 3

            await eventually(adopted, what="the three rollouts adopted", timeout=20)
            await update_cm(client, namespace, "fourth-cfg", v1)
            event = await deferred(client, namespace, "fourth", "in line for a slot")
            # one namespace never takes the last of the 4 slots
            assert "its namespace holds 3 of the 4 rollout slots" in event["message"], event[
                "message"
            ]
            await unchanged_for(6, lambda: generation(client, namespace, "fourth"),
                                "the fourth Deployment waiting for a slot")  # fmt: skip
            assert await generation(client, namespace, "fourth") == before
            assert carried(await deployment(client, namespace, "fourth"), "fourth-cfg") == \
                content(v0)  # fmt: skip

            await gate(client, namespace, "r0", "ok")  # r0's rollout finishes: a slot frees

            async def rolled() -> bool:
                d = await deployment(client, namespace, "fourth")
                return carried(d, "fourth-cfg") == content(v1)

            await eventually(rolled, what="the fourth rolled once a slot freed", timeout=30)
            assert rolled_out(await deployment(client, namespace, "r0"))
            assert await generation(client, namespace, "fourth") == before + 1
        except BaseException:
            print(ctl.log()[-6000:])
            raise
