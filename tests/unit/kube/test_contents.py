"""ConfigMaps and Secrets decoded with their content kept raw (`kube.contents`): decoded on
demand as before, and a digest of the raw bytes that tells them apart."""

from __future__ import annotations

import base64
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kube_reloader.kube.configfiles import config_files
from kube_reloader.kube.contents import ConfigMapContent, SecretContent, digest
from kube_reloader.kube.errors import KubeError


def cm(body: bytes) -> ConfigMapContent:
    return msgspec.json.decode(body, type=ConfigMapContent)


def test_a_configmaps_data_and_binary_data_decode_on_demand() -> None:
    got = cm(b'{"metadata": {"name": "c"}, "data": {"a": "1"}, "binaryData": {"b": "AAE="}}')
    assert got.metadata.name == "c"
    assert got.strings() == {"a": "1"}
    assert got.binary() == {"b": b"\x00\x01"}


@pytest.mark.parametrize("body", [b"{}", b'{"data": null, "binaryData": null}'])
def test_absent_or_null_content_decodes_as_none(body: bytes) -> None:
    assert (cm(body).strings(), cm(body).binary()) == (None, None)


def test_content_that_is_not_a_map_of_strings_raises_when_it_is_decoded() -> None:
    got = cm(b'{"data": {"a": 1}}')  # the object itself still decodes (its metadata is read)
    with pytest.raises(msgspec.ValidationError):
        got.strings()


def test_a_secrets_values_decode_one_by_one_from_base64() -> None:
    value = base64.b64encode(b"s3cr3t").decode()
    body = msgspec.json.encode({"data": {"k": value}, "type": "Opaque"})
    secret = msgspec.json.decode(body, type=SecretContent)
    assert list(secret.values()) == [("k", b"s3cr3t")]
    assert list(msgspec.json.decode(b"{}", type=SecretContent).values()) == []
    with pytest.raises(msgspec.DecodeError):
        list(msgspec.json.decode(b'{"data": {"k": "%%"}}', type=SecretContent).values())


def test_the_same_bytes_in_data_or_in_binary_data_are_different_content() -> None:
    body = b'{"a": "AAE="}'
    assert cm(b'{"data": ' + body + b"}").digest() != cm(b'{"binaryData": ' + body + b"}").digest()


def test_metadata_does_not_change_the_digest_and_one_byte_of_content_does() -> None:
    one = cm(b'{"metadata": {"name": "a", "annotations": {"x": "1"}}, "data": {"k": "v"}}')
    relabelled = cm(b'{"metadata": {"name": "a", "annotations": {"x": "2"}}, "data": {"k": "v"}}')
    changed = cm(b'{"metadata": {"name": "a"}, "data": {"k": "w"}}')
    assert one.digest() == relabelled.digest() != changed.digest()
    assert len(one.digest()) == 16


@given(st.lists(st.binary(max_size=8), max_size=3), st.lists(st.binary(max_size=8), max_size=3))
def test_digests_are_equal_exactly_when_the_parts_are(a: list[bytes], b: list[bytes]) -> None:
    raws = [[msgspec.Raw(x) for x in parts] for parts in (a, b)]
    assert (digest(*raws[0]) == digest(*raws[1])) == (a == b)


class OneConfigMap:
    """A client whose LIST answers one ConfigMap, decoded as asked."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    async def list(self, resource: object, **options: Any) -> Any:
        return SimpleNamespace(items=[msgspec.json.decode(self.body, type=options["type"])])


async def test_a_configmaps_files_are_its_data_as_utf_8_and_its_binary_data() -> None:
    body = '{"data": {"a": "é"}, "binaryData": {"b": "AAE="}}'.encode()
    files = await config_files(OneConfigMap(body), "ns", "c")  # type: ignore[arg-type]
    assert files == {"a": "é".encode(), "b": b"\x00\x01"}


async def test_a_configmap_whose_data_cannot_be_read_is_a_kube_error_for_its_files() -> None:
    with pytest.raises(KubeError, match="cannot read its data"):
        await config_files(OneConfigMap(b'{"data": {"a": 1}}'), "ns", "c")  # type: ignore[arg-type]


def test_binary_data_alone_changes_the_digest() -> None:
    one = cm(b'{"data": {"k": "v"}, "binaryData": {"b": "AAE="}}')
    other = cm(b'{"data": {"k": "v"}, "binaryData": {"b": "AAI="}}')
    assert one.digest() != other.digest()
