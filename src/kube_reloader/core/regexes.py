"""Named reload lists compile exactly as Reloader builds them: `"^" + entry + "$"`, searched.

Reloader uses Go's RE2, which is linear-time and rejects lookarounds and backreferences.
Python's `re` backtracks, so two guards keep decisions identical and the controller safe:
syntax RE2 rejects is rejected here too, and patterns with nested unbounded repetition
(the shape of catastrophic backtracking, e.g. `(a+)+`) are refused with a clear reason
instead of being allowed to stall the controller. Kubernetes names are at most 253
characters, so every other pattern matches in bounded time.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

# Python 3.11+ keeps the regex parser in re._parser (sre_parse is its deprecated alias).
from re import _parser as sre_parser  # type: ignore[attr-defined]
from typing import Any

_REPEATS = {
    sre_parser.MAX_REPEAT,
    sre_parser.MIN_REPEAT,
    getattr(sre_parser, "POSSESSIVE_REPEAT", None),
}
_RE2_UNSUPPORTED = {
    sre_parser.ASSERT: "lookaround assertions",
    sre_parser.ASSERT_NOT: "lookaround assertions",
    sre_parser.GROUPREF: "backreferences",
    sre_parser.GROUPREF_EXISTS: "conditional groups",
}
_MAXREPEAT = sre_parser.MAXREPEAT


@dataclass(frozen=True, slots=True)
class Compiled:
    entry: str
    pattern: re.Pattern[str] | None
    error: str | None = None

    def search(self, name: str) -> bool:
        return self.pattern is not None and self.pattern.search(name) is not None


@functools.lru_cache(maxsize=4096)
def compile_entry(entry: str) -> Compiled:
    """Compile one list entry the way v1 does, or say why it cannot be used."""
    source = "^" + entry + "$"
    try:
        parsed = sre_parser.parse(source)
        pattern = re.compile(source)
    except (re.error, OverflowError, RecursionError) as exc:
        return Compiled(entry, None, f"invalid regular expression {entry!r}: {exc}")
    problem = _inspect(
        parsed.data if hasattr(parsed, "data") else list(parsed), inside_repeat=False
    )
    if problem:
        return Compiled(entry, None, f"regular expression {entry!r} refused: {problem}")
    return Compiled(entry, pattern)


def _inspect(items: Any, *, inside_repeat: bool) -> str | None:
    for op, arg in items:
        if op in _RE2_UNSUPPORTED:
            return f"{_RE2_UNSUPPORTED[op]} are not supported by Reloader's RE2 syntax"
        if op in _REPEATS:
            _lo, hi, sub = arg
            unbounded = hi == _MAXREPEAT or hi > 100
            if unbounded and inside_repeat:
                return "nested unbounded repetition risks catastrophic backtracking"
            found = _inspect(
                sub.data if hasattr(sub, "data") else sub, inside_repeat=inside_repeat or unbounded
            )
            if found:
                return found
        elif op == sre_parser.SUBPATTERN:
            sub = arg[-1]
            found = _inspect(sub.data if hasattr(sub, "data") else sub, inside_repeat=inside_repeat)
            if found:
                return found
        elif op == sre_parser.BRANCH:
            for alt in arg[1]:
                if inside_repeat and len(arg[1]) > 1:
                    return "alternation under unbounded repetition risks catastrophic backtracking"
                found = _inspect(
                    alt.data if hasattr(alt, "data") else alt, inside_repeat=inside_repeat
                )
                if found:
                    return found
    return None
