"""`kube-reloader lint --fix`'s check of its own edit: what a document must read as once its
moves are applied (as plain data, compared strictly: types, key order, NaN), and that an
edited document reads back as exactly that, with every comment it had.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import yaml

from kube_reloader.cli.manifests import Chunk, parse_chunk
from kube_reloader.core import linting

_COMMENT = re.compile(r"#[^\r\n]*")
#: (annotation key, from path, to path), as in `Finding.moves`
Move = tuple[str, linting.Path, linting.Path]


class Refused(Exception):
    """The file cannot be edited safely; the message is the one-line reason."""


# ----------------------------------------------------------------------- the expected result


def expected(obj: Any, moves: Sequence[Move]) -> Any:
    """The document as plain data (shared nodes copied apart) with `moves` applied: each key
    put first in the destination mapping (in file order), an emptied source mapping dropped."""
    tree = _unshared(obj)
    inserted: dict[int, int] = {}
    for key, src, dst in moves:
        parent = at(tree, src[:-1])
        value = parent.pop(key)
        holder = mapping_at(tree, dst[:-1])
        if holder.get(dst[-1]) is None:
            holder[dst[-1]] = {}
        target = mapping_at(tree, dst)
        if key in target:
            if target[key] != value or type(target[key]) is not type(value):
                raise Refused(
                    f"{key} is on both the workload and its pod template, with different values"
                )
        else:
            n = inserted.get(id(target), 0)
            items = list(target.items())
            target.clear()
            target.update([*items[:n], (key, value), *items[n:]])
            inserted[id(target)] = n + 1
        if not parent:
            del at(tree, src[:-2])[src[-2]]
    return tree


def mapping_at(tree: Any, path: linting.Path) -> Any:
    node = tree
    for part in path:
        if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            node = node.get(part) if isinstance(node, dict) else None
    if not isinstance(node, dict):
        raise Refused(f"{'.'.join(map(str, path))} is missing or not a mapping")
    return node


def _unshared(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _unshared(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_unshared(v) for v in obj]
    return obj


def at(tree: Any, path: Iterable[str | int]) -> Any:
    for part in path:
        tree = tree[part]
    return tree


def canonical(obj: Any) -> Any:
    """A form in which equal means the same YAML data: types told apart (1, 1.0, true), NaN
    equal to itself, mapping order significant."""
    if isinstance(obj, dict):
        return ("map", tuple((canonical(k), canonical(v)) for k, v in obj.items()))
    if isinstance(obj, list):
        return ("seq", tuple(canonical(v) for v in obj))
    if isinstance(obj, set | frozenset):
        return ("set", tuple(sorted(repr(v) for v in obj)))
    return (type(obj).__name__, repr(obj))


# ----------------------------------------------------------------------- verification


def verify_segment(old: str, new: str, obj: Any, moves: Sequence[Move], source: str) -> None:
    """Refuse unless `new` reads (as lint reads it) as `obj` with exactly `moves` applied and
    keeps every comment of `old`."""
    doc, err = parse_chunk(Chunk(source, new, 1))
    if err is not None or doc is None:
        raise Refused("the edited document would not read back")
    if canonical(doc.obj) != canonical(expected(obj, moves)):
        raise Refused("the edit would change more than the moved annotations")
    if sorted(comments(old)) != sorted(comments(new)):
        raise Refused("the edit would lose or alter a comment")


def comments(text: str) -> list[str]:
    """Every comment in `text`, found between PyYAML's tokens (outside any scalar)."""
    out: list[str] = []
    pos = 0
    fast = getattr(yaml, "CSafeLoader", None) if text.isascii() else None  # libyaml: marks count
    for token in yaml.scan(text, Loader=fast or yaml.SafeLoader):  # characters, ASCII is sure
        out += [c.rstrip() for c in _COMMENT.findall(text[pos : token.start_mark.index])]
        pos = max(pos, token.end_mark.index)
    out += [c.rstrip() for c in _COMMENT.findall(text[pos:])]
    return out
