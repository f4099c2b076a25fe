"""Every background task of the process runs here, and none dies silently.

A long-lived task (a watch consumer, a worker, the alert sender, the catch-up loop) that raises
is logged with its name and the exception, counted, and started again after a jittered
exponential backoff. A task that keeps crashing is reported: after `unhealthy_after`
consecutive crashes it turns `/readyz` red, after `dead_after` it turns `/live` red too (the
process cannot do its job; the kubelet restarts it). A task that runs `stable_after` seconds
without crashing is healthy again. Short jobs (one Event, one resume) run as one-shot tasks:
a crash is logged and counted, never restarted, never lost silently.

This module is the only place in `src/` that creates asyncio tasks (a test enforces it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from kube_reloader.core import limiting

log = logging.getLogger(__name__)


@dataclass
class TaskState:
    """What the supervisor knows about one named long-lived task."""

    name: str
    restarts: int = 0
    #: crashes since the task last ran `stable_after` seconds without crashing
    consecutive: int = 0
    last_error: str = ""


class Supervisor:
    def __init__(
        self,
        *,
        on_crash: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        base_delay: float = 0.5,
        max_delay: float = 30.0,
        unhealthy_after: int = 3,
        dead_after: int = 10,
        stable_after: float = 60.0,
    ) -> None:
        #: told the task's name after every crash (e.g. to count restarts)
        self.on_crash = on_crash
        self.clock = clock
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.unhealthy_after = unhealthy_after
        self.dead_after = dead_after
        self.stable_after = stable_after
        self.states: dict[str, TaskState] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self.oneshot_failures = 0

    # ------------------------------------------------------------------ spawning

    def _track(self, task: asyncio.Task[Any]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def spawn(self, name: str, factory: Callable[[], Awaitable[None]]) -> asyncio.Task[None]:
        """Run `factory()`; whenever it raises, log, count and run it again after a backoff.
        A normal return ends the task (e.g. a discovery poll that found its API)."""
        state = self.states.setdefault(name, TaskState(name))
        task = asyncio.get_running_loop().create_task(self._keep(state, factory), name=name)
        self._track(task)
        return task

    def oneshot(self, name: str, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run a short job once; a crash is logged and counted, not restarted."""
        task = asyncio.get_running_loop().create_task(self._once(name, coro), name=name)
        task.add_done_callback(lambda _: coro.close())  # cancelled before it started: no warning
        self._track(task)
        return task

    def task(self, name: str, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """A plain task whose result the caller awaits (e.g. a worker drain or a waiter):
        tracked so `close` cancels it, exceptions left to the awaiting caller."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._track(task)
        return task

    async def _keep(self, state: TaskState, factory: Callable[[], Awaitable[None]]) -> None:
        while True:
            started = self.clock()
            try:
                await factory()
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the point of a supervisor
                error = f"{type(exc).__name__}: {exc}"[:500]
                log.exception("task crashed", extra={"task": state.name, "error": error})
            if self.clock() - started >= self.stable_after:
                state.consecutive = 0
            state.restarts += 1
            state.consecutive += 1
            state.last_error = error
            if self.on_crash is not None:
                self.on_crash(state.name)
            delay = limiting.backoff(
                min(state.consecutive - 1, 16),
                base=self.base_delay,
                cap=self.max_delay,
                jitter=random.random(),  # noqa: S311 - jitter, not crypto
            )
            log.warning(
                "restarting task",
                extra={
                    "task": state.name,
                    "in_seconds": round(delay, 2),
                    "consecutive_crashes": state.consecutive,
                },
            )
            await asyncio.sleep(delay)

    async def _once(self, name: str, coro: Coroutine[Any, Any, None]) -> None:
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.oneshot_failures += 1
            log.exception(
                "background job failed", extra={"task": name, "error": f"{type(exc).__name__}"}
            )
            if self.on_crash is not None:
                self.on_crash(name)

    # ------------------------------------------------------------------ health

    def unhealthy(self) -> list[str]:
        """Tasks that crashed `unhealthy_after` times in a row: `/readyz` goes red."""
        return sorted(s.name for s in self.states.values() if s.consecutive >= self.unhealthy_after)

    def dead(self) -> list[str]:
        """Tasks that crashed `dead_after` times in a row: `/live` goes red."""
        return sorted(s.name for s in self.states.values() if s.consecutive >= self.dead_after)

    @property
    def running(self) -> int:
        return len(self._tasks)

    async def close(self, grace: float = 10.0) -> None:
        """Cancel every task and wait (bounded) for them to end."""
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        if tasks:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait(tasks, timeout=grace)
        for t in tasks:
            if t.done() and not t.cancelled():
                with contextlib.suppress(BaseException):
                    t.result()
