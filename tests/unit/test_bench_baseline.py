"""The benchmark's before/after plumbing (bench/baseline.py, bench/report.py): no cluster."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from bench import baseline, report

REPO = Path(__file__).resolve().parents[2]


def _result(p50: float, p99: float, cpu: float, rss: float, missed: int = 0) -> dict[str, Any]:
    return {"latency_ms": {"p50": p50, "p95": p99, "p99": p99, "max": p99}, "missed": missed,
            "duplicates": 0, "cpu_seconds": cpu, "rss_peak_mib": rss, "updates": 10,
            "api_by_verb_resource": {"patch deployments": 10}}  # fmt: skip


META = {"date": "d", "machine": "m", "quick": True, "seed": 7, "duration": 10.0, "repeats": 1,
        "converge_timeout": 300.0, "peers": {"reloader-v1": "v1.4.21 (392be733e05b)"},
        "current": "abc123 subject"}  # fmt: skip


def test_without_a_baseline_the_report_has_a_column_and_a_ratio_per_peer() -> None:
    results = {"S1": {"kube-reloader": [_result(5, 20, 1.0, 40)],
                      "reloader-v1": [_result(10, 40, 2, 50)], "reloader-v2": [_result(10, 80, 2, 50)]}}  # fmt: skip
    text = report.report(results, META)
    assert (
        "| measure | kube-reloader | reloader-v1 | reloader-v2 | ÷ reloader-v1 | ÷ reloader-v2 |"
        in text
    )
    assert "Before / after" not in text
    assert "| latency p99 (ms) | 20.0 | 40.0 | 80.0 | 0.50 | 0.25 |" in text


def test_with_a_baseline_the_report_opens_with_before_after() -> None:
    meta = {**META, "baseline": {"name": "kube-reloader@v1", "ref": "v1", "commit": "f" * 40,
                                 "subject": "f00 old"}}  # fmt: skip
    results = {"S1": {"kube-reloader": [_result(5, 20, 1.0, 40, missed=1)],
                      "kube-reloader@v1": [_result(10, 40, 2.0, 40)],
                      "reloader-v1": [_result(10, 40, 2, 50)]}}  # fmt: skip
    text = report.report(results, meta)
    assert text.index("## Before / after") < text.index("## S1")
    row = next(line for line in text.splitlines() if line.startswith("| S1 |"))
    assert row == (
        "| S1 | **0 → 1** | 0 → 0 | 10.0 → 5.0 (0.50) | 40.0 → 20.0 (0.50) | 2.0 → 1.0 (0.50) | 40.0 → 40.0 (1.00) |"
    )
    assert (
        "| measure | kube-reloader | kube-reloader@v1 | reloader-v1 | ÷ reloader-v1 | after / before |"
        in text
    )


def test_export_runs_kube_reloader_from_the_ref(tmp_path: Path) -> None:
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    base = baseline.export("HEAD", REPO)
    try:
        assert base.name == "kube-reloader@HEAD"
        assert (base.src / "kube_reloader" / "__init__.py").is_file()
        where = subprocess.run(
            [sys.executable, "-c", "import kube_reloader; print(kube_reloader.__file__)"],
            env=base.env(dict(os.environ)), capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        assert where.startswith(str(base.src))
    finally:
        base.remove()
    assert not base.root.exists()


def test_names() -> None:
    assert baseline.is_kube_reloader("kube-reloader")
    assert baseline.is_kube_reloader("kube-reloader@origin/main")
    assert not baseline.is_kube_reloader("reloader-v1")
    assert baseline.file_safe("kube-reloader@origin/main") == "kube-reloader@origin_main"


def test_every_controller_is_handed_the_clusters_kubeconfig_as_json_beside_it(
    tmp_path: Path,
) -> None:
    import json

    import yaml
    from bench import compare

    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "x",
           "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443",
                                                  "certificate-authority": "ca.crt"}}]}  # fmt: skip
    source = tmp_path / "kubeconfig"
    source.write_text(yaml.safe_dump(doc))
    out = compare.as_json(source)
    assert out.parent == source.parent, "relative certificate paths still resolve"
    assert json.loads(out.read_text()) == doc
