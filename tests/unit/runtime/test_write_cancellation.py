"""Losing leadership cancels writes in flight, except one past its point of no return (a Job
deleted and not yet re-created), which must finish or the Job would be gone for good."""

from __future__ import annotations

import asyncio
from typing import Any

from kube_reloader.core import planning
from kube_reloader.core.objects import WorkloadKind
from kube_reloader.core.planning import Outcome
from kube_reloader.core.references import PodTemplate
from kube_reloader.kube import errors, resources
from kube_reloader.runtime import writeseam
from kube_reloader.runtime.fencing import Fence


async def test_stop_leading_cancels_writes_in_flight_but_not_a_committed_job_recreation() -> None:
    fence = Fence()
    release = asyncio.Event()

    async def plain_write() -> None:
        await release.wait()

    async def committed_write() -> None:
        fence.commit()
        await release.wait()

    plain = asyncio.ensure_future(plain_write())
    committed = asyncio.ensure_future(committed_write())
    fence.writing |= {plain, committed}
    await asyncio.sleep(0)
    fence.stop_leading()
    release.set()
    await asyncio.gather(plain, committed, return_exceptions=True)
    assert plain.cancelled()
    assert not committed.cancelled()
    assert not fence.may_write()


class FakeJobs:
    """A Job API that frees the name two polls after the delete."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.busy = 2

    async def get(self, *_: Any, **__: Any) -> dict[str, Any]:
        self.calls.append("get")
        return {"metadata": {"name": "j", "namespace": "n", "uid": "u1"},
                "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}  # fmt: skip

    async def delete(self, *_: Any, **__: Any) -> None:
        self.calls.append("delete")

    async def create(self, *_: Any, **__: Any) -> dict[str, Any]:
        self.calls.append("create")
        if self.busy:
            self.busy -= 1
            raise errors.AlreadyExists(409, "still being deleted")
        return {"kind": "Job"}


async def test_a_job_write_reports_its_point_of_no_return_between_delete_and_create() -> None:
    jobs = FakeJobs()
    seen: list[list[str]] = []
    workload = planning.Workload(
        kind=WorkloadKind.JOB, namespace="n", name="j", annotations={}, template=PodTemplate()
    )
    plan = planning.Plan(
        workload=workload.key,
        change=None,  # type: ignore[arg-type]
        decision=None,  # type: ignore[arg-type]
        outcome=Outcome.RELOAD,
        message="",
    )
    target = writeseam.Target(
        workload, resources.JOBS, "Reloader", now=None,  # type: ignore[arg-type]
        committed=lambda: seen.append(list(jobs.calls)),
    )  # fmt: skip
    await writeseam.JOB_RECREATE.apply(jobs, target, [plan])  # type: ignore[arg-type]
    assert seen == [["get", "delete"]], "committed once, right after the delete"
    assert jobs.calls == ["get", "delete", "create", "create", "create"]
