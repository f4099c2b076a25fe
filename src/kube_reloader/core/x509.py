"""The validity of a certificate: `notBefore`/`notAfter` of the first certificate in a PEM
bundle (a TLS Secret's `tls.crt`), read by a small DER walk.

Total: any input gives a `Validity` or a one-line error, never an exception; nothing else
of the certificate is read or kept (no key, no name, no extension). Only what RFC 5280 puts
before the validity is walked: the TBSCertificate's optional `[0]` version, the serial
number, the signature algorithm, the issuer.
"""

from __future__ import annotations

import binascii
import datetime as dt

from kube_reloader.core.records import record

#: PEM input larger than this is refused (a certificate chain is a few KiB)
MAX_PEM = 64 << 10
_BEGIN, _END = b"-----BEGIN CERTIFICATE-----", b"-----END CERTIFICATE-----"
_SEQUENCE, _UTC_TIME, _GENERALIZED_TIME, _VERSION = 0x30, 0x17, 0x18, 0xA0


@record
class Validity:
    #: epoch seconds
    not_before: float
    not_after: float

    def to_dict(self) -> dict[str, str]:
        return {"notBefore": iso(self.not_before), "notAfter": iso(self.not_after)}


@record
class Parsed:
    validity: Validity | None = None
    error: str | None = None


class _Bad(Exception):
    pass


def iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def first_pem_certificate(pem: bytes) -> bytes | str:
    """The DER bytes of the first `CERTIFICATE` block of `pem`, or a one-line error.

    Linear in the input: one search for the first BEGIN line, one for the END line after it
    (a regex's lazy `.*?` retries from every BEGIN: quadratic on BEGIN lines with no END)."""
    if len(pem) > MAX_PEM:
        return f"the PEM data is larger than {MAX_PEM} bytes"
    begin = pem.find(_BEGIN)
    if begin < 0:
        return "no PEM CERTIFICATE block"
    start = begin + len(_BEGIN)
    end = pem.find(_END, start)
    if end < 0:
        return "no PEM CERTIFICATE block (a BEGIN line without an END line)"
    body = b"".join(pem[start:end].split())
    try:
        der = binascii.a2b_base64(body, strict_mode=True)
    except (binascii.Error, ValueError):
        return "the CERTIFICATE block is not valid base64"
    return der if der else "the CERTIFICATE block is empty"


def validity_of_pem(pem: bytes) -> Parsed:
    der = first_pem_certificate(pem)
    if isinstance(der, str):
        return Parsed(error=der)
    return validity_of_der(der)


def validity_of_der(der: bytes) -> Parsed:
    """The validity of a DER certificate, or a one-line error."""
    try:
        return Parsed(validity=_validity(der))
    except _Bad as exc:
        return Parsed(error=str(exc))


def _tlv(data: bytes, pos: int, end: int) -> tuple[int, int, int]:
    """(tag, content start, content end) of the element at `pos` (within `end`)."""
    if pos + 2 > end:
        raise _Bad("truncated DER element")
    tag, first = data[pos], data[pos + 1]
    if tag & 0x1F == 0x1F:
        raise _Bad("unsupported DER tag form")
    pos += 2
    if first < 0x80:
        length = first
    else:
        count = first & 0x7F
        if count == 0 or count > 4:
            raise _Bad("unsupported DER length form")
        if pos + count > end:
            raise _Bad("truncated DER length")
        length = int.from_bytes(data[pos : pos + count], "big")
        pos += count
    if pos + length > end:
        raise _Bad("DER element longer than its container")
    return tag, pos, pos + length


def _expect(data: bytes, pos: int, end: int, tag: int, what: str) -> tuple[int, int]:
    got, start, stop = _tlv(data, pos, end)
    if got != tag:
        raise _Bad(f"expected {what} (tag 0x{tag:02x}), found tag 0x{got:02x}")
    return start, stop


def _validity(der: bytes) -> Validity:
    cert_start, cert_end = _expect(der, 0, len(der), _SEQUENCE, "the Certificate SEQUENCE")
    pos, tbs_end = _expect(der, cert_start, cert_end, _SEQUENCE, "the TBSCertificate SEQUENCE")
    tag, _, stop = _tlv(der, pos, tbs_end)
    if tag == _VERSION:
        pos = stop
        tag, _, stop = _tlv(der, pos, tbs_end)
    if tag != 0x02:
        raise _Bad(f"expected the serial number INTEGER, found tag 0x{tag:02x}")
    pos = stop
    _, pos = _expect(der, pos, tbs_end, _SEQUENCE, "the signature AlgorithmIdentifier")
    _, pos = _expect(der, pos, tbs_end, _SEQUENCE, "the issuer Name")
    start, stop = _expect(der, pos, tbs_end, _SEQUENCE, "the Validity SEQUENCE")
    not_before, pos = _time(der, start, stop, "notBefore")
    not_after, _ = _time(der, pos, stop, "notAfter")
    return Validity(not_before, not_after)


def _time(der: bytes, pos: int, end: int, what: str) -> tuple[float, int]:
    tag, start, stop = _tlv(der, pos, end)
    text = der[start:stop]
    if tag == _UTC_TIME and len(text) == 13:
        year = int(text[:2]) if text[:2].isdigit() else -1
        text = (b"19" if year >= 50 else b"20") + text  # RFC 5280 4.1.2.5.1
    elif tag != _GENERALIZED_TIME or len(text) != 15:
        raise _Bad(f"{what} is not a UTCTime or GeneralizedTime of RFC 5280's form")
    if not text[:14].isdigit() or text[14:] != b"Z":
        raise _Bad(f"{what} is not a UTC time (YYYYMMDDHHMMSSZ)")
    try:
        when = dt.datetime.strptime(text[:14].decode("ascii"), "%Y%m%d%H%M%S")
    except ValueError:
        raise _Bad(f"{what} is not a valid date") from None
    return when.replace(tzinfo=dt.UTC).timestamp(), stop
