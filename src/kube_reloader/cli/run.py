"""`kube-reloader [flags]` / `kube-reloader run [flags]`: the controller in the foreground."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Sequence

from kube_reloader import __version__, logs
from kube_reloader.cli.flags import FlagError, parse
from kube_reloader.kube import config, errors
from kube_reloader.kube.client import Client
from kube_reloader.runtime.controller import Controller

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
    return asyncio.run(_run(conn, settings.options))


async def _run(conn: config.ConnectionConfig, options: object) -> int:
    from kube_reloader.runtime.options import Options

    assert isinstance(options, Options)
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
    async with Client(conn, user_agent=f"kube-reloader/{__version__}") as client:
        controller = Controller(client, opts)
        await controller.run(stop)
    log.info(
        "stopped", extra={"reloads": controller.stats.reloads, "changes": controller.stats.changes}
    )
    return 0
