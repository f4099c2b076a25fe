"""The admission webhook flags (ours): `--admission-addr` and the `--admission-*` settings of
its certificates and of its callers' (`--admission-client-ca`, `--admission-client-names`);
parsed into `runtime.admitter.AdmissionSettings`."""

from __future__ import annotations

import argparse
import re
import ssl
from collections.abc import Mapping
from typing import Any

from kube_reloader.core.pausing import DurationError, parse_duration
from kube_reloader.runtime.admitsettings import AdmissionSettings

_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_ADDR = re.compile(r"(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]*):(\d{1,5})")
#: a serving certificate lives at least this long (renewal every few seconds is a mistake)
MIN_VALIDITY = 20.0
#: the longest `--admission-grace`: reloads of the webhook's kinds wait that long at most
MAX_GRACE = 10.0


class AdmissionFlagError(ValueError):
    pass


def add(parser: Any) -> None:
    """The webhook's flags, on a parser or an argument group."""
    flags = (
        (
            ("--admission-addr", "", "HOST:PORT"),
            "serve the mutating admission webhook here, over TLS (off when empty)",
        ),
        (
            ("--admission-webhook-config", "kube-reloader", "NAME"),
            "the MutatingWebhookConfiguration whose caBundle is kept current",
        ),
        (
            ("--admission-ca-secret", "kube-reloader-admission-ca", "NAME"),
            "the Secret (in POD_NAMESPACE) holding the webhook's CA",
        ),
        (
            ("--admission-service", "", "NAME"),
            "the webhook's Service: its DNS names go in the serving certificate",
        ),
        (
            ("--admission-cert-validity", "24h", "DURATION"),
            "validity of a serving certificate (renewed at two thirds of it)",
        ),
        (
            ("--admission-client-ca", "", "FILE"),
            "require callers to present a TLS client certificate chaining to this CA bundle (the "
            "API server's, from its AdmissionConfiguration); also enables key-level hashes",
        ),
        (
            ("--admission-client-names", "", "NAME[,NAME]"),
            "with --admission-client-ca: the names (CN or DNS SAN) a client certificate may carry",
        ),
        (
            ("--admission-grace", "2s", "DURATION"),
            "how long a ConfigMap change's write into a Deployment, StatefulSet, DaemonSet or "
            "CronJob waits for the apply's own write of that workload (given the new hash by "
            "the webhook: one rollout instead of two); at most 10s",
        ),
    )
    for (flag, default, metavar), text in flags:
        parser.add_argument(flag, default=default, metavar=metavar, help=text)


def settings(ns: argparse.Namespace, env: Mapping[str, str]) -> AdmissionSettings | None:
    """The webhook's settings, or None when `--admission-addr` is empty."""
    addr = str(ns.admission_addr)
    if not addr:
        return None
    found = _ADDR.fullmatch(addr)
    if found is None or int(found.group(2)) > 65535:
        raise AdmissionFlagError(f"--admission-addr: {addr!r} is not host:port (e.g. :9443)")
    namespace = env.get("POD_NAMESPACE", "")
    if not namespace:
        raise AdmissionFlagError(
            "--admission-addr: the POD_NAMESPACE environment variable is required (the "
            "webhook's CA Secret lives in the controller's namespace)"
        )
    for flag in ("admission-webhook-config", "admission-ca-secret"):
        value = str(getattr(ns, flag.replace("-", "_")))
        if not _NAME.fullmatch(value):
            raise AdmissionFlagError(f"--{flag}: {value!r} is not a valid name")
    raw = str(ns.admission_cert_validity)
    try:
        validity = parse_duration(raw)
    except DurationError:
        raise AdmissionFlagError(f"--admission-cert-validity: {raw!r} is not a duration") from None
    if validity < MIN_VALIDITY:
        raise AdmissionFlagError(f"--admission-cert-validity: {raw!r} is under 20s")
    grace = _grace(ns)
    hosts = ["127.0.0.1", "localhost"]
    service = str(ns.admission_service)
    if service:
        if not _NAME.fullmatch(service):
            raise AdmissionFlagError(f"--admission-service: {service!r} is not a valid name")
        hosts = [
            f"{service}.{namespace}.svc",
            f"{service}.{namespace}.svc.cluster.local",
            f"{service}.{namespace}",
            service,
            *hosts,
        ]
    client_ca, client_names = _clients(ns)
    return AdmissionSettings(
        addr=addr,
        namespace=namespace,
        ca_secret=str(ns.admission_ca_secret),
        webhook_config=str(ns.admission_webhook_config),
        hosts=tuple(hosts),
        cert_validity=validity,
        ca_validity=max(365 * 24 * 3600.0, validity * 30),
        client_ca=client_ca,
        client_names=client_names,
        grace=grace,
    )


def _grace(ns: argparse.Namespace) -> float:
    """`--admission-grace`: a duration from 0 to `MAX_GRACE`."""
    raw = str(getattr(ns, "admission_grace", "2s"))
    try:
        grace = parse_duration(raw)
    except DurationError:
        raise AdmissionFlagError(f"--admission-grace: {raw!r} is not a duration") from None
    if not 0 <= grace <= MAX_GRACE:
        raise AdmissionFlagError(f"--admission-grace: {raw!r} is not between 0s and 10s")
    return grace


def _clients(ns: argparse.Namespace) -> tuple[str, tuple[str, ...]]:
    """`--admission-client-ca` (checked: a readable bundle of certificates) and the names."""
    client_ca = str(getattr(ns, "admission_client_ca", "") or "")
    raw = str(getattr(ns, "admission_client_names", "") or "")
    names = tuple(n.strip() for n in raw.split(",") if n.strip())
    if names and not client_ca:
        raise AdmissionFlagError("--admission-client-names: needs --admission-client-ca")
    if client_ca:
        try:
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=client_ca)
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
            raise AdmissionFlagError(
                f"--admission-client-ca: {client_ca!r} is not a readable CA bundle ({exc})"
            ) from None
    return client_ca, names
