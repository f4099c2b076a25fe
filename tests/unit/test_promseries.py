"""The metric families: a series is found again by its labels as given, never a removed one;
wrong labels, names and amounts are refused; a scrape in another thread reads whole tables."""

from __future__ import annotations

import enum
import math
import sys
import threading

import pytest

from kube_reloader.promseries import Counter, Gauge, Histogram, Registry
from kube_reloader.promtext import render


def _text(registry: Registry) -> str:
    return render(registry).decode()


def test_the_same_labels_find_the_same_series_whatever_order_the_names_come_in() -> None:
    registry = Registry()
    c = Counter("demo_total", "demo", ["verb", "code"], registry=registry)
    a = c.labels(verb="PATCH", code="200")
    assert c.labels(verb="PATCH", code="200") is a
    assert c.labels(code="200", verb="PATCH") is a, "keyword order does not make a second series"
    assert c.labels("PATCH", "200") is a, "positional values reach the same series"
    c.labels(code="200", verb="PATCH").inc()
    a.inc(2)
    assert 'demo_total{code="200",verb="PATCH"} 3.0' in _text(registry)


def test_a_removed_series_is_made_anew_and_exported_again() -> None:
    registry = Registry()
    g = Gauge("demo", "demo", ["ns"], registry=registry)
    old = g.labels(ns="a")
    old.set(1)
    g.remove("a")
    assert 'ns="a"' not in _text(registry)
    new = g.labels(ns="a")
    assert new is not old
    new.set(5)
    assert 'demo{ns="a"} 5.0' in _text(registry)
    g.clear()
    assert g.labels(ns="a") is not new
    assert 'demo{ns="a"} 0.0' in _text(registry)


def test_values_are_strings_on_the_wire_and_a_wrong_label_is_still_refused() -> None:
    registry = Registry()
    h = Histogram("demo_seconds", "demo", ["kind"], buckets=(1.0,), registry=registry)
    h.labels(kind=7).observe(0.5)
    assert h.labels(kind="7") is h.labels(kind=7), "7 and '7' are one series, as before"
    assert 'demo_seconds_count{kind="7"} 1.0' in _text(registry)
    with pytest.raises(ValueError, match="Incorrect label names"):
        h.labels(other="x")
    with pytest.raises(ValueError, match="Incorrect label count"):
        h.labels("a", "b")
    with pytest.raises(ValueError, match="not both"):
        h.labels("a", kind="b")
    with pytest.raises(ValueError, match="has labels"):
        h.observe(1.0)


def test_an_unhashable_label_value_is_found_by_its_string() -> None:
    c = Counter("demo", "demo", ["what"])
    c.labels(what=["a"]).inc()
    assert c.labels(what="['a']").get() == 1.0


class Named(enum.StrEnum):
    A = "a"


def test_values_that_are_equal_keys_but_print_apart_are_series_apart() -> None:
    registry = Registry()
    c = Counter("demo", "demo", ["v"], registry=registry)
    for value in (1, True, 1.0, 1, True, 1.0, 0, False):
        c.labels(value).inc()
    c.labels("a").inc()
    c.labels(Named.A).inc()
    c.labels(float("nan")).inc()
    got = {s.labels["v"]: s.value for f in registry.collect() for s in f.samples}
    assert got == {"1": 2, "True": 2, "1.0": 2, "0": 1, "False": 1, "a": 2, "nan": 1}
    assert c.labels(v="a") is c.labels("a") is c.labels(Named.A)


def test_a_positional_value_never_finds_a_series_looked_up_by_name() -> None:
    g = Gauge("demo", "demo", ["x", "y"])
    by_name = g.labels(x="1", y="2")
    assert g.labels((), (("x", "1"), ("y", "2"))) is not by_name


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (lambda: Counter("bad name", "x"), "metric name"),
        (lambda: Counter("ok", "x", ["bad-label"]), "label name"),
        (lambda: Counter("ok", "x", ["__reserved"]), "label name"),
        (lambda: Counter("ok", "x", ["a", "a"]), "twice"),
        (lambda: Histogram("ok", "x", ["le"], buckets=(1,)), "label name"),
        (lambda: Histogram("ok", "x", buckets=(2, 1)), "ascend"),
        (lambda: Histogram("ok", "x", buckets=(1, 1)), "ascend"),
    ],
)
def test_a_malformed_metric_is_refused_when_it_is_made(make: object, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        make()  # type: ignore[operator]


def test_a_counter_refuses_to_go_down_and_a_name_is_registered_once() -> None:
    registry = Registry()
    c = Counter("twice", "x", registry=registry)
    with pytest.raises(ValueError, match="only goes up"):
        c.inc(-1)
    with pytest.raises(ValueError, match="registered twice: twice, twice_total"):
        Counter("twice_total", "x", registry=registry)
    with pytest.raises(ValueError, match="collector registered twice"):
        registry.register(c)
    Gauge("other", "x", registry=registry)
    assert registry.get_sample_value("twice_total") == 0.0
    assert registry.get_sample_value("twice_total", {"x": "y"}) is None


def test_a_histogram_counts_each_value_in_the_first_bucket_it_fits() -> None:
    registry = Registry()
    h = Histogram("h", "x", buckets=(1, 2), registry=registry)
    for value in (0.5, 1.0, 1.5, 2.0, 3.0, float("inf")):
        h.observe(value)
    h.observe(float("nan"))  # fits no bucket, and makes the sum NaN
    sample = registry.get_sample_value
    assert [sample("h_bucket", {"le": le}) for le in ("1.0", "2.0", "+Inf")] == [2, 4, 6]
    assert sample("h_count") == 6
    total = sample("h_sum")
    assert total is not None
    assert math.isnan(total)


def test_a_gauge_with_a_function_is_read_at_each_scrape() -> None:
    registry = Registry()
    g = Gauge("fn", "x", ["c"], registry=registry)
    values = iter((3, 4))
    g.labels(c="a").set_function(lambda: next(values))
    assert registry.get_sample_value("fn", {"c": "a"}) == 3.0
    assert registry.get_sample_value("fn", {"c": "a"}) == 4.0


def test_a_scrape_in_another_thread_never_reads_a_table_in_the_middle_of_a_change() -> None:
    registry = Registry()
    h = Histogram("h", "x", ["n"], buckets=(0.5,), registry=registry)
    stop = threading.Event()
    failed: list[str] = []

    def scrape() -> None:
        try:
            while not stop.is_set():
                for family in registry.collect():
                    assert family.samples is not None
        except Exception as exc:  # noqa: BLE001 - "changed size during iteration" fails the test
            failed.append(repr(exc))

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # the threads take turns often
    reader = threading.Thread(target=scrape)
    reader.start()
    try:
        for i in range(20_000):  # every step adds a series and removes one: the table changes
            h.labels(n=str(i)).observe(1)
            if i >= 100:
                h.remove(str(i - 100))
    finally:
        stop.set()
        reader.join()
        sys.setswitchinterval(switch)
    assert failed == []
    assert registry.get_sample_value("h_count", {"n": "19999"}) == 1
