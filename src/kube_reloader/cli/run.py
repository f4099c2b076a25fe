"""`kube-reloader [flags]` / `kube-reloader run [flags]`: the controller in the foreground."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Sequence

from kube_reloader import __version__, logs
from kube_reloader.cli.flags import FlagError, RunSettings, parse
from kube_reloader.kube import config, errors
from kube_reloader.kube.client import Client
from kube_reloader.metrics import Recorder
from kube_reloader.runtime.controller import Controller
from kube_reloader.runtime.leadership import LeaderElector
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
            controller = Controller(client, opts, metrics=recorder)

            async def mark_ready() -> None:
                await controller.ready.wait()
                health.synced = True

            helpers = [asyncio.create_task(mark_ready())]
            elector = None
            if settings.ha is not None:
                elector = LeaderElector(
                    client,
                    namespace=settings.ha.namespace,
                    identity=settings.ha.identity,
                    timing=settings.ha.timing,
                )
                controller.leading.clear()
                health.ha = True
                helpers.append(
                    asyncio.create_task(_follow(elector, controller, health, recorder, stop))
                )
            await controller.run(stop)
            for task in helpers:
                task.cancel()
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


async def _follow(
    elector: LeaderElector,
    controller: Controller,
    health: Health,
    recorder: Recorder,
    stop: asyncio.Event,
) -> None:
    """Lead when elected; when the lease is lost, stop (the pod restarts as a warm standby)."""
    elector_task = asyncio.create_task(elector.run())
    try:
        await elector.leading.wait()
        controller.leading.set()
        health.leader = True
        recorder.leader.set(1)
        await elector.lost.wait()
        controller.leading.clear()
        health.leader = False
        health.lost_lease = True
        recorder.leader.set(0)
        log.error("lost the lease; stopping so that this pod restarts as a standby")
        stop.set()
    finally:
        elector_task.cancel()
