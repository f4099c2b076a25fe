"""Bounded waits for integration tests: poll until a condition holds or fail with context,
and the conditions more than one test waits for."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from typing import Any, TypeVar

from kube_reloader.core import staleness
from kube_reloader.kube import errors, podstarts
from kube_reloader.kube.client import Client
from kube_reloader.kube.resources import Resource

T = TypeVar("T")


async def eventually(
    probe: Callable[[], Awaitable[T | None]],
    *,
    timeout: float = 30.0,
    interval: float = 0.1,
    what: str = "condition",
) -> T:
    """Await `probe()` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = await probe()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")
        await asyncio.sleep(interval)


def observed(obj: Mapping[str, Any], *, as_string: bool = False) -> bool:
    """Whether `obj`'s controller has written a status for its current spec:
    `status.observedGeneration` equals `metadata.generation` (Argo Rollouts writes it as a
    string: `as_string`)."""
    generation = obj["metadata"]["generation"]
    want = str(generation) if as_string else generation
    return bool((obj.get("status") or {}).get("observedGeneration") == want)


def rolled_out(d: Mapping[str, Any]) -> bool:
    """Whether a Deployment's controller has rolled its current spec out completely: every
    pod updated and available, no old pod left."""
    s = d.get("status") or {}
    want = d["spec"]["replicas"]
    return observed(d) and all(
        s.get(f, 0) == want for f in ("replicas", "updatedReplicas", "availableReplicas")
    )


def template_env(obj: Mapping[str, Any], name: str) -> str | None:
    """The value of env var `name` in any container of `obj`'s pod template."""
    for c in obj["spec"]["template"]["spec"]["containers"]:
        for e in c.get("env") or []:
            if e["name"] == name:
                return str(e.get("value"))
    return None


async def past_pod_starts(
    client: Client, namespaces: list[str], margin: float = staleness.MARGIN
) -> bool:
    """Has the clock passed every running pod's start by more than `margin` (default the
    staleness audit's; whole seconds), so a change made now is newer than what they run? A
    pod's start as the audit and the in-place rotation read it: its containers' start, which
    the node (kwok, or the real kubelet) writes when the pod gets Ready (under load, seconds
    after the pod's creation)."""
    newest = 0.0
    for ns in namespaces:
        for starts in (await podstarts.pod_starts(client, ns)).values():
            newest = max([newest, *starts])
    return time.time() > newest + margin + 1


async def clock_past(moment: float) -> None:
    """Wait until the wall clock is past `moment` (epoch seconds): evidence that a time the
    API server writes from now on (whole seconds) is later than it."""

    async def past() -> bool:
        return time.time() > moment

    wait = max(0.0, moment - time.time())
    await eventually(past, what=f"the clock past {moment:.2f}", timeout=wait + 5, interval=0.02)


async def next_second(since: float | None = None) -> None:
    """Wait for the next whole second of the wall clock after `since` (default: now), so that
    a write made then carries a later managedFields or creation time than one made before."""
    await clock_past(int(time.time() if since is None else since) + 1)


async def exists(client: Client, resource: Resource, name: str, namespace: str) -> bool:
    """Whether the API server has the object now (a GET; NotFound is False)."""
    try:
        await client.get(resource, name, namespace=namespace)
    except errors.NotFound:
        return False
    return True


@contextlib.asynccontextmanager
async def alongside(work: Coroutine[Any, Any, None]) -> AsyncIterator[asyncio.Task[None]]:
    """Run `work` while the block runs, then cancel it; if it failed meanwhile, its error is
    raised here (a background helper that died never passes silently)."""
    task = asyncio.create_task(work)
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
