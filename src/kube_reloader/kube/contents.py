"""ConfigMaps and Secrets as decoded for hashing: their content kept as the raw JSON it came
in (a view of the answer, no copy), decoded only when it is hashed, and a digest of those
bytes that tells an event which left the content alone (a label, an annotation) from one
that changed it, without decoding or hashing the content again.

The digest is keyed BLAKE2b with a key drawn once per process: nobody outside it can
compute one, so nobody can make two different contents that look the same to it. Equal
digests mean equal bytes; different bytes of the same content (which the API server's
serializer, sorting map keys, does not produce) only cost the full path.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from typing import TypeVar

import msgspec

from kube_reloader.kube.projections import ObjectMeta

T = TypeVar("T")

_KEY = os.urandom(32)
_STRINGS = msgspec.json.Decoder(dict[str, str] | None)
_BINARY = msgspec.json.Decoder(dict[str, bytes] | None)
_RAWS = msgspec.json.Decoder(dict[str, msgspec.Raw] | None)
_BYTES = msgspec.json.Decoder(bytes)


def _absent() -> msgspec.Raw:
    return msgspec.Raw(b"")


def digest(*parts: msgspec.Raw) -> bytes:
    """16 bytes that differ, but for a 2^-128 chance, when any of `parts` differs."""
    h = hashlib.blake2b(key=_KEY, digest_size=16)
    for part in parts:
        view = memoryview(part)
        h.update(view.nbytes.to_bytes(8, "little"))
        h.update(view)
    return h.digest()


def _decode(decoder: msgspec.json.Decoder[T], raw: msgspec.Raw) -> T | None:
    """`raw` decoded; None when it is absent."""
    return decoder.decode(raw) if memoryview(raw).nbytes else None


class ConfigMapContent(msgspec.Struct, frozen=True):
    """A ConfigMap as decoded for hashing; reduced to a hash right after decoding."""

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    data: msgspec.Raw = msgspec.field(default_factory=_absent)
    binaryData: msgspec.Raw = msgspec.field(default_factory=_absent)

    def strings(self) -> dict[str, str] | None:
        """`data`, decoded; raises msgspec.ValidationError when it is not a map of strings."""
        return _decode(_STRINGS, self.data)

    def binary(self) -> dict[str, bytes] | None:
        """`binaryData`, decoded (from base64); raises msgspec.ValidationError when it is
        not a map of base64 strings."""
        return _decode(_BINARY, self.binaryData)

    def digest(self) -> bytes:
        """The digest of the content's bytes (`digest`)."""
        return digest(self.data, self.binaryData)


class SecretContent(msgspec.Struct, frozen=True):
    """A Secret as decoded for hashing.

    Values stay raw JSON (views of the answer, no copy) until `values()` decodes them one
    at a time: a page of 500 Secrets of 8 KiB never becomes 500 live 8 KiB objects.
    """

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    data: msgspec.Raw = msgspec.field(default_factory=_absent)
    type: str = ""

    def values(self) -> Iterator[tuple[str, bytes]]:
        """Each `(key, decoded bytes)` of `data`; raises msgspec.DecodeError on bad base64
        and msgspec.ValidationError when `data` is not a map."""
        for key, raw in (_decode(_RAWS, self.data) or {}).items():
            yield key, _BYTES.decode(raw)

    def digest(self) -> bytes:
        """The digest of the content's bytes (`digest`)."""
        return digest(self.data)
