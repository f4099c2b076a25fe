"""The adversarial suite's tools: the real controller as a process, and a canary.

Each case runs `kube-reloader` exactly as users run it (the console script, real flags,
its own HTTP server) against the dev cluster, scoped to the namespaces the case creates: a
hostile tenant's namespace and a canary's. The canary is an ordinary Deployment on an
ordinary ConfigMap in another namespace; a case passes only when, with the hostile objects
in place, the canary still reloads and `/live` and `/readyz` tell the truth.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import secrets
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kube_reloader.devcluster.ports import free_port
from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client, PatchType
from tests.exposition import metric_samples
from tests.harness import auto_deployment_on_configmap


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a kube-reloader child process. Before/after measurements:
    `KUBE_RELOADER_UNDER_TEST_SRC` runs another checkout's code against the same cases."""
    env = {**os.environ, **(extra or {})}
    other = os.environ.get("KUBE_RELOADER_UNDER_TEST_SRC")
    if other:
        env["PYTHONPATH"] = other
    return env


def soft_open_files(limit: int) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(limit, hard), hard))


@dataclass
class Probe:
    status: int
    seconds: float
    body: str


@dataclass
class ControllerProcess:
    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path

    def get(self, path: str, timeout: float = 5.0) -> Probe:
        """GET a path of the controller's HTTP server (status 0 when it did not answer)."""
        started = time.monotonic()
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.port}{path}", timeout=timeout
            ) as resp:
                return Probe(resp.status, time.monotonic() - started, resp.read().decode())
        except urllib.error.HTTPError as exc:
            return Probe(exc.code, time.monotonic() - started, exc.read().decode())
        except (urllib.error.URLError, TimeoutError, ConnectionError, OSError):
            return Probe(0, time.monotonic() - started, "")

    async def probe(self, path: str, timeout: float = 5.0) -> Probe:
        return await asyncio.to_thread(self.get, path, timeout)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def alive(self) -> bool:
        return self.proc.poll() is None


async def label_namespaces(client: Client, namespaces: Sequence[str]) -> str:
    """Label `namespaces` with a fresh run label; returns the selector that picks them."""
    run = secrets.token_hex(4)
    for ns in namespaces:
        await client.patch(
            resources.NAMESPACES, ns, {"metadata": {"labels": {"adversarial-run": run}}},
            patch_type=PatchType.MERGE,
        )  # fmt: skip
    return f"adversarial-run={run}"


@contextlib.asynccontextmanager
async def controller(
    kubeconfig: Path,
    namespaces: Sequence[str],
    *flags: str,
    env: dict[str, str] | None = None,
    ready_within: float = 60.0,
    client: Client | None = None,
    open_files: int | None = None,
) -> AsyncIterator[ControllerProcess]:
    """Start the real controller; wait for /readyz; stop it after.

    With `client`, the controller runs cluster-wide as most users run it (one watch per
    kind for the whole cluster, so a hostile object shares its watch with the canary's),
    acting only in `namespaces` through `--namespace-selector`; without, it is scoped with
    `--namespaces` (one watch per namespace). `open_files` starts it with that soft
    RLIMIT_NOFILE, as many hosts and containers start processes (1024)."""
    port = free_port()
    if client is not None:
        scope = f"--namespace-selector={await label_namespaces(client, namespaces)}"
    else:
        scope = f"--namespaces={','.join(namespaces)}"
    log_file = tempfile.NamedTemporaryFile(  # noqa: SIM115 - kept for the whole block
        prefix="kube-reloader-adversarial-", suffix=".log", delete=False
    )
    argv = [
        sys.executable, "-m", "kube_reloader", f"--kubeconfig={kubeconfig}",
        scope, f"--metrics-addr=127.0.0.1:{port}",
        "--log-format=json", *flags,
    ]  # fmt: skip
    proc = subprocess.Popen(  # noqa: ASYNC220 - a long-lived child, polled below
        argv, stdout=log_file, stderr=subprocess.STDOUT, env=child_env(env),
        preexec_fn=(lambda: soft_open_files(open_files)) if open_files else None,
    )  # fmt: skip
    running = ControllerProcess(proc, port, Path(log_file.name))
    try:
        deadline = time.monotonic() + ready_within
        while True:
            if not running.alive():
                raise AssertionError(f"controller exited:\n{running.log()[-3000:]}")
            if (await running.probe("/readyz", 2)).status == 200:
                break
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"controller not ready after {ready_within}s:\n{running.log()[-3000:]}"
                )
            await asyncio.sleep(0.2)
        yield running
    finally:
        if running.alive():
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.to_thread(proc.wait, 30)
            except subprocess.TimeoutExpired:
                proc.kill()
                await asyncio.to_thread(proc.wait, 10)
        log_file.close()


async def new_namespace(client: Client, prefix: str) -> str:
    name = f"{prefix}-{secrets.token_hex(3)}"
    await client.create(
        resources.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    return name


async def drop_namespace(client: Client, name: str) -> None:
    with contextlib.suppress(errors.NotFound):
        await client.delete(resources.NAMESPACES, name)


@dataclass
class Canary:
    """A Deployment `canary` reading ConfigMap `canary` (auto) in its own namespace."""

    client: Client
    namespace: str
    version: int = 0

    async def create(self, name: str = "canary") -> None:
        await auto_deployment_on_configmap(
            self.client, self.namespace, name=name, configmap=name, data={"v": "0"}
        )

    async def signature(self, name: str = "canary") -> tuple[str | None, str | None]:
        """What a reload changes: the env var (env-vars strategy) and the pod template's
        `last-reloaded-from` annotation (annotations strategy)."""
        obj = await self.client.get(resources.DEPLOYMENTS, name, namespace=self.namespace)
        tmpl = obj["spec"]["template"]
        env = {e["name"]: e.get("value") for e in tmpl["spec"]["containers"][0].get("env") or []}
        env_name = "STAKATER_" + name.upper().replace("-", "_") + "_CONFIGMAP"
        annotations = (tmpl.get("metadata") or {}).get("annotations") or {}
        return env.get(env_name), annotations.get("reloader.stakater.com/last-reloaded-from")

    async def change(self, name: str = "canary") -> None:
        self.version += 1
        await self.client.patch(
            resources.CONFIGMAPS, name, {"data": {"v": str(self.version)}},
            namespace=self.namespace, patch_type=PatchType.MERGE,
        )  # fmt: skip

    async def reloads(self, name: str = "canary", within: float = 20.0) -> float:
        """Change the canary's ConfigMap and return the seconds until its Deployment carries
        the new content; fail after `within` seconds."""
        before = await self.signature(name)
        started = time.monotonic()
        await self.change(name)
        while time.monotonic() - started < within:
            now = await self.signature(name)
            if now != before and any(now):
                return time.monotonic() - started
            await asyncio.sleep(0.1)
        raise AssertionError(f"the canary in {self.namespace} did not reload within {within}s")


async def events_for(client: Client, namespace: str, name: str) -> list[dict[str, Any]]:
    items = (await client.list(resources.EVENTS, namespace=namespace)).items
    return [e for e in items if (e.get("involvedObject") or {}).get("name") == name]


# -- what every tenant-proofing case checks beside its canary ----------------------------------


@dataclass
class Vitals:
    """`/live` polled every half second while a case runs (each answer within 2 s or a
    failure), and the event loop's lag from the controller's own metrics."""

    proc: ControllerProcess
    probes: int = 0
    failures: int = 0
    worst_live: float = 0.0

    async def poll(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            answer = await self.proc.probe("/live", timeout=2.0)
            self.probes += 1
            self.worst_live = max(self.worst_live, answer.seconds)
            if answer.status != 200:
                self.failures += 1
            await until_stopped(stop, 0.5)

    def check(self) -> None:
        assert self.probes > 0
        assert self.failures == 0, f"/live failed {self.failures} of {self.probes} times"
        assert self.worst_live < 2.0, f"/live took {self.worst_live:.2f}s"


async def until_stopped(stop: asyncio.Event, period: float) -> None:
    """A sampler's period: return when `stop` is set, or after `period` seconds (the next
    sample is due); never a wait for something to happen."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), period)


@contextlib.asynccontextmanager
async def vitals(proc: ControllerProcess) -> AsyncIterator[Vitals]:
    v = Vitals(proc)
    stop = asyncio.Event()
    task = asyncio.ensure_future(v.poll(stop))
    try:
        yield v
    finally:
        stop.set()
        await task


@dataclass(frozen=True)
class Lag:
    """The controller's event-loop lag so far: samples over 250 ms, and the worst of the last
    minute."""

    over: int
    samples: int
    worst: float


async def loop_lag(proc: ControllerProcess) -> Lag:
    text = (await proc.probe("/metrics", timeout=5)).body
    buckets = metric_samples(text, "kube_reloader_event_loop_lag_seconds_bucket")
    within = buckets.get('{le="0.25"}', 0.0)
    total = buckets.get('{le="+Inf"}', 0.0)
    worst = metric_samples(text, "kube_reloader_event_loop_lag_max_seconds").get("", 0.0)
    assert total > 0, "no event-loop lag samples: is kube_reloader_event_loop_lag exported?"
    return Lag(int(total - within), int(total), worst)


async def create_all(client: Client, objects: Sequence[dict[str, Any]], at_once: int = 32) -> None:
    """Create `objects` (`resource` picked by kind), `at_once` requests at a time."""
    by_kind = {
        "ConfigMap": resources.CONFIGMAPS, "Secret": resources.SECRETS,
        "Deployment": resources.DEPLOYMENTS,
    }  # fmt: skip
    gate = asyncio.Semaphore(at_once)

    async def one(obj: dict[str, Any]) -> None:
        async with gate:
            await client.create(by_kind[obj["kind"]], obj)

    await asyncio.gather(*(one(o) for o in objects))
