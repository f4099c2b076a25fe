"""The admission webhook's own PKI: a CA kept in a Secret (so every replica serves certificates
the same CA bundle verifies), short-lived serving certificates each replica makes for itself,
and the CA bundle in the MutatingWebhookConfiguration.

The CA is created on first start (two replicas starting together both end up with the one
created first) and renewed once a third of its validity is left: the Secret then holds the new
CA and a bundle of the new and the previous one, so serving certificates signed by either keep
verifying while the replicas move over. Keys never leave this process except in that Secret.

Imported only in admission mode: `cryptography` costs memory the controller alone never needs.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import ipaddress
import os
import ssl
from typing import Any

import msgspec
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client, PatchType
from kube_reloader.kube.resources import Resource

MUTATING_WEBHOOKS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration",
    namespaced=False,
)
CA_CRT, CA_KEY, BUNDLE = "ca.crt", "ca.key", "bundle.crt"
#: certificates are valid from a little before they are made (clock skew with the API server)
_BACKDATE = dt.timedelta(minutes=5)


class Ca(msgspec.Struct, frozen=True):
    cert_pem: bytes
    key_pem: bytes
    #: the certificates a client must trust (this CA, and the one before it while it lasts)
    bundle_pem: bytes

    def __repr__(self) -> str:
        """Never the private key (a repr can reach a log line)."""
        return f"Ca(cert_pem=<{len(self.cert_pem)} bytes>, key_pem=<redacted>)"

    @property
    def not_before(self) -> float:
        return _cert(self.cert_pem).not_valid_before_utc.timestamp()

    @property
    def not_after(self) -> float:
        return not_after(self.cert_pem)


def _cert(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def not_after(cert_pem: bytes) -> float:
    """Epoch seconds at which a PEM certificate expires."""
    return _cert(cert_pem).not_valid_after_utc.timestamp()


def serial(cert_pem: bytes) -> int:
    return _cert(cert_pem).serial_number


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def new_ca(now: float, validity: float, previous: Ca | None = None) -> Ca:
    """A fresh CA valid for `validity` seconds; its bundle keeps `previous` while it lasts."""
    start = dt.datetime.fromtimestamp(now, dt.UTC) - _BACKDATE
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-reloader-admission-ca")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + _BACKDATE + dt.timedelta(seconds=validity))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    pem = cert.public_bytes(serialization.Encoding.PEM)
    bundle = pem
    if previous is not None and previous.not_after > now:
        bundle += previous.cert_pem
    return Ca(pem, _key_pem(key), bundle)


def serving_cert(ca: Ca, hosts: list[str], now: float, validity: float) -> tuple[bytes, bytes]:
    """A server certificate (PEM) and its key for `hosts` (DNS names or IP addresses),
    signed by `ca`, valid for `validity` seconds and never past the CA."""
    ca_cert = _cert(ca.cert_pem)
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise errors.ConfigError("the admission CA key is not an EC key")
    start = dt.datetime.fromtimestamp(now, dt.UTC) - _BACKDATE
    end = min(start + _BACKDATE + dt.timedelta(seconds=validity), ca_cert.not_valid_after_utc)
    sans: list[x509.GeneralName] = []
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def server_context() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


def load(ctx: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """Install a certificate in a live context: connections from now on present it. Goes
    through anonymous in-memory files, so a read-only root filesystem is no obstacle and the
    key never touches a disk."""
    fds = []
    try:
        for what, data in (("cert", cert_pem), ("key", key_pem)):
            fd = os.memfd_create(f"admission-{what}", os.MFD_CLOEXEC)
            fds.append(fd)
            os.write(fd, data)
        ctx.load_cert_chain(f"/proc/self/fd/{fds[0]}", f"/proc/self/fd/{fds[1]}")
    finally:
        for fd in fds:
            os.close(fd)


def _decode(obj: dict[str, Any], where: str) -> Ca:
    data = obj.get("data") or {}
    try:
        cert, key = (base64.b64decode(data.get(k) or "", validate=True) for k in (CA_CRT, CA_KEY))
        bundle = base64.b64decode(data.get(BUNDLE) or "", validate=True) or cert
        _cert(cert)
    except (binascii.Error, ValueError, TypeError) as exc:
        raise errors.ConfigError(f"{where}: not a CA this process can read ({exc})") from exc
    return Ca(cert, key, bundle)


def _data(ca: Ca) -> dict[str, str]:
    files = {CA_CRT: ca.cert_pem, CA_KEY: ca.key_pem, BUNDLE: ca.bundle_pem}
    return {k: base64.b64encode(v).decode() for k, v in files.items()}


async def ensure_ca(
    client: Client, namespace: str, name: str, *, now: float, validity: float
) -> Ca:
    """The CA from Secret `namespace/name`: created when absent, renewed (new CA, bundle of
    both) once a third of its validity is left. A replica that loses a race uses the
    winner's."""
    where = f"Secret {namespace}/{name}"
    try:
        obj = await client.get(resources.SECRETS, name, namespace=namespace)
    except errors.NotFound:
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {"app.kubernetes.io/managed-by": "kube-reloader"},
            },
            "data": _data(new_ca(now, validity)),
        }
        try:
            return _decode(await client.create(resources.SECRETS, body), where)
        except errors.AlreadyExists:
            obj = await client.get(resources.SECRETS, name, namespace=namespace)
    ca = _decode(obj, where)
    if ca.not_after - now > (ca.not_after - ca.not_before) / 3:
        return ca
    renewed = new_ca(now, validity, previous=ca)
    obj = dict(obj)
    obj["data"] = _data(renewed)
    try:
        return _decode(await client.update(resources.SECRETS, obj), where)
    except errors.Conflict:  # another replica renewed it first: use theirs
        return _decode(await client.get(resources.SECRETS, name, namespace=namespace), where)


async def patch_ca_bundle(client: Client, webhook_config: str, bundle_pem: bytes) -> int:
    """Set every webhook's clientConfig.caBundle of the MutatingWebhookConfiguration to
    `bundle_pem`; returns how many webhooks were changed (0: already current)."""
    obj = await client.get(MUTATING_WEBHOOKS, webhook_config)
    want = base64.b64encode(bundle_pem).decode()
    ops: list[dict[str, Any]] = []
    for i, hook in enumerate(obj.get("webhooks") or []):
        if not isinstance(hook, dict) or (hook.get("clientConfig") or {}).get("caBundle") == want:
            continue
        ops += [
            {"op": "test", "path": f"/webhooks/{i}/name", "value": hook.get("name")},
            {"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": want},
        ]
    if ops:
        await client.patch(MUTATING_WEBHOOKS, webhook_config, ops, patch_type=PatchType.JSON)
    return len(ops) // 2
