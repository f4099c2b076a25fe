"""The kwok stages the dev cluster runs: upstream's files, with a readiness gate for tests.

A pod whose annotation `NEVER_READY_IF_ENV` holds a value V never becomes Ready when one of
its containers (init containers included) has an env entry whose `value` is V: kwok's
`pod-ready` stage gets one more selector expression, a gojq query that yields "gated" for
such a pod and "ok" for every other, and matches only "ok". The pod stays Pending with no
Ready condition, so kube-controller-manager sees a rollout that makes no progress and
reports `ProgressDeadlineExceeded` itself. Nothing else changes: `pod-delete` selects on
`deletionTimestamp` alone, so a gated pod is still deleted normally, and `pod-complete`
selects Running pods only, which a gated pod never is.

The transformation runs when the cluster writes `kwok-stages.yaml`, not when the stage
files are cached, so the build cache stays valid.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml

from kube_reloader.devcluster.state import ClusterError

__all__ = [
    "GATE_QUERY",
    "NEVER_READY_IF_ENV",
    "READINESS_GATE",
    "StageError",
    "gate_pod_ready",
    "kwok_stages",
]

NEVER_READY_IF_ENV = "test.kube-reloader.io/never-ready-if-env"
POD_READY = "pod-ready"

#: gojq, evaluated by kwok on the whole pod; exactly one string out, never an error (kwok
#: treats a failing query as "no value", which `In` would read as gated)
GATE_QUERY = (
    f'.metadata.annotations["{NEVER_READY_IF_ENV}"] as $v'
    " | if $v != null"
    " and any((.spec.containers[]?, .spec.initContainers[]?) | .env[]?; .value == $v)"
    ' then "gated" else "ok" end'
)
READINESS_GATE: dict[str, Any] = {"key": GATE_QUERY, "operator": "In", "values": ["ok"]}


class StageError(ClusterError):
    """A stage file is not the kwok Stage this module expects."""

    def __init__(self, problem: str) -> None:
        super().__init__(f"dev-cluster: kwok stages: {problem}")


class _Dumper(yaml.SafeDumper):
    """Writes multi-line strings (the status templates) as literal blocks when it can."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def _load_stage(text: str) -> dict[str, Any]:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise StageError(f"kwok stage is not valid YAML: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("kind") != "Stage":
        raise StageError("kwok stage file does not hold one `kind: Stage` document")
    return doc


def _name(doc: dict[str, Any]) -> str:
    meta = doc.get("metadata")
    return str(meta.get("name", "")) if isinstance(meta, dict) else ""


def gate_pod_ready(text: str) -> str:
    """Return the `pod-ready` stage `text` with `READINESS_GATE` added to its selector.

    Idempotent: a stage that already has the gate is returned unchanged.
    """
    doc = _load_stage(text)
    if _name(doc) != POD_READY:
        raise StageError(f"expected the {POD_READY!r} stage, got {_name(doc)!r}")
    spec = doc.get("spec")
    selector = spec.get("selector") if isinstance(spec, dict) else None
    exprs = selector.get("matchExpressions") if isinstance(selector, dict) else None
    if not isinstance(exprs, list):
        raise StageError(f"the {POD_READY!r} stage has no spec.selector.matchExpressions list")
    if READINESS_GATE in exprs:
        return text
    exprs.append(dict(READINESS_GATE))
    out = yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=1 << 16, allow_unicode=True)
    if yaml.safe_load(out) != doc:
        raise StageError(f"the {POD_READY!r} stage does not survive a YAML round trip")
    return out


def kwok_stages(texts: Iterable[str]) -> str:
    """One multi-document stages file from the stage files' `texts`, in order, the
    `pod-ready` stage gated and every other stage byte for byte as given."""
    docs = []
    gated = False
    for text in texts:
        if _name(_load_stage(text)) == POD_READY:
            text = gate_pod_ready(text)
            gated = True
        docs.append(text.strip())
    if not gated:
        raise StageError(f"no {POD_READY!r} stage among the kwok stage files")
    return "\n---\n".join(docs) + "\n"
