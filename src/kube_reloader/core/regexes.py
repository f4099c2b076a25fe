"""Named reload lists compile exactly as Reloader builds them: `"^" + entry + "$"`, searched.

Reloader uses Go's `regexp`, an RE2 engine: linear time in the name's length whatever the
pattern, and its own dialect (`(?i)`, `[[:digit:]]`, `\\pL`, `\\z`; no lookarounds or
backreferences). Every pattern here is compiled by RE2 itself (`google-re2`), so decisions are
Go's and no pattern a tenant writes can stall the controller.

Annotation values are hostile input, so a list is bounded before anything is compiled:
at most `MAX_LIST_CHARS` characters and `MAX_ENTRIES` entries of at most `MAX_PATTERN_LENGTH`
characters each, a bounded RE2 memory budget per pattern, and caches bounded by the length
of the text they hold (not by a count, which a tenant would fill with long lists). A list
over a cap is refused as a whole (the workload is not reloaded for that list and gets a
Warning), an entry RE2 rejects is skipped as Reloader's master does. A list compiles once per
distinct value while it stays cached, into one combined program; a change costs one
linear-time search of it, plus, on a match only, a search per entry to name the first entry
that matched (the entry Reloader, which tries them in order, would report).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

import re2

from kube_reloader.core.annotations import split_list
from kube_reloader.core.parsing import quote
from kube_reloader.core.records import record

V = TypeVar("V")

#: entries per named list (a list of more is refused as a whole)
MAX_ENTRIES = 256
#: characters per named list (a longer list is refused as a whole)
MAX_LIST_CHARS = 4 * 1024
#: characters per entry (a longer entry is skipped); Kubernetes names are at most 253
MAX_PATTERN_LENGTH = 1024
#: RE2's memory budget for one entry and for a whole list (a pattern over it is refused)
ENTRY_MEMORY = 1 << 20
LIST_MEMORY = 2 << 20
#: characters of pattern text the compiled caches may hold (compiled RE2 programs cost
#: tens of bytes per character): a tenant writing many distinct lists evicts, never grows
CACHED_ENTRY_CHARS = 1 << 20
CACHED_LIST_CHARS = 1 << 20
#: bytes Go's RE2 does not accept but C++ RE2 does: `\C` (any byte)
_NOT_IN_GO = ("\\C",)


def _options(budget: int) -> re2.Options:
    opts = re2.Options()
    opts.max_mem = budget
    opts.log_errors = False
    return opts


def _compile(source: str, budget: int) -> tuple[re2._Regexp | None, str | None]:
    try:
        return re2.compile(source, _options(budget)), None
    except (re2.error, UnicodeError, ValueError, TypeError, OverflowError) as exc:
        arg = exc.args[0] if exc.args else ""
        text = arg.decode("utf-8", "replace") if isinstance(arg, bytes) else str(arg)
        return None, (text.splitlines() or [type(exc).__name__])[0][:200]


def _go_dialect_problem(entry: str) -> str | None:
    i = 0
    while i < len(entry):
        if entry[i] == "\\" and i + 1 < len(entry):
            if entry[i : i + 2] in _NOT_IN_GO:
                return "\\C (any byte) is not part of Go's regexp syntax"
            i += 2
            continue
        i += 1
    return None


def _search(pattern: re2._Regexp, name: str) -> bool:
    try:
        return pattern.search(name) is not None
    except (UnicodeError, ValueError, TypeError):
        return False  # a name RE2 cannot encode (lone surrogate) matches nothing


@record
class Compiled:
    """One list entry: its RE2 program, or why it cannot be used."""

    entry: str
    pattern: re2._Regexp | None
    error: str | None = None

    def search(self, name: str) -> bool:
        return self.pattern is not None and _search(self.pattern, name)


class _Cache(Generic[V]):
    """Least recently used values by key, bounded by the total length of the keys."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self.chars = 0
        self._items: OrderedDict[str, V] = OrderedDict()

    def get(self, key: str) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: str, value: V) -> V:
        if key not in self._items:
            self.chars += len(key)
        self._items[key] = value
        while self.chars > self.max_chars and len(self._items) > 1:
            old, _ = self._items.popitem(last=False)
            self.chars -= len(old)
        return value


_ENTRIES: _Cache[Compiled] = _Cache(CACHED_ENTRY_CHARS)
_LISTS: _Cache[CompiledList] = _Cache(CACHED_LIST_CHARS)


def compile_entry(entry: str) -> Compiled:
    """Compile one list entry the way v1 does (`^entry$`, RE2), or say why it cannot be used."""
    if len(entry) > MAX_PATTERN_LENGTH:
        return _compile_entry(entry)  # refused at once; not worth a place in the cache
    return _ENTRIES.get(entry) or _ENTRIES.put(entry, _compile_entry(entry))


def _compile_entry(entry: str) -> Compiled:
    """Compile one list entry the way v1 does (`^entry$`, RE2), or say why it cannot be used."""
    shown = quote(entry)
    if len(entry) > MAX_PATTERN_LENGTH:
        why = f"longer than {MAX_PATTERN_LENGTH} characters"
        return Compiled(entry, None, f"regular expression {shown} refused: {why}")
    problem = _go_dialect_problem(entry)
    if problem is not None:
        return Compiled(entry, None, f"invalid regular expression {shown}: {problem}")
    pattern, error = _compile("^" + entry + "$", ENTRY_MEMORY)
    if pattern is None:
        return Compiled(entry, None, f"invalid regular expression {shown}: {error}")
    return Compiled(entry, pattern)


@record
class CompiledList:
    """A whole named list: its usable entries (in order), one combined program that tests
    them all at once, the per-entry problems, and `refused` when the list as a whole is over
    a cap. Only the combined program is kept compiled; an entry is compiled again (cached
    apart) only when the combined program matched and the first matching entry is wanted."""

    entries: tuple[str, ...] = ()
    combined: re2._Regexp | None = None
    problems: tuple[str, ...] = ()
    refused: str | None = None

    def first_match(self, name: str) -> str | None:
        """The first entry (in list order) whose regex finds `name`, or None."""
        if self.refused is not None or not self.entries:
            return None
        if self.combined is not None and not _search(self.combined, name):
            return None
        for entry in self.entries:
            if compile_entry(entry).search(name):
                return entry
        return None


def compile_list(value: str) -> CompiledList:
    """Compile a named-list annotation value once; every decision on it reuses the result."""
    if len(value) > MAX_LIST_CHARS:
        return _compile_list(value)  # refused at once; not worth a place in the cache
    return _LISTS.get(value) or _LISTS.put(value, _compile_list(value))


def _compile_list(value: str) -> CompiledList:
    if len(value) > MAX_LIST_CHARS:
        return CompiledList(
            refused=f"the list is {len(value):,} characters long, more than the "
            f"{MAX_LIST_CHARS:,} kube-reloader accepts; the list is not used"
        )
    if value.count(",") + 1 > MAX_ENTRIES:
        return CompiledList(
            refused=f"the list has {value.count(',') + 1} entries, more than the "
            f"{MAX_ENTRIES} kube-reloader accepts; the list is not used"
        )
    usable: list[str] = []
    problems: list[str] = []
    for entry in split_list(value):
        checked = _ENTRIES.get(entry) or _compile_entry(entry)  # validated, not kept
        if checked.error is not None:
            problems.append(checked.error)
        else:
            usable.append(entry)
    combined = None
    # `\Q` quotes up to `\E` or the end of the pattern: it would swallow the entries after it
    if len(usable) > 1 and not any("\\Q" in e for e in usable):
        # `(?:^a|b$)` keeps each entry's own precedence: v1 concatenates the anchors.
        source = "|".join("(?:^" + e + "$)" for e in usable)
        combined, _error = _compile(source, LIST_MEMORY)
        if combined is None:
            return CompiledList(
                refused="the list is too large for RE2's memory budget; the list is not used"
            )
    return CompiledList(tuple(usable), combined, tuple(problems))
