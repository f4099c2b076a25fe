"""Prometheus metrics without prometheus_client: counters, gauges and histograms with labels,
the families a collector reads at scrape time, and a registry (`promtext` renders them).

prometheus_client's package imports its HTTP servers and push gateway client when it loads
(`http.server`, `wsgiref`, `urllib.request`, `email`): about 20 ms of every start, for families
that need a fraction of it. The text a scrape gets is byte for byte what prometheus_client
rendered for the same families (tests/unit/test_promtext.py renders both and compares).

A series already made is found by one lookup of its labels as given (keyword names included,
so two call sites that order them differently find the same series); `remove` and `clear`
empty that lookup. Only values that are strings printing as themselves (`str`, a `StrEnum`
member) go in it; any other value (a number, NaN) finds its series by its string each time,
since 1, True and 1.0 are one dict key and three series. An object equal to a string that
prints otherwise (an Enum mixing in `str`, not a `StrEnum`) would find that string's series:
pass `str(value)` for those (every call site passes a `str` or a `StrEnum` member).

Values are written on the event loop and may be read by a scrape in a worker thread: each
series, and each metric's table of series, has a lock, so a scrape reads a whole histogram
and never a table in the middle of a change."""

from __future__ import annotations

import bisect
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, ClassVar, Generic, NamedTuple, Protocol, TypeVar

INF = float("inf")
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
#: marks a lookup key made of label names and values (`labels(name=value)`)
_BY_NAME = object()


class Sample(NamedTuple):
    name: str
    labels: dict[str, str]
    value: float


def _check_name(name: str) -> str:
    if not _METRIC_NAME.match(name):
        raise ValueError(f"not a Prometheus metric name: {name!r}")
    return name


def _check_labels(names: Iterable[str], reserved: tuple[str, ...] = ()) -> tuple[str, ...]:
    out = tuple(names)
    for label in out:
        if not _LABEL_NAME.match(label) or label.startswith("__") or label in reserved:
            raise ValueError(f"not a label name this metric may have: {label!r}")
    if len(set(out)) != len(out):
        raise ValueError(f"a label name given twice: {out}")
    return out


class Family:
    """One metric family as a scrape reads it: its name, help, type and samples."""

    __slots__ = ("documentation", "labelnames", "name", "samples", "type")

    def __init__(
        self, name: str, documentation: str, kind: str, labelnames: Sequence[str] = ()
    ) -> None:
        self.name = _check_name(name)
        self.documentation = documentation
        self.type = kind
        self.labelnames = _check_labels(labelnames)
        self.samples: list[Sample] = []


class CounterFamily(Family):
    """A counter a collector reads at scrape time: `add_metric(label values, value)`."""

    __slots__ = ()

    def __init__(self, name: str, documentation: str, labels: Sequence[str] = ()) -> None:
        super().__init__(name.removesuffix("_total"), documentation, "counter", labels)

    def add_metric(self, values: Sequence[str], value: float) -> None:
        labels = dict(zip(self.labelnames, values, strict=True))
        self.samples.append(Sample(self.name + "_total", labels, float(value)))


class GaugeFamily(Family):
    """A gauge a collector reads at scrape time: `add_metric(label values, value)`."""

    __slots__ = ()

    def __init__(self, name: str, documentation: str, labels: Sequence[str] = ()) -> None:
        super().__init__(name, documentation, "gauge", labels)

    def add_metric(self, values: Sequence[str], value: float) -> None:
        labels = dict(zip(self.labelnames, values, strict=True))
        self.samples.append(Sample(self.name, labels, float(value)))


class Collector(Protocol):
    def collect(self) -> Iterable[Family]: ...


class Registry:
    """The collectors of one exposition, in the order they were registered; a name a
    registered metric already exposes is refused."""

    def __init__(self) -> None:
        self._collectors: list[Collector] = []
        self._names: set[str] = set()
        self._lock = threading.Lock()

    def register(self, collector: Collector) -> None:
        names = collector.exposed_names() if isinstance(collector, Metric) else ()
        with self._lock:
            if any(c is collector for c in self._collectors):
                raise ValueError(f"collector registered twice: {collector!r}")
            taken = sorted(self._names.intersection(names))
            if taken:
                raise ValueError(f"metric names registered twice: {', '.join(taken)}")
            self._names.update(names)
            self._collectors.append(collector)

    def collect(self) -> Iterator[Family]:
        with self._lock:
            collectors = list(self._collectors)
        for collector in collectors:
            yield from collector.collect()

    def get_sample_value(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        """The value of the sample named `name` with exactly `labels`, or None (tests)."""
        wanted = labels or {}
        for family in self.collect():
            for sample in family.samples:
                if sample.name == name and sample.labels == wanted:
                    return sample.value
        return None


class CounterSeries:
    __slots__ = ("_lock", "_value")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._value = 0.0

    def inc(self, amount: float = 1) -> None:
        if amount < 0:
            raise ValueError(f"a counter only goes up: inc({amount})")
        with self._lock:
            self._value += amount

    def get(self) -> float:
        return self._value


class GaugeSeries:
    __slots__ = ("_function", "_lock", "_value")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._value = 0.0
        self._function: Callable[[], float] | None = None

    def set(self, value: float) -> None:
        with self._lock:
            self._value = float(value)

    def inc(self, amount: float = 1) -> None:
        with self._lock:
            self._value += amount

    def set_function(self, function: Callable[[], float]) -> None:
        """Read the value from `function` at each scrape, from now on."""
        self._function = function

    def get(self) -> float:
        function = self._function
        return float(function()) if function is not None else self._value


class HistogramSeries:
    __slots__ = ("_bounds", "_counts", "_lock", "_sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self._lock = threading.Lock()
        self._bounds = bounds
        self._counts = [0.0] * len(bounds)
        self._sum = 0.0

    def observe(self, amount: float) -> None:
        """Count `amount` in the first bucket it fits (NaN fits none, and adds to the sum)."""
        index = bisect.bisect_left(self._bounds, amount) if amount == amount else -1
        with self._lock:
            self._sum += amount
            if index >= 0:
                self._counts[index] += 1

    def snapshot(self) -> tuple[list[float], float]:
        with self._lock:
            return list(self._counts), self._sum


S = TypeVar("S", CounterSeries, GaugeSeries, HistogramSeries)


class Metric(Generic[S]):
    """A family of series with the same label names, made by `labels(...)`."""

    type: ClassVar[str]
    _reserved: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Iterable[str] = (),
        *,
        registry: Registry | None = None,
    ) -> None:
        self.name = _check_name(name)
        self.documentation = documentation
        self.labelnames = _check_labels(labelnames, self._reserved)
        self._lock = threading.Lock()
        self._series: dict[tuple[str, ...], S] = {}
        self._lookup: dict[Any, S] = {}
        if not self.labelnames:
            self._series[()] = self._new()
        if registry is not None:
            registry.register(self)

    def _new(self) -> S:
        raise NotImplementedError

    def _samples(self, family: Family, labels: dict[str, str], series: S) -> None:
        raise NotImplementedError

    def exposed_names(self) -> tuple[str, ...]:
        return (self.name,)

    def labels(self, *values: Any, **named: Any) -> S:
        key = (_BY_NAME, tuple(named.items())) if named else values
        try:
            return self._lookup[key]
        except KeyError:
            return self._find(values, named, key)
        except TypeError:  # an unhashable value: found by its string
            return self._find(values, named, None)

    def _find(self, values: tuple[Any, ...], named: dict[str, Any], key: Any) -> S:
        if not self.labelnames:
            raise ValueError(f"{self.name} has no labels")
        if values and named:
            raise ValueError("labels: give the values by position or by name, not both")
        if named:
            if set(named) != set(self.labelnames):
                raise ValueError(f"Incorrect label names: {sorted(named)}")
            values = tuple(named[label] for label in self.labelnames)
        elif len(values) != len(self.labelnames):
            raise ValueError(f"Incorrect label count: {len(values)}")
        strings = tuple(str(v) for v in values)
        # Only strings that print as themselves go in the lookup (a StrEnum member too): 1,
        # True and 1.0 are one dict key but three series, and NaN never finds itself.
        kept = key is not None and all(isinstance(v, str) for v in values) and strings == values
        with self._lock:  # with the lookup's entry, so a `remove` meanwhile drops both
            series = self._series.get(strings)
            if series is None:
                series = self._series[strings] = self._new()
            if kept:
                self._lookup[key] = series
        return series

    def remove(self, *values: Any) -> None:
        if len(values) != len(self.labelnames) or not values:
            raise ValueError(f"Incorrect label count: {len(values)}")
        with self._lock:
            self._series.pop(tuple(str(v) for v in values), None)
            self._lookup.clear()

    def clear(self) -> None:
        with self._lock:
            self._series.clear()
            self._lookup.clear()
            if not self.labelnames:
                self._series[()] = self._new()

    def _only(self) -> S:
        if self.labelnames:
            raise ValueError(f"{self.name} has labels: pick a series with labels() first")
        return self._series[()]

    def collect(self) -> list[Family]:
        family = Family(self.name, self.documentation, self.type, self.labelnames)
        with self._lock:
            series = list(self._series.items())
        for values, one in series:
            self._samples(family, dict(zip(self.labelnames, values, strict=True)), one)
        return [family]


class Counter(Metric[CounterSeries]):
    """A counter; its samples are named `<name>_total` (a name given with `_total` keeps one)."""

    type = "counter"

    def __init__(self, name: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(name.removesuffix("_total"), *args, **kwargs)

    def _new(self) -> CounterSeries:
        return CounterSeries()

    def _samples(self, family: Family, labels: dict[str, str], series: CounterSeries) -> None:
        family.samples.append(Sample(self.name + "_total", labels, series.get()))

    def exposed_names(self) -> tuple[str, ...]:
        return (self.name, self.name + "_total")

    def inc(self, amount: float = 1) -> None:
        self._only().inc(amount)


class Gauge(Metric[GaugeSeries]):
    type = "gauge"

    def _new(self) -> GaugeSeries:
        return GaugeSeries()

    def _samples(self, family: Family, labels: dict[str, str], series: GaugeSeries) -> None:
        family.samples.append(Sample(self.name, labels, series.get()))

    def set(self, value: float) -> None:
        self._only().set(value)

    def inc(self, amount: float = 1) -> None:
        self._only().inc(amount)


class Histogram(Metric[HistogramSeries]):
    """A histogram over `buckets` (upper bounds, ascending; +Inf is added)."""

    type = "histogram"
    _reserved = ("le",)

    def __init__(self, name: str, *args: Any, buckets: Sequence[float], **kwargs: Any) -> None:
        bounds = [float(b) for b in buckets]
        if bounds != sorted(bounds) or len(set(bounds)) != len(bounds):
            raise ValueError(f"buckets must ascend: {buckets}")
        if not bounds or bounds[-1] != INF:
            bounds.append(INF)
        self.bounds = tuple(bounds)
        self._le = tuple(go_float(b) for b in bounds)
        super().__init__(name, *args, **kwargs)

    def _new(self) -> HistogramSeries:
        return HistogramSeries(self.bounds)

    def _samples(self, family: Family, labels: dict[str, str], series: HistogramSeries) -> None:
        counts, total = series.snapshot()
        seen = 0.0
        for le, count in zip(self._le, counts, strict=True):
            seen += count
            family.samples.append(Sample(self.name + "_bucket", {**labels, "le": le}, seen))
        family.samples.append(Sample(self.name + "_count", labels, seen))
        family.samples.append(Sample(self.name + "_sum", labels, total))

    def exposed_names(self) -> tuple[str, ...]:
        return tuple(self.name + s for s in ("", "_bucket", "_count", "_sum"))

    def observe(self, amount: float) -> None:
        self._only().observe(amount)


def go_float(value: float) -> str:
    """A sample's value as Prometheus' text shows it: Python's shortest repr, except
    `+Inf`, `-Inf`, `NaN`, and a positive number of seven or more integer digits, which
    Go writes with an exponent (`1.5e+06`, not `1500000.0`)."""
    if value != value:
        return "NaN"
    if value in (INF, -INF):
        return "+Inf" if value > 0 else "-Inf"
    text = repr(float(value))
    whole, dot, fraction = text.partition(".")
    if value > 0 and dot and len(whole) > 6:
        digits = whole + fraction
        mantissa = f"{digits[0]}.{digits[1:]}".rstrip("0").rstrip(".")
        return f"{mantissa}e+{len(whole) - 1:02d}"
    return text
