"""`--admission-*`, as the command line gives them: importing these settings costs nothing,
so a controller without the admission webhook never imports its server (aiohttp), its rules
or its certificates (issue 33: a start that costs a fifth of a second)."""

from __future__ import annotations

import msgspec


class AdmissionSettings(msgspec.Struct, frozen=True):
    """`--admission-*`: where the webhook serves, and its certificates."""

    addr: str
    #: where the CA Secret lives (the controller's namespace)
    namespace: str
    ca_secret: str = "kube-reloader-admission-ca"
    #: the MutatingWebhookConfiguration whose caBundle this process keeps current
    webhook_config: str = "kube-reloader"
    #: names the serving certificate is valid for (the Service's DNS names, 127.0.0.1)
    hosts: tuple[str, ...] = ("127.0.0.1", "localhost")
    #: seconds a serving certificate is valid; renewed after two thirds of it
    cert_validity: float = 24 * 3600.0
    #: seconds the CA is valid; renewed (with an overlapping bundle) with a third left
    ca_validity: float = 365 * 24 * 3600.0
    #: seconds for the lookups of a review whose budget is unknown (called outside the edge)
    lookup_deadline: float = 1.0
    #: `--admission-client-ca`: a CA bundle file the caller's client certificate must chain
    #: to (the API server's, for webhooks); empty: callers are not authenticated
    client_ca: str = ""
    #: `--admission-client-names`: the names (CN or DNS SAN) a client certificate may carry;
    #: empty: any certificate from `client_ca`
    client_names: tuple[str, ...] = ()
    #: `--admission-grace`: seconds a ConfigMap change's template write waits for the apply
    #: that may follow it (`Options.admission_grace`)
    grace: float = 2.0

    @property
    def authenticated(self) -> bool:
        return bool(self.client_ca)
