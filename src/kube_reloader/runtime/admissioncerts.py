"""The admission webhook's serving certificate: made by this process, signed by the CA all
replicas share (a Secret), rotated before it expires without a restart (the live TLS context
gets the new one; connections from then on present it), and the CA bundle kept in the
MutatingWebhookConfiguration.

Every `check_interval` it re-reads the CA (renewed there by whichever replica finds it old),
re-patches the bundle if someone changed it, and renews the serving certificate once two
thirds of its validity have passed, or at once when the CA changed under it.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from kube_reloader.admitserving import build_admission_app
from kube_reloader.core import admitting
from kube_reloader.kube import admissioncerts, errors
from kube_reloader.kube.client import Client
from kube_reloader.runtime.admission import AdmissionSettings, Admitter
from kube_reloader.runtime.clock import Clock, sleep
from kube_reloader.runtime.options import Options
from kube_reloader.runtime.reporting import log
from kube_reloader.runtime.supervisor import Supervisor
from kube_reloader.serving import Limits, Server

#: the webhook's listener: a review (with its old object) is far larger than a probe
LIMITS = Limits(max_connections=32, max_request_bytes=admitting.MAX_REVIEW_BYTES + 64 * 1024)


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

    @property
    def check_interval(self) -> float:
        return max(1.0, min(60.0, self.settings.cert_validity / 10))

    async def refresh(self) -> None:
        """Read (or make) the CA, keep the bundle patched, renew the certificate if due.
        The first call installs a certificate or raises."""
        s = self.settings
        now = self.clock.wall()
        ca = await admissioncerts.ensure_ca(
            self.client, s.namespace, s.ca_secret, now=now, validity=s.ca_validity
        )
        ca_changed = self.ca is None or ca.cert_pem != self.ca.cert_pem
        self.ca = ca
        if ca.bundle_pem != self.bundle_patched or ca_changed:
            await self._patch_bundle(ca)
        if ca_changed or now >= self.renew_at:
            cert, key = admissioncerts.serving_cert(ca, list(s.hosts), now, s.cert_validity)
            admissioncerts.load(self.context, cert, key)
            self.cert_pem = cert
            self.issued += 1
            expires = admissioncerts.not_after(cert)
            self.renew_at = now + (expires - now) * 2 / 3
            log.info(
                "admission serving certificate installed",
                extra={"expires_in_s": round(expires - now),
                       "serial": hex(admissioncerts.serial(cert))},
            )  # fmt: skip

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
            await self.refresh()


@dataclass
class Running:
    server: Server
    keeper: CertKeeper
    admitter: Admitter


async def start(
    client: Client, options: Options, settings: AdmissionSettings, clock: Clock,
    supervisor: Supervisor,
) -> Running:  # fmt: skip
    """Install a first certificate (raises when it cannot), serve `POST /mutate` over TLS on
    `settings.addr`, and keep the certificate fresh under the supervisor."""
    keeper = CertKeeper(client, settings, clock)
    await keeper.refresh()
    admitter = Admitter(client, options, clock, settings.lookup_deadline)
    app = build_admission_app(admitter.answer, admitting.MAX_REVIEW_BYTES)
    server = Server(app, settings.addr, tls=keeper.context, limits=LIMITS)
    await server.start()
    supervisor.spawn("admission-certificates", keeper.loop)
    return Running(server, keeper, admitter)
