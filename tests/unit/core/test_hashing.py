"""Golden hash vectors: every value must equal Reloader's for the same input (compat-spec §3)."""

from __future__ import annotations

import hashlib

import pytest

from kube_reloader.core import hashing


@pytest.mark.parametrize(
    ("data", "binary", "expected"),
    [
        ({"a": "1", "b": "2"}, None, "f83e99e324ba68ccc373a58ef1eb42f8ab88646a"),
        ({"b": "2", "a": "1"}, None, "f83e99e324ba68ccc373a58ef1eb42f8ab88646a"),
        ({"a": "1"}, {"bin": b"\x00\x01\xff"}, "d5dc58f87f0e3dddb0b553f274d938c9265e73a5"),
        ({}, None, "da39a3ee5e6b4b0d3255bfef95601890afd80709"),
        (None, None, "da39a3ee5e6b4b0d3255bfef95601890afd80709"),
        ({"a.b": "x", "a": "y"}, None, hashlib.sha1(b"a.b=x;a=y").hexdigest()),
        ({"k": "héllo ✓"}, None, hashlib.sha1("k=héllo ✓".encode()).hexdigest()),
        ({"k": ""}, None, hashlib.sha1(b"k=").hexdigest()),
    ],
    ids=[
        "spec example", "key order is irrelevant", "binaryData is base64 text", "empty",
        "no data at all", "sorted on the whole item, '.' before '='", "unicode is UTF-8",
        "empty value",
    ],
)  # fmt: skip
def test_configmap_hash_vectors(
    data: dict[str, str] | None, binary: dict[str, bytes] | None, expected: str
) -> None:
    assert hashing.configmap_hash(data, binary) == expected


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"a": b"1", "b": b"2"}, "f83e99e324ba68ccc373a58ef1eb42f8ab88646a"),
        ({}, hashing.EMPTY_HASH),
        ({"bin": b"\xff\xfe\x00"}, hashlib.sha1(b"bin=\xff\xfe\x00").hexdigest()),
        ({"z": b"\x80", "y": b"\x7f"}, hashlib.sha1(b"y=\x7f;z=\x80").hexdigest()),
    ],
    ids=["same as the configmap", "empty", "raw bytes that are not UTF-8", "byte-wise order"],
)
def test_secret_hash_vectors(data: dict[str, bytes], expected: str) -> None:
    assert hashing.secret_hash(data) == expected


def test_spc_pod_status_hash_vector() -> None:
    assert (
        hashing.spc_pod_status_hash([("secret/data/foo", "1")], "spc")
        == "fa843fd8a4053fd874c3edfa3f4776e875c7038f"
    )


def test_delete_marker_hash_is_v1s() -> None:
    assert hashing.DELETE_MARKER_HASH == "aae45badef99284e4dae01d6046154ea9d99532f"


def test_configmap_and_secret_with_the_same_content_hash_the_same() -> None:
    assert hashing.configmap_hash({"k": "v"}) == hashing.secret_hash({"k": b"v"})


def test_a_10k_key_secret_hashes_quickly_and_deterministically() -> None:
    data = {f"key-{i:05d}": bytes([i % 256]) * 8 for i in range(10_000)}
    reversed_data = dict(reversed(list(data.items())))
    assert hashing.secret_hash(data) == hashing.secret_hash(reversed_data)


def test_hmac_sha256_keys_the_same_items_reloader_hashes() -> None:
    import hmac

    key = b"k" * hashing.KEY_BYTES
    assert hashing.configmap_hash({"b": "2", "a": "1"}, key=key) == (
        hmac.new(key, b"a=1;b=2", hashlib.sha256).hexdigest()
    )
    assert hashing.secret_hash({"pin": b"123456"}, key=key) == (
        hmac.new(key, b"pin=123456", hashlib.sha256).hexdigest()
    )


def test_an_hmac_hash_cannot_be_matched_without_the_key() -> None:
    pin = {"pin": b"123456"}
    keyed = hashing.secret_hash(pin, key=b"a" * 32)
    assert keyed != hashing.secret_hash(pin)
    assert keyed != hashing.secret_hash(pin, key=b"b" * 32)
    assert len(keyed) == 64


def test_sha1_is_requested_as_not_for_security_so_fips_openssl_allows_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[dict[str, object]] = []
    real = hashlib.sha1

    def spy(*args: object, **kwargs: object) -> object:
        calls.append(kwargs)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(hashlib, "sha1", spy)
    hashing.configmap_hash({"a": "1"})
    assert calls == [{"usedforsecurity": False}]
