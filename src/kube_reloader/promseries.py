"""prometheus_client's Counter, Gauge and Histogram with a dictionary in front of `labels()`.

prometheus_client's own `labels()` checks the label names, turns every value into a string and
takes the metric's lock on every call; a reload calls it a dozen times for series that already
exist. Here a series already made is found by one lookup of the labels as given (keyword
names included, so two call sites that order them differently both find the right series).
`remove` and `clear` empty the lookup, so a removed series is made anew by the next call."""

from __future__ import annotations

from typing import Any

import prometheus_client


class _Cached:
    """The lookup in front of `labels()`; mixed in before the prometheus_client class."""

    _series: dict[Any, Any]

    def labels(self, *values: Any, **named: Any) -> Any:
        key = (values, tuple(named.items())) if named else values
        try:
            return self._series[key]
        except KeyError:
            pass
        except TypeError:  # an unhashable value: prometheus_client turns it into a string
            return super().labels(*values, **named)  # type: ignore[misc]
        series = super().labels(*values, **named)  # type: ignore[misc]
        self._series[key] = series
        return series

    def remove(self, *values: Any) -> None:
        self._series.clear()
        super().remove(*values)  # type: ignore[misc]

    def clear(self) -> None:
        self._series.clear()
        super().clear()  # type: ignore[misc]


class Counter(_Cached, prometheus_client.Counter):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._series = {}
        super().__init__(*args, **kwargs)


class Gauge(_Cached, prometheus_client.Gauge):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._series = {}
        super().__init__(*args, **kwargs)


class Histogram(_Cached, prometheus_client.Histogram):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._series = {}
        super().__init__(*args, **kwargs)
