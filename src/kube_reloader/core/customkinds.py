"""Custom workload kinds named on the command line: `--workload-kind=GROUP/VERSION/RESOURCE:PATH`
(e.g. `serving.knative.dev/v1/services:spec.template`), a custom resource whose pod template
lives at PATH. Parsing is total: a value or a one-line error."""

from __future__ import annotations

import re

from kube_reloader.core.parsing import quote
from kube_reloader.core.records import record

_GROUP = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$")
_VERSION = re.compile(r"^v[0-9]+((alpha|beta)[0-9]+)?$")
_PLURAL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SEGMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_TEXT = 512
MAX_SEGMENTS = 8


class CustomKindError(ValueError):
    pass


@record
class CustomKind:
    group: str
    version: str
    plural: str
    #: where the pod template is, from the object's root (`("spec", "template")`)
    path: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.group}/{self.version}/{self.plural}:{'.'.join(self.path)}"


def parse_workload_kind(text: str) -> CustomKind:
    """`GROUP/VERSION/RESOURCE:PATH`; PATH is dotted field names under `spec`."""
    bad = f"--workload-kind {quote(text)}"
    if len(text) > MAX_TEXT:
        raise CustomKindError(f"{bad}: longer than {MAX_TEXT} characters")
    gvr, sep, path = text.partition(":")
    parts = gvr.split("/")
    if not sep or len(parts) != 3:
        raise CustomKindError(f"{bad}: want GROUP/VERSION/RESOURCE:PATH")
    group, version, plural = parts
    if not _GROUP.match(group):
        raise CustomKindError(f"{bad}: {quote(group)} is not an API group of a custom resource")
    if not _VERSION.match(version):
        raise CustomKindError(f"{bad}: {quote(version)} is not an API version")
    if not _PLURAL.match(plural):
        raise CustomKindError(f"{bad}: {quote(plural)} is not a resource (lower-case plural)")
    segments = tuple(path.split("."))
    if (
        len(segments) < 2
        or len(segments) > MAX_SEGMENTS
        or segments[0] != "spec"
        or not all(_SEGMENT.match(s) for s in segments)
    ):
        raise CustomKindError(
            f"{bad}: PATH must be dotted field names under spec, e.g. spec.template"
        )
    return CustomKind(group, version, plural, segments)
