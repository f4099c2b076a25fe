"""`kube-reloader lint`'s vocabulary: the rules (id, name, severity, summary), the documents
it reads and the findings it reports. The rules themselves live by group (`lintplacement`,
`lintvalues`, `lintnames`, `inplacelint`); `core.linting` runs them all."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from kube_reloader.core.records import record


class Severity(IntEnum):
    INFO = 1
    WARNING = 2
    ERROR = 3

    @property
    def label(self) -> str:
        return self.name.lower()


@record
class Rule:
    id: str
    name: str
    severity: Severity
    summary: str


RULES = {
    r.id: r
    for r in (
        Rule("KR000", "invalid-yaml", Severity.ERROR, "A YAML document cannot be parsed"),
        Rule(
            "KR001",
            "pod-template-annotation",
            Severity.WARNING,
            "Reload annotation on the pod template",
        ),
        Rule(
            "KR002",
            "shadowed-pod-template-annotation",
            Severity.ERROR,
            "Pod-template reload annotation that can never be read",
        ),
        Rule(
            "KR003",
            "values-pod-annotations",
            Severity.ERROR,
            "Helm values put reload annotations under podAnnotations",
        ),
        Rule(
            "KR004",
            "tls-secret-without-reload",
            Severity.WARNING,
            "A TLS Secret is used but nothing reloads on its renewal",
        ),
        Rule(
            "KR005",
            "named-resource-missing",
            Severity.WARNING,
            "A named reload list names a resource that does not exist",
        ),
        Rule(
            "KR006",
            "named-resource-unreferenced",
            Severity.INFO,
            "A named reload list names a resource the workload does not use",
        ),
        Rule(
            "KR007",
            "invalid-regex",
            Severity.ERROR,
            "A named reload list entry cannot be used as a regular expression",
        ),
        Rule(
            "KR008",
            "unknown-annotation",
            Severity.ERROR,
            "Unknown key under the reloader.stakater.com domain",
        ),
        Rule(
            "KR009",
            "invalid-value",
            Severity.WARNING,
            "An annotation value Reloader does not treat as intended",
        ),
        Rule("KR010", "auto-and-search", Severity.WARNING, "auto and search on the same workload"),
        Rule(
            "KR011",
            "unreloaded-kind",
            Severity.WARNING,
            "Reload annotations on a kind that is never reloaded",
        ),
        Rule(
            "KR012",
            "ignored-resource-named",
            Severity.WARNING,
            "A workload names a resource marked ignore",
        ),
        Rule("KR013", "owned-workload", Severity.INFO, "Workload owned by another controller"),
        Rule(
            "KR014",
            "misplaced-workload-only-annotation",
            Severity.ERROR,
            "exclude/pause annotations on the pod template are never read",
        ),
        Rule(
            "KR015",
            "in-place-pod-spec",
            Severity.ERROR,
            "An in-place strategy's pod spec lacks what its agent needs",
        ),
    )
}

Path = tuple[str | int, ...]
#: for --fix: (annotation key, from path, to path)
Move = tuple[str, Path, Path]
META_ANNOTATIONS: Path = ("metadata", "annotations")


@dataclass(frozen=True)
class Document:
    obj: Any
    source: str
    line_of: Callable[[Path], int]


@record
class Finding:
    rule: str
    severity: Severity
    message: str
    fix: str
    source: str
    line: int
    object: str = ""
    #: for --fix: (annotation key, from path, to path) moves that resolve this finding
    moves: tuple[Move, ...] = field(default=())

    @property
    def name(self) -> str:
        return RULES[self.rule].name


def finding(
    rule: str,
    d: Document,
    path: Path,
    message: str,
    fix: str,
    obj: str = "",
    severity: Severity | None = None,
    moves: tuple[Move, ...] = (),
) -> Finding:
    """A finding of `rule` at `path` of `d`, with the rule's severity unless told otherwise."""
    level = severity or RULES[rule].severity
    return Finding(rule, level, message, fix, d.source, d.line_of(path), obj, moves)
