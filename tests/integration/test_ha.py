"""Two kube-reloader replicas with --enable-ha against the real control plane: one leads,
the other keeps warm caches; killing the leader mid-burst loses and repeats nothing, and a
SIGTERM releases the lease so the standby takes over at its next retry."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from kube_reloader.core import hashing
from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client
from tests.harness import auto_deployment_on_configmap, env_of, generation, update_cm
from tests.waiting import eventually

# serial: lease timings: two replicas contend for one Lease
pytestmark = [pytest.mark.cluster, pytest.mark.serial]
TIMING = ["--leader-election-lease-duration=4s", "--leader-election-renew-deadline=3s",
          "--leader-election-retry-period=1s"]  # fmt: skip


class Replica:
    def __init__(self, name: str, namespace: str, kubeconfig: Path, log_dir: Path) -> None:
        self.name = name
        self.log = log_dir / f"{name}.log"
        env = {
            **os.environ,
            "KUBECONFIG": str(kubeconfig),
            "POD_NAME": name,
            "POD_NAMESPACE": namespace,
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kube_reloader", "--enable-ha", f"--namespaces={namespace}",
             "--metrics-addr=127.0.0.1:0", "--log-format=json", *TIMING],
            env=env, stdout=self.log.open("w"), stderr=subprocess.STDOUT,
        )  # fmt: skip

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=30)


@contextlib.contextmanager
def replicas(namespace: str, kubeconfig: Path, tmp_path: Path) -> Iterator[dict[str, Replica]]:
    """Two replicas, each killed at the end however the test ends; when it fails, their logs
    are printed (pytest shows a failed test's output) with how each process ended."""
    with contextlib.ExitStack() as stack:
        reps: dict[str, Replica] = {}
        for name in ("replica-a", "replica-b"):
            reps[name] = Replica(name, namespace, kubeconfig, tmp_path)
            stack.callback(reps[name].stop, signal.SIGKILL)
        try:
            yield reps
        except BaseException:
            for r in reps.values():
                with contextlib.suppress(OSError):
                    log = r.log.read_text(errors="replace")[-20_000:]
                    print(f"--- {r.name} (exit code {r.proc.poll()}):\n{log}")
            raise


async def warm(reps: dict[str, Replica]) -> None:
    """Wait until every replica has listed what it watches (a standby's caches are warm): a
    change made after that reaches each of them as a watch event, not only as a LIST."""

    async def synced() -> bool:
        return all('"caches synced"' in r.log.read_text() for r in reps.values())

    await eventually(synced, what="every replica's caches synced", timeout=30)


async def holder(client: Client, namespace: str) -> dict[str, Any] | None:
    try:
        lease = await client.get(resources.LEASES, "stakater-reloader-lock", namespace=namespace)
    except errors.NotFound:
        return None
    return lease["spec"]  # type: ignore[no-any-return]


@contextlib.asynccontextmanager
async def workloads(client: Client, namespace: str, n: int) -> AsyncIterator[list[str]]:
    names = [f"w{i}" for i in range(n)]
    for name in names:
        await auto_deployment_on_configmap(
            client, namespace, name=name, configmap=f"c-{name}", data={"v": "0"}, replicas=0
        )
    yield names


async def test_killing_the_leader_mid_burst_loses_and_repeats_no_reload(
    client: Client, namespace: str, kubeconfig_path: Path, tmp_path: Path
) -> None:
    async with workloads(client, namespace, 10) as names:
        before = {n: await generation(client, namespace, n) for n in names}
        with replicas(namespace, kubeconfig_path, tmp_path) as reps:

            async def led() -> dict[str, Any] | None:
                spec = await holder(client, namespace)
                return spec if spec and spec.get("holderIdentity") else None

            first = (await eventually(led, what="a leader", timeout=30))["holderIdentity"]
            await warm(reps)
            for i, name in enumerate(names):
                await update_cm(client, namespace, f"c-{name}", {"v": "1"})
                if i == 4:
                    reps[first].stop(signal.SIGKILL)
                    killed_at = time.monotonic()
            want = hashing.configmap_hash({"v": "1"})

            async def all_applied() -> bool:
                for name in names:
                    if (await env_of(client, "Deployment", namespace, name)).get(
                        f"STAKATER_C_{name.upper()}_CONFIGMAP"
                    ) != want:
                        return False
                return True

            await eventually(
                all_applied, what="every change applied after the failover", timeout=40
            )
            failover = time.monotonic() - killed_at
            spec = await holder(client, namespace)
            assert spec is not None
            assert spec["holderIdentity"] not in ("", first)
            await asyncio.sleep(2)  # give a duplicate the chance to happen
            after = {n: await generation(client, namespace, n) for n in names}
            print(f"failover: all changes applied {failover:.1f}s after SIGKILL of the leader")
            assert {n: after[n] - before[n] for n in names} == dict.fromkeys(names, 1), (
                "each workload rolled exactly once"
            )


async def test_sigterm_releases_the_lease_for_the_standby(
    client: Client, namespace: str, kubeconfig_path: Path, tmp_path: Path
) -> None:
    async with workloads(client, namespace, 1) as names:
        with replicas(namespace, kubeconfig_path, tmp_path) as reps:

            async def led() -> dict[str, Any] | None:
                spec = await holder(client, namespace)
                return spec if spec and spec.get("holderIdentity") else None

            first = (await eventually(led, what="a leader", timeout=30))["holderIdentity"]
            # the standby is warm before the leader stops: a standby still listing when the
            # change is made finds it only in its LIST, where the catch-up can tell it from
            # the workload's creation by whole-second managedFields times alone (the same
            # second: left alone, as a restart must not roll workloads that are current)
            await warm(reps)
            other = next(n for n in reps if n != first)
            stopped_at = time.monotonic()
            reps[first].stop(signal.SIGTERM)
            assert reps[first].proc.returncode == 0
            spec = await holder(client, namespace)
            assert spec is not None
            assert spec["holderIdentity"] in ("", other), "the leader gave the lease up on SIGTERM"

            async def taken() -> bool:
                s = await holder(client, namespace)
                return bool(s and s.get("holderIdentity") == other)

            await eventually(taken, what="the standby to take the lease", timeout=20)
            print(f"hand-over: standby leads {time.monotonic() - stopped_at:.1f}s after SIGTERM")
            await update_cm(client, namespace, f"c-{names[0]}", {"v": "9"})

            async def applied() -> bool:
                env = await env_of(client, "Deployment", namespace, names[0])
                return env.get("STAKATER_C_W0_CONFIGMAP") == hashing.configmap_hash({"v": "9"})

            await eventually(applied, what="the new leader to reload")
            assert "released leadership" in reps[first].log.read_text()
