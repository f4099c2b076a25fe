"""Credentials for a dev cluster: a CA, the API server's serving certificate, an admin client
certificate, an admin bearer token and the service-account signing key; and the client
certificate the API server presents to admission webhooks (`WEBHOOK_CLIENT`, through the
AdmissionConfiguration `admission_config`: a webhook may require it, `--admission-client-ca`).

Everything is generated fresh for each cluster and lives only in its state directory (mode
0600), so the kubeconfig verifies the server for real instead of skipping TLS verification.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = dt.timedelta(days=365)
#: the common name of the API server's client certificate for admission webhooks
WEBHOOK_CLIENT = "kube-apiserver-webhook-client"
_CA_KEY_USAGE = x509.KeyUsage(
    digital_signature=True,
    key_cert_sign=True,
    crl_sign=True,
    content_commitment=False,
    key_encipherment=False,
    data_encipherment=False,
    key_agreement=False,
    encipher_only=False,
    decipher_only=False,
)


@dataclass(frozen=True, slots=True)
class Pki:
    """Paths of every generated credential."""

    root: Path

    @property
    def ca_crt(self) -> Path:
        return self.root / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.root / "ca.key"

    @property
    def serving_crt(self) -> Path:
        return self.root / "apiserver.crt"

    @property
    def serving_key(self) -> Path:
        return self.root / "apiserver.key"

    @property
    def admin_crt(self) -> Path:
        return self.root / "admin.crt"

    @property
    def admin_key(self) -> Path:
        return self.root / "admin.key"

    @property
    def sa_key(self) -> Path:
        return self.root / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.root / "sa.pub"

    @property
    def webhook_client_crt(self) -> Path:
        return self.root / "webhook-client.crt"

    @property
    def webhook_client_key(self) -> Path:
        return self.root / "webhook-client.key"

    @property
    def admission_config(self) -> Path:
        """The API server's `--admission-control-config-file` (absent in older clusters)."""
        return self.root / "admission-config.json"

    @property
    def tokens_csv(self) -> Path:
        return self.root / "tokens.csv"

    @property
    def token_file(self) -> Path:
        return self.root / "admin.token"

    def token(self) -> str:
        return self.token_file.read_text().strip()


def generate(root: Path) -> Pki:
    """Write a complete, fresh PKI into `root`."""
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o700)
    pki = Pki(root)
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    ca_key, ca_cert = _ca(pki, now)
    sans: list[x509.GeneralName] = [
        x509.DNSName("localhost"),
        x509.DNSName("kubernetes"),
        x509.DNSName("kubernetes.default"),
        x509.DNSName("kubernetes.default.svc"),
        x509.DNSName("kubernetes.default.svc.cluster.local"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address("10.0.0.1")),
    ]
    ca = _Signer(ca_cert, ca_key, now)
    server, client = ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH
    masters = ("system:masters",)
    _leaf(ca, pki.serving_crt, pki.serving_key, cn="kube-apiserver", usage=server, sans=sans)
    _leaf(ca, pki.admin_crt, pki.admin_key, cn="kube-reloader-admin", usage=client, orgs=masters)
    _leaf(ca, pki.webhook_client_crt, pki.webhook_client_key, cn=WEBHOOK_CLIENT, usage=client)
    _write_admission_config(pki)
    _service_accounts_and_token(pki)
    return pki


def _ca(pki: Pki, now: dt.datetime) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """The dev CA's key and self-signed certificate, written into `pki`."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-reloader-dev-ca")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(_CA_KEY_USAGE, critical=True)
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    _write_key(pki.ca_key, ca_key)
    _write(pki.ca_crt, ca_cert.public_bytes(serialization.Encoding.PEM))
    return ca_key, ca_cert


def _service_accounts_and_token(pki: Pki) -> None:
    """The service-account signing key and the admin's static token."""
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write_key(pki.sa_key, sa_key)
    _write(
        pki.sa_pub,
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
    )
    token = secrets.token_hex(24)
    _write(pki.token_file, token.encode() + b"\n")
    _write(pki.tokens_csv, f'{token},kube-reloader-admin,admin-uid,"system:masters"\n'.encode())


def _write_admission_config(pki: Pki) -> None:
    """An AdmissionConfiguration whose MutatingAdmissionWebhook plugin reads a kubeconfig
    with one user, `*` (every webhook, whatever its host:port): the webhook client
    certificate, presented to any webhook that asks for one."""
    kubeconfig = pki.root / "webhook-client.kubeconfig"
    user = {
        "client-certificate": str(pki.webhook_client_crt),
        "client-key": str(pki.webhook_client_key),
    }
    users = {"apiVersion": "v1", "kind": "Config", "users": [{"name": "*", "user": user}]}
    _write(kubeconfig, json.dumps(users).encode())
    plugin = {
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "WebhookAdmissionConfiguration",
        "kubeConfigFile": str(kubeconfig),
    }
    doc = {
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "AdmissionConfiguration",
        "plugins": [{"name": "MutatingAdmissionWebhook", "configuration": plugin}],
    }
    _write(pki.admission_config, json.dumps(doc, indent=2).encode())


@dataclass(frozen=True, slots=True)
class _Signer:
    """The cluster's CA signing leaf certificates valid from `now`."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey
    now: dt.datetime


def _leaf(
    ca: _Signer,
    crt_path: Path,
    key_path: Path,
    *,
    cn: str,
    usage: x509.ObjectIdentifier,
    orgs: tuple[str, ...] = (),
    sans: Sequence[x509.GeneralName] = (),
) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(attrs))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(ca.now)
        .not_valid_after(ca.now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()),
            critical=False,
        )
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca.key, hashes.SHA256())
    _write_key(key_path, key)
    _write(crt_path, cert.public_bytes(serialization.Encoding.PEM))


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    _write(
        path,
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )


def _write(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def node_client(pki: Pki, out: Path, node: str) -> tuple[Path, Path]:
    """A kubelet's client certificate for `node` (`system:node:<node>` in `system:nodes`),
    signed by the cluster's CA, written to `out`; returns (certificate, key)."""
    out.mkdir(parents=True, exist_ok=True)
    ca_cert = x509.load_pem_x509_certificate(pki.ca_crt.read_bytes())
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise TypeError(f"the dev cluster's CA key is not an EC key: {type(ca_key).__name__}")
    crt, key = out / "kubelet-client.crt", out / "kubelet-client.key"
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    ca = _Signer(ca_cert, ca_key, now)
    client, nodes = ExtendedKeyUsageOID.CLIENT_AUTH, ("system:nodes",)
    _leaf(ca, crt, key, cn=f"system:node:{node}", usage=client, orgs=nodes)
    return crt, key
