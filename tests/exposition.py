"""Prometheus text expositions, as the tests read them from /metrics (ours and the peers')."""

from __future__ import annotations

import re


def metric_samples(text: str, name: str) -> dict[str, float]:
    """`name`'s samples in a Prometheus exposition, by their label text ("" for none)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith((name + "{", name + " ")):
            labels, _, value = line[len(name) :].rpartition(" ")
            out[labels.strip()] = float(value)
    return out


def scalar(metrics: str, series: str) -> float | None:
    """The value of `series` (`name` or `name{labels}`, as exposed) in a /metrics text."""
    for line in metrics.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


SAMPLE = re.compile(r"([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def total(metrics: str, name: str, **labels: str) -> float:
    """The sum of the samples of family member `name` (exactly) whose labels include
    `labels`, in a /metrics text."""
    out = 0.0
    for line in metrics.splitlines():
        m = SAMPLE.fullmatch(line.strip())
        if m is None or m.group(1) != name:
            continue
        have = dict(LABEL.findall(m.group(2) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            out += float(m.group(3))
    return out
