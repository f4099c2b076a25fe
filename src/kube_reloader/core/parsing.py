"""Total parsing of JSON that tenants write into annotations.

`json.loads` is not total on hostile text: 100,000 nested brackets raise `RecursionError`, an
integer of 5,000 digits raises `ValueError`, and a megabyte of nesting costs memory before it
fails. `json_value` bounds size and depth before decoding and turns every failure into a
one-line error, so one bad annotation costs its workload a warning, never the loop.
"""

from __future__ import annotations

import json
from typing import Any

from kube_reloader.core.records import record

#: bytes of JSON accepted in one annotation (Kubernetes caps all annotations at 256 KiB)
MAX_JSON_BYTES = 256 * 1024
#: brackets deep (our own records are 1-2 deep; Reloader's `last-reloaded-from` is 2)
MAX_JSON_DEPTH = 16


@record
class Parsed:
    """A decoded value, or (when `error` is set) why there is none."""

    value: Any = None
    error: str | None = None


def nesting_depth(text: str, limit: int) -> int:
    """The bracket depth of a JSON text (brackets inside strings do not count), counting
    stops as soon as it passes `limit`."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        elif ch in "]}":
            depth -= 1
    return deepest


def json_value(
    text: str, *, max_bytes: int = MAX_JSON_BYTES, max_depth: int = MAX_JSON_DEPTH
) -> Parsed:
    """Decode `text` as JSON within the bounds, or say in one line why not."""
    if len(text) > max_bytes:
        return Parsed(error=f"JSON longer than {max_bytes} characters")
    if nesting_depth(text, max_depth) > max_depth:
        return Parsed(error=f"JSON nested deeper than {max_depth} levels")
    try:
        return Parsed(json.loads(text))
    except (ValueError, RecursionError, MemoryError) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        return Parsed(error=f"not valid JSON: {first[:200]}")


def json_object(text: str) -> dict[str, Any] | None:
    """A JSON object within the bounds, or None for anything else."""
    parsed = json_value(text)
    return parsed.value if isinstance(parsed.value, dict) else None


def quote(text: str, limit: int = 80) -> str:
    """`repr` of a tenant-written value for a message, at most about `limit` characters: the
    value is cut until its repr fits, as one character can take ten to escape (`\U0001019d`)."""
    out = repr(text)
    n = min(len(text), limit)
    while len(out) > limit + 2 and n > 0:
        n -= 1
        out = repr(text[:n] + "...")
    return out
