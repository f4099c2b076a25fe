"""Content hashes identical to Reloader's, so switching controllers rolls nothing.

SHA-1 over the `key=value` items sorted byte-wise and joined with `;` (compat-spec §3).
That hash is unsalted: anyone who reads it (a workload's env var, a log line) can test
guesses of a short Secret offline. `--hash-algorithm=hmac-sha256` keys the same items with a
secret key instead (clusters that do not need Reloader-identical values); the key is passed
in, never stored here.
ConfigMap `binaryData` is hashed as its standard padded base64 text; Secret values are hashed
as their decoded raw bytes. Only these hashes are ever kept: the data itself is dropped as
soon as the hash is computed.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterable, Mapping

#: sha1("") — what an empty ConfigMap or Secret hashes to
EMPTY_HASH = "da39a3ee5e6b4b0d3255bfef95601890afd80709"
#: v1 >= 1.4.13 writes sha1 of this marker in annotations mode when a resource is deleted
DELETE_MARKER = b"__RELOADER_EMPTY_DELETE_MARKER__"
DELETE_MARKER_HASH = hashlib.sha1(DELETE_MARKER, usedforsecurity=False).hexdigest()


#: the algorithms `--hash-algorithm` accepts
ALGORITHMS = ("sha1", "hmac-sha256")
#: bytes of key for hmac-sha256
KEY_BYTES = 32


def _digest(items: Iterable[bytes], key: bytes | None = None) -> str:
    joined = b";".join(sorted(items))
    if key is not None:
        return hmac.new(key, joined, hashlib.sha256).hexdigest()
    # Reloader's value; FIPS-mode OpenSSL refuses SHA-1 unless told it is not for security
    return hashlib.sha1(joined, usedforsecurity=False).hexdigest()


def configmap_items(
    data: Mapping[str, str] | None, binary_data: Mapping[str, bytes] | None = None
) -> list[tuple[str, bytes]]:
    """Each key of a ConfigMap with the `key=value` item its hash is made of."""
    items = [(k, k.encode() + b"=" + v.encode()) for k, v in (data or {}).items()]
    items += [
        (k, k.encode() + b"=" + base64.standard_b64encode(raw))
        for k, raw in (binary_data or {}).items()
    ]
    return items


def secret_items(data: Mapping[str, bytes] | None) -> list[tuple[str, bytes]]:
    """Each key of a Secret with the `key=value` item its hash is made of."""
    return [(k, k.encode() + b"=" + v) for k, v in (data or {}).items()]


def items_hash(items: Iterable[tuple[str, bytes]], *, key: bytes | None = None) -> str:
    return _digest((item for _, item in items), key)


def configmap_hash(
    data: Mapping[str, str] | None,
    binary_data: Mapping[str, bytes] | None = None,
    *,
    key: bytes | None = None,
) -> str:
    """Hash of a ConfigMap's `data` and `binaryData` (raw bytes, as decoded from the API)."""
    return items_hash(configmap_items(data, binary_data), key=key)


def secret_hash(data: Mapping[str, bytes] | None, *, key: bytes | None = None) -> str:
    """Hash of a Secret's `data` (raw decoded bytes; type, labels and annotations ignored)."""
    return items_hash(secret_items(data), key=key)


def spc_pod_status_hash(
    objects: Iterable[tuple[str, str]], class_name: str, *, key: bytes | None = None
) -> str:
    """Hash of a SecretProviderClassPodStatus: its `(id, version)` objects and class name."""
    items = [f"{i}={v}".encode() for i, v in objects]
    items.append(f"SecretProviderClassName={class_name}".encode())
    return _digest(items, key)
