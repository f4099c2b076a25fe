"""`kube-reloader [flags]` / `kube-reloader run [flags]`: the controller in the foreground."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
import signal
import sys
import time
from collections.abc import Callable, Sequence

from kube_reloader import __version__, limits, logs
from kube_reloader.cli.flags import FlagError, HASettings, RunSettings, parse
from kube_reloader.kube import config, errors, hashkey, leases
from kube_reloader.kube.client import Client
from kube_reloader.metrics import Recorder
from kube_reloader.runtime.controller import Controller
from kube_reloader.runtime.leadership import LOCK_NAME, LeaderElector
from kube_reloader.serving import Health, Server, build_app, build_debug_app

log = logging.getLogger("kube_reloader")


def main(argv: Sequence[str]) -> int:
    try:
        settings = parse(argv)
    except FlagError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    logs.setup(settings.log_level, settings.log_format)
    for warning in settings.warnings:
        log.warning("flag ignored", extra={"problem": warning})
    try:
        conn = config.load(settings.kubeconfig, context=settings.context)
    except errors.ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    limits.raise_open_files_limit()  # watches and probes must not run out of descriptors
    return asyncio.run(_run(conn, settings))


async def _run(conn: config.ConnectionConfig, settings: RunSettings) -> int:
    options = settings.options
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    opts = options
    log.info(
        "starting kube-reloader",
        extra={
            "version": __version__,
            "api_server": conn.server,
            "credentials": conn.source,
            "namespaces": ",".join(opts.namespaces) if opts.namespaces else "all",
            "strategy": opts.plan.strategy.value,
            "resources": ",".join(r.plural for r in opts.resources),
        },
    )
    recorder = Recorder()
    health = Health()
    servers = [Server(build_app(recorder, health), settings.metrics_addr)]
    if settings.pprof_addr:
        servers.append(Server(build_debug_app(recorder), settings.pprof_addr))
    try:
        for server in servers:
            await server.start()
    except OSError as exc:
        log.error("cannot listen", extra={"error": str(exc)})
        return 1

    def observe(verb: str, code: str) -> None:
        recorder.api_requests.labels(verb=verb, code=code).inc()

    try:
        async with Client(
            conn, user_agent=f"kube-reloader/{__version__}", observer=observe
        ) as client:
            if settings.hash_key is not None:
                try:
                    key = await hashkey.ensure(
                        client, settings.hash_key.namespace, settings.hash_key.secret
                    )
                except errors.KubeError as exc:
                    log.error("cannot read or create the hash key", extra={"error": str(exc)})
                    return 1
                opts = dataclasses.replace(opts, hash_key=key)
            controller = Controller(client, opts, metrics=recorder)
            health.failing = controller.supervisor.unhealthy
            health.dead = controller.supervisor.dead

            async def mark_ready() -> None:
                await controller.ready.wait()
                health.synced = True

            helpers = [controller.supervisor.task("ready", mark_ready())]
            elector = None
            if settings.ha is not None:
                controller.leading.clear()
                elector = _elector(client, settings.ha, controller)
                health.ha = True
                helpers.append(
                    controller.supervisor.task(
                        "follow-lease", _follow(elector, controller, health, recorder, stop)
                    )
                )
            await controller.run(stop)
            for task in helpers:
                task.cancel()
            # the elector has stopped (no renew in flight) before the lease is released
            await asyncio.gather(*helpers, return_exceptions=True)
            if elector is not None:
                await elector.release()
                recorder.leader.set(0)
                if elector.lost.is_set():
                    return 1
    finally:
        for server in servers:
            await server.stop()
    log.info(
        "stopped", extra={"reloads": controller.stats.reloads, "changes": controller.stats.changes}
    )
    return 0


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _elector(
    client: Client,
    ha: HASettings,
    controller: Controller,
    *,
    clock: Callable[[], float] = time.monotonic,
    wall_clock: Callable[[], dt.datetime] = _utc_now,
) -> LeaderElector:
    """The elector on Reloader's lock, wired so that the controller starts and stops writing in
    the very step the elector decides (its callbacks run synchronously, with no await between
    the decision and `controller.leading`)."""
    return LeaderElector(
        leases.LeaseLock(client, ha.namespace, LOCK_NAME),
        identity=ha.identity,
        timing=ha.timing,
        clock=clock,
        wall_clock=wall_clock,
        on_started_leading=controller.start_leading,
        on_stopped_leading=controller.stop_leading,
    )


async def _follow(
    elector: LeaderElector,
    controller: Controller,
    health: Health,
    recorder: Recorder,
    stop: asyncio.Event,
) -> None:
    """Report leadership when elected; when the lease is lost, stop (the pod restarts as a warm
    standby). `controller.leading` itself is set and cleared by the elector's callbacks (see
    `_elector`), never here after an await."""
    supervisor = controller.supervisor
    elector_task = supervisor.task("leader-election", elector.run())
    won = supervisor.task("lease-won", elector.leading.wait())
    lost = supervisor.task("lease-lost", elector.lost.wait())
    try:
        await asyncio.wait({won, elector_task}, return_when=asyncio.FIRST_COMPLETED)
        if elector.leading.is_set():
            health.leader = True
            recorder.leader.set(1)
            await asyncio.wait({lost, elector_task}, return_when=asyncio.FIRST_COMPLETED)
        if not elector.lost.is_set():
            # the election loop itself failed: without renewals this replica must not write
            log.error("leader election stopped unexpectedly", exc_info=_error_of(elector_task))
        controller.stop_leading()  # already stopped if the elector decided it
        health.leader = False
        health.lost_lease = True
        recorder.leader.set(0)
        log.error("lost the lease; stopping so that this pod restarts as a standby")
        stop.set()
    finally:
        for task in (won, lost, elector_task):
            task.cancel()
        await asyncio.gather(won, lost, elector_task, return_exceptions=True)


def _error_of(task: asyncio.Task[None]) -> BaseException | None:
    if not task.done() or task.cancelled():
        return None
    return task.exception()
