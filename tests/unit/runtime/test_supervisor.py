"""The supervisor: crashes are logged, counted and restarted with backoff; health tells the
truth; nothing in src/ starts a task behind its back."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest

from kube_reloader.runtime.supervisor import Supervisor

SRC = Path(__file__).resolve().parents[3] / "src" / "kube_reloader"
SPAWNERS = {"create_task", "ensure_future", "TaskGroup", "run_coroutine_threadsafe"}


def fast(**kw: object) -> Supervisor:
    crashed: list[str] = []
    sup = Supervisor(on_crash=crashed.append, base_delay=0.001, max_delay=0.002, **kw)  # type: ignore[arg-type]
    sup.crashed = crashed  # type: ignore[attr-defined]
    return sup


async def test_a_crashing_task_is_restarted_and_each_crash_is_counted() -> None:
    sup = fast()
    runs = 0
    done = asyncio.Event()

    async def flaky() -> None:
        nonlocal runs
        runs += 1
        if runs < 4:
            raise RuntimeError(f"crash {runs}")
        done.set()
        await asyncio.Event().wait()

    sup.spawn("consumer@ns", flaky)
    await asyncio.wait_for(done.wait(), 5)
    assert runs == 4
    assert sup.crashed == ["consumer@ns"] * 3  # type: ignore[attr-defined]
    assert sup.states["consumer@ns"].restarts == 3
    assert "RuntimeError: crash 3" in sup.states["consumer@ns"].last_error
    await sup.close()


async def test_a_task_that_keeps_crashing_turns_ready_then_live_red() -> None:
    sup = fast(unhealthy_after=3, dead_after=6)

    async def broken() -> None:
        raise ValueError("always")

    sup.spawn("worker@0", broken)
    for _ in range(500):
        if sup.states["worker@0"].consecutive >= 3:
            break
        await asyncio.sleep(0.001)
    assert sup.unhealthy() == ["worker@0"]
    for _ in range(500):
        if sup.states["worker@0"].consecutive >= 6:
            break
        await asyncio.sleep(0.001)
    assert sup.dead() == ["worker@0"]
    await sup.close()


async def test_a_task_that_ran_long_enough_before_crashing_starts_healthy_again() -> None:
    now = [0.0]
    sup = Supervisor(clock=lambda: now[0], base_delay=0.001, max_delay=0.002, unhealthy_after=2,
                     stable_after=60)  # fmt: skip
    crashes = 0
    stop = asyncio.Event()

    async def long_then_crash() -> None:
        nonlocal crashes
        crashes += 1
        if crashes == 1:
            raise RuntimeError("quick crash")
        if crashes == 2:
            now[0] += 120  # ran two minutes, then crashed
            raise RuntimeError("late crash")
        await stop.wait()

    sup.spawn("t", long_then_crash)
    for _ in range(500):
        if crashes >= 3:
            break
        await asyncio.sleep(0.001)
    assert sup.states["t"].consecutive == 1
    assert sup.unhealthy() == []
    await sup.close()


async def test_a_task_that_returns_is_finished_not_restarted() -> None:
    sup = fast()
    runs = 0

    async def once() -> None:
        nonlocal runs
        runs += 1

    task = sup.spawn("discover/rollouts", once)
    await asyncio.wait_for(task, 5)
    await asyncio.sleep(0.01)
    assert runs == 1
    assert sup.crashed == []  # type: ignore[attr-defined]


async def test_a_crashing_oneshot_is_logged_and_counted_but_not_restarted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sup = fast()

    async def send() -> None:
        raise KeyError("boom")

    await asyncio.wait_for(sup.oneshot("event/Reloaded", send()), 5)
    assert sup.oneshot_failures == 1
    assert sup.crashed == ["event/Reloaded"]  # type: ignore[attr-defined]
    assert any("background job failed" in r.message for r in caplog.records)


async def test_close_cancels_every_task_it_runs() -> None:
    sup = fast()
    sup.spawn("a", lambda: asyncio.Event().wait())  # type: ignore[arg-type,return-value]
    sup.oneshot("b", asyncio.sleep(3600))
    assert sup.running == 2
    await sup.close(grace=5)
    assert sup.running == 0


def test_no_module_in_src_starts_a_task_without_the_supervisor() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        if path.name == "supervisor.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            name = None
            if isinstance(node, ast.Attribute):
                name = node.attr
            elif isinstance(node, ast.Name):
                name = node.id
            if name in SPAWNERS:
                offenders.append(f"{path.relative_to(SRC)}:{node.lineno} {name}")
    assert offenders == []
