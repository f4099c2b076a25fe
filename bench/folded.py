"""Tally a py-spy profile in collapsed-stack form (`bench.compare --profile=folded`): where
kube-reloader's samples go, as shares of all samples.

    python -m bench.folded bench/results/<stamp>/profiles/S2-kube-reloader.folded [--top 20]

Two tables: **self** by module (the file of the innermost Python frame: the work done there or
in the C code it called, such as `ssl.py` for TLS records), and **inclusive** by kube-reloader
function (every sample with that function anywhere on its stack, so the shares overlap: a
caller includes its callees). Samples whose innermost frame is the selector's `select` are
the loop waiting for I/O (py-spy, without `--native`, cannot tell a wait in `epoll_wait`
from work): they are counted apart and left out of both tables.

A line of the input is `frame;frame;...;frame COUNT`, outermost frame first, each frame
`function (path:line)` as py-spy writes it (`path` may lack `:line`)."""

from __future__ import annotations

import argparse
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

_FRAME = re.compile(r"^(?P<func>.*?) \((?P<path>[^()]*?)(?::\d+)?\)$")
PACKAGE = "kube_reloader/"


@dataclass
class Tally:
    total: int = 0
    waiting: int = 0
    by_module: Counter[str] = field(default_factory=Counter)
    by_function: Counter[str] = field(default_factory=Counter)


def module_of(path: str) -> str:
    """`.../site-packages/kube_reloader/kube/wire.py` -> `kube_reloader/kube/wire.py`; other
    files by their last two parts (`asyncio/events.py`), the interpreter's own by name."""
    if PACKAGE in path:
        return PACKAGE + path.rsplit(PACKAGE, 1)[1]
    parts = path.replace("\\", "/").split("/")
    return "/".join(parts[-2:]) if len(parts) > 1 else path


def frame(text: str) -> tuple[str, str]:
    """One frame: (function, module). A frame without a path is its own module."""
    m = _FRAME.match(text.strip())
    if m is None:
        return text.strip(), text.strip()
    return m["func"], module_of(m["path"])


def tally(lines: Iterable[str]) -> Tally:
    out = Tally()
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [frame(f) for f in stack.split(";") if f]
        if not frames:
            continue
        func, module = frames[-1]
        if func.rpartition(".")[2] == "select" and module.endswith("selectors.py"):
            out.waiting += n
            continue
        out.total += n
        out.by_module[module] += n
        ours = {f"{m.removeprefix(PACKAGE)}:{f}" for f, m in frames if PACKAGE in m}
        for name in ours:
            out.by_function[name] += n
    return out


def table(title: str, counts: Counter[str], total: int, top: int) -> list[str]:
    rows = [f"| {title} | share |", "|---|---|"]
    for name, n in counts.most_common(top):
        rows.append(f"| `{name}` | {100.0 * n / total:.1f}% |")
    return rows


def render(t: Tally, top: int) -> str:
    if not t.total:
        return "no samples"
    lines = [f"{t.total} samples ({t.waiting} more waiting in the selector, left out)", ""]
    lines += table("self, by module", t.by_module, t.total, top)
    lines.append("")
    lines += table("inclusive, by kube-reloader function", t.by_function, t.total, top)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("profile", type=Path)
    p.add_argument("--top", type=int, default=20)
    args = p.parse_args(argv)
    with args.profile.open() as f:
        print(render(tally(f), args.top))


if __name__ == "__main__":
    main()
