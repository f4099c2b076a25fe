"""Repeated runs summarised: the median and range (min-max) of each measure per controller, and
of each ratio kube-reloader / peer, taken run by run (repeat k of one against repeat k of the
other: both ran on the machine within minutes of each other)."""

from __future__ import annotations

import statistics
from typing import Any

Results = dict[str, dict[str, list[dict[str, Any]]]]  # scenario -> controller -> runs


def get(d: dict[str, Any], path: str) -> Any:
    """`d["a"]["b"]` for "a.b", or None where a level is missing."""
    for p in path.split("."):
        d = d.get(p) if isinstance(d, dict) else None  # type: ignore[assignment]
    return d


def _num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def spread(runs: list[dict[str, Any]], key: str) -> tuple[float, float, float] | None:
    """(median, min, max) of `key` over the runs that have it, or None."""
    xs = [float(v) for v in (get(r, key) for r in runs) if _num(v)]
    if not xs:
        return None
    return statistics.median(xs), min(xs), max(xs)


def ratio_spread(
    ours: list[dict[str, Any]], theirs: list[dict[str, Any]], key: str
) -> tuple[float, float, float] | None:
    """(median, min, max) of ours[k] / theirs[k] over the repeats where both are numbers and
    the peer's is not 0."""
    xs = []
    for a, b in zip(ours, theirs, strict=False):
        x, y = get(a, key), get(b, key)
        if _num(x) and _num(y) and y:
            xs.append(float(x) / float(y))
    if not xs:
        return None
    return statistics.median(xs), min(xs), max(xs)


def _fmt(x: float, digits: int) -> str:
    return f"{x:,.{digits}f}"


def cell(s: tuple[float, float, float] | None, digits: int = 1) -> str:
    """The median (min–max), or the value alone when every run gave the same; "—" for none."""
    if s is None:
        return "—"
    med, lo, hi = s
    if lo == hi:
        return _fmt(med, digits)
    return f"{_fmt(med, digits)} ({_fmt(lo, digits)}–{_fmt(hi, digits)})"


def total(runs: list[dict[str, Any]], key: str) -> int:
    """The sum of an integer count over the runs (missed, duplicates: any is one too many)."""
    return sum(int(v) for v in (get(r, key) for r in runs) if _num(v))


def run_count(results: Results) -> int:
    """The fewest runs any (scenario, controller) has: what "n runs" may claim."""
    counts = [len(runs) for by in results.values() for runs in by.values()]
    return min(counts) if counts else 0


def median(runs: list[dict[str, Any]], key: str, digits: int = 1) -> str:
    """The median alone, or "—"."""
    s = spread(runs, key)
    return "—" if s is None else _fmt(s[0], digits)
