"""Helm charts for `kube-reloader lint`: a folder with a `Chart.yaml` is a chart, whose
templates are not YAML until Helm renders them. `lint` reads the chart's `values.yaml` (for the
values rule) and lints what `helm template` renders, each document named after the template it
came from (`# Source:`); without a helm binary the templates are skipped, in one line.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from kube_reloader import limits
from kube_reloader.cli.manifests import Chunk, parse_chunk, split_documents
from kube_reloader.core.linting import Document, Finding

#: how long one `helm template` may take
RENDER_TIMEOUT = 120.0
SOURCE_PREFIX = "# Source: "


def chart_of(path: Path) -> Path | None:
    """The outermost chart holding `path` (a subchart renders with its parent), if any."""
    found = None
    for d in _ancestors(path.parent.absolute()):
        if _is_chart(d):
            found = d
    if found is None:
        return None
    return Path(os.path.relpath(found)) if not path.is_absolute() else found


def wanted(path: Path, charts: set[Path]) -> bool:
    """Whether `path` is read as a file: outside any chart, or the chart's own values.yaml
    (for the values rule). A chart's other files are its templates: the chart is noted in
    `charts`, to be rendered."""
    chart = chart_of(path)
    if chart is None:
        return True
    charts.add(chart)
    return path.name == "values.yaml" and path.parent.absolute() == chart.absolute()


def _is_chart(d: Path) -> bool:
    return (d / "Chart.yaml").is_file()


def _ancestors(d: Path) -> list[Path]:
    return [*reversed(d.parents), d]


def find_helm(explicit: str | None = None) -> str | None:
    """`--helm PATH`, else `helm` on PATH, else the dev cluster's cached build."""
    if explicit:
        return explicit
    on_path = shutil.which("helm")
    if on_path:
        return on_path
    from kube_reloader.devcluster.versions import cache_dir

    cached = cache_dir() / "bin" / "helm"
    return str(cached) if cached.is_file() and os.access(cached, os.X_OK) else None


def render(chart: Path, helm: str, values: Sequence[str] = ()) -> tuple[str | None, str | None]:
    """`helm template` of the chart (with `values` files, for the Kubernetes version the dev
    cluster runs): its output, or a one-line reason it could not be had."""
    from kube_reloader.devcluster.versions import Versions

    argv = [helm, "template", str(chart), "--kube-version", Versions().kubernetes]
    try:
        done = subprocess.run(
            [*argv, *(arg for v in values for arg in ("--values", v))],
            capture_output=True,
            text=True,
            timeout=RENDER_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        return None, f"cannot run {helm}: {exc}"
    if done.returncode != 0:
        lines = [ln.strip() for ln in done.stderr.splitlines() if ln.strip()]
        first = next((ln for ln in lines if ln.startswith("Error:")), lines[0] if lines else "")
        return None, f"helm template failed: {first.removeprefix('Error: ') or done.returncode}"
    if len(done.stdout) > limits.MAX_FILE_CHARS:
        return None, f"helm template rendered more than {limits.MAX_FILE_CHARS:,} characters"
    return done.stdout, None


def rendered_documents(
    chart: Path, output: str, budget: limits.AliasBudget
) -> tuple[list[Document], list[Finding]]:
    """The rendered documents, each named after the template it came from (Helm's `# Source:`
    comment names it from the chart's name; the path given is in the chart's folder). Lines
    in the rendered output are not the template's, so none is given."""
    docs: list[Document] = []
    errors: list[Finding] = []
    for chunk in split_documents(output, str(chart)):
        source = _source_of(chart, chunk.text)
        doc, err = parse_chunk(Chunk(source, chunk.text, 0), budget)
        if err is not None:
            errors.append(err)
        elif doc is not None:
            docs.append(Document(doc.obj, source, lambda _path: 0))
    return docs, errors


def _source_of(chart: Path, text: str) -> str:
    for line in text.splitlines():
        if line.startswith(SOURCE_PREFIX):
            _name, *rel = Path(line[len(SOURCE_PREFIX) :].strip()).parts  # name/templates/x
            return str(chart.joinpath(*rel))
    return str(chart)
