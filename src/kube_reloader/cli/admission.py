"""The admission webhook flags (ours): `--admission-addr` and the `--admission-*` settings of
its certificates; parsed into `runtime.admission.AdmissionSettings`."""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping

from kube_reloader.core.pausing import DurationError, parse_duration
from kube_reloader.runtime.admission import AdmissionSettings

_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_ADDR = re.compile(r"(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]*):(\d{1,5})")
#: a serving certificate lives at least this long (renewal every few seconds is a mistake)
MIN_VALIDITY = 20.0


class AdmissionFlagError(ValueError):
    pass


def add(parser: argparse.ArgumentParser) -> None:
    flags = (
        ("--admission-addr", "", "HOST:PORT",
         "serve the mutating admission webhook here, over TLS (off when empty)"),
        ("--admission-webhook-config", "kube-reloader", "NAME",
         "the MutatingWebhookConfiguration whose caBundle is kept current"),
        ("--admission-ca-secret", "kube-reloader-admission-ca", "NAME",
         "the Secret (in POD_NAMESPACE) holding the webhook's CA"),
        ("--admission-service", "", "NAME",
         "the webhook's Service: its DNS names go in the serving certificate"),
        ("--admission-cert-validity", "24h", "DURATION",
         "validity of a serving certificate (renewed at two thirds of it)"),
    )  # fmt: skip
    for flag, default, metavar, text in flags:
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
    hosts = ["127.0.0.1", "localhost"]
    service = str(ns.admission_service)
    if service:
        if not _NAME.fullmatch(service):
            raise AdmissionFlagError(f"--admission-service: {service!r} is not a valid name")
        hosts = [f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local",
                 f"{service}.{namespace}", service, *hosts]  # fmt: skip
    return AdmissionSettings(
        addr=addr,
        namespace=namespace,
        ca_secret=str(ns.admission_ca_secret),
        webhook_config=str(ns.admission_webhook_config),
        hosts=tuple(hosts),
        cert_validity=validity,
        ca_validity=max(365 * 24 * 3600.0, validity * 30),
    )
