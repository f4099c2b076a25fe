"""Stakater Reloader and kube-reloader side by side, as processes of a test: kube-reloader run
as a pod would run it (`KubeReloader`), and each writer's evidence that it is done with its
start or with a change (`KubeReloader.started`/`outstanding`, `peer_started`/`peer_outstanding`),
read from its /metrics and its JSON log, so a test waits for evidence and never a fixed time.
Shared by the swap tests and the differential tier."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from kube_reloader.kube import resources
from kube_reloader.kube.client import Client
from tests.exposition import scalar, total
from tests.peers import SCRUBBED, ChildProcess, PeerProcess, free_port
from tests.waiting import eventually

#: a bound, not a wait: the longest a writer may take to show it is done (its start's
#: catch-up, a drained queue)
DONE_TIMEOUT = 60.0
#: the controllers Reloader v2 runs with these flags (`SetupReconcilers`: ConfigMaps and Secrets
#: not ignored, no namespace selector, no CSI; Deployments for its pauses)
V2_CONTROLLERS = frozenset({"configmap", "secret", "deployment"})
#: kube-reloader's catch-up verdict lines, one per workload (and reference) it caught up or
#: whose pods it looked at (`resyncing`, `freshness`)
CATCH_UP_VERDICTS = (
    "reloading a change missed while not watching",
    "its pods already run this content; nothing to roll",
)


def records(text: str, message: str) -> list[dict[str, Any]]:
    """The JSON log lines of `text` whose message (`msg`, or zerolog's `message`) is
    `message`."""
    out = []
    for line in text.splitlines():
        if message not in line:
            continue
        try:
            rec = json.loads(line)
        except ValueError:  # a line still being written, or not JSON
            continue
        if isinstance(rec, dict) and (rec.get("msg") or rec.get("message")) == message:
            out.append(rec)
    return out


async def until_done(probe: Callable[[], Awaitable[str]], what: str) -> float:
    """Until `probe` returns "" (what is still outstanding, else); the seconds waited."""
    t0 = time.monotonic()
    outstanding = ""

    async def done() -> bool:
        nonlocal outstanding
        outstanding = await probe()
        return not outstanding

    try:
        await eventually(done, timeout=DONE_TIMEOUT, interval=0.25, what=what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {outstanding}") from None
    return time.monotonic() - t0


class KubeReloader(ChildProcess):
    """`python -m kube_reloader --enable-ha` scoped to `namespace`, as a pod would run it:
    POD_NAME (its Lease identity) and POD_NAMESPACE (the Lease's), JSON logs to its own file,
    /metrics on a free loopback port."""

    def __init__(
        self, name: str, kubeconfig: Path, namespace: str, log_dir: Path, flags: Sequence[str]
    ) -> None:
        self.name = name
        self.port = free_port()
        self.log = log_dir / f"{name}.log"
        env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
        env.update(KUBECONFIG=str(kubeconfig), POD_NAME=name, POD_NAMESPACE=namespace)
        self.argv = [sys.executable, "-m", "kube_reloader", "--enable-ha",
                     f"--namespaces={namespace}", f"--metrics-addr=127.0.0.1:{self.port}",
                     f"--health-addr=127.0.0.1:{free_port()}",
                     "--log-format=json", *flags]  # fmt: skip
        log_dir.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def _metrics(self) -> str:
        url = f"http://127.0.0.1:{self.port}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                return str(resp.read().decode())
        except (urllib.error.URLError, OSError):
            return ""

    async def metrics(self) -> str:
        return await asyncio.to_thread(self._metrics)

    async def reloads(self) -> float:
        """Its successful workload reloads (Reloader's counter)."""
        text = await self.metrics()
        return scalar(text, 'reloader_reload_executed_total{success="true"}') or 0.0

    def tail(self, lines: int = 30) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def records(self, message: str) -> list[dict[str, Any]]:
        return records(self.log.read_text(errors="replace") if self.log.exists() else "", message)

    async def outstanding(self) -> str:
        """What it still has to write ("" when nothing): workloads with reloads waiting (a
        coalescing window, a min-interval deferral, a retry's backoff, a hold: all counted in
        `kube_reloader_pending_reloads`), queued, or taken by a worker and not yet reconciled
        (each take is an add, a retry or a re-read after a conflict; each ends in one
        reconcile, counted after its write, in both modes)."""
        if not self.alive():
            raise AssertionError(f"{self.name} exited ({self.proc.returncode}):\n{self.tail()}")
        text = await self.metrics()
        if not text:
            return "no /metrics yet"
        pending = total(text, "kube_reloader_pending_reloads")
        depth = total(text, "reloader_workqueue_depth")
        taken = (
            total(text, "reloader_workqueue_adds_total")
            + total(text, "reloader_retries_total")
            + len(self.records("conflict, re-reading"))
        )
        reconciled = total(text, "kube_reloader_reconciles_total")
        if pending or depth or reconciled < taken:
            return (
                f"{pending:.0f} workloads with reloads waiting, {depth:.0f} queued, "
                f"{reconciled:.0f} reconciles of {taken:.0f} taken"
            )
        return ""

    async def started(self) -> str:
        """What it still has to do about its start ("" when nothing): its catch-up ("startup
        reconciliation done", with the workloads it queued or had their pods looked at), each
        of those workloads' verdict logged, then `outstanding`."""
        done = self.records("startup reconciliation done")
        if not done:
            return "catch-up not done"
        queued = int(done[0].get("workloads_queued", 0))
        decided = {r.get("workload") for m in CATCH_UP_VERDICTS for r in self.records(m)}
        if len(decided) < queued:
            return f"catch-up queued {queued} workloads, {len(decided)} decided"
        return await self.outstanding()

    async def wait_leading(self, timeout: float) -> float:
        """Until it leads with synced caches; the seconds waited."""
        t0 = time.monotonic()

        async def leading() -> bool:
            if not self.alive():
                raise AssertionError(f"{self.name} exited ({self.proc.returncode}):\n{self.tail()}")
            text = await self.metrics()
            return scalar(text, "kube_reloader_leader") == 1 == scalar(text, "kube_reloader_ready")

        await eventually(leading, timeout=timeout, interval=0.25, what=f"{self.name} leading")
        return time.monotonic() - t0

    async def wait_synced(self, timeout: float = 60.0) -> None:
        """Until its caches are synced (a standby's too)."""

        async def synced() -> bool:
            if not self.alive():
                raise AssertionError(f"{self.name} exited ({self.proc.returncode}):\n{self.tail()}")
            return scalar(await self.metrics(), "kube_reloader_ready") == 1

        await eventually(synced, timeout=timeout, interval=0.25, what=f"{self.name} synced")

    def stop(self, timeout: float = 30.0) -> int:
        return super().stop(timeout)


@contextlib.contextmanager
def kube_reloader(
    name: str, kubeconfig: Path, namespace: str, log_dir: Path, flags: Sequence[str]
) -> Iterator[KubeReloader]:
    proc = KubeReloader(name, kubeconfig, namespace, log_dir, flags)
    try:
        yield proc
    finally:
        proc.stop()


async def peer_outstanding(peer: PeerProcess) -> str:
    """What the peer still has to write ("" when nothing), from its /metrics.

    v1 (one client-go work queue per resource): every item queued (`enqueue`, counted as an
    add) or re-queued after an error (counted as a retry) has been handled, each handling
    counted after its write (`handleErr`: `events_processed{result=success}` or
    `errors{type=handler_error}`). v2 (controller-runtime): every add reconciled, nothing
    queued or in a worker, and no reconcile of ConfigMaps or Secrets that schedules another
    (error, requeue): such a later add is not counted until it happens (its Deployment
    controller's requeues are the resumes of its pauses, not reloads)."""
    if not peer.alive():
        raise AssertionError(
            f"{peer.name} exited ({peer.proc.returncode}):\n{peer.log_text()[-2000:]}"
        )
    text = await peer.metrics()
    if not text:
        return "no /metrics yet"
    if peer.component == "reloader-v1":
        depth = total(text, "reloader_workqueue_depth")
        taken = total(text, "reloader_workqueue_adds_total") + total(text, "reloader_retries_total")
        handled = total(text, "reloader_events_processed_total", result="success") + total(
            text, "reloader_errors_total", type="handler_error"
        )
        if depth or handled < taken:
            return f"{depth:.0f} queued, {handled:.0f} handled of {taken:.0f} taken"
        return ""
    depth = total(text, "workqueue_depth")
    active = total(text, "controller_runtime_active_workers")
    adds = total(text, "workqueue_adds_total")
    reconciled = total(text, "controller_runtime_reconcile_total")
    again = sum(  # the reload controllers' (the deployment one requeues its pauses' resumes)
        total(text, "controller_runtime_reconcile_total", controller=c, result=r)
        for c in ("configmap", "secret")
        for r in ("error", "requeue", "requeue_after")
    )
    if depth or active or reconciled < adds or again:
        return (
            f"{depth:.0f} queued, {active:.0f} in workers, {reconciled:.0f} reconciles of "
            f"{adds:.0f} adds, {again:.0f} to be retried"
        )
    return ""


async def peer_started(peer: PeerProcess, api: Client, namespace: str) -> str:
    """What the peer still has to do about its start ("" when nothing): every object its
    informers list handed to its event handlers, then `peer_outstanding`.

    v1 counts each informer add (`events_received{event_type=add}`) in its handler, which then
    queues it or not in the same call (with default flags: not, `--reload-on-create` off).
    v2's controllers log "Starting workers" only once their handler has had every object of
    the initial list (controller-runtime v0.24: `Kind.WaitForSync` waits for the handler
    registration's `HasSynced`), each passed or dropped by its predicates."""
    if peer.component == "reloader-v1":
        text = await peer.metrics()
        for rtype in (resources.CONFIGMAPS, resources.SECRETS):
            listed = len((await api.list(rtype, namespace=namespace)).items)
            seen = total(
                text, "reloader_events_received_total", event_type="add", resource_type=rtype.plural
            )
            if seen < listed:
                return f"{seen:.0f} of {listed} {rtype.plural} handed to its handler"
    else:
        started = {r.get("controller") for r in records(peer.log_text(), "Starting workers")}
        missing = V2_CONTROLLERS - started
        if missing:
            return f"controllers without workers: {sorted(missing)}"
    return await peer_outstanding(peer)
