"""`lint --fix` on generated multi-document files (issue 32's done-criterion: 1,000 of them).

Each file is written from a model (the data every document holds) in randomly chosen styles:
block and flow mappings, plain and quoted scalars, comments, anchors and aliases, `...` ends,
empty documents, 2- or 4-space mappings and either sequence indentation. The oracle is the
model itself: after `--fix` every document reads (PyYAML) as the model with exactly the
misplaced annotations moved to the workload's own metadata (first, in file order; an emptied
template `annotations` dropped), in the same key order; a second `--fix` changes nothing; a
file whose template and workload disagree on a key, or whose moved annotations are aliased
elsewhere, is refused and left byte for byte; no other file is refused.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kube_reloader.cli import lintfix, lintverify

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the oracle reads fast

MOVABLE = [
    "reloader.stakater.com/auto",
    "configmap.reloader.stakater.com/auto",
    "secret.reloader.stakater.com/reload",
    "configmap.reloader.stakater.com/reload",
    "configmaps.exclude.reloader.stakater.com/reload",
    "deployment.reloader.stakater.com/pause-period",
]
STAYING = ["prometheus.io/scrape", "team", "reloader.stakater.com/autoo"]
KINDS = {
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "CronJob": "batch/v1",
}
NAMES = st.sampled_from(["web", "api", "cfg-a", "tls", "worker"])
VALUES = st.sampled_from(["true", "false", "cfg-a", "cfg-a,tls", "5m"])


@dataclass
class Style:
    indent: int  # mapping indent
    offset: int  # block sequence dash offset
    draw: Any  # hypothesis data.draw

    def flow(self) -> bool:
        return bool(self.draw(st.integers(0, 4)) == 0)

    def scalar(self, value: str) -> str:
        plain_ok = value not in ("true", "false") and not value[0].isdigit() and "," not in value
        choice = self.draw(st.integers(0, 2 if plain_ok else 1))
        return {0: f'"{value}"', 1: f"'{value}'", 2: value}[choice]

    def eol(self) -> str:
        return str(self.draw(st.sampled_from(["", "", "", "  # why"])))


@dataclass
class Writer:
    style: Style
    lines: list[str] = field(default_factory=list)

    def mapping(self, key: str, value: dict[str, str], depth: int, anchor: str = "") -> None:
        pad = " " * (self.style.indent * depth)
        tag = f" &{anchor}" if anchor else ""
        if self.style.flow() or not value:
            items = ", ".join(
                f"{self.style.scalar(k)}: {self.style.scalar(v)}" for k, v in value.items()
            )
            self.lines.append(f"{pad}{key}:{tag} {{{items}}}{self.style.eol()}")
            return
        self.lines.append(f"{pad}{key}:{tag}{self.style.eol()}")
        inner = " " * (self.style.indent * (depth + 1))
        for k, v in value.items():
            if self.style.draw(st.integers(0, 6)) == 0:
                self.lines.append(f"{inner}# about {k}")
            self.lines.append(
                f"{inner}{self.style.scalar(k)}: {self.style.scalar(v)}{self.style.eol()}"
            )

    def line(self, depth: int, text: str) -> None:
        self.lines.append(" " * (self.style.indent * depth) + text)


@st.composite
def workload(draw: Any, style: Style) -> tuple[str, dict[str, Any], bool]:
    """(text, the data it holds, whether --fix must refuse it: the workload and its template
    disagree on a key, or the template's annotations are aliased elsewhere)."""
    kind = draw(st.sampled_from(sorted(KINDS)))
    name = draw(NAMES)
    labels = draw(st.dictionaries(st.sampled_from(["app", "tier"]), NAMES, max_size=2))
    wa = draw(st.dictionaries(st.sampled_from(MOVABLE[:3] + STAYING[:2]), VALUES, max_size=3))
    pa = draw(st.dictionaries(st.sampled_from(MOVABLE + STAYING), VALUES, max_size=4))
    share = bool(labels) and draw(st.booleans())
    w = Writer(style)
    w.line(0, f"apiVersion: {KINDS[kind]}")
    w.line(0, f"kind: {kind}")
    w.line(0, "metadata:")
    w.line(1, f"name: {style.scalar(name)}{style.eol()}")
    if labels:
        w.mapping("labels", labels, 1, anchor="lbl" if share else "")
    if wa:
        w.mapping("annotations", wa, 1)
    w.line(0, "spec:")
    depth = 1
    if kind == "CronJob":
        w.line(1, 'schedule: "*/5 * * * *"')
        w.line(1, "jobTemplate:")
        w.line(2, "spec:")
        depth = 3
    w.line(depth, "template:")
    w.line(depth + 1, "metadata:" if (labels or pa) else "metadata: {}")
    if labels:
        if share:
            w.line(depth + 2, "labels: *lbl")
        else:
            w.mapping("labels", labels, depth + 2)
    copied = bool(pa) and draw(st.integers(0, 5)) == 0  # the annotations aliased elsewhere
    if pa:
        w.mapping("annotations", pa, depth + 2, anchor="ann" if copied else "")
    w.line(depth + 1, "spec:")
    dash = " " * (style.indent * (depth + 2) + style.offset)
    if style.flow():
        w.line(depth + 2, f"containers: [{{name: c, image: {style.scalar('img')}}}]")
    else:
        w.line(depth + 2, "containers:")
        w.lines.append(f"{dash}- name: c{style.eol()}")
        w.lines.append(f"{dash}  image: {style.scalar('img')}")
    data = _workload_data(kind, name, labels, wa, pa)
    if copied:
        w.line(0, "x-copy: *ann")
        data["x-copy"] = dict(pa)
    conflict = any(k in wa and wa[k] != v for k, v in pa.items() if k in MOVABLE)
    # an edit of aliased annotations would change the copy too: that file must be refused
    return "\n".join(w.lines) + "\n", data, conflict or (copied and bool(set(pa) & set(MOVABLE)))


def _workload_data(
    kind: str, name: str, labels: dict[str, str], wa: dict[str, str], pa: dict[str, str]
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = dict(labels)
    if wa:
        meta["annotations"] = dict(wa)
    tmeta: dict[str, Any] = {}
    if labels:
        tmeta["labels"] = dict(labels)
    if pa:
        tmeta["annotations"] = dict(pa)
    template = {"metadata": tmeta, "spec": {"containers": [{"name": "c", "image": "img"}]}}
    spec: dict[str, Any] = {"template": template}
    if kind == "CronJob":
        spec = {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": template}}}
    return {"apiVersion": KINDS[kind], "kind": kind, "metadata": meta, "spec": spec}


def fixed(doc: Any) -> Any:
    """The oracle: the workload's misplaced annotations moved, first and in order."""
    if not isinstance(doc, dict) or doc.get("kind") not in KINDS:
        return doc
    spec = doc["spec"]
    template = (
        spec["jobTemplate"]["spec"]["template"] if doc["kind"] == "CronJob" else spec["template"]
    )
    pa = template["metadata"].get("annotations") or {}
    moving = {k: v for k, v in pa.items() if k in MOVABLE}
    if not moving:
        return doc
    wa = doc["metadata"].get("annotations") or {}
    new = {k: v for k, v in moving.items() if k not in wa}
    doc["metadata"]["annotations"] = {**new, **wa}
    rest = {k: v for k, v in pa.items() if k not in MOVABLE}
    if rest:
        template["metadata"]["annotations"] = rest
    else:
        del template["metadata"]["annotations"]
    return doc


def ordered(obj: Any) -> Any:
    if isinstance(obj, dict):
        return [(k, ordered(v)) for k, v in obj.items()]
    if isinstance(obj, list):
        return [ordered(v) for v in obj]
    return obj


@st.composite
def other(draw: Any, style: Style) -> tuple[str, Any, bool]:
    choice = draw(st.integers(0, 3))
    if choice == 0:
        return "# nothing here\n" if draw(st.booleans()) else "", None, False
    if choice == 1:
        w = Writer(style)
        w.lines += ["apiVersion: v1", "kind: ConfigMap", "metadata: {name: cfg-a}", "data:"]
        w.line(1, "key: |")
        w.line(2, "line one")
        w.line(2, "reloader.stakater.com/auto: true")
        return (
            "\n".join(w.lines) + "\n",
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "cfg-a"},
                "data": {"key": "line one\nreloader.stakater.com/auto: true\n"},
            },
            False,
        )
    text = "apiVersion: v1\nkind: Service\nmetadata:\n  name: web  # svc\nspec: {ports: [{port: 80}], selector: {app: web}}\n"
    data = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {"ports": [{"port": 80}], "selector": {"app": "web"}},
    }
    return text, data, False


@st.composite
def files(draw: Any) -> tuple[str, list[Any], bool]:
    style = Style(draw(st.sampled_from([2, 4])), draw(st.sampled_from([0, 2])), draw)
    parts = draw(st.lists(st.one_of(workload(style), other(style)), min_size=1, max_size=5))
    text = draw(st.sampled_from(["", "# a file of manifests\n"]))
    for i, (body, _data, _refuse) in enumerate(parts):
        if i or _data is None or draw(st.booleans()):
            text += draw(st.sampled_from(["---\n", "--- # next\n"]))
        text += body
        if _data is not None and draw(st.integers(0, 5)) == 0:
            text += "...\n"
    return text, [d for _t, d, _r in parts], any(r for _t, _d, r in parts)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files())
def test_fix_moves_exactly_the_misplaced_annotations_in_generated_files(
    case: tuple[str, list[Any], bool],
) -> None:
    text, model, conflict = case
    assert list(yaml.load_all(text, Loader=LOADER)) == model, "the generator writes what it means"
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "manifests.yaml"
        target.write_text(text)
        outcome = lintfix.fix_file(str(target))
        after = target.read_text()
        if outcome.refused is not None or conflict:
            event(f"refused: {(outcome.refused or '').split(': ', 1)[-1][:60]}")
            assert conflict, f"refused without a conflict: {outcome.refused}\n{text}"
            assert outcome.refused is not None
            assert after == text
            return
        event("fixed" if outcome.moved else "nothing to move")
        assert ordered(list(yaml.load_all(after, Loader=LOADER))) == ordered(
            [fixed(d) for d in model]
        ), after
        assert sorted(lintverify.comments(after)) == sorted(lintverify.comments(text))
        assert lintfix.fix_file(str(target)) == lintfix.Outcome(), "a second --fix moves nothing"
        assert target.read_text() == after, "and changes nothing"
