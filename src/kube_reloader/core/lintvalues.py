"""`kube-reloader lint`'s rules for annotation values: auto and search values Reloader does
not read as written (KR009), auto with search (KR010), the pod-level strategy and the fleet
rules' values (KR009), and what an in-place strategy needs of the pod spec (KR015, through
`inplacelint`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kube_reloader.core import evicting, inplacelint, scheduling
from kube_reloader.core.annotations import POD_STRATEGY, Keys
from kube_reloader.core.lintrules import (
    META_ANNOTATIONS,
    Document,
    Finding,
    Path,
    Severity,
    finding,
)
from kube_reloader.core.objects import ObjectKey

#: what Go's ParseBool reads as true besides "true" (anything else it reads is false)
GO_TRUE = ("1", "t", "T", "TRUE", "True")


def policies(
    d: Document,
    key: ObjectKey,
    wa: Mapping[str, str],
    template: Mapping[str, Any],
    tpath: Path,
    ref: str,
) -> list[Finding]:
    """The pod-level strategy (KR009), what in-place reloads need (KR015), and the fleet rules:
    window, order, Job policy (KR009)."""
    policy, problems = evicting.policy_of(key.kind, wa)
    strategy = (*META_ANNOTATIONS, POD_STRATEGY)
    see = "see kube-reloader.io/strategy in docs/strategies.md"
    out = [finding("KR009", d, strategy, f"{ref}: {text}", see, ref) for text in problems]
    for at, text, fix, error in inplacelint.check(policy, template, tpath):
        level = None if error else Severity.WARNING
        out.append(finding("KR015", d, at, f"{ref}: {text}", fix, ref, level))
    fleet = "see docs/fleet.md (fleet-safe rotations)"
    for text in scheduling.rules_of(key, wa, {})[1]:
        out.append(finding("KR009", d, META_ANNOTATIONS, f"{ref}: {text}", fleet, ref))
    return out


def values(
    d: Document, keys: Keys, src: Mapping[str, str], path_base: Path, ref: str
) -> list[Finding]:
    """Values Reloader does not read as written (KR009), auto with search (KR010)."""
    out = []
    for key in (keys.auto, keys.configmap_auto, keys.secret_auto, keys.spc_auto):
        value = src.get(key)
        if value is not None and value not in ("true", "false"):
            meaning = "true" if value in GO_TRUE else "false"
            text = (
                f"{ref}: {key}={value!r} is read as true (Go's ParseBool) by Reloader v1 and "
                "as not true by v2"
                if meaning == "true"
                else f"{ref}: {key}={value!r} is not true for Reloader v1 or v2, but under "
                '--auto-reload-all it opts the workload out in v1 only (v2: only "false" does)'
            )
            out.append(finding("KR009", d, (*path_base, key), text, 'use "true" or "false"', ref))
    at = (*path_base, keys.search)
    value = src.get(keys.search)
    if value is not None and value not in ("true", "false"):
        text = (
            f'{ref}: {keys.search}={value!r} counts only when exactly "true"; this value '
            "disables search"
        )
        out.append(finding("KR009", d, at, text, 'use "true"', ref))
    auto_on = any(src.get(k) == "true" for k in (keys.auto, keys.configmap_auto, keys.secret_auto))
    if auto_on and src.get(keys.search) == "true":
        text = (
            f"{ref}: auto reloads on every referenced resource, so search + match adds nothing "
            "and hides intent"
        )
        out.append(finding("KR010", d, at, text, "keep either auto or search", ref))
    return out
