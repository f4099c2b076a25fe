"""Small typed projections that watch and list answers are decoded into.

msgspec ignores every field a projection does not declare, so decoding into one of these
costs a fraction of a full object and retains only what is named here. Callers declare
their own projections by subclassing `Object` (or any Struct with a `metadata: ObjectMeta`).
"""

from __future__ import annotations

import msgspec


class OwnerReference(msgspec.Struct, frozen=True, omit_defaults=True):
    apiVersion: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool = False


class ObjectMeta(msgspec.Struct, frozen=True, omit_defaults=True):
    """The metadata fields a controller needs; everything else is skipped while decoding."""

    name: str = ""
    namespace: str = ""
    uid: str = ""
    resourceVersion: str = ""
    generation: int = 0
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    annotations: dict[str, str] = msgspec.field(default_factory=dict)
    ownerReferences: tuple[OwnerReference, ...] = ()
    deletionTimestamp: str | None = None


class Object(msgspec.Struct, frozen=True, omit_defaults=True):
    """The smallest projection: metadata only."""

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
