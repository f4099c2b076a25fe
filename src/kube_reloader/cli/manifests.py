"""Reading manifests for `kube-reloader lint`: files and stdin into YAML documents, each with
a map from paths to file lines, refusing what would exhaust memory (a huge file, an alias
bomb, even one split over many documents) with a finding naming the file and line, while
the other documents are still read.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from kube_reloader import limits
from kube_reloader.core import linting
from kube_reloader.core.linting import Document, Finding, Severity

_DOC_START = re.compile(r"^---(\s|$)")


@dataclass
class Chunk:
    source: str
    text: str
    first_line: int  # 1-based line of the chunk's first line in the file


def split_documents(text: str, source: str) -> list[Chunk]:
    chunks: list[Chunk] = []
    current: list[str] = []
    start = 1
    for i, line in enumerate(text.splitlines(keepends=True), start=1):
        if _DOC_START.match(line):
            chunks.append(Chunk(source, "".join(current), start))
            rest = line[3:].lstrip()
            current, start = ([rest], i) if rest.strip() else ([], i + 1)
            continue
        current.append(line)
    chunks.append(Chunk(source, "".join(current), start))
    return [c for c in chunks if c.text.strip() and not _comments_only(c.text)]


def _comments_only(text: str) -> bool:
    return all(ln.strip().startswith("#") or not ln.strip() for ln in text.splitlines())


#: what constructing a composed document can raise: an explicit tag PyYAML cannot construct
#: (`!foo`, `!!int ""`), an unhashable key
_CONSTRUCTION_ERRORS = (
    yaml.YAMLError,
    ValueError,
    TypeError,
    AttributeError,
    IndexError,
    RecursionError,
    OverflowError,
)
_DOCUMENT_FIX = "fix the document; the other documents were still linted"


def parse_chunk(
    chunk: Chunk, budget: limits.AliasBudget | None = None
) -> tuple[Document | None, Finding | None]:
    try:
        node = yaml.compose(chunk.text, Loader=yaml.SafeLoader)
        refused = limits.refusal(node, budget) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = chunk.first_line + (mark.line if mark is not None else 0)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        return None, _invalid(chunk, f"not valid YAML: {problem}", line)
    except RecursionError:
        node, refused = None, "nested too deeply"
    if refused:
        return None, _invalid(chunk, f"refused YAML: {refused}", chunk.first_line)
    if node is None:
        return None, None
    lines = _lines(node, chunk.first_line)
    try:
        obj = yaml.SafeLoader(chunk.text).get_single_data()
    except _CONSTRUCTION_ERRORS as exc:
        problem = getattr(exc, "problem", None) or (str(exc).splitlines() or [""])[0]
        text = f"not valid YAML: {problem or type(exc).__name__}"
        return None, _invalid(chunk, text, chunk.first_line)

    def line_of(path: linting.Path) -> int:
        for cut in range(len(path), -1, -1):
            if path[:cut] in lines:
                return lines[path[:cut]]
        return chunk.first_line

    return Document(obj, chunk.source, line_of), None


def _invalid(chunk: Chunk, message: str, line: int) -> Finding:
    return Finding("KR000", Severity.ERROR, message, _DOCUMENT_FIX, chunk.source, line)


def _lines(node: yaml.Node, first_line: int) -> dict[linting.Path, int]:
    """The file line of every path in the composed document `node`."""
    lines: dict[linting.Path, int] = {}
    walked: set[int] = set()

    def walk(n: yaml.Node, path: linting.Path) -> None:
        lines[path] = first_line + n.start_mark.line
        if id(n) in walked:
            return  # an alias: paths below it take the alias's line (memory stays ~ the text)
        walked.add(id(n))
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                if not isinstance(k, yaml.ScalarNode):
                    continue  # a collection as a key: construction below refuses it
                key = k.value
                lines[(*path, key)] = first_line + k.start_mark.line
                walk(v, (*path, key))
                lines[(*path, key)] = first_line + k.start_mark.line
        elif isinstance(n, yaml.SequenceNode):
            for i, item in enumerate(n.value):
                walk(item, (*path, i))

    walk(node, ())
    return lines


def constant_line(line: int) -> Callable[[linting.Path], int]:
    def line_of(_path: linting.Path) -> int:
        return line

    return line_of


def read_inputs(
    paths: Sequence[str], wanted: Callable[[Path], bool] = lambda _path: True
) -> tuple[list[Document], list[Finding], dict[str, str]]:
    """The documents of `paths` (files, folders, - for stdin), the findings of what could not be
    read, and each file's text; `wanted` says which files found (in folders or named) to read."""
    docs: list[Document] = []
    errors: list[Finding] = []
    texts: dict[str, str] = {}
    budget = limits.AliasBudget()  # shared by every document of the run
    files: list[tuple[str, str]] = []
    for p in paths:
        if p == "-":
            files.append(("<stdin>", limits.read_text(sys.stdin)))
            continue
        path = Path(p)
        if path.is_dir():
            for f in sorted(path.rglob("*")):
                if f.suffix in (".yaml", ".yml") and f.is_file() and wanted(f):
                    files.append((str(f), limits.read_text(f)))
        elif path.exists():
            if not wanted(path):
                continue
            files.append((str(path), limits.read_text(path)))
        else:
            raise FileNotFoundError(f"{p}: no such file or directory")
    for source, text in files:
        if len(text) > limits.MAX_FILE_CHARS:
            refused = f"refused: more than {limits.MAX_FILE_CHARS:,} characters"
            fix = "split the file; the other files were still linted"
            errors.append(Finding("KR000", Severity.ERROR, refused, fix, source, 1))
            continue
        texts[source] = text
        for chunk in split_documents(text, source):
            doc, err = parse_chunk(chunk, budget)
            if err is not None:
                errors.append(err)
            elif doc is not None:
                if (
                    isinstance(doc.obj, dict)
                    and doc.obj.get("kind", "").endswith("List")
                    and isinstance(doc.obj.get("items"), list)
                ):
                    docs += [
                        Document(item, source, constant_line(doc.line_of(())))
                        for item in doc.obj["items"]
                    ]
                else:
                    docs.append(doc)
    return docs, errors, texts
