"""The lookup in front of `labels()`: the same series as prometheus_client's own, found again
by the labels as given, and never a series that was removed."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from kube_reloader.promseries import Counter, Gauge, Histogram


def _text(registry: CollectorRegistry) -> str:
    return generate_latest(registry).decode()


def test_the_same_labels_find_the_same_series_whatever_order_the_names_come_in() -> None:
    registry = CollectorRegistry()
    c = Counter("demo_total", "demo", ["verb", "code"], registry=registry)
    a = c.labels(verb="PATCH", code="200")
    assert c.labels(verb="PATCH", code="200") is a
    assert c.labels(code="200", verb="PATCH") is a, "keyword order does not make a second series"
    assert c.labels("PATCH", "200") is a, "positional values reach the same series"
    c.labels(code="200", verb="PATCH").inc()
    a.inc(2)
    assert 'demo_total{code="200",verb="PATCH"} 3.0' in _text(registry)


def test_a_removed_series_is_made_anew_and_exported_again() -> None:
    registry = CollectorRegistry()
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
    registry = CollectorRegistry()
    h = Histogram("demo_seconds", "demo", ["kind"], buckets=(1.0,), registry=registry)
    h.labels(kind=7).observe(0.5)
    assert h.labels(kind="7") is h.labels(kind=7), "7 and '7' are one series, as before"
    assert 'demo_seconds_count{kind="7"} 1.0' in _text(registry)
    with pytest.raises(ValueError, match="Incorrect label names"):
        h.labels(other="x")
    with pytest.raises(ValueError, match="Incorrect label count"):
        h.labels("a", "b")
