"""Go's `encoding/json` output, written by Python: what Reloader's Go code writes, byte for byte.

`json.Marshal` writes compact JSON, escapes `<`, `>` and `&` (HTML safety) and U+2028 and
U+2029 (JavaScript line terminators) in strings, and keeps other non-ASCII text as UTF-8. A
struct's fields come in their declared order (a dict's insertion order here); a map's keys
sorted (`sort_keys`).
"""

from __future__ import annotations

import json

#: what Go's `json.Marshal` escapes that Python's `json.dumps` does not
GO_ESCAPES = (
    ("<", "\\u003c"),
    (">", "\\u003e"),
    ("&", "\\u0026"),
    ("\u2028", "\\u2028"),
    ("\u2029", "\\u2029"),
)


def marshal(value: object, *, sort_keys: bool = False) -> str:
    """`value` as Go's `json.Marshal` writes it (a map's keys sorted with `sort_keys`)."""
    text = json.dumps(value, sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in GO_ESCAPES:
        text = text.replace(char, escaped)
    return text
