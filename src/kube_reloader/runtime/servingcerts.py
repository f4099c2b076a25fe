"""The admission webhook's serving certificate: made by this process, signed by the CA all
replicas share (a Secret), rotated before it expires without a restart (the live TLS context
gets the new one; connections from then on present it), and the CA bundle kept in the
MutatingWebhookConfiguration.

Every `check_interval` it re-reads the CA (renewed there by whichever replica finds it old),
re-reads the webhook configuration and patches its bundle if it is not the CA's (someone
replaced the object), and renews the serving certificate once two thirds of its validity have
passed, or at once when the CA changed under it.

With `--admission-client-ca` the serving context also requires a client certificate chaining
to that bundle (read once at start) and, with `--admission-client-names`, naming one of them.

Admission never stops the controller: until a first certificate is installed and the port is
listening, nothing is served, and the attempt is retried with backoff (one log line each:
"admission is not serving"); a failed refresh later leaves the certificate in use serving
and is retried at the next check. None of it crashes a supervised task, so `/readyz` stays
what the controller's reloads make it.
"""

from __future__ import annotations

import contextlib
import json
import random
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field

from kube_reloader.core import admitting, limiting
from kube_reloader.edges.admitserving import Gates, build_admission_app
from kube_reloader.edges.serving import Limits
from kube_reloader.edges.tlsserving import TlsServer, allow_names, require_client_certificates
from kube_reloader.kube import admissioncerts, errors
from kube_reloader.kube.client import Client
from kube_reloader.runtime.admitsettings import AdmissionSettings
from kube_reloader.runtime.admitter import Admitter
from kube_reloader.runtime.clock import Clock, sleep
from kube_reloader.runtime.options import Options
from kube_reloader.runtime.reporting import log
from kube_reloader.runtime.supervisor import Supervisor

#: the webhook's listener: a review (with its old object) is far larger than a probe; a
#: review waiting for its turn (`admitserving`) is not idle, so only the heaviest client's
#: oldest connection makes way for it at the cap; each connection in its TLS handshake holds
#: a ~256 KiB buffer, so 64 connections cost at most ~16 MiB of them
LIMITS = Limits(
    max_connections=64,
    max_per_client=32,
    max_request_bytes=admitting.MAX_REVIEW_BYTES + 64 * 1024,
    idle_grace=30.0,
)


class CertKeeper:
    def __init__(self, client: Client, settings: AdmissionSettings, clock: Clock) -> None:
        self.client = client
        self.settings = settings
        self.clock = clock
        self.context: ssl.SSLContext = admissioncerts.server_context()
        self.ca: admissioncerts.Ca | None = None
        #: the serving certificate in use (PEM), its renewal time, how many were made
        self.cert_pem = b""
        self.renew_at = 0.0
        self.issued = 0
        #: the bundle last found in (or written to) the webhook configuration
        self.bundle_patched = b""
        #: `--admission-client-ca` loaded into the context (before anything is served)
        self.client_ca_loaded = False

    @property
    def check_interval(self) -> float:
        return max(1.0, min(60.0, self.settings.cert_validity / 10))

    async def refresh(self) -> None:
        """Read (or make) the CA, keep the bundle patched, renew the certificate if due.
        The first call installs a certificate or raises."""
        s = self.settings
        if s.client_ca and not self.client_ca_loaded:  # fails closed: nothing served without
            require_client_certificates(self.context, s.client_ca)
            self.client_ca_loaded = True
        now = self.clock.wall()
        ca = await admissioncerts.ensure_ca(
            self.client, s.namespace, s.ca_secret, now=now, validity=s.ca_validity
        )
        ca_changed = self.ca is None or ca.cert_pem != self.ca.cert_pem
        self.ca = ca
        await self._patch_bundle(ca)  # reads the live object: a replaced one is patched again
        if ca_changed or now >= self.renew_at:
            cert, key = admissioncerts.serving_cert(ca, list(s.hosts), now, s.cert_validity)
            admissioncerts.load(self.context, cert, key)
            self.cert_pem = cert
            self.issued += 1
            expires = admissioncerts.not_after(cert)
            self.renew_at = now + (expires - now) * 2 / 3
            log.info(
                "admission serving certificate installed",
                extra={
                    "expires_in_s": round(expires - now),
                    "serial": hex(admissioncerts.serial(cert)),
                },
            )

    async def _patch_bundle(self, ca: admissioncerts.Ca) -> None:
        try:
            changed = await admissioncerts.patch_ca_bundle(
                self.client, self.settings.webhook_config, ca.bundle_pem
            )
        except errors.NotFound:
            log.warning(
                "the MutatingWebhookConfiguration does not exist; its caBundle is not kept",
                extra={"config": self.settings.webhook_config},
            )
            return
        self.bundle_patched = ca.bundle_pem
        if changed:
            log.info(
                "admission CA bundle patched",
                extra={"config": self.settings.webhook_config, "webhooks": changed},
            )

    async def loop(self) -> None:
        """Refresh forever (under the supervisor: a failed refresh is retried with backoff;
        the certificate in use keeps serving meanwhile)."""
        while True:
            due = max(0.5, self.renew_at - self.clock.wall())
            await sleep(self.clock, min(self.check_interval, due))
            try:
                await self.refresh()
            except Exception as exc:  # noqa: BLE001 - the certificate in use keeps serving
                log.warning(
                    "admission certificate refresh failed; retried at the next check",
                    extra={"error": _short(exc)},
                )


@dataclass(eq=False, repr=False)  # state, not a value: compared by identity
class Running:
    server: TlsServer
    keeper: CertKeeper
    admitter: Admitter
    #: True once the port listens with a certificate installed
    serving: bool = False
    #: failed attempts to start serving
    failures: int = 0
    gates: Gates = field(default_factory=Gates)

    async def serve(self) -> None:
        """Install a first certificate and listen, retrying with backoff until both work;
        then keep the certificate fresh. Never raises."""
        clock = self.keeper.clock
        while not self.serving:
            try:
                await self.keeper.refresh()
                await self.server.start()
                self.serving = True
            except Exception as exc:  # noqa: BLE001 - admission never stops the controller
                with contextlib.suppress(Exception):
                    await self.server.stop()  # a half-started listener
                self.failures += 1
                delay = limiting.backoff(
                    min(self.failures - 1, 16),
                    base=1.0,
                    cap=60.0,
                    jitter=random.random(),  # noqa: S311 - jitter, not crypto
                )
                log.warning(
                    "admission is not serving; the controller reloads without it",
                    extra={
                        "error": _short(exc),
                        "retry_in_s": round(delay, 1),
                        "failures": self.failures,
                    },
                )
                await sleep(clock, delay)
        await self.keeper.loop()


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:300]


def start(
    client: Client,
    options: Options,
    settings: AdmissionSettings,
    clock: Clock,
    supervisor: Supervisor,
    namespace_wanted: Callable[[str], bool] | None = None,
) -> Running:
    """Serve `POST /mutate` over TLS on `settings.addr` once a first certificate is
    installed, and keep it fresh, under the supervisor (`Running.serve`). Never raises."""
    keeper = CertKeeper(client, settings, clock)
    admitter = Admitter(
        client,
        options,
        clock,
        settings.lookup_deadline,
        namespace_wanted,
        authenticated=settings.authenticated,
    )
    gates = Gates()
    busy = json.dumps(admitting.response(""), separators=(",", ":")).encode()
    app = build_admission_app(
        admitter.parse, admitter.respond, admitting.MAX_REVIEW_BYTES, busy, gates
    )
    check = allow_names(settings.client_names) if settings.client_names else None
    if not settings.authenticated:
        log.warning(
            "admission webhook: callers are not authenticated (no --admission-client-ca): "
            "anyone who reaches the port can learn the object-level hash of a ConfigMap in "
            "a watched namespace; see docs/limits.md, Admission webhook"
        )
    elif not settings.client_names:
        log.warning(
            "admission webhook: any client certificate from --admission-client-ca is taken "
            "for the API server's; name it with --admission-client-names"
        )
    server = TlsServer(
        app, settings.addr, keeper.context, supervisor.oneshot, limits=LIMITS, check=check
    )
    running = Running(server, keeper, admitter, gates=gates)
    supervisor.spawn("admission", running.serve)
    return running
