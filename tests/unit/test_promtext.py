"""The exposition is prometheus_client's, byte for byte: the same families made in both (it
stays a test dependency for this), rendered by each, compared; and the process collector."""

from __future__ import annotations

from pathlib import Path

import prometheus_client
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.utils import floatToGoString

from kube_reloader import promseries
from kube_reloader.promtext import CONTENT_TYPE, ProcessCollector, render

prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

labels = st.text(st.characters(codec="utf-8"), max_size=12)
amounts = st.floats(min_value=0, allow_nan=False) | st.sampled_from([0.0, 1e6, 1234567.0, 1e-9])
values = st.floats(allow_nan=True, allow_infinity=True)
BUCKETS = (0.001, 0.5, 1, 2.5, 1e6, 1e7)


@given(values)
@settings(max_examples=500)
def test_a_value_is_written_as_prometheus_client_writes_it(value: float) -> None:
    assert promseries.go_float(value) == floatToGoString(value)


@pytest.mark.parametrize(
    ("value", "text"),
    [(1.0, "1.0"), (1e6, "1e+06"), (1234567.0, "1.234567e+06"), (1e-05, "1e-05"),
     (float("inf"), "+Inf"), (float("-inf"), "-Inf"), (-1234567.0, "-1234567.0")],
)  # fmt: skip
def test_go_writes_large_numbers_with_an_exponent(value: float, text: str) -> None:
    assert promseries.go_float(value) == text


def _both(kind: str, name: str, helptext: str, names: list[str]) -> tuple[object, object]:
    ours_registry = promseries.Registry()
    theirs_registry = prometheus_client.CollectorRegistry()
    extra = {"buckets": BUCKETS} if kind == "Histogram" else {}
    ours = getattr(promseries, kind)(name, helptext, names, registry=ours_registry, **extra)
    theirs = getattr(prometheus_client, kind)(
        name, helptext, names, registry=theirs_registry, **extra
    )
    return (ours_registry, ours), (theirs_registry, theirs)


@given(
    kind=st.sampled_from(["Counter", "Gauge", "Histogram"]),
    helptext=st.text(max_size=30),
    steps=st.lists(st.tuples(labels, labels, amounts), max_size=8),
)
@settings(max_examples=200, deadline=None)
def test_a_family_renders_as_prometheus_client_renders_it(
    kind: str, helptext: str, steps: list[tuple[str, str, float]]
) -> None:
    (ours_registry, ours), (theirs_registry, theirs) = _both(kind, "demo", helptext, ["b", "a"])
    method = {"Counter": "inc", "Gauge": "set", "Histogram": "observe"}[kind]
    for b, a, amount in steps:
        for metric in (ours, theirs):
            getattr(metric.labels(b=b, a=a), method)(amount)  # type: ignore[attr-defined]
    assert render(ours_registry) == prometheus_client.generate_latest(theirs_registry)


@pytest.mark.parametrize("kind", ["Counter", "Gauge", "Histogram"])
def test_a_family_without_labels_shows_its_zero_and_a_removed_series_goes(kind: str) -> None:
    (ours_registry, ours), (theirs_registry, theirs) = _both(kind, "plain_total", "h\\n\n", [])
    assert render(ours_registry) == prometheus_client.generate_latest(theirs_registry)
    (ours_registry, ours), (theirs_registry, theirs) = _both(kind, "by", "by", ["x"])
    for metric in (ours, theirs):
        metric.labels(x="1")  # type: ignore[attr-defined]
        metric.labels(x="2")  # type: ignore[attr-defined]
        metric.remove("1")  # type: ignore[attr-defined]
    assert render(ours_registry) == prometheus_client.generate_latest(theirs_registry)
    assert b'x="1"' not in render(ours_registry)


def test_a_collectors_families_render_as_prometheus_client_renders_them() -> None:
    ours = promseries.CounterFamily("made_total", "made", labels=["r"])
    ours.add_metric(["a"], 2)
    gauge = promseries.GaugeFamily("size", "size")
    gauge.add_metric([], 7)
    theirs = CounterMetricFamily("made_total", "made", labels=["r"])
    theirs.add_metric(["a"], 2)
    their_gauge = GaugeMetricFamily("size", "size")
    their_gauge.add_metric([], 7)

    class Fixed:
        def __init__(self, families: list[object]) -> None:
            self.families = families

        def collect(self) -> list[object]:
            return self.families

    ours_registry = promseries.Registry()
    ours_registry.register(Fixed([ours, gauge]))  # type: ignore[arg-type]
    theirs_registry = prometheus_client.CollectorRegistry()
    theirs_registry.register(Fixed([theirs, their_gauge]))  # type: ignore[arg-type]
    assert render(ours_registry) == prometheus_client.generate_latest(theirs_registry)


def test_the_content_type_is_the_one_served_before() -> None:
    assert CONTENT_TYPE == prometheus_client.CONTENT_TYPE_LATEST


def _proc(
    tmp_path: Path,
    *,
    limit: str = "1024",
    stat: bool = True,
    ticks: tuple[str, str] = ("250", "150"),
) -> Path:
    (tmp_path / "stat").write_text("cpu 1 2 3\nbtime 1700000000\n")
    me = tmp_path / "42"
    (me / "fd").mkdir(parents=True)
    for n in range(3):
        (me / "fd" / str(n)).write_text("")
    fields = ["S"] + ["0"] * 50
    fields[11], fields[12] = ticks
    fields[19], fields[20], fields[21] = "500", "8192", "3"
    if stat:
        (me / "stat").write_text("42 (a) b) " + " ".join(fields) + "\n")
    (me / "limits").write_text(
        "Limit                     Soft Limit           Hard Limit           Units\n"
        f"Max open files            {limit}                 4096                 files\n"
    )
    return tmp_path


def _process(tmp_path: Path, **kwargs: object) -> dict[str, float]:
    collector = ProcessCollector(str(_proc(tmp_path, **kwargs)), lambda: "42")  # type: ignore[arg-type]
    registry = promseries.Registry()
    registry.register(collector)
    return {s.name: s.value for f in registry.collect() for s in f.samples}


def test_the_process_families_are_read_from_proc_a_command_with_a_paren_included(
    tmp_path: Path,
) -> None:
    ticks = __import__("os").sysconf("SC_CLK_TCK")
    page = __import__("resource").getpagesize()
    got = _process(tmp_path)
    assert list(got) == [
        "process_virtual_memory_bytes", "process_resident_memory_bytes",
        "process_start_time_seconds", "process_cpu_seconds_total",
        "process_open_fds", "process_max_fds",
    ]  # fmt: skip
    assert got["process_virtual_memory_bytes"] == 8192
    assert got["process_resident_memory_bytes"] == 3 * page
    assert got["process_start_time_seconds"] == 1700000000 + 500 / ticks
    assert got["process_cpu_seconds_total"] == 400 / ticks
    assert got["process_open_fds"] == 3
    assert got["process_max_fds"] == 1024


def test_an_unlimited_file_limit_is_infinite_and_an_unreadable_stat_leaves_its_families_out(
    tmp_path: Path,
) -> None:
    got = _process(tmp_path, limit="unlimited", stat=False)
    assert got == {"process_open_fds": 3.0, "process_max_fds": float("inf")}


def test_without_proc_the_process_families_are_left_out(tmp_path: Path) -> None:
    collector = ProcessCollector(str(tmp_path / "missing"))
    assert collector.collect() == []


def test_the_process_families_render_as_prometheus_clients_collector_renders_them(
    tmp_path: Path,
) -> None:
    from prometheus_client.process_collector import ProcessCollector as Theirs

    proc = _proc(tmp_path, ticks=("6", "1"))  # 0.06 + 0.01 is not 0.07 in floats
    ours = promseries.Registry()
    ours.register(ProcessCollector(str(proc), lambda: "42"))
    theirs = prometheus_client.CollectorRegistry()
    Theirs(proc=str(proc), pid=lambda: "42", registry=theirs)
    assert render(ours) == prometheus_client.generate_latest(theirs)
