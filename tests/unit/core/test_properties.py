"""Property-based tests of the pure core (hypothesis)."""

from __future__ import annotations

import base64
import hashlib

from hypothesis import given, settings
from hypothesis import strategies as st

from kube_reloader.core import hashing, mutating, strategies
from kube_reloader.core.matching import MatchConfig, decide
from kube_reloader.core.objects import ResourceType, WorkloadKind
from kube_reloader.core.references import pod_template_from_manifest

keys = st.text(
    alphabet=st.characters(min_codepoint=33, max_codepoint=0x2FFF, blacklist_characters="=;"),
    min_size=1,
    max_size=12,
)
values = st.text(max_size=30)
raw = st.binary(max_size=30)


def reference_hash(items: list[bytes]) -> str:
    """compat-spec §3, written independently: Go's sort.Strings on bytes, joined by ';'."""
    return hashlib.sha1(b";".join(sorted(items))).hexdigest()


@given(st.dictionaries(keys, values, max_size=8), st.dictionaries(keys, raw, max_size=4))
def test_configmap_hash_equals_the_reference_and_ignores_key_order(
    data: dict[str, str], binary: dict[str, bytes]
) -> None:
    items = [f"{k}={v}".encode() for k, v in data.items()]
    items += [k.encode() + b"=" + base64.b64encode(v) for k, v in binary.items()]
    expected = reference_hash(items)
    assert hashing.configmap_hash(data, binary) == expected
    assert (
        hashing.configmap_hash(
            dict(reversed(list(data.items()))), dict(reversed(list(binary.items())))
        )
        == expected
    )


@given(st.dictionaries(keys, raw, max_size=8))
def test_secret_hash_equals_the_reference(data: dict[str, bytes]) -> None:
    assert hashing.secret_hash(data) == reference_hash(
        [k.encode() + b"=" + v for k, v in data.items()]
    )


annotation_values = st.sampled_from(
    ["true", "false", "True", "yes", "", "1", "x|cm", "c.*", "[", "cm, other"]
)
annotation_keys = st.sampled_from([
    "reloader.stakater.com/auto", "configmap.reloader.stakater.com/auto", "configmap.reloader.stakater.com/reload",
    "reloader.stakater.com/search", "configmaps.exclude.reloader.stakater.com/reload",
])  # fmt: skip
annotation_maps = st.dictionaries(annotation_keys, annotation_values, max_size=4)


@given(annotation_maps, annotation_maps, st.booleans(), st.sampled_from(list(WorkloadKind)))
@settings(max_examples=300)
def test_decisions_are_deterministic_and_always_explained(
    wa: dict[str, str], pa: dict[str, str], all_: bool, kind: WorkloadKind
) -> None:
    kw = {"rtype": ResourceType.CONFIGMAP, "name": "cm", "resource_annotations": {}, "kind": kind,
          "workload_annotations": wa, "template_annotations": pa, "config": MatchConfig(auto_reload_all=all_)}  # fmt: skip
    first, second = decide(**kw), decide(**kw)  # type: ignore[arg-type]
    assert first == second
    assert first.message


env_names = st.from_regex(r"STAKATER_[A-Z0-9_]{1,10}_CONFIGMAP", fullmatch=True)
hashes = st.text(alphabet="0123456789abcdef", min_size=40, max_size=40)


@given(
    st.lists(st.tuples(env_names, hashes), min_size=1, max_size=4),
    st.lists(st.sampled_from(["A", "B", "KEEP"]), max_size=3),
)
def test_applying_an_env_patch_twice_equals_applying_it_once(
    sets: list[tuple[str, str]], existing: list[str]
) -> None:
    template = {
        "spec": {
            "containers": [
                {"name": "app", "env": [{"name": n, "value": "v"} for n in dict.fromkeys(existing)]}
            ]
        }
    }
    for name, value in sets:
        body = strategies.env_patch(pod_template_from_manifest(template), "app", name, value)
        if body is None:
            continue
        once = mutating.apply_strategic(template, body)
        twice = mutating.apply_strategic(once, body)
        assert once == twice
        assert strategies.env_patch(pod_template_from_manifest(once), "app", name, value) is None, (
            "idempotent"
        )
        template = once
