"""Key-level reloads (`--reload-scope=keys`, `kube-reloader.io/reload-scope: keys`): which keys
of a ConfigMap or Secret a pod template consumes, and the hash of only those keys.

A workload in `keys` scope reloads only when a key it consumes changes. Consumed keys:
`configMapKeyRef`/`secretKeyRef` keys and the `items` of a volume or projected source;
`envFrom` and a volume without `items` (mounted whole, with or without `subPath`) consume every
key, and then the value written is the object's own hash, byte-identical to Reloader's.

To decide later without keeping any data, a ConfigMap or Secret that a `keys` workload reads
is reduced to per-key digests when it is decoded: for each key, 8 bytes naming the key
(SHA-1 of its name) and 20 bytes of digest of its `key=value` item (SHA-1, or HMAC-SHA256
truncated under `--hash-algorithm=hmac-sha256`, so nothing guessable is kept). The scoped
value is SHA-1 over the sorted digests of the consumed keys that exist. Maps with more than
`MAX_KEYS` keys keep no digests (`OVERFLOW`); their readers compare the object's hash.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping
from enum import StrEnum

from kube_reloader.core.annotations import RELOAD_SCOPE
from kube_reloader.core.objects import ResourceType
from kube_reloader.core.parsing import quote
from kube_reloader.core.references import PodTemplate

SCOPE_ANNOTATION = RELOAD_SCOPE
#: more keys than this: no per-key digests are kept (bounded memory per object)
MAX_KEYS = 1024
_ID = 8
_DIGEST = 20
_RECORD = _ID + _DIGEST
#: the digests of an object with more than `MAX_KEYS` keys: its readers use its own hash
OVERFLOW = b"\xff"


class Scope(StrEnum):
    OBJECT = "object"
    KEYS = "keys"


def parse_scope(value: str) -> Scope | None:
    """`object` or `keys` (as written, or with surrounding blanks); None for anything else."""
    try:
        return Scope(value.strip())
    except ValueError:
        return None


def scope_of(
    workload_annotations: Mapping[str, str],
    template_annotations: Mapping[str, str],
    default: Scope,
) -> tuple[Scope, str | None]:
    """The workload's scope (its metadata first, then its pod template), and a one-line
    warning when the annotation's value is not one of the scopes (the default is used)."""
    for where, found in (
        ("workload", workload_annotations),
        ("pod template", template_annotations),
    ):
        raw = found.get(SCOPE_ANNOTATION)
        if raw is None:
            continue
        parsed = parse_scope(raw)
        if parsed is None:
            return default, (
                f"{SCOPE_ANNOTATION}={quote(raw)} on the {where} is not object or keys; "
                f"{default.value} used"
            )
        return parsed, None
    return default, None


#: (type, name) -> the keys consumed of it, or None: every key
Consumption = dict[tuple[ResourceType, str], frozenset[str] | None]


def consumption(template: PodTemplate) -> Consumption:
    """What the template consumes of every ConfigMap and Secret it reads, in one pass over
    it (a template may hold thousands of references)."""
    whole: set[tuple[ResourceType, str]] = set()
    keyed: dict[tuple[ResourceType, str], set[str]] = {}
    for c in (*template.containers, *template.init_containers):
        whole.update((ResourceType.CONFIGMAP, n) for n in c.env_from_configmaps)
        whole.update((ResourceType.SECRET, n) for n in c.env_from_secrets)
        for var in c.env:
            if var.key is None:
                continue
            if var.configmap is not None:
                keyed.setdefault((ResourceType.CONFIGMAP, var.configmap), set()).add(var.key)
            if var.secret is not None:
                keyed.setdefault((ResourceType.SECRET, var.secret), set()).add(var.key)
    for vol in template.volumes:
        for rtype in (ResourceType.CONFIGMAP, ResourceType.SECRET):
            for source, items in vol.items_of(rtype):
                if items is None:
                    whole.add((rtype, source))
                else:
                    keyed.setdefault((rtype, source), set()).update(items)
    out: Consumption = {ref: frozenset(keys) for ref, keys in keyed.items() if ref not in whole}
    out.update(dict.fromkeys(whole))
    return out


def consumed_keys(template: PodTemplate, rtype: ResourceType, name: str) -> frozenset[str] | None:
    """The keys of the resource the template consumes; None when it consumes every key (an
    `envFrom`, a volume without `items`) or when nothing names a key (named-list reloads)."""
    if rtype is ResourceType.SECRETPROVIDERCLASS:
        return None
    return consumption(template).get((rtype, name))


def _key_id(key: str) -> bytes:
    return hashlib.sha1(key.encode(), usedforsecurity=False).digest()[:_ID]


def digests(items: Iterable[tuple[str, bytes]], *, secret_key: bytes | None = None) -> bytes:
    """Per-key digests of `(key, item bytes as hashed by core.hashing)`, packed; `OVERFLOW`
    when there are more than `MAX_KEYS` keys."""
    records: list[bytes] = []
    for key, item in items:
        if len(records) >= MAX_KEYS:
            return OVERFLOW
        if secret_key is not None:
            digest = hmac.new(secret_key, item, hashlib.sha256).digest()[:_DIGEST]
        else:
            digest = hashlib.sha1(item, usedforsecurity=False).digest()
        records.append(_key_id(key) + digest)
    records.sort()
    return b"".join(records)


def scoped_hash(packed: bytes, keys: frozenset[str]) -> str:
    """The hash of only `keys` (those present in the object) from its packed digests
    (never `OVERFLOW`: `value_for` answers the object's hash for it)."""
    wanted = {_key_id(k) for k in keys}
    chosen = [
        packed[i + _ID : i + _RECORD]
        for i in range(0, len(packed) - _RECORD + 1, _RECORD)
        if packed[i : i + _ID] in wanted
    ]
    return hashlib.sha1(b"".join(sorted(chosen)), usedforsecurity=False).hexdigest()


def value_for(
    *, keys: frozenset[str] | None, object_hash: str, packed: bytes | None, scope: Scope
) -> tuple[str, str, bool]:
    """The hash a workload in `scope` that consumes `keys` of a resource (`consumed_keys`)
    records for it, why (for `explain`), and whether it is exact (False: the object's hash,
    for want of the per-key digests)."""
    if scope is Scope.OBJECT or not object_hash:
        return object_hash, "", True
    if keys is None:
        return object_hash, "reload-scope keys: every key is consumed; the object's hash", True
    shown = ", ".join(quote(k) for k in sorted(keys))
    if packed == OVERFLOW:
        why = f"consumes {shown}, but it has more than {MAX_KEYS} keys"
        return object_hash, f"reload-scope keys: {why}; the object's hash", True
    if packed is None:
        why = (
            f"consumes {shown}, but no per-key digests are known for it "
            "(not read since it was first needed)"
        )
        return object_hash, f"reload-scope keys: {why}; the object's hash", False
    return scoped_hash(packed, keys), f"reload-scope keys: only {shown} count", True
