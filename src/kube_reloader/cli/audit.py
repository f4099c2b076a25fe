"""`kube-reloader audit [--cluster | -n NS] [--format text|json] [CONTROLLER FLAGS...]`:
the workloads whose running pods started before the last content change of a ConfigMap or
Secret they consume, and that no rule will reload, with the reason (`core.staleness`).

It judges with the controller's rules: any controller flag that changes them may follow
(`--auto-reload-all`, renamed annotation keys, `--namespaces-to-ignore`,
`--resource-label-selector`, `--resources-to-ignore`, `--reload-tls-secrets` ...), parsed
by the controller's own flag parser. `--cluster` audits every namespace, `-n` one; neither,
the kubeconfig context's namespace. Reads: one LIST of each workload kind, of ConfigMaps
and of Secrets (metadata only: no content), of pods per namespace that has a candidate
(reduced to start times), one LIST by name per stale TLS Secret (its certificate's
validity).

Exit codes: 0 nothing stale, 1 stale workloads found, 2 a usage error or an API error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence

from kube_reloader.cli import flags
from kube_reloader.core import planning, staleness
from kube_reloader.core.annotations import Keys
from kube_reloader.core.objects import ResourceType
from kube_reloader.core.staleness import Consumed
from kube_reloader.kube import config, errors, podstarts, projections, resources
from kube_reloader.kube.client import Client
from kube_reloader.kube.resources import Resource
from kube_reloader.kube.transport import RequestObserver
from kube_reloader.runtime import auditing, cache, kinds
from kube_reloader.runtime.options import Options

KINDS: tuple[Resource, ...] = (resources.DEPLOYMENTS, resources.STATEFULSETS, resources.DAEMONSETS)
CONFIGS = ((ResourceType.CONFIGMAP, resources.CONFIGMAPS), (ResourceType.SECRET, resources.SECRETS))
#: a config as the audit needs it: change time, annotations, TLS-ness, resourceVersion
Config = tuple[float | None, dict[str, str], bool, str]
Names = set[tuple[str, str]]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kube-reloader audit",
        description="Find workloads whose pods run old ConfigMap/Secret content that no rule "
        "will reload. Controller flags (any of `kube-reloader --help`'s, e.g. "
        "--auto-reload-all, --kubeconfig) may follow; they are judged as the controller "
        "judges them. Exit 1 when something is found.",
        allow_abbrev=False,
    )
    p.add_argument("--cluster", action="store_true", help="every namespace")
    p.add_argument(
        "-n", "--namespace", default=None, help="one namespace (default: the kubeconfig's)"
    )
    p.add_argument(
        "--format", choices=("text", "json"), default="text", help="output (default: text)"
    )
    return p


async def _configs(
    client: Client,
    res: Resource,
    namespace: str | None,
    selector: str | None,
    keep: frozenset[str],
) -> dict[tuple[str, str], Config]:
    """ConfigMaps or Secrets without their content (metadata and type only)."""

    def reduce(obj: podstarts.ConfigMeta) -> tuple[tuple[str, str], Config]:
        m = obj.metadata
        tls = res is resources.SECRETS and staleness.is_tls(obj.type, m.annotations)
        ann = {k: v for k, v in m.annotations.items() if k in keep}
        return (m.namespace, m.name), (podstarts.changed_at(m), ann, tls, m.resourceVersion)

    listed = await client.list_reduced(
        res,
        namespace=namespace,
        label_selector=selector,
        type=podstarts.ConfigMeta,
        reduce=reduce,
    )
    return dict(listed.items)


async def run(
    options: Options,
    conn: config.ConnectionConfig,
    namespace: str | None,
    observer: RequestObserver | None = None,
) -> auditing.Report:
    keys = options.plan.match.keys
    keep = keys.resource_keys()
    async with Client(conn, user_agent="kube-reloader-audit", observer=observer) as client:
        workloads = await _workloads(client, namespace, keys)
        configs: dict[ResourceType, dict[tuple[str, str], Config]] = {}
        watched: dict[ResourceType, Names | None] = {}
        selector = options.resource_label_selector or None
        for rtype, res in CONFIGS:
            configs[rtype] = await _configs(client, res, namespace, None, keep)
            watched[rtype] = None
            if selector:
                watched[rtype] = set(await _configs(client, res, namespace, selector, keep))
        in_selected_ns = await _selected_namespaces(client, options.namespace_selector)

        async def lookup(rtype: ResourceType, ns: str, name: str) -> Consumed | None:
            found = configs[rtype].get((ns, name))
            if found is None:
                return None
            changed, ann, tls, _ = found
            outside = _outside(rtype, ns, name, watched, in_selected_ns, options)
            scope = staleness.unwatched(
                namespace=ns,
                rtype=rtype,
                namespaces=options.namespaces,
                namespaces_to_ignore=options.namespaces_to_ignore,
                resources=options.resources,
                outside_selector=outside,
            )
            return Consumed(rtype, name, changed, ann, tls=tls, unwatched=scope)

        def version(ns: str, name: str) -> str:
            found = configs[ResourceType.SECRET].get((ns, name))
            return found[3] if found is not None else ""

        now = int(time.time())
        certificates = auditing.Certificates(client)
        return await auditing.audit(
            client, workloads, lookup, options.plan, now, certificates, versions=version
        )


async def _workloads(client: Client, namespace: str | None, keys: Keys) -> list[planning.Workload]:
    """The built-in workloads (Deployments, StatefulSets, DaemonSets) as the controller
    reads them."""
    workloads = []
    for res in KINDS:
        listed = await client.list(res, namespace=namespace, type=projections.Workload)
        status = kinds.BUILTIN[res.kind].status  # a rollout in progress is not judged
        workloads += [
            cache.workload_entry(res.kind, o, keys, status).workload for o in listed.items
        ]
    return workloads


async def _selected_namespaces(client: Client, selector: str) -> set[str] | None:
    """The namespaces `--namespace-selector` selects (None: no selector, every namespace)."""
    if not selector:
        return None
    listed = await client.list(
        resources.NAMESPACES, label_selector=selector, type=projections.Object
    )
    return {o.metadata.name for o in listed.items}


def _outside(
    rtype: ResourceType,
    ns: str,
    name: str,
    watched: dict[ResourceType, Names | None],
    in_selected_ns: set[str] | None,
    options: Options,
) -> str | None:
    if in_selected_ns is not None and ns not in in_selected_ns:
        return f"--namespace-selector={options.namespace_selector} (its namespace)"
    chosen = watched[rtype]
    if chosen is not None and (ns, name) not in chosen:
        return f"--resource-label-selector={options.resource_label_selector}"
    return None


def render_text(report: auditing.Report) -> str:
    lines = []
    for f in report.findings:
        d = f.to_dict()
        lines.append(
            f"{d['kind']} {d['namespace']}/{d['name']}: {d['resource']} changed at "
            f"{d['changedAt']}, {d['podsBeforeChange']} of {d['pods']} pod(s) started before "
            f"(oldest {d['oldestPodStartedAt']}); not reloaded: {d['reason']}: {d['message']}"
        )
        cert = d.get("certificate")
        if isinstance(cert, dict):
            validity = f"notBefore {cert['notBefore']}, notAfter {cert['notAfter']}"
            lines.append(f"    certificate: {validity}")
    lines += [f"warning: {e}" for e in report.errors]
    stale = f"{len(report.findings)} stale (workload, resource) pair(s)"
    lines.append(f"{stale} among {report.workloads} workload(s)")
    return "\n".join(lines) + "\n"


def render_json(report: auditing.Report) -> str:
    doc = {
        "stale": [f.to_dict() for f in report.findings],
        "workloads": report.workloads,
        "errors": report.errors,
    }
    return json.dumps(doc, indent=2) + "\n"


def main(argv: Sequence[str]) -> int:
    args, rest = build_parser().parse_known_args(argv)
    if args.cluster and args.namespace:
        print("error: --cluster and -n are exclusive", file=sys.stderr)
        return 2
    try:
        settings = flags.parse(rest)
        conn = config.load(settings.kubeconfig, context=settings.context)
        namespace = None if args.cluster else (args.namespace or conn.namespace)
        report = asyncio.run(run(settings.options, conn, namespace))
    except flags.FlagError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (OSError, ValueError, errors.KubeError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"error: {first}", file=sys.stderr)
        return 2
    sys.stdout.write(render_json(report) if args.format == "json" else render_text(report))
    return 1 if report.findings else 0
