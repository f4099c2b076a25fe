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
from typing import Any

from kube_reloader import __version__, limits
from kube_reloader.cli import charts, lintfix
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
                    docs.append(_tls_secret(m.namespace, m.name))
    return docs, present


def _tls_secret(namespace: str, name: str) -> Document:
    """A TLS Secret of the cluster as lint reads it: its kind, type and name."""
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": namespace},
    }
    return Document(secret, f"Secret {namespace}/{name}", constant_line(0))


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
    return json.dumps([_json_finding(f) for f in findings], indent=2) + "\n"


def _json_finding(f: Finding) -> dict[str, Any]:
    return {
        "rule": f.rule,
        "name": f.name,
        "severity": f.severity.label,
        "file": f.source,
        "line": f.line,
        "object": f.object,
        "message": f.message,
        "fix": f.fix,
    }


#: SARIF's level of each severity
SARIF_LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def render_sarif(findings: Sequence[Finding]) -> str:
    rules = sorted({f.rule for f in findings} | set(linting.RULES))
    driver = {
        "name": "kube-reloader",
        "version": __version__,
        "rules": [_sarif_rule(r) for r in rules],
    }
    results = [_sarif_result(f, rules.index(f.rule)) for f in findings]
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{"tool": {"driver": driver}, "results": results}],
    }
    return json.dumps(doc, indent=2) + "\n"


def _sarif_rule(rule_id: str) -> dict[str, Any]:
    rule = linting.RULES[rule_id]
    return {
        "id": rule_id,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "defaultConfiguration": {"level": SARIF_LEVELS[rule.severity]},
    }


def _sarif_result(f: Finding, index: int) -> dict[str, Any]:
    region = {"startLine": max(1, f.line)}
    location = {"physicalLocation": {"artifactLocation": {"uri": f.source}, "region": region}}
    return {
        "ruleId": f.rule,
        "ruleIndex": index,
        "level": SARIF_LEVELS[f.severity],
        "message": {"text": f"{f.message}. Fix: {f.fix}"},
        "locations": [location],
    }


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
    p.add_argument(
        "--kubeconfig",
        default=None,
        help="with --cluster: the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, "
        "then the in-cluster service account)",
    )
    p.add_argument(
        "--context", default=None, help="with --cluster: the kubeconfig context (default: current)"
    )
    p.add_argument(
        "--format",
        choices=("text", "json", "sarif"),
        default="text",
        help="text for people, json for scripts, sarif for code-scanning tools (default: text)",
    )
    p.add_argument(
        "--fail-on",
        choices=("error", "warning", "info"),
        default="error",
        help="exit 1 when a finding of this severity or worse is found (default: error)",
    )
    p.add_argument("--fix", action="store_true", help="move misplaced annotations, in place")
    p.add_argument(
        "--helm",
        default=None,
        metavar="PATH",
        help="the helm binary that renders charts (default: PATH, then the dev cluster's)",
    )
    p.add_argument(
        "--helm-values",
        action="append",
        default=[],
        metavar="FILE",
        help="a values file for helm template (repeatable)",
    )
    return p


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    if not args.paths and not args.cluster:
        print("error: give PATHs, - for stdin, or --cluster", file=sys.stderr)
        return 2
    live: list[Document] = []
    present = None
    try:
        if args.cluster:
            live, present = asyncio.run(read_cluster(args.kubeconfig, args.context, args.namespace))
        docs, broken, texts = gather(args, live, notes=True)
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
    if args.fix and fix_files(texts, findings):
        docs, broken, texts = gather(args, live, notes=False)
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


def gather(
    args: argparse.Namespace, live: list[Document], *, notes: bool
) -> tuple[list[Document], list[Finding], dict[str, str]]:
    """The documents of the PATHs, of the charts among them (rendered) and of the cluster."""
    found: set[Path] = set()
    docs, broken, texts = read_inputs(args.paths, lambda p: charts.wanted(p, found))
    helm = charts.find_helm(args.helm) if found else None
    budget = limits.AliasBudget()
    for chart in sorted(found):
        if helm is None:
            if notes:
                print(
                    f"lint: {chart}: a Helm chart, and no helm binary (PATH, --helm, or the dev "
                    "cluster's cache): its templates were skipped",
                    file=sys.stderr,
                )
            continue
        output, problem = charts.render(chart, helm, args.helm_values)
        if output is None:
            if notes:
                print(f"lint: {chart}: {problem}; its templates were skipped", file=sys.stderr)
            continue
        rendered, errors = charts.rendered_documents(chart, output, budget)
        docs += rendered
        broken += errors
        if notes:
            print(
                f"lint: {chart}: a Helm chart, linted as helm template renders it "
                f"({len(rendered)} document(s)); findings name its templates",
                file=sys.stderr,
            )
        if notes and args.fix:
            print(
                f"lint: {chart}: --fix leaves a chart alone (it lints what helm renders): "
                "move its annotations in the templates by hand",
                file=sys.stderr,
            )
    return docs + live, broken, texts


def fix_files(texts: dict[str, str], findings: Sequence[Finding]) -> bool:
    """`--fix` every file with a finding that has moves; whether any file changed."""
    changed = False
    for source in sorted({f.source for f in findings if f.moves} & set(texts) - {"<stdin>"}):
        outcome = lintfix.fix_file(source)
        if outcome.refused is not None:
            print(f"not fixed {source}: {outcome.refused}; the file is unchanged", file=sys.stderr)
        elif outcome.moved:
            print(f"fixed {source}: moved {outcome.moved} annotation(s)", file=sys.stderr)
            changed = True
    return changed
