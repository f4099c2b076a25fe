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

            ready_task = asyncio.create_task(mark_ready())
            await controller.run(stop)
            ready_task.cancel()
    finally:
        for server in servers:
            await server.stop()
    log.info(
        "stopped", extra={"reloads": controller.stats.reloads, "changes": controller.stats.changes}
    )
    return 0
