"""Repeated benchmark runs summarised (bench/summary.py) and bench/README.md's generated block
(bench/readme.py): medians, ranges, ratios repeat by repeat, the CPU goal. No cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from bench import readme, summary


def _run(
    p99: float | None,
    cpu1k: float,
    missed: int = 0,
    converged: float | None = 1.0,
    start: float = 0.25,
) -> dict[str, Any]:
    return {"latency_ms": {"p99": p99}, "cpu_per_1k_events": cpu1k, "missed": missed,
            "duplicates": 0, "converged_s": converged, "rss_peak_mib": 50.0,
            "start_cpu_seconds": start}  # fmt: skip


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([3.0, 1.0, 2.0], "2.0 (1.0–3.0)"),
        ([2.0, 2.0, 2.0], "2.0"),
        ([1.0, 4.0], "2.5 (1.0–4.0)"),
        ([None, 5.0, None], "5.0"),
        ([None, None], "—"),
        ([1234.0, 1500.0, 2000.0], "1,500.0 (1,234.0–2,000.0)"),
    ],
)
def test_a_cell_is_the_median_of_the_runs_and_their_range(
    values: list[float | None], expected: str
) -> None:
    runs = [{"x": v} for v in values]
    assert summary.cell(summary.spread(runs, "x")) == expected


def test_ratios_are_taken_repeat_by_repeat_and_skip_a_peer_figure_of_zero() -> None:
    ours = [{"x": 1.0}, {"x": 2.0}, {"x": 3.0}, {"x": 4.0}]
    theirs = [{"x": 2.0}, {"x": 2.0}, {"x": 0.0}, {"x": None}]
    # 1/2 and 2/2 only: a median of the ratios, not a ratio of the medians (1.5 / 2 = 0.75)
    assert summary.ratio_spread(ours, theirs, "x") == (0.75, 0.5, 1.0)
    assert summary.ratio_spread(ours, [{"x": 0.0}], "x") is None


def test_nested_keys_and_counts_over_the_runs() -> None:
    runs = [_run(10.0, 1.0, missed=2), _run(30.0, 1.0, missed=0), _run(20.0, 1.0, missed=1)]
    assert summary.spread(runs, "latency_ms.p99") == (20.0, 10.0, 30.0)
    assert summary.total(runs, "missed") == 3
    assert summary.get({"a": 1}, "a.b") is None


def test_the_run_count_claimed_is_the_fewest_any_controller_had() -> None:
    results = {"S1": {"a": [{}, {}, {}], "b": [{}, {}]}, "S2": {"a": [{}, {}, {}]}}
    assert summary.run_count(results) == 2


def _results() -> dict[str, Any]:
    return {
        "S1": {"kube-reloader": [_run(20, 0.9), _run(22, 1.1), _run(21, 1.0)],
               "reloader-v1": [_run(40, 1.0), _run(44, 1.0), _run(42, 1.0)],
               "reloader-v2": [_run(30, 2.0), _run(30, 2.0), _run(30, 2.0)]},
        "S2": {"kube-reloader": [_run(20, 3.0, start=0.15)] * 3,
               "reloader-v1": [_run(None, 1.0, missed=50, converged=None)] * 3,
               "reloader-v2": [_run(25, 1.5)] * 3},
        "M1": {"kube-reloader": [_run(20, 0.5, start=2.0)] * 3,
               "reloader-v1": [_run(25, 0.6)] * 3,
               "reloader-v2": [_run(25, 0.9)] * 3},
    }  # fmt: skip


META = {"date": "2026-12-02 18:00 UTC", "machine": "x86_64, 2 cores, Python 3.11.7", "quick": True,
        "seed": 7, "duration": 10.0, "converge_timeout": 300.0, "current": "abc123 subject",
        "peers": {"reloader-v1": "v1.4.21 (392be733e05b)", "reloader-v2": "v2-7a94f29a7142 (7a94f29a7142)"}}  # fmt: skip


def test_the_generated_block_carries_the_run_its_ratios_and_the_cpu_verdicts() -> None:
    text = readme.block(_results(), META)
    assert text.startswith(readme.BEGIN)
    assert text.endswith(readme.END)
    assert "3 run(s) per scenario and controller" in text
    assert "reloader-v1 v1.4.21 (392be733e05b)" in text
    assert "| S1 Burst: 10 CM, 1 update / 100 ms | kube-reloader | 21.0 (20.0–22.0) |" in text
    row = next(line for line in text.splitlines() if line.startswith("| S1 | "))
    assert row.startswith("| S1 | 0.50 | 0.70 (0.67–0.73) |")
    # Reloader v1 never converged in S2: no ratio, and its 150 missed pairs are shown
    assert "| S2 Fan-out: 1 CM, 50 Deployments | reloader-v1 | — | — |" in text
    assert text.count("| 150 | 0 |") == 1
    # the leanest peer of each scenario, by its median; the ratio to it, repeat by repeat
    assert (
        "| S1 | reloader-v1 | 1.00 | 1.00 (0.90–1.10) | 1.00 (0.90–1.10) | met | 0.25 | **not met** |"
        in text
    )
    assert "| S2 | reloader-v1 | 1.00 | 3.00 | 3.00 | **not met** | 0.15 | met |" in text
    assert "| M1 | reloader-v1 | 0.60 | 0.50 | 0.83 | met | 2.00 | 17,000 objects listed |" in text


def _work(cpu: float, start: float, updates: int, events: int) -> dict[str, Any]:
    return {"cpu_seconds": cpu, "start_cpu_seconds": start, "updates": updates,
            "watch_events": events, "cpu_per_1k_events": (cpu - start) / events * 1000}  # fmt: skip


def test_beside_the_goal_the_events_and_cpu_per_update_show_the_same_work_at_another_pace() -> None:
    results = {
        # v1 writes slower: each update makes 300 events, so it is the leanest per event
        "S2": {"kube-reloader": [_work(0.45, 0.15, 2, 400), _work(0.55, 0.15, 2, 400)],
               "reloader-v1": [_work(0.22, 0.02, 2, 600)] * 2,
               "reloader-v2": [_work(0.40, 0.02, 2, 500)] * 2},
        # no update: nothing to count per update
        "S4": {"kube-reloader": [_work(0.2, 0.15, 0, 100)] * 2,
               "reloader-v1": [_work(0.06, 0.02, 0, 100)] * 2},
    }  # fmt: skip
    assert readme.leanest(results["S2"]) == "reloader-v1"
    assert readme.update_costs(results) == [
        "| S2 | reloader-v1 | 300.0 | 200.0 | 100.00 | 175.00 (150.00–200.00) | 1.75 (1.50–2.00) |"
    ]
    text = readme.block(results, META)
    assert "| its watch events / update | kube-reloader's | its CPU ms / update |" in text
    assert "| S4 | reloader-v1 |" not in text.split("the same work for every controller")[1]


def test_update_rewrites_only_the_block_and_copies_the_plots(tmp_path: Path) -> None:
    import json

    run = tmp_path / "run"
    run.mkdir()
    (run / "results.json").write_text(json.dumps({"meta": META, "results": _results()}))
    (run / "cpu.png").write_bytes(b"png")
    doc = tmp_path / "README.md"
    doc.write_text(
        f"# Benchmarks\n\nbefore\n\n{readme.BEGIN}\nold numbers\n{readme.END}\n\nafter\n"
    )
    readme.update(doc, run)
    text = doc.read_text()
    assert "old numbers" not in text
    assert text.startswith("# Benchmarks\n\nbefore\n\n")
    assert text.endswith("\n\nafter\n")
    assert (tmp_path / "plots" / "cpu.png").read_bytes() == b"png"
    doc.write_text("no markers")
    with pytest.raises(SystemExit):
        readme.update(doc, run)
    doc.write_text(f"{readme.BEGIN}\nold numbers\n{readme.END}\n")
    (run / "results.json").write_text(
        json.dumps({"meta": {**META, "complete": False}, "results": _results()})
    )
    with pytest.raises(SystemExit, match="interrupted"):
        readme.update(doc, run)
    assert "old numbers" in doc.read_text()


def test_l1_lays_out_every_deployment_on_a_configmap_and_a_secret_of_its_own() -> None:
    import argparse

    from bench import scale_l1

    args = argparse.Namespace(configs=400, value_bytes=8, deployments=60, replicas=2, namespaces=4)
    nss, objs, plan = scale_l1.layout(args)
    kinds = [o["kind"] for o in objs]
    assert (kinds.count("ConfigMap"), kinds.count("Secret"), kinds.count("Deployment")) == (
        200,
        200,
        60,
    )
    assert len(nss) == 4
    assert len(plan.workloads) == 60
    readers = [w for res, ws in plan.affects.items() for w in ws]
    assert len(readers) == 120  # one ConfigMap and one Secret each, no config shared
    assert len(plan.affects) == 120
    assert all(o["spec"]["replicas"] == 2 for o in objs if o["kind"] == "Deployment")


def test_l1_reports_a_controller_that_stopped_at_start_and_one_that_converged() -> None:
    from bench import scale_l1

    doc = {"meta": {"date": "d", "machine": "m", "current": "abc", "setup_s": 900,
                    "peers": {"reloader-v1": "v1.4.21 (392be733e05b)"},
                    "params": {"configs": 50000, "value_bytes": 1024, "deployments": 10000, "replicas": 2, "burst": 500}},
           "results": [{"controller": "kube-reloader", "first_reload_s": 9.5, "rss_ready_mib": 80.0, "rss_peak_mib": 95.0,
                        "rss_steady_mib": 81.0, "latency_ms": {"p50": 40.0, "p99": 9000.0}, "converged_s": 2.5,
                        "not_converged": 0, "changes": 500, "api_requests": 1234, "cpu_seconds": 30.0},
                       {"controller": "reloader-v1", "stopped": "no reload of the probe within 900 s of its start",
                        "rss_peak_mib": 700.0, "api_requests": 60, "cpu_seconds": 100.0}]}  # fmt: skip
    lines = scale_l1.table(doc)
    assert "50,000 ConfigMaps and Secrets" in lines[0]
    assert (
        "| kube-reloader | 9.5 | 80.0 / 95.0 / 81.0 | 40.0 / 9,000.0 | 2.5 | 0 of 500 | 1,234 | 30.0 |"
        in lines
    )
    assert lines[-1].startswith("| reloader-v1 | stopped: no reload of the probe within 900 s")


def test_bad_rotation_reports_what_broke_and_a_controller_that_never_converged() -> None:
    from bench import bad_rotation

    doc = {"date": "d", "machine": "m", "peers": {"reloader-v1": "v1.4.21 (392be733e05b)"},
           "params": {"deployments": 2000, "cap": 50, "halt": 3, "limit": 900.0},
           "results": {"reloader-v1": {"deployments": 2000, "broken": 2000, "broken_after_s": 399.6,
                                       "converged_s": None, "converged_workloads": 1500},
                       "kube-reloader": {"deployments": 2000, "broken": 49, "broken_after_s": 4.8,
                                         "converged_s": 159.8, "converged_workloads": 2000}}}  # fmt: skip
    lines = bad_rotation.table(doc)
    assert "`--max-concurrent-rollouts=50 --halt-after-failures=3`" in lines[0]
    assert "| reloader-v1 | 2,000 of 2,000 | 399.6 | not within 900 (1,500 of 2,000) |" in lines
    assert lines[-1] == "| kube-reloader | 49 of 2,000 | 4.8 | 159.8 |"


def test_combined_apply_counts_the_deployments_rolled_twice() -> None:
    from bench import combined_apply

    doc = {"date": "d", "machine": "m", "peers": {"reloader-v2": "v2-7a94f29a7142 (7a94f29a7142)"},
           "params": {"deployments": 200, "limit": 600.0},
           "results": {"kube-reloader + webhook": {"deployments": 200, "converged_s": 12.0, "revisions": 200,
                                                   "replicasets": 200, "revisions_per_deployment": {"1": 200},
                                                   "replicasets_per_deployment": {"1": 200}},
                       "reloader-v2": {"deployments": 200, "converged_s": None, "revisions": 390,
                                       "replicasets": 385, "revisions_per_deployment": {"1": 10, "2": 190},
                                       "replicasets_per_deployment": {"1": 15, "2": 185}}}}  # fmt: skip
    lines = combined_apply.table(doc)
    assert "| kube-reloader + webhook | 200 | 200 | 0 of 200 | 12.0 |" in lines
    assert lines[-1] == "| reloader-v2 | 390 | 385 | 190 of 200 | not within 600 |"


@pytest.mark.parametrize("flag", ["bad_rotation", "combined_apply"])
def test_each_tools_table_replaces_only_its_own_block(flag: str, tmp_path: Path) -> None:
    import json

    from bench import bad_rotation

    run = tmp_path / "run"
    run.mkdir()
    doc = {"date": "2026-12-03", "machine": "m", "peers": {}, "params": {"deployments": 1, "cap": 1,
           "halt": 1, "limit": 1.0}, "results": {}}  # fmt: skip
    # (an empty run has the same header in both tools' tables)
    (run / "results.json").write_text(json.dumps(doc))
    blocks = {f: readme.markers(f) for f in readme.TABLES}
    assert len({m for pair in blocks.values() for m in pair}) == 2 * len(blocks), "unique markers"
    text = "\n".join(f"{b}\nold {f}\n{e}" for f, (b, e) in blocks.items())
    target = tmp_path / "README.md"
    target.write_text(text)
    readme.update_table(target, run, flag)
    out = target.read_text()
    assert f"old {flag}" not in out
    assert all(f"old {f}" in out for f in readme.TABLES if f != flag)
    assert bad_rotation.table(doc)[0].split(" — ")[0] in out


def test_a_rerun_replaces_only_its_scenarios_and_the_block_says_so() -> None:
    again = {"meta": {**META, "date": "2026-12-03 11:30 UTC", "repeats": 3, "current": "def456 fix"},
             "results": {"S2": {c: [_run(10, 1.0)] * 3 for c in ("kube-reloader", "reloader-v1", "reloader-v2")}}}  # fmt: skip
    results, meta = readme.merged({"meta": META, "results": _results()}, [again])
    assert list(results) == ["S1", "S2", "M1"]
    assert results["S1"] == _results()["S1"]
    assert results["S2"]["reloader-v1"][0]["converged_s"] is not None
    text = readme.block(results, meta)
    assert (
        "S2 from a rerun on 2026-12-03 11:30 UTC (3 run(s), 10.0 s of updates, kube-reloader `def456 fix`)."
        in text
    )
    assert text.count("| 150 | 0 |") == 0, "the first run's S2 is gone"
    other = {"meta": {**again["meta"], "peers": {"reloader-v1": "v1.4.21"}}, "results": {}}
    with pytest.raises(SystemExit, match="same peers"):
        readme.merged({"meta": META, "results": _results()}, [other])


def test_the_header_names_the_flags_only_the_current_tree_ran_with() -> None:
    text = readme.block(_results(), {**META, "current_args": ["--event-loop=uvloop"]})
    assert "kube-reloader: `abc123 subject` with `--event-loop=uvloop`;" in text
    assert "kube-reloader: `abc123 subject`;" in readme.block(_results(), META)
    both = {**META, "current_args": ["--reload-rate=5"], "baseline_args": ["--reload-rate=5"]}
    assert "`abc123 subject` with `--reload-rate=5` (the baseline with `--reload-rate=5`);" in (
        readme.block(_results(), both)
    )


def test_a_run_without_peers_names_none_in_the_header() -> None:
    text = readme.block(_results(), {**META, "peers": {}, "current_args": ["--event-loop=uvloop"]})
    assert "kube-reloader: `abc123 subject` with `--event-loop=uvloop`. Each cell" in text
