"""`kube-reloader [flags]` / `kube-reloader run [flags]`: the controller in the foreground.

Flags, logging, credentials and the open-files limit are set up here; serving, the controller
and leader election are `runtime.manager.Manager`'s.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Sequence

from kube_reloader import __version__, limits, logs
from kube_reloader.cli import eventloops
from kube_reloader.cli.flags import FlagError, RunSettings, parse
from kube_reloader.kube import config, errors
from kube_reloader.kube.client import Client
from kube_reloader.runtime.controller import Controller
from kube_reloader.runtime.manager import Manager, ManagerSettings

log = logging.getLogger("kube_reloader")


def main(argv: Sequence[str]) -> int:
    try:
        settings = parse(argv)
    except FlagError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    logs.setup(settings.log_level, settings.log_format, compat=settings.compat)
    for warning in settings.warnings:
        log.warning("flag ignored", extra={"problem": warning})
    try:
        conn = config.load(settings.kubeconfig, context=settings.context)
    except errors.ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    limits.raise_open_files_limit()  # watches and probes must not run out of descriptors
    factory = eventloops.loop_factory(
        settings.event_loop, tls_listener=settings.admission is not None
    )
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(_run(conn, settings))


def manager_settings(settings: RunSettings) -> ManagerSettings:
    """The part of the command line the manager runs with."""
    return ManagerSettings(
        options=settings.options,
        metrics_addr=settings.metrics_addr,
        pprof_addr=settings.pprof_addr,
        health_addr=settings.health_addr,
        ha=settings.ha,
        hash_key=settings.hash_key,
        admission=settings.admission,
    )


async def _run(conn: config.ConnectionConfig, settings: RunSettings) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    opts = settings.options
    log.info(
        "starting kube-reloader",
        extra={
            "version": __version__,
            "api_server": conn.server,
            "credentials": conn.source,
            "namespaces": ",".join(opts.namespaces) if opts.namespaces else "all",
            "strategy": opts.plan.strategy.value,
            "resources": ",".join(r.plural for r in opts.resources),
            "compat": settings.compat.value,
            "event_loop": type(loop).__module__.partition(".")[0],
        },
    )
    # `Client` and `Controller` are looked up here, at call time: tests/integration swaps them
    manager = Manager(manager_settings(settings), new_client=Client, new_controller=Controller)
    return await manager.run(conn, stop)
