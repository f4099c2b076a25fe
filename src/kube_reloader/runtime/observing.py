"""Metrics read from the controller's state at scrape time (watch health, cache sizes,
side-channel results), so the hot path does not have to count them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

from kube_reloader.edges.alerts import AlertSender
from kube_reloader.promseries import CounterFamily, Family, GaugeFamily


class Observed(Protocol):
    """What the collector reads at scrape time."""

    @property
    def alerts(self) -> AlertSender | None: ...

    @property
    def pending(self) -> int: ...

    def all_reflectors(self) -> list[Any]: ...

    def fleet(self) -> tuple[int, dict[str, int]]:
        """Rollouts in flight, and held workloads by reason."""
        ...


class ControllerCollector:
    def __init__(self, controller: Observed) -> None:
        self.controller = controller

    def collect(self) -> Iterator[Family]:
        c = self.controller
        restarts, relists, objects = _cache_metrics(c)
        forbidden = _forbidden(c)
        yield restarts
        yield relists
        yield objects
        yield forbidden
        yield _alerts(c)
        yield _pending(c)
        yield from _fleet(c)


def _cache_metrics(c: Observed) -> tuple[Family, Family, Family]:
    """Watch restarts, relists and cached objects, summed over the reflectors of a resource."""
    restarts = CounterFamily(
        "kube_reloader_watch_restarts",
        "Watch streams restarted (timeouts, errors, expiries), by resource",
        labels=["resource"],
    )
    relists = CounterFamily(
        "kube_reloader_relists",
        "Relists after an expired or broken watch",
        labels=["resource"],
    )
    objects = GaugeFamily(
        "kube_reloader_cache_objects", "Objects held in the watch caches", labels=["resource"]
    )
    totals: dict[str, list[int]] = {}
    for refl in c.all_reflectors():
        name = str(refl.resource)
        t = totals.setdefault(name, [0, 0, 0])
        t[0] += refl.watch_restarts
        t[1] += refl.relists
        t[2] += len(refl.store)
    for name, (restart, relist, size) in sorted(totals.items()):
        restarts.add_metric([name], restart)
        relists.add_metric([name], relist)
        objects.add_metric([name], size)
    return restarts, relists, objects


def _forbidden(c: Observed) -> Family:
    """1 for a resource when any of its reflectors is refused by RBAC (or polls)."""
    forbidden = GaugeFamily(
        "kube_reloader_forbidden",
        "1 when RBAC forbids listing (or, with polling, watching) a resource",
        labels=["resource"],
    )
    seen: dict[str, int] = {}
    for refl in c.all_reflectors():
        name = str(refl.resource)
        seen[name] = max(seen.get(name, 0), int(refl.forbidden or refl.polling))
    for name, value in sorted(seen.items()):
        forbidden.add_metric([name], value)
    return forbidden


def _alerts(c: Observed) -> Family:
    alerts = CounterFamily("kube_reloader_alerts", "Reload alerts, by result", labels=["result"])
    if c.alerts is not None:
        alerts.add_metric(["sent"], c.alerts.stats.sent)
        alerts.add_metric(["failed"], c.alerts.stats.failed)
        alerts.add_metric(["dropped"], c.alerts.stats.dropped)
    return alerts


def _pending(c: Observed) -> Family:
    pending = GaugeFamily(
        "kube_reloader_pending_reloads", "Workloads with reloads waiting to be written"
    )
    pending.add_metric([], c.pending)
    return pending


def _fleet(c: Observed) -> Iterator[Family]:
    """Rollouts in flight and held workloads by reason, from one look at the fleet."""
    in_flight, held = c.fleet()
    rollouts = GaugeFamily(
        "kube_reloader_rollouts_in_flight",
        "Workload rollouts started by reloads and not finished (--max-concurrent-rollouts)",
    )
    rollouts.add_metric([], in_flight)
    yield rollouts
    waiting = GaugeFamily(
        "kube_reloader_held_workloads",
        "Workloads whose reload waits, by reason (slots, window, frozen, halted, order, "
        "job-running)",
        labels=["reason"],
    )
    for reason, count in sorted(held.items()):
        waiting.add_metric([reason], count)
    yield waiting
