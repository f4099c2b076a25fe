"""A watch event that leaves a ConfigMap's or Secret's content bytes alone reuses the stored
reduction (`cache.content_kept`, `sources.config_update`): whatever it returns must be what
the full reduction (`configmap_entry`, `secret_entry`) gives, but for the content time, which
stays the stored one (as `intake.keep_content_time` keeps it after a full reduction)."""

from __future__ import annotations

import base64
import copy
from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kube_reloader.core.annotations import Keys
from kube_reloader.core.objects import ResourceType
from kube_reloader.kube.contents import ConfigMapContent, SecretContent
from kube_reloader.runtime.cache import ConfigEntry, configmap_entry, content_kept, secret_entry
from kube_reloader.runtime.sources import config_update

KEYS = Keys()
Manifest = dict[str, Any]


def configmap() -> Manifest:
    return {
        "metadata": {"name": "cfg", "namespace": "ns", "uid": "u-1", "resourceVersion": "10",
                     "creationTimestamp": "2026-12-01T09:00:00Z",
                     "annotations": {"unrelated": "x"},
                     "managedFields": [{"manager": "kubectl", "operation": "Update", "time": "2026-12-01T10:00:00Z",
                                        "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}}}}]},
        "data": {"a": "1", "b": "two"},
        "binaryData": {"c": base64.b64encode(b"\x00\x01").decode()},
    }  # fmt: skip


def secret() -> Manifest:
    m = configmap()
    del m["binaryData"]
    m["data"] = {"tls.crt": base64.b64encode(b"cert").decode(), "tls.key": "a2V5"}
    m["type"] = "Opaque"
    return m


def decode(m: Manifest) -> Any:
    kind = SecretContent if "type" in m else ConfigMapContent
    return msgspec.json.decode(msgspec.json.encode(m), type=kind)


def full(m: Manifest, *, per_key: bool = False) -> ConfigEntry:
    """The full reduction, with the digest a watch event's reduction keeps."""
    obj = decode(m)
    if "type" in m:
        return secret_entry(obj, KEYS, per_key=per_key, content=obj.digest())
    return configmap_entry(obj, KEYS, per_key=per_key, content=obj.digest())


def kept(m: Manifest, old: ConfigEntry, *, per_key: bool = False) -> ConfigEntry | None:
    obj = decode(m)
    return content_kept(obj, old, KEYS, per_key=per_key, content=obj.digest())


def relabelled(m: Manifest) -> None:
    m["metadata"]["resourceVersion"] = "11"
    m["metadata"]["labels"] = {"team": "a"}
    m["metadata"]["managedFields"].append({"manager": "kubectl-label", "operation": "Update", "time": "2026-12-02T10:00:00Z",
                                           "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {}}}})  # fmt: skip


def now_ignored(m: Manifest) -> None:  # an annotation the rules read: kept in the entry
    m["metadata"]["annotations"][KEYS.ignore] = "true"


def made_tls(m: Manifest) -> None:
    m["type"] = "kubernetes.io/tls"


def value_changed(m: Manifest) -> None:
    m["data"]["a"] = "2"


def key_added(m: Manifest) -> None:
    m["data"]["z"] = ""


def emptied(m: Manifest) -> None:
    del m["data"]


def binary_changed(m: Manifest) -> None:  # a Secret has none: its data changes instead
    key = "binaryData" if "binaryData" in m else "data"
    m[key] = {**m[key], "c": base64.b64encode(b"\x00\x02").decode()}


def moved_to_binary(m: Manifest) -> None:  # the same JSON bytes under the other field
    if "binaryData" in m:
        m["data"], m["binaryData"] = m["binaryData"], m["data"]
    else:
        m["data"] = {**m["data"], "x": "eA=="}


def recreated(m: Manifest) -> None:
    m["metadata"]["uid"] = "u-2"


def edited(
    kind: Callable[[], Manifest], change: Callable[[Manifest], None]
) -> tuple[Manifest, Manifest]:
    """A manifest of `kind`, and a copy with `change` made to it."""
    before = kind()
    after = copy.deepcopy(before)
    change(after)
    return before, after


KEPT = [relabelled, now_ignored]
NOT_KEPT = [value_changed, key_added, emptied, binary_changed, moved_to_binary, recreated]


@pytest.mark.parametrize("kind", [configmap, secret])
@pytest.mark.parametrize("change", KEPT)
def test_a_write_that_left_the_content_alone_equals_the_full_reduction_with_the_old_time(
    kind: Callable[[], Manifest], change: Callable[[Manifest], None]
) -> None:
    before, after = edited(kind, change)
    old = full(before)
    got = kept(after, old)
    assert got == msgspec.structs.replace(full(after), changed_at=old.changed_at)


@pytest.mark.parametrize("kind", [configmap, secret])
@pytest.mark.parametrize("change", NOT_KEPT)
def test_a_changed_content_or_a_replaced_object_is_reduced_in_full(
    kind: Callable[[], Manifest], change: Callable[[Manifest], None]
) -> None:
    before, after = edited(kind, change)
    assert kept(after, full(before)) is None


def test_a_secret_made_a_tls_secret_says_so_with_its_content_kept() -> None:
    before, after = edited(secret, made_tls)
    got = kept(after, full(before))
    assert got is not None
    assert got.tls
    assert not full(before).tls
    assert got == msgspec.structs.replace(full(after), changed_at=full(before).changed_at)


def test_per_key_digests_are_reused_when_kept_and_wanted_and_never_made_up() -> None:
    before, after = edited(configmap, relabelled)
    with_digests, without = full(before, per_key=True), full(before)
    got = kept(after, with_digests, per_key=True)
    assert got is not None
    assert got.digests == full(after, per_key=True).digests
    no_longer = kept(after, with_digests)
    assert no_longer is not None
    assert no_longer.digests is None
    assert kept(after, without, per_key=True) is None


def test_an_entry_without_a_content_digest_or_content_time_is_never_taken_as_unchanged() -> None:
    m = configmap()
    assert kept(m, msgspec.structs.replace(full(m), content=b"")) is None
    assert kept(m, msgspec.structs.replace(full(m), changed_at=None)) is None


def test_a_modified_event_is_reduced_from_the_stored_entry_in_full_or_kept_with_its_digest() -> (
    None
):
    asked: list[tuple[str, ResourceType, str]] = []

    def wants(namespace: str, rtype: ResourceType, name: str) -> bool:
        asked.append((namespace, rtype, name))
        return True

    update = config_update(ResourceType.CONFIGMAP, KEYS, None, wants)
    m = configmap()
    listed = configmap_entry(decode(m), KEYS)  # from a LIST: no digest, no per-key digests
    assert update(decode(m), listed) == full(m, per_key=True)
    changed = copy.deepcopy(m)
    value_changed(changed)
    assert update(decode(changed), full(m, per_key=True)) == full(changed, per_key=True)
    relabelled(changed)
    stored = full(m, per_key=True)
    got = update(decode(changed), full(changed, per_key=True))
    assert got == msgspec.structs.replace(full(changed, per_key=True), changed_at=stored.changed_at)
    assert asked == [("ns", ResourceType.CONFIGMAP, "cfg")] * 3


DATA = st.dictionaries(st.sampled_from("abc"), st.text("xy=;\n\u00e9", max_size=3), max_size=3)


@given(DATA, DATA)
def test_a_modified_events_reduction_always_carries_the_hash_the_full_reduction_gives(
    a: dict[str, str], b: dict[str, str]
) -> None:
    before, after = configmap(), configmap()
    before["data"], after["data"] = a, b
    got = kept(after, full(before))
    same_bytes = msgspec.json.encode(a) == msgspec.json.encode(b)
    assert (got is not None) == same_bytes
    reduced = config_update(ResourceType.CONFIGMAP, KEYS, None)(decode(after), full(before))
    assert reduced is not None
    assert (reduced.hash, reduced.content) == (full(after).hash, full(after).content)
