"""The webhook's PKI: a CA whose bundle keeps its predecessor, serving certificates for the
given names that never outlive their CA, installed into a live TLS context from memory."""

from __future__ import annotations

import contextlib
import ssl
import time

from cryptography import x509

from kube_reloader.kube import admissioncerts

DAY = 24 * 3600.0


def test_a_renewed_ca_bundles_its_predecessor_while_it_is_valid() -> None:
    now = time.time()
    old = admissioncerts.new_ca(now, 365 * DAY)
    assert old.bundle_pem == old.cert_pem
    new = admissioncerts.new_ca(now, 365 * DAY, previous=old)
    assert new.bundle_pem == new.cert_pem + old.cert_pem
    expired = admissioncerts.new_ca(now - 10 * DAY, DAY)
    assert admissioncerts.new_ca(now, DAY, previous=expired).bundle_pem.count(b"BEGIN") == 1


def test_a_serving_certificate_names_its_hosts_and_ends_with_its_ca_at_the_latest() -> None:
    now = time.time()
    ca = admissioncerts.new_ca(now, DAY)
    cert_pem, _ = admissioncerts.serving_cert(ca, ["svc.ns.svc", "127.0.0.1"], now, 30 * DAY)
    cert = x509.load_pem_x509_certificate(cert_pem)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["svc.ns.svc"]
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert admissioncerts.not_after(cert_pem) == ca.not_after
    short, _ = admissioncerts.serving_cert(ca, ["a"], now, 60)
    assert admissioncerts.not_after(short) <= now + 61


def test_a_certificate_is_installed_into_a_context_and_verifies_against_the_ca() -> None:
    now = time.time()
    ca = admissioncerts.new_ca(now, DAY)
    cert_pem, key_pem = admissioncerts.serving_cert(ca, ["127.0.0.1"], now, DAY)
    ctx = admissioncerts.server_context()
    admissioncerts.load(ctx, cert_pem, key_pem)
    client = ssl.create_default_context(cadata=ca.bundle_pem.decode())
    server_in, server_out, client_in, client_out = (ssl.MemoryBIO() for _ in range(4))
    server = ctx.wrap_bio(server_in, server_out, server_side=True)
    peer = client.wrap_bio(client_in, client_out, server_hostname="127.0.0.1")
    for _ in range(10):  # a handshake over memory
        for side in (peer, server):
            with contextlib.suppress(ssl.SSLWantReadError):
                side.do_handshake()
        server_in.write(client_out.read())
        client_in.write(server_out.read())
    der = peer.getpeercert(binary_form=True)
    assert der is not None
    assert admissioncerts.serial(ssl.DER_cert_to_PEM_cert(der).encode()) == admissioncerts.serial(
        cert_pem
    )
