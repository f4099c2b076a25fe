"""Bounds the process puts on itself and on what it reads, so that no input and no client can
exhaust its memory or its file descriptors (issue 13): the open-files limit it runs with, and
how far a YAML document may grow by expanding its aliases ("billion laughs").
"""

from __future__ import annotations

import logging
import resource
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import msgspec

if TYPE_CHECKING:
    import yaml

log = logging.getLogger(__name__)

#: Linux refuses a soft limit above fs.nr_open (1,048,576 by default), even when the hard
#: limit is unlimited
_NR_OPEN_DEFAULT = 1 << 20


def raise_open_files_limit() -> int:
    """Lift the soft RLIMIT_NOFILE to the hard limit and return the new soft limit.

    Container runtimes often start processes at a soft limit of 1024 under a far higher hard
    one; the API connections, watches and HTTP clients of one controller then share 1024
    descriptors. Raising the soft limit needs no privilege.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = _NR_OPEN_DEFAULT if hard == resource.RLIM_INFINITY else hard
    new = soft
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            new = wanted
        except (ValueError, OSError) as exc:
            log.warning("cannot raise the open files limit", extra={"error": str(exc)})
    log.info("open files limit", extra={"soft_was": soft, "soft": new, "hard": hard})
    return new


#: longer than any manifest file (the API server stores at most 1.5 MiB per object)
MAX_FILE_CHARS = 8 * 2**20
#: nodes a document may gain by expanding its aliases; ordinary anchors (a shared block of
#: labels or env vars) add tens or hundreds
MAX_ALIAS_NODES = 100_000
#: path steps (one per level of nesting of each expanded node) it may gain: the linter keeps
#: a path per node, so deep expansions cost memory too
MAX_ALIAS_STEPS = 2_000_000


class Expansion(msgspec.Struct, frozen=True):
    """The size of a composed YAML document as written and with every alias expanded."""

    written_nodes: int
    expanded_nodes: int
    written_steps: int
    expanded_steps: int

    @property
    def too_large(self) -> bool:
        return (
            self.expanded_nodes - self.written_nodes > MAX_ALIAS_NODES
            or self.expanded_steps - self.written_steps > MAX_ALIAS_STEPS
        )


@dataclass
class AliasBudget:
    """What aliases may add over one whole input (every document of every file of one run):
    a bomb split over many small documents is refused like one in a single document."""

    nodes: int = MAX_ALIAS_NODES
    steps: int = MAX_ALIAS_STEPS

    def spend(self, size: Expansion) -> bool:
        """Take this document's expansion from the budget; False (nothing taken) if it does
        not fit in what is left."""
        extra_nodes = size.expanded_nodes - size.written_nodes
        extra_steps = size.expanded_steps - size.written_steps
        if extra_nodes > self.nodes or extra_steps > self.steps:
            return False
        self.nodes -= extra_nodes
        self.steps -= extra_steps
        return True


class RecursiveAlias(ValueError):
    """An alias refers to a collection that contains it."""


def measure(root: yaml.Node) -> Expansion:
    """How large `root` is, without expanding anything: each distinct node is visited once,
    so an alias bomb costs no more than its text. Raises `RecursiveAlias` on a cycle and
    `RecursionError` on nesting deeper than the interpreter's stack."""
    import yaml  # only where YAML is read: an in-cluster start never parses any

    # per distinct node: (nodes below it expanded, sum of their depths below it)
    sizes: dict[int, tuple[int, int]] = {}
    written = [0, 0]  # distinct nodes, sum of their depths where first written

    def visit(node: yaml.Node, depth: int) -> tuple[int, int]:
        key = id(node)
        if key in sizes:
            if sizes[key][0] < 0:
                raise RecursiveAlias("an alias refers to a collection that contains it")
            return sizes[key]
        sizes[key] = (-1, 0)
        written[0] += 1
        written[1] += depth
        children: list[yaml.Node] = []
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        count, steps = 1, 0
        for child in children:
            c, s = visit(child, depth + 1)
            count, steps = count + c, steps + s + c
        sizes[key] = (count, steps)
        return count, steps

    count, steps = visit(root, 0)
    return Expansion(written[0], count, written[1], steps)


def refusal(root: yaml.Node, budget: AliasBudget | None = None) -> str | None:
    """Why a composed document must not be expanded (constructed, walked), or None. With a
    `budget`, the document's expansion is also taken from what is left of the input's."""
    try:
        size = measure(root)
    except RecursiveAlias as exc:
        return str(exc)
    except RecursionError:
        return "nested too deeply"
    grown = (
        f"aliases would expand this document from {size.written_nodes:,} to "
        f"{size.expanded_nodes:,} nodes"
    )
    if size.too_large:
        return f"{grown} (an alias bomb?)"
    if budget is not None and not budget.spend(size):
        return f"{grown}, past what aliases may add to one input (an alias bomb in pieces?)"
    return None


def read_text(source: Path | TextIO) -> str:
    """The text of `source`, cut one chunk past `MAX_FILE_CHARS` (so that the caller sees it
    is too long) whatever it is: /dev/zero and a FIFO are paths too."""
    if isinstance(source, Path):
        with source.open() as f:
            return read_text(f)
    parts: list[str] = []
    total = 0
    while total <= MAX_FILE_CHARS and (part := source.read(64 * 1024)):
        parts.append(part)
        total += len(part)
    return "".join(parts)
