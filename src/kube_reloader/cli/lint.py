"""`kube-reloader lint [PATH...|-] [--cluster] [--format text|json|sarif] [--fix]`.

Exit codes: 0 no finding at or above `--fail-on`, 1 such findings, 2 usage or input errors
(a broken YAML document is reported with file:line; the other documents are still linted).
Input that would exhaust memory (a huge file, an alias bomb) is refused the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from kube_reloader import __version__
from kube_reloader.cli.manifests import constant_line, read_inputs
from kube_reloader.core import linting
from kube_reloader.core.linting import Document, Finding, Severity
from kube_reloader.kube.errors import KubeError


async def read_cluster(
    kubeconfig: str | None, context: str | None, namespace: str | None
) -> tuple[list[Document], set[tuple[str, str, str]]]:
    from kube_reloader.kube import config, resources
    from kube_reloader.kube.client import Client

    conn = config.load(kubeconfig, context=context)
    docs: list[Document] = []
    present: set[tuple[str, str, str]] = set()
    async with Client(conn, user_agent="kube-reloader-lint") as client:
        for res in (
            resources.DEPLOYMENTS,
            resources.STATEFULSETS,
            resources.DAEMONSETS,
            resources.CRONJOBS,
        ):
            for item in (await client.list(res, namespace=namespace)).items:
                item.setdefault("kind", res.kind)
                item.setdefault("apiVersion", res.api_version)
                ref = f"{res.kind} {item['metadata'].get('namespace')}/{item['metadata']['name']}"
                docs.append(Document(item, ref, constant_line(0)))
        for res, rtype in ((resources.CONFIGMAPS, "CONFIGMAP"), (resources.SECRETS, "SECRET")):
            listed = await client.list(res, namespace=namespace, type=_Meta)
            for meta_obj in listed.items:
                m = meta_obj.metadata
                present.add((rtype, m.namespace, m.name))
                if rtype == "SECRET" and meta_obj.type == "kubernetes.io/tls":
                    secret = {"apiVersion": "v1", "kind": "Secret", "type": meta_obj.type,
                              "metadata": {"name": m.name, "namespace": m.namespace}}  # fmt: skip
                    docs.append(
                        Document(secret, f"Secret {m.namespace}/{m.name}", constant_line(0))
                    )
    return docs, present


import msgspec  # noqa: E402 - only the cluster path needs it

from kube_reloader.kube.projections import ObjectMeta  # noqa: E402


class _Meta(msgspec.Struct):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    type: str = ""


# ----------------------------------------------------------------------- output


def render_text(findings: Sequence[Finding]) -> str:
    lines = []
    for f in findings:
        where = f"{f.source}:{f.line}" if f.line else f.source
        lines.append(
            f"{where}: {f.severity.label} {f.rule} {f.name}: {f.message}\n    fix: {f.fix}"
        )
    errors = sum(f.severity is Severity.ERROR for f in findings)
    warnings = sum(f.severity is Severity.WARNING for f in findings)
    lines.append(f"{len(findings)} finding(s): {errors} error(s), {warnings} warning(s)")
    return "\n".join(lines) + "\n"


def render_json(findings: Sequence[Finding]) -> str:
    return json.dumps(
        [{"rule": f.rule, "name": f.name, "severity": f.severity.label, "file": f.source, "line": f.line,
          "object": f.object, "message": f.message, "fix": f.fix} for f in findings],
        indent=2,
    ) + "\n"  # fmt: skip


def render_sarif(findings: Sequence[Finding]) -> str:
    level = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
    rules = sorted({f.rule for f in findings} | set(linting.RULES))
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "kube-reloader", "version": __version__,
                "rules": [{"id": r, "name": linting.RULES[r].name, "shortDescription": {"text": linting.RULES[r].summary},
                           "defaultConfiguration": {"level": level[linting.RULES[r].severity]}} for r in rules],
            }},
            "results": [{
                "ruleId": f.rule, "ruleIndex": rules.index(f.rule), "level": level[f.severity],
                "message": {"text": f"{f.message}. Fix: {f.fix}"},
                "locations": [{"physicalLocation": {"artifactLocation": {"uri": f.source},
                                                    "region": {"startLine": max(1, f.line)}}}],
            } for f in findings],
        }],
    }  # fmt: skip
    return json.dumps(doc, indent=2) + "\n"


# ----------------------------------------------------------------------- --fix


def fix_text(
    text: str, findings: Sequence[Finding], docs_by_line: dict[int, Document]
) -> tuple[str, int]:
    """Move misplaced annotations to the workload's metadata by editing lines, so everything
    else in the file stays byte for byte as it was. Returns the new text and moves done."""
    lines = text.splitlines(keepends=True)
    moves = [(f, m) for f in findings for m in f.moves]
    done = 0
    # group by document (the line of its first key)
    by_doc: dict[int, list[tuple[str, linting.Path, linting.Path]]] = {}
    for f, (key, src, dst) in moves:
        by_doc.setdefault(f.line, []).append((key, src, dst))
    edits: list[tuple[int, int, list[str]]] = []  # (start index, end index, replacement lines)
    for doc in {id(d): d for d in docs_by_line.values()}.values():
        wanted = [mv for mv in (m for f in findings for m in f.moves if f.source == doc.source)
                  if _belongs(doc, mv)]  # fmt: skip
        if not wanted:
            continue
        moved_lines: list[str] = []
        removals: list[int] = []
        for key, src, _dst in wanted:
            i = doc.line_of(src) - 1
            if (
                i < 0
                or i >= len(lines)
                or not lines[i].lstrip().startswith((key, f'"{key}"', f"'{key}'"))
            ):
                continue
            moved_lines.append(lines[i].strip())
            removals.append(i)
        if not removals:
            continue
        meta_line = doc.line_of(("metadata",)) - 1
        ann_path = ("metadata", "annotations")
        has_ann = doc.line_of(ann_path) != doc.line_of(("metadata",))
        if has_ann:
            ann_i = doc.line_of(ann_path) - 1
            if ann_i + 1 < len(lines) and not lines[ann_i].rstrip().endswith(":"):
                continue  # flow style annotations: leave it to a human
            first_key = _first_child(lines, ann_i)
            indent = (
                _indent(lines[first_key]) if first_key is not None else _indent(lines[ann_i]) + 2
            )
            insert_at = ann_i + 1
            new = [" " * indent + ml + "\n" for ml in moved_lines]
        else:
            child = _first_child(lines, meta_line)
            indent = _indent(lines[child]) if child is not None else _indent(lines[meta_line]) + 2
            insert_at = meta_line + 1
            new = [" " * indent + "annotations:\n"] + [
                " " * (indent + 2) + ml + "\n" for ml in moved_lines
            ]
        # empty pod-template annotations mapping left behind: remove its key line too
        src_parent = doc.line_of(wanted[0][1][:-1]) - 1
        remaining = [j for j in _children(lines, src_parent) if j not in removals]
        if not remaining:
            removals.append(src_parent)
        edits.append((insert_at, insert_at, new))
        edits += [(i, i + 1, []) for i in removals]
        done += len(moved_lines)
    for start, end, repl in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        lines[start:end] = repl
    return "".join(lines), done


def _belongs(doc: Document, move: tuple[str, linting.Path, linting.Path]) -> bool:
    return doc.line_of(move[1]) != doc.line_of(())


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _children(lines: list[str], parent: int) -> list[int]:
    base = _indent(lines[parent])
    out = []
    for j in range(parent + 1, len(lines)):
        stripped = lines[j].strip()
        if not stripped or stripped.startswith("#"):
            continue
        if _indent(lines[j]) <= base:
            break
        out.append(j)
    return out


def _first_child(lines: list[str], parent: int) -> int | None:
    kids = _children(lines, parent)
    return kids[0] if kids else None


# ----------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kube-reloader lint",
        description="Find reload annotations that will not work, before they ship.",
        allow_abbrev=False,
    )
    p.add_argument(
        "paths", nargs="*", metavar="PATH", help="YAML files or directories; - for stdin"
    )
    p.add_argument("--cluster", action="store_true", help="lint the live cluster (kubeconfig)")
    p.add_argument("-n", "--namespace", default=None, help="with --cluster: one namespace")
    p.add_argument("--kubeconfig", default=None)
    p.add_argument("--context", default=None)
    p.add_argument("--format", choices=("text", "json", "sarif"), default="text")
    p.add_argument("--fail-on", choices=("error", "warning", "info"), default="error")
    p.add_argument("--fix", action="store_true", help="move misplaced annotations, in place")
    return p


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    if not args.paths and not args.cluster:
        print("error: give PATHs, - for stdin, or --cluster", file=sys.stderr)
        return 2
    try:
        docs, broken, texts = read_inputs(args.paths)
        present = None
        if args.cluster:
            live, present = asyncio.run(read_cluster(args.kubeconfig, args.context, args.namespace))
            docs += live
    except (OSError, UnicodeDecodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KubeError as exc:  # --cluster: one line
        print(f"error: {exc}", file=sys.stderr)
        return 2
    findings = sorted(
        broken + linting.lint(docs, cluster_resources=present),
        key=lambda f: (f.source, f.line, f.rule),
    )
    if args.fix:
        for source, text in texts.items():
            if source == "<stdin>":
                continue
            file_docs = {d.line_of(()): d for d in docs if d.source == source}
            new, moved = fix_text(text, [f for f in findings if f.source == source], file_docs)
            if moved:
                Path(source).write_text(new)
                print(f"fixed {source}: moved {moved} annotation(s)", file=sys.stderr)
        if any(f.moves for f in findings):
            docs, broken, texts = read_inputs(args.paths)
            findings = sorted(
                broken + linting.lint(docs, cluster_resources=present),
                key=lambda f: (f.source, f.line, f.rule),
            )
    render = {"text": render_text, "json": render_json, "sarif": render_sarif}[args.format]
    sys.stdout.write(render(findings))
    if broken:
        return 2
    threshold = {"error": Severity.ERROR, "warning": Severity.WARNING, "info": Severity.INFO}[
        args.fail_on
    ]
    return 1 if any(f.severity >= threshold for f in findings) else 0
