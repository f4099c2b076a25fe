"""The Prometheus text exposition of a `promseries.Registry`, and the process collector.

The text is the one prometheus_client 0.26 rendered for the same families (its
`generate_latest`, without `_created` series), so a scrape sees no change: HELP and TYPE
lines named as the samples' family (a counter's with `_total`), labels sorted by name, label
values and help texts escaped, values in Go's float syntax (`promseries.go_float`)."""

from __future__ import annotations

import os
import resource
from collections.abc import Callable

from kube_reloader.promseries import CounterFamily, Family, GaugeFamily, Registry, Sample, go_float

#: what /metrics answers with (as prometheus_client's `CONTENT_TYPE_LATEST` did)
CONTENT_TYPE = "text/plain; version=1.0.0; charset=utf-8"


def render(registry: Registry) -> bytes:
    """Every family of `registry`, in the order its collectors were registered."""
    out: list[str] = []
    for family in registry.collect():
        name = family.name + "_total" if family.type == "counter" else family.name
        text = family.documentation.replace("\\", r"\\").replace("\n", r"\n")
        out.append(f"# HELP {name} {text}\n# TYPE {name} {family.type}\n")
        out.extend(_line(sample) for sample in family.samples)
    return "".join(out).encode()


def _line(sample: Sample) -> str:
    if not sample.labels:
        return f"{sample.name} {go_float(sample.value)}\n"
    pairs = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(sample.labels.items()))
    return f"{sample.name}{{{pairs}}} {go_float(sample.value)}\n"


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


class ProcessCollector:
    """The process' memory, start time, CPU and file descriptors, read from /proc at each
    scrape: the `process_*` families every Prometheus client exports. Where /proc cannot be
    read, the families it could not read are left out."""

    def __init__(self, proc: str = "/proc", pid: Callable[[], str] = lambda: "self") -> None:
        self._proc = proc
        self._pid = pid
        self._ticks = float(os.sysconf("SC_CLK_TCK"))
        self._page = resource.getpagesize()
        self._boot: float | None = None  # read at the first scrape, not at start

    def _boot_time(self) -> float:
        try:
            with open(os.path.join(self._proc, "stat"), "rb") as stat:
                for line in stat:
                    if line.startswith(b"btime "):
                        return float(line.split()[1])
        except OSError:
            pass
        return 0.0

    def collect(self) -> list[Family]:
        if self._boot is None:
            self._boot = self._boot_time()
        if not self._boot:
            return []
        where = os.path.join(self._proc, str(self._pid()).strip())
        return self._stat(where, self._boot) + self._files(where)

    def _stat(self, where: str, boot: float) -> list[Family]:
        try:
            with open(os.path.join(where, "stat"), "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[-1].split()
        except OSError:
            return []
        # after the command: state is field 0; utime 11, stime 12, start 19, vsize 20, rss 21
        # (each time in ticks turned into seconds, then added, as prometheus_client did)
        cpu = float(fields[11]) / self._ticks + float(fields[12]) / self._ticks
        return [
            _gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", fields[20]),
            _gauge(
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                float(fields[21]) * self._page,
            ),
            _gauge(
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                float(fields[19]) / self._ticks + boot,
            ),
            _counter(
                "process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", cpu
            ),
        ]

    def _files(self, where: str) -> list[Family]:
        try:
            opened = len(os.listdir(os.path.join(where, "fd")))
            with open(os.path.join(where, "limits"), "rb") as limits:
                soft = next(
                    (line.split()[3] for line in limits if line.startswith(b"Max open files")),
                    None,
                )
        except OSError:
            return []
        out = [_gauge("process_open_fds", "Number of open file descriptors.", opened)]
        if soft is not None:
            most = float("inf") if soft == b"unlimited" else float(soft)
            out.append(_gauge("process_max_fds", "Maximum number of open file descriptors.", most))
        return out


def _gauge(name: str, text: str, value: float | bytes) -> Family:
    family = GaugeFamily(name, text)
    family.add_metric((), float(value))
    return family


def _counter(name: str, text: str, value: float) -> Family:
    family = CounterFamily(name, text)
    family.add_metric((), value)
    return family
