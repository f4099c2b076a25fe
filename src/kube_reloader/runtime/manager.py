"""The manager: everything that runs around the controller in one process (controller-runtime's
"manager" idea).

It owns the HTTP servers (`/metrics`, `/live`, `/readyz`; with `--compat=v2` also Reloader v2's
health listener, `/healthz` and `/readyz`; and the diagnostics listener), the
API client, the controller, and leader election. Without HA the controller writes from the
start. With HA it starts as a standby and may write only while this replica holds the lease:
the elector's callbacks flip `controller.leading` in the very step the elector decides (no await
in between), and once the lease is lost the process stops with exit code 1 so that the pod
restarts as a warm standby. On shutdown the lease is released only after the elector stopped
(no renew in flight).

Time is injected: one `Clock` is a parameter of `Manager` (the real one by default, there and
nowhere deeper); the elector and the controller read it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import msgspec

from kube_reloader import __version__
from kube_reloader.core import hashing
from kube_reloader.edges.serving import Health, Server, build_app, build_debug_app, build_health_app
from kube_reloader.kube import config, discovery, errors, hashkey, leases
from kube_reloader.kube.client import Client
from kube_reloader.kube.transport import RequestObserver
from kube_reloader.metrics import Recorder
from kube_reloader.runtime.admitsettings import AdmissionSettings
from kube_reloader.runtime.auditroom import AuditRoom
from kube_reloader.runtime.clock import Clock, SystemClock, utc
from kube_reloader.runtime.controller import Controller
from kube_reloader.runtime.kinds import custom
from kube_reloader.runtime.leadership import HASettings, LeaderElector
from kube_reloader.runtime.options import Options
from kube_reloader.runtime.supervisor import Supervisor

if TYPE_CHECKING:
    from kube_reloader.runtime import servingcerts

log = logging.getLogger("kube_reloader")


class HashKeySettings(msgspec.Struct, frozen=True):
    """`--hash-algorithm=hmac-sha256`: where the key lives (created on first start)."""

    namespace: str
    secret: str


class ManagerSettings(msgspec.Struct, frozen=True):
    """What the manager runs, and where it serves."""

    options: Options
    #: None: no metrics server (`--metrics-addr=0` under `--compat=v2`)
    metrics_addr: str | None = ":9090"
    #: diagnostics listener (`--enable-pprof`); None: not served
    pprof_addr: str | None = None
    #: Reloader v2's health listener (`--health-addr`); None: not served
    health_addr: str | None = None
    #: None: a single replica, always writing
    ha: HASettings | None = None
    hash_key: HashKeySettings | None = None
    #: the admission webhook (`--admission-addr`); None: not served
    admission: AdmissionSettings | None = None


# ---------------------------------------------------------------------- what the manager runs


class Counts(Protocol):
    @property
    def reloads(self) -> int: ...

    @property
    def changes(self) -> int: ...


class Runnable(Protocol):
    """What the manager needs of the controller (`runtime.controller.Controller`)."""

    @property
    def ready(self) -> asyncio.Event: ...

    @property
    def leading(self) -> asyncio.Event: ...

    @property
    def supervisor(self) -> Supervisor: ...

    @property
    def stats(self) -> Counts: ...

    def start_leading(self) -> None: ...

    def stop_leading(self) -> None: ...

    async def run(self, stop: asyncio.Event) -> None: ...


class Elector(Protocol):
    """What the manager needs of the elector (`runtime.leadership.LeaderElector`)."""

    @property
    def leading(self) -> asyncio.Event: ...

    @property
    def lost(self) -> asyncio.Event: ...

    async def run(self) -> None: ...

    async def release(self) -> None: ...


class ClientFactory(Protocol):
    def __call__(
        self,
        conn: config.ConnectionConfig,
        /,
        *,
        user_agent: str,
        observer: RequestObserver | None,
        monotonic: Callable[[], float],
    ) -> Client: ...


class ControllerFactory(Protocol):
    def __call__(
        self, client: Client, options: Options, /, *, clock: Clock, metrics: Recorder
    ) -> Runnable: ...


class ElectorFactory(Protocol):
    def __call__(
        self,
        client: Client,
        ha: HASettings,
        /,
        *,
        on_started_leading: Callable[[], None],
        on_stopped_leading: Callable[[], None],
    ) -> Elector: ...


def lease_elector(clock: Clock) -> ElectorFactory:
    """Electors on Reloader's lock (`ha.lock_name` in the HA namespace): expiry and deadlines on
    `clock`'s monotonic time, the Lease's timestamps from its wall time."""

    def wall_clock() -> dt.datetime:
        return utc(clock)

    def build(
        client: Client,
        ha: HASettings,
        /,
        *,
        on_started_leading: Callable[[], None],
        on_stopped_leading: Callable[[], None],
    ) -> LeaderElector:
        return LeaderElector(
            leases.LeaseLock(client, ha.namespace, ha.lock_name),
            identity=ha.identity,
            timing=ha.timing,
            clock=clock.monotonic,
            wall_clock=wall_clock,
            on_started_leading=on_started_leading,
            on_stopped_leading=on_stopped_leading,
            release_on_cancel=ha.release_on_cancel,
        )

    return build


# ---------------------------------------------------------------------- the manager


class Manager:
    """Serves, builds the controller, runs leader election and decides when the controller
    may write. `run` returns the process's exit code.

    The factories default to the real client, controller and elector, the clock to the
    system's; `health` and `recorder` are what the probes and `/metrics` report.
    """

    def __init__(
        self,
        settings: ManagerSettings,
        *,
        new_client: ClientFactory = Client,
        new_controller: ControllerFactory = Controller,
        new_elector: ElectorFactory | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.settings = settings
        self.clock = clock or SystemClock()
        self.new_client = new_client
        self.new_controller = new_controller
        self.new_elector = new_elector or lease_elector(self.clock)
        lease = None if settings.ha is None else settings.ha.lock_name
        self.recorder = Recorder(v2=settings.options.version_two(lease))
        self.health = Health()
        self.servers: list[Server] = []
        #: the admission webhook, once serving
        self.admission: servingcerts.Running | None = None

    async def run(self, conn: config.ConnectionConfig, stop: asyncio.Event) -> int:
        """Serve, then run the controller until `stop` is set (or the lease is lost)."""
        settings = self.settings
        self.servers = []
        if settings.metrics_addr:
            self.servers.append(
                Server(build_app(self.recorder, self.health), settings.metrics_addr)
            )
        if settings.pprof_addr:
            self.servers.append(Server(build_debug_app(self.recorder), settings.pprof_addr))
        if settings.health_addr:
            self.servers.append(Server(build_health_app(self.health), settings.health_addr))
        try:
            for server in self.servers:
                await server.start()
        except OSError as exc:
            log.error("cannot listen", extra={"error": str(exc)})
            return 1
        try:
            async with self.new_client(
                conn,
                user_agent=f"kube-reloader/{__version__}",
                observer=self.recorder,
                monotonic=self.clock.monotonic,
            ) as client:
                options = await self._options(client)
                if options is None:
                    return 1
                controller = self.new_controller(
                    client, options, clock=self.clock, metrics=self.recorder
                )
                if settings.admission is not None:
                    self._admission(client, options, settings.admission, controller)
                if options.audit_interval > 0 and isinstance(controller, Controller):
                    c = controller  # the staleness audit reads its caches, reports through it
                    room = AuditRoom(
                        client, options, c.clock, c.stores, c.fence, c.reports.audit, c.ready
                    )
                    c.supervisor.spawn("staleness-audit", room.loop)
                code = await self._run_controller(client, controller, stop)
                if code:
                    return code
        finally:
            for server in self.servers:
                await server.stop()
        log.info(
            "stopped",
            extra={"reloads": controller.stats.reloads, "changes": controller.stats.changes},
        )
        return 0

    def _admission(
        self, client: Client, options: Options, admission: AdmissionSettings, c: Runnable
    ) -> None:
        """Serve the admission webhook once it can, under the controller's supervisor (never
        stops the controller; its server is stopped with the others)."""
        from kube_reloader.runtime import servingcerts as certs  # cryptography: only here

        wanted = c.intake.namespace_wanted if isinstance(c, Controller) else None
        self.admission = certs.start(client, options, admission, self.clock, c.supervisor, wanted)
        self.servers.append(self.admission.server)

    async def _options(self, client: Client) -> Options | None:
        """The controller's options, with the hash key read (or created) when one is used;
        None when it cannot be."""
        hash_key = self.settings.hash_key
        options = await self._custom_kinds(client, self.settings.options)
        if options is None or hash_key is None:
            return options
        try:
            key = await hashkey.ensure(
                client, hash_key.namespace, hash_key.secret, size=hashing.KEY_BYTES
            )
        except errors.KubeError as exc:
            log.error("cannot read or create the hash key", extra={"error": str(exc)})
            return None
        return dataclasses.replace(options, hash_key=key)

    async def _custom_kinds(self, client: Client, options: Options) -> Options | None:
        """Register each `--workload-kind` under the kind name discovery gives it; None (the
        process exits) when one is not served, as with `--is-Argo-Rollouts=true`."""
        kinds, watched = options.kinds, options.workload_kinds
        for ck in options.custom_kinds:
            try:
                kind = await discovery.kind_of(client, ck.group, ck.version, ck.plural)
            except errors.KubeError as exc:
                log.error(
                    "cannot look up a --workload-kind", extra={"kind": str(ck), "error": str(exc)}
                )
                return None
            if kind is None:
                log.error(
                    "--workload-kind is not served by the API server", extra={"kind": str(ck)}
                )
                return None
            if kind in kinds:
                log.error(
                    "--workload-kind names a kind already registered",
                    extra={"kind": str(ck), "registered_kind": kind},
                )
                return None
            kinds = kinds.with_kind(custom(kind, ck))
            watched = (*watched, kind)
            log.info("custom workload kind", extra={"kind": kind, "resource": str(ck)})
        if kinds is options.kinds:
            return options
        return dataclasses.replace(options, kinds=kinds, workload_kinds=watched)

    async def _run_controller(
        self, client: Client, controller: Runnable, stop: asyncio.Event
    ) -> int:
        health, recorder, ha = self.health, self.recorder, self.settings.ha
        health.failing = controller.supervisor.unhealthy
        health.dead = controller.supervisor.dead

        async def mark_ready() -> None:
            await controller.ready.wait()
            health.synced = True

        helpers = [controller.supervisor.task("ready", mark_ready())]
        elector = None
        if ha is not None:
            controller.leading.clear()
            elector = self.new_elector(
                client,
                ha,
                on_started_leading=controller.start_leading,
                on_stopped_leading=controller.stop_leading,
            )
            health.ha = True
            helpers.append(
                controller.supervisor.task(
                    "follow-lease", follow_lease(elector, controller, health, recorder, stop)
                )
            )
        await controller.run(stop)
        for task in helpers:
            task.cancel()
        # the elector has stopped (no renew in flight) before the lease is released
        await asyncio.gather(*helpers, return_exceptions=True)
        if elector is not None:
            await elector.release()
            recorder.set_leader(False)
            if elector.lost.is_set():
                return 1
        return 0


async def follow_lease(
    elector: Elector,
    controller: Runnable,
    health: Health,
    recorder: Recorder,
    stop: asyncio.Event,
) -> None:
    """Run the elector; report leadership when elected; when the lease is lost, stop (the pod
    restarts as a warm standby). `controller.leading` itself is set and cleared by the
    elector's callbacks (see `Manager`), never here after an await."""
    supervisor = controller.supervisor
    elector_task = supervisor.task("leader-election", elector.run())
    won = supervisor.task("lease-won", elector.leading.wait())
    lost = supervisor.task("lease-lost", elector.lost.wait())
    try:
        await asyncio.wait({won, elector_task}, return_when=asyncio.FIRST_COMPLETED)
        if elector.leading.is_set():
            health.leader = True
            recorder.set_leader(True)
            await asyncio.wait({lost, elector_task}, return_when=asyncio.FIRST_COMPLETED)
        if not elector.lost.is_set():
            # the election loop itself failed: without renewals this replica must not write
            log.error("leader election stopped unexpectedly", exc_info=_error_of(elector_task))
        controller.stop_leading()  # already stopped if the elector decided it
        health.leader = False
        health.lost_lease = True
        recorder.set_leader(False)
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
