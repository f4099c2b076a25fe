"""bench/tls_rotation.py's table and its block in bench/README.md (bench/readme.py). No
cluster."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench import readme, tls_rotation


def _row(case: str, controller: str, served: list[float | None], **extra: Any) -> dict[str, Any]:
    base = {"case": case, "controller": controller, "renewals": len(served),
            "served_after_s": served, "failed_seconds": 0.0, "failed_connections": 0,
            "probes": 100, "dropped_sessions": 0, "admissions": 0, "failed_admissions": 0,
            "restarts_per_renewal": 0.0, "failures_sample": []}  # fmt: skip
    return base | extra


DOC = {
    "date": "2026-12-05 10:00 UTC", "machine": "x86_64, 2 cores, Python 3.11.7",
    "peers": {"reloader-v1": "v1.4.21 (392be733e05b)"}, "params": {"renewals": 2},
    "results": [
        _row("nats", "kube-reloader", [0.6, 0.7]),
        _row("nats", "reloader-v1", [3.1, None], failed_seconds=1.4, dropped_sessions=2,
             restarts_per_renewal=1.0),
        _row("webhook", "reloader-v1", [9.0, 8.5], admissions=400, failed_admissions=7,
             restarts_per_renewal=2.0),
    ],
}  # fmt: skip


def test_each_row_shows_what_its_case_measures_and_a_renewal_never_served() -> None:
    lines = tls_rotation.table(DOC)
    rows = [line for line in lines if line.startswith(("| nats", "| webhook"))]
    assert rows == [
        "| nats | kube-reloader | 0.6, 0.7 | 0.0 | 0 | — | 0.0 |",
        "| nats | reloader-v1 | 3.1, not served | 1.4 | 2 | — | 1.0 |",
        "| webhook | reloader-v1 | 9.0, 8.5 | 0.0 | — | 7 of 400 | 2.0 |",
    ]
    assert "2 renewals per row" in lines[0]
    assert "reloader-v1 v1.4.21" in lines[0]


def test_the_readme_block_is_replaced_between_its_markers(tmp_path: Path) -> None:
    begin, end = readme.markers("tls_rotation")
    doc = tmp_path / "README.md"
    doc.write_text(f"before\n{begin}\nold table\n{end}\nafter\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.json").write_text(json.dumps(DOC))
    readme.update_table(doc, run, "tls_rotation")
    text = doc.read_text()
    assert "old table" not in text
    assert "| webhook | reloader-v1 | 9.0, 8.5 |" in text
    assert text.startswith("before\n")
    assert text.endswith("after\n")
