"""The certificate validity reader: exact on real certificates, total on anything else."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from hypothesis import given, settings
from hypothesis import strategies as st

from kube_reloader.core.x509 import MAX_PEM, validity_of_der, validity_of_pem

KEY = ec.generate_private_key(ec.SECP256R1())
NAME = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "nats.tenant.svc")])


def certificate(not_before: dt.datetime, not_after: dt.datetime, *, serial: int = 7) -> bytes:
    cert = (
        x509.CertificateBuilder().subject_name(NAME).issuer_name(NAME)
        .public_key(KEY.public_key()).serial_number(serial)
        .not_valid_before(not_before).not_valid_after(not_after)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("nats.tenant.svc")]), False)
        .sign(KEY, hashes.SHA256())
    )  # fmt: skip
    return cert.public_bytes(serialization.Encoding.PEM)


def utc(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("not_before", "not_after"),
    [
        (utc(2026, 1, 2, 3, 4, 5), utc(2026, 4, 2, 3, 4, 5)),  # UTCTime both
        (utc(1999, 12, 31, 23, 59, 59), utc(2049, 12, 31, 23, 59, 59)),  # UTCTime 19xx / 20xx
        (utc(2001, 1, 1), utc(2060, 1, 1)),  # notAfter from 2050 on is a GeneralizedTime
    ],
)
def test_the_validity_of_a_real_certificate_is_read_exactly(
    not_before: dt.datetime, not_after: dt.datetime
) -> None:
    parsed = validity_of_pem(certificate(not_before, not_after, serial=2**150))
    assert parsed.error is None
    assert parsed.validity is not None
    assert parsed.validity.not_before == not_before.timestamp()
    assert parsed.validity.not_after == not_after.timestamp()


def test_only_the_first_certificate_of_a_chain_is_read() -> None:
    leaf = certificate(utc(2026, 5, 1), utc(2026, 6, 1))
    ca = certificate(utc(2020, 1, 1), utc(2030, 1, 1))
    parsed = validity_of_pem(b"junk before\n" + leaf + ca)
    assert parsed.validity is not None
    assert parsed.validity.to_dict() == {
        "notBefore": "2026-05-01T00:00:00Z",
        "notAfter": "2026-06-01T00:00:00Z",
    }


GOOD = certificate(utc(2026, 1, 1), utc(2027, 1, 1))


@pytest.mark.parametrize(
    ("pem", "error"),
    [
        (b"", "no PEM CERTIFICATE block"),
        (b"-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----", "not valid base64"),
        (b"-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----", "empty"),
        (b"-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----", "truncated"),
        (
            b"-----BEGIN CERTIFICATE-----\nAgEB\n-----END CERTIFICATE-----",
            "expected the Certificate",
        ),
        (b"x" * (MAX_PEM + 1), "larger than"),
    ],
)
def test_input_that_is_no_certificate_gives_a_one_line_error(pem: bytes, error: str) -> None:
    parsed = validity_of_pem(pem)
    assert parsed.validity is None
    assert parsed.error is not None
    assert error in parsed.error
    assert "\n" not in parsed.error


class Scanned(bytes):
    """Bytes that count the searches made in them and the bytes those searches may read."""

    finds = 0
    scanned = 0

    def find(self, sub: Any, start: Any = None, end: Any = None) -> int:
        Scanned.finds += 1
        Scanned.scanned += len(self) - (start or 0)
        return super().find(sub, start, end)


BEGIN = b"-----BEGIN CERTIFICATE-----"


@pytest.mark.parametrize(
    ("tail", "error"),
    [(b"", "without an END line"), (GOOD, "not valid base64"), (b"\n" + GOOD, "not valid base64")],
    ids=["BEGIN lines only", "then a certificate", "then a certificate on its own line"],
)  # fmt: skip
def test_a_hostile_run_of_begin_lines_is_read_in_two_linear_searches(
    tail: bytes, error: str
) -> None:
    hostile = BEGIN * ((MAX_PEM - len(tail)) // len(BEGIN)) + tail
    Scanned.finds = Scanned.scanned = 0
    parsed = validity_of_pem(Scanned(hostile))
    assert parsed.error is not None
    assert error in parsed.error
    assert "\n" not in parsed.error
    assert 1 <= Scanned.finds <= 2, "one search for BEGIN, one for the END after it"
    assert Scanned.scanned <= 2 * len(hostile), "each search reads the input at most once"


def test_pem_input_over_64_kib_is_refused_before_it_is_searched() -> None:
    Scanned.finds = 0
    parsed = validity_of_pem(Scanned(BEGIN * (64 * 1024 // len(BEGIN) + 1)))
    assert parsed.error is not None
    assert "larger than 65536 bytes" in parsed.error
    assert Scanned.finds == 0


def test_a_certificate_after_junk_and_before_a_run_of_begin_lines_is_read() -> None:
    pem = b"junk\n" + GOOD + BEGIN * 1000
    parsed = validity_of_pem(pem)
    assert parsed.validity is not None
    assert parsed.validity.to_dict()["notBefore"] == "2026-01-01T00:00:00Z"


def test_a_truncated_certificate_gives_an_error_at_every_length() -> None:
    der = x509.load_pem_x509_certificate(GOOD).public_bytes(serialization.Encoding.DER)
    for n in range(len(der)):
        parsed = validity_of_der(der[:n])
        assert parsed.validity is None, n
        assert parsed.error, n


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=600))
def test_any_der_bytes_give_a_validity_or_a_one_line_error(data: bytes) -> None:
    parsed = validity_of_der(data)
    assert (parsed.validity is None) != (parsed.error is None)
    assert parsed.error is None or "\n" not in parsed.error


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 700), st.integers(0, 255))
def test_a_certificate_with_one_byte_changed_gives_a_validity_or_a_one_line_error(
    at: int, value: int
) -> None:
    der = bytearray(x509.load_pem_x509_certificate(GOOD).public_bytes(serialization.Encoding.DER))
    der[at % len(der)] = value
    parsed = validity_of_der(bytes(der))
    assert (parsed.validity is None) != (parsed.error is None)
    assert parsed.error is None or "\n" not in parsed.error


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_any_pem_text_gives_a_validity_or_a_one_line_error(text: str) -> None:
    pem = f"-----BEGIN CERTIFICATE-----\n{text}\n-----END CERTIFICATE-----".encode(
        "utf-8", "replace"
    )
    parsed = validity_of_pem(pem)
    assert (parsed.validity is None) != (parsed.error is None)
    assert parsed.error is None or "\n" not in parsed.error
