"""`kube-reloader lint --fix`: move misplaced reload annotations from a workload's pod template
to its own metadata, one document at a time, by a ruamel.yaml round trip.

The file is cut into documents at its `---` lines, as `lint` reads it; only a document with
moves is re-emitted (comments, key order, quoting, flow and block styles kept by ruamel,
indentation as guessed from the document), every other byte stays as it was. Before anything
is written the result is verified: each edited document, read back by PyYAML as `lint` reads
it, must equal the original with exactly its own moves applied, its comments must all still be
there, and the other documents must be byte for byte the same. A file that fails any check is
left untouched and the reason is one line. Writing is a temporary file in the same directory
renamed over the original, with the original's mode.
"""

from __future__ import annotations

import io
import itertools
import os
import re
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import CommentMark
from ruamel.yaml.tokens import CommentToken

from kube_reloader import limits
from kube_reloader.cli.lintverify import Move, Refused, at, mapping_at, verify_segment
from kube_reloader.cli.manifests import Chunk, parse_chunk
from kube_reloader.core import linting

_DOC_START = re.compile(r"^---(\s|$)")
_DOC_END = re.compile(r"^\.\.\.(\s|$)")
_LINES = re.compile(r"[^\n]*\n|[^\n]+")


class Outcome(msgspec.Struct, frozen=True):
    moved: int = 0
    refused: str | None = None


def fix_file(path: str) -> Outcome:
    """Fix `path` in place; never raises for what is in the file."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            text = limits.read_text(f)
        if len(text) > limits.MAX_FILE_CHARS:
            return Outcome(refused=f"more than {limits.MAX_FILE_CHARS:,} characters")
        new, moved = fix_text(text, path)
        if moved and new != text:
            write_atomically(path, new)
        return Outcome(moved=moved if new != text else 0)
    except Refused as exc:
        return Outcome(refused=str(exc))
    except (OSError, UnicodeError) as exc:
        return Outcome(refused=f"cannot rewrite it: {exc}")


def fix_text(text: str, source: str = "<text>") -> tuple[str, int]:
    """The text with every document's misplaced annotations moved, and how many were; raises
    `Refused` when the result would be anything else."""
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    out: list[str] = []
    moved = 0
    for i, seg in enumerate(split_segments(text[len(bom) :])):
        try:
            new, n = _fix_segment(seg, source)
        except Refused as exc:
            raise Refused(f"document {i + 1}: {exc}") from None
        except RecursionError:
            raise Refused(f"document {i + 1}: nested too deeply to edit") from None
        except Exception as exc:  # noqa: BLE001 - hostile input: one line, never a traceback
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise Refused(f"document {i + 1}: ruamel.yaml cannot edit it ({first})") from None
        out.append(new)
        moved += n
    if split_segments("".join(out)) != out:
        raise Refused("the edited documents would no longer split as they did")
    return bom + "".join(out), moved


def _fix_segment(seg: str, source: str) -> tuple[str, int]:
    # every key a move is for names reloader (a double-quoted one may be spelt in escapes)
    if "reloader" not in seg and "\\" not in seg:
        return seg, 0
    doc = parse_chunk(Chunk(source, seg, 1))[0]
    moves = moves_of(doc.obj) if doc is not None else []
    if doc is None or not moves:
        return seg, 0
    new = edit_segment(seg, moves)
    verify_segment(seg, new, doc.obj, moves, source)
    return new, len(moves)


def split_segments(text: str) -> list[str]:
    """The text cut before every `---` line (as `lint` cuts it); joined, they are the text."""
    segments: list[str] = []
    current: list[str] = []
    for line in _LINES.findall(text):
        if _DOC_START.match(line) and current:
            segments.append("".join(current))
            current = []
        current.append(line)
    segments.append("".join(current))
    return segments


def moves_of(obj: Any) -> list[Move]:
    """The moves `lint` asks for in one document (a `List`'s items under their own paths)."""
    if not isinstance(obj, dict):
        return []
    items = obj.get("items")
    if str(obj.get("kind", "")).endswith("List") and isinstance(items, list):
        return [
            (key, ("items", j, *src), ("items", j, *dst))
            for j, item in enumerate(items)
            for key, src, dst in moves_of(item)
        ]
    doc = linting.Document(obj, "<fix>", lambda _path: 0)
    seen: dict[linting.Path, Move] = {}
    for finding in linting.lint([doc]):
        for key, src, dst in finding.moves:
            seen.setdefault(src, (key, src, dst))
    return sorted(seen.values(), key=lambda m: _position(obj, m[1]))


def _position(obj: Any, path: linting.Path) -> tuple[int, ...]:
    """Where `path` is in document order (the index of each key among its siblings)."""
    out: list[int] = []
    node = obj
    for part in path:
        out.append(list(node).index(part) if isinstance(node, dict) else int(part))
        node = node[part]
    return tuple(out)


# ----------------------------------------------------------------------- the edit


def edit_segment(segment: str, moves: Sequence[Move]) -> str:
    """The segment with its body re-emitted by ruamel after `moves`; the `---` line, comments
    before the body and an explicit `...` end stay as they were."""
    start, end = _body_span(segment)
    body = segment[start:end]
    nl = body.find("\n", len(body.rstrip()))
    core, rest = (body, "") if nl < 0 else (body[: nl + 1], body[nl + 1 :])
    mapping, offset = guess_indent(core)
    rt = _round_tripper(mapping, offset)
    data = rt.load(core)
    for move in moves:
        _move(data, move, _column(move[2], mapping, offset))
    buf = io.StringIO()
    rt.dump(data, buf)
    dumped = buf.getvalue()
    if "\r\n" in core:
        dumped = dumped.replace("\r\n", "\n").replace("\n", "\r\n")
    if not core.endswith("\n"):
        dumped = dumped.rstrip("\r\n")
    return segment[:start] + dumped + rest + segment[end:]


def _column(path: linting.Path, mapping: int, offset: int) -> int:
    """The column of the keys of the mapping at `path` (a key holding a sequence adds
    nothing, each item its dash offset and the dash)."""
    steps = zip(path, (*path[1:], ""), strict=True)
    return sum(
        offset + 2 if isinstance(p, int) else 0 if isinstance(q, int) else mapping for p, q in steps
    )


def _body_span(segment: str) -> tuple[int, int]:
    """Where the document's content starts (its first line that is not the `---` line, blank
    or a comment) and ends (an explicit `...`, else the segment's end). That it is one
    document is verified on the result."""
    lines = _LINES.findall(segment)
    offsets = list(itertools.accumulate(len(ln) for ln in lines))
    if lines and _DOC_START.match(lines[0]) and lines[0][3:].strip()[:1] not in ("", "#"):
        raise Refused("content on its --- line")
    start = end = None
    for i, line in enumerate(lines):
        head = line.strip()
        if (i == 0 and _DOC_START.match(line)) or not head or head.startswith("#"):
            continue
        if _DOC_END.match(line):
            end = offsets[i] - len(line)
            break
        if start is None:
            start = offsets[i] - len(line)
    if start is None:
        raise Refused("no content to edit")
    return start, len(segment) if end is None else end


def _round_tripper(mapping: int, offset: int) -> YAML:
    rt = YAML(typ="rt")
    rt.preserve_quotes = True
    rt.width = 1 << 30
    rt.brace_single_entry_mapping_in_flow_sequence = True
    rt.indent(mapping=mapping, sequence=offset + 2, offset=offset)
    return rt


def guess_indent(body: str) -> tuple[int, int]:
    """The document's mapping indent and block sequence dash offset, from its first nested
    mapping and first block sequence under a key (2 and 0 when there is none)."""
    lines = [ln for ln in body.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    mapping: int | None = None
    offset: int | None = None
    for prev, line in itertools.pairwise(lines):
        step = _indent(line) - _indent(prev)
        if not prev.rstrip().endswith(":") or step < 0 or prev.lstrip().startswith("-"):
            continue
        if line.lstrip().startswith("-"):
            offset = step if offset is None else offset
        elif step > 0:
            mapping = step if mapping is None else mapping
        if mapping is not None and offset is not None:
            break
    return mapping or 2, offset or 0


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _move(data: Any, move: Move, column: int) -> None:
    """Apply one move to ruamel's tree, its comments with it; `column` is where the keys of
    the destination mapping start (for comments carried from the emptied mapping)."""
    key, src, dst = move
    parent = at(data, src[:-1])
    real_key = next(k for k in parent if k == key)
    comment = parent.ca.items.pop(real_key, None)
    value = parent.pop(real_key)
    holder = mapping_at(data, dst[:-1])
    if holder.get(dst[-1]) is None:
        holder[dst[-1]] = CommentedMap()
    target = mapping_at(data, dst)
    if real_key not in target:
        placed = getattr(target, "_kr_placed", 0)
        target.insert(placed, real_key, value)
        target._kr_placed = placed + 1
        if comment is not None:
            target.ca.items[real_key] = comment
    else:  # already there (same value: verified after): its comments go above the keys
        _carry(holder, dst[-1], _tokens(comment), column)
    if not parent:
        _drop_emptied(data, src[:-1], holder, dst[-1], column)


def _drop_emptied(data: Any, path: linting.Path, holder: Any, key: str | int, column: int) -> None:
    """Remove the emptied mapping at `path`; the comments on its key's line and above its
    first key go above the moved keys (`holder[key]`, whose keys start at `column`)."""
    grand = at(data, path[:-1])
    _pre, _, eol, before = grand.ca.items.pop(path[-1], None) or [None] * 4
    del grand[path[-1]]
    _carry(holder, key, _tokens([eol, before]), column)


def _tokens(entry: Any) -> list[Any]:
    if entry is None:
        return []
    if isinstance(entry, list):
        return [t for part in entry for t in _tokens(part)]
    return [entry]


def _carry(holder: Any, key: str | int, tokens: list[Any], column: int) -> None:
    """Put comments (tokens) on their own lines above the first key of `holder[key]`."""
    if not tokens:
        return
    entry = holder.ca.items.setdefault(key, [None, None, None, None])
    carried = [CommentToken(t.value, CommentMark(column)) for t in tokens]
    entry[3] = [*carried, *(entry[3] or [])]
    target = holder[key]
    target.ca.comment = [(target.ca.comment or [None])[0], entry[3]]


def write_atomically(path: str, text: str) -> None:
    """Write `text` to `path` (through a symlink, to its target) by a rename, with its mode."""
    real = os.path.realpath(path)
    mode = stat.S_IMODE(os.stat(real).st_mode)
    fd, tmp = tempfile.mkstemp(
        dir=os.path.dirname(real), prefix=f".{Path(real).name}.", suffix=".tmp"
    )
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, real)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
