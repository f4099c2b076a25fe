"""Label selectors as Reloader accepts them on the command line.

v1 rewrites legacy forms before joining the elements with `,` (AND): `k:v` -> `k=v`,
`k:*` -> `k` (exists), `k=*` -> `k`. The result is checked here against the Kubernetes
selector grammar so a typo fails at startup with the flag's name, not as a watch error later.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_KEY = r"(?:[A-Za-z0-9][-A-Za-z0-9_.]*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
_VALUE = r"(?:[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_REQUIREMENT = re.compile(
    rf"""^\s*(?:
        !?{_KEY}
      | {_KEY}\s*(?:=|==|!=)\s*{_VALUE}
      | {_KEY}\s+(?:in|notin)\s*\(\s*{_VALUE}(?:\s*,\s*{_VALUE})*\s*\)
    )\s*$""",
    re.X,
)


class SelectorError(ValueError):
    pass


def legacy_to_selector(elements: Sequence[str]) -> str:
    """Apply v1's rewriting to each element, then AND them together."""
    out = []
    for raw in elements:
        element = raw.strip()
        if not element:
            continue
        if ":" in element and "=" not in element and "(" not in element:
            key, _, value = element.partition(":")
            element = key if value == "*" else f"{key}={value}"
        elif element.endswith("=*") and element.count("=") == 1:
            element = element[:-2]
        out.append(element)
    return ",".join(out)


def split_requirements(selector: str) -> list[str]:
    """Split on commas that are not inside `in (...)` value lists."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if current or parts:
        parts.append("".join(current))
    return parts


def validate(selector: str) -> None:
    """Raise `SelectorError` naming the first requirement that is not valid selector syntax."""
    if not selector:
        return
    for req in split_requirements(selector):
        if not _REQUIREMENT.match(req):
            raise SelectorError(f"{req.strip()!r} is not a valid label selector requirement")


_OPERATORS = {"In": "in", "NotIn": "notin"}


def from_label_selector(selector: object) -> str:
    """A workload's `spec.selector` (matchLabels and matchExpressions) as a selector string;
    `SelectorError` for a shape the API server would not have accepted, or an empty one (it
    selects every pod)."""
    if not isinstance(selector, dict):
        raise SelectorError("the selector is not an object")
    out: list[str] = []
    labels = selector.get("matchLabels") or {}
    if not isinstance(labels, dict):
        raise SelectorError("matchLabels is not an object")
    out += [f"{k}={v}" for k, v in sorted(labels.items())]
    expressions = selector.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise SelectorError("matchExpressions is not a list")
    for e in expressions:
        if not isinstance(e, dict):
            raise SelectorError("a matchExpressions entry is not an object")
        key, op, values = e.get("key"), e.get("operator"), e.get("values") or []
        if not isinstance(key, str) or not isinstance(values, list):
            raise SelectorError("a matchExpressions entry is not a key, an operator and values")
        if op in _OPERATORS and values:
            out.append(f"{key} {_OPERATORS[op]} ({','.join(str(v) for v in values)})")
        elif op == "Exists":
            out.append(key)
        elif op == "DoesNotExist":
            out.append(f"!{key}")
        else:
            raise SelectorError(f"operator {op!r} of {key!r} is not one the API server accepts")
    if not out:
        raise SelectorError("the selector is empty: it would select every pod")
    text = ",".join(out)
    validate(text)
    return text
