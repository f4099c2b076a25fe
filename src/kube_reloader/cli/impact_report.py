"""`kube-reloader impact`'s output: one line per workload and a summary, or JSON."""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from kube_reloader.core import impacting, planning
from kube_reloader.core.scheduling import Hold

ORDER_TAIL = " to finish rolling out this change"


def describe(row: impacting.Row) -> str:
    """`reload  env-vars  now`, `... held: window (opens ...)`, `... waits: slot #3`, `no: ...`."""
    v = row.verdict
    if v is None:
        why = row.warnings[0] if row.outcome == "reload" and row.warnings else row.reason
        return f"no: {why}"
    head = f"reload  {row.strategy}  "
    if v.write:
        return head + ("now (urgent: the window is bypassed)" if "urgent" in v.message else "now")
    if v.hold is Hold.SLOTS:
        return head + f"waits: slot #{v.position}"
    if v.hold is Hold.ORDER:
        names = v.message.removeprefix("waiting for ").removesuffix(ORDER_TAIL)
        return head + f"waits: order (after {names})"
    if v.hold is Hold.WINDOW:
        opens = "never" if v.until is None else _utc(v.until)
        source, _, where = row.window.rpartition(" (")
        return head + f"held: window (opens {opens}; {source!r} of the {where.rstrip(')')})"
    return head + f"held: {v.hold} ({v.message})"


def _utc(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def summary(rows: Sequence[impacting.Row]) -> dict[str, Any]:
    held = Counter(str(r.verdict.hold) for r in rows if r.verdict and not r.verdict.write)
    now = sum(1 for r in rows if r.verdict is not None and r.verdict.write)
    return {
        "now": now,
        "held": dict(sorted(held.items())),
        "not_reloaded": sum(1 for r in rows if r.verdict is None),
    }


def render_text(c: planning.Change, notes: Sequence[str], rows: Sequence[impacting.Row]) -> str:
    lines = [f"{c.rtype.kind} {c.namespace}/{c.name}: one content change (hash {c.hash})"]
    lines += [f"note: {n}" for n in notes]
    width = max((len(f"{r.workload.kind}/{r.workload.name}") for r in rows), default=0)
    for r in rows:
        lines.append(f"{r.workload.kind}/{r.workload.name}".ljust(width) + "  " + describe(r))
        lines += [f"  warning: {w}" for w in r.warnings]
    if not rows:
        lines.append(f"no workloads in namespace {c.namespace}")
    s = summary(rows)
    held = sum(s["held"].values())
    by = ", ".join(f"{k} {n}" for k, n in s["held"].items())
    held_by = f"{held} held" + (f" ({by})" if by else "")
    lines.append(f"summary: {s['now']} reload now, {held_by}, {s['not_reloaded']} not reloaded")
    return "\n".join(lines) + "\n"


def row_dict(row: impacting.Row) -> dict[str, Any]:
    out = dataclasses.asdict(row)
    out["workload"] = {
        "kind": row.workload.kind,
        "namespace": row.workload.namespace,
        "name": row.workload.name,
    }
    v = out["verdict"]
    if v is not None:
        v["hold"] = None if v["hold"] is None else str(v["hold"])
        v["until_utc"] = None if v["until"] is None else _utc(v["until"])
    return out


def to_json(
    c: planning.Change, notes: Sequence[str], rows: Sequence[impacting.Row], state: impacting.State
) -> dict[str, Any]:
    return {
        "resource": {"kind": c.rtype.kind, "namespace": c.namespace, "name": c.name},
        "hash": c.hash,
        "notes": list(notes),
        "in_flight": [str(k) for k in sorted(state.in_flight)],
        "rows": [row_dict(r) for r in rows],
        "summary": summary(rows),
    }
