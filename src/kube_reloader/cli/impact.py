"""`kube-reloader impact KIND/NAME`: what one content change of a ConfigMap, Secret or
SecretProviderClass would do to every workload of its namespace (`core.impacting.preview`).

The change previewed is one new content: its hash is a sentinel, `sentinel(current)` (SHA-256
of the current content's hash and a marker, cut to 40 hex digits like Reloader's SHA-1), so it
differs from whatever a workload carries and every workload that reloads on the resource
reloads. New content also lifts a circuit-breaker halt of the old one, so no halt applies.

Live (kubeconfig, `--context`): the namespace's workloads of every built-in kind (Argo
Rollouts and DeploymentConfigs when served), the namespace's annotations (a 403 leaves them
out, said in a note) and, with `--max-concurrent-rollouts`, the rollouts in flight as the
controller adopts them at start (progressing, and carrying a reload), cluster-wide (on a 403,
this namespace only). From `-f FILE`: the same, read from a YAML stream (objects without a
namespace are in the one asked for, as with `kubectl apply -n`).

A SecretProviderClass is previewed as one change of the class; the controller sees Secrets
Store CSI rotations per pod (with `--enable-csi-integration`), and evict workloads are not
reloaded for them.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import hashlib
import json
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from kube_reloader.cli import flagset, impact_report
from kube_reloader.cli.explain import (
    CONTROLLER_FLAGS,
    content_hash,
    parse_args,
    workload_of,
)
from kube_reloader.cli.flaghelp import HelpFormatter
from kube_reloader.core import impacting, ledger, planning
from kube_reloader.core.annotations import Keys
from kube_reloader.core.matching import is_tls_secret
from kube_reloader.core.objects import ObjectKey, ResourceType
from kube_reloader.kube import config, errors, resources
from kube_reloader.kube.client import Client
from kube_reloader.runtime.kinds import BUILTIN
from kube_reloader.runtime.options import Options

TYPES = {
    "configmap": ResourceType.CONFIGMAP,
    "configmaps": ResourceType.CONFIGMAP,
    "cm": ResourceType.CONFIGMAP,
    "secret": ResourceType.SECRET,
    "secrets": ResourceType.SECRET,
    "secretproviderclass": ResourceType.SECRETPROVIDERCLASS,
    "secretproviderclasses": ResourceType.SECRETPROVIDERCLASS,
    "spc": ResourceType.SECRETPROVIDERCLASS,
}
API = {
    ResourceType.CONFIGMAP: resources.CONFIGMAPS,
    ResourceType.SECRET: resources.SECRETS,
    ResourceType.SECRETPROVIDERCLASS: resources.SECRETPROVIDERCLASSES,
}
#: listed in the namespace: the built-in kinds first, then those served only with an add-on
REQUIRED = (
    resources.DEPLOYMENTS,
    resources.STATEFULSETS,
    resources.DAEMONSETS,
    resources.CRONJOBS,
    resources.JOBS,
)
OPTIONAL = (resources.ROLLOUTS, resources.DEPLOYMENTCONFIGS)
ROLLING = (resources.DEPLOYMENTS, resources.STATEFULSETS, resources.DAEMONSETS)
CSI_NOTE = (
    "Secrets Store CSI rotations are per pod (SecretProviderClassPodStatus, with "
    "--enable-csi-integration); previewed as one change of the class, and evict workloads "
    "are not reloaded for them"
)
Doc = dict[str, Any]


@dataclasses.dataclass
class Inputs:
    """What the preview is computed from, however it was read."""

    change: planning.Change
    workloads: list[planning.Workload]
    namespace_annotations: dict[str, str]
    #: every workload read (all namespaces read), for the rollouts in flight
    rolling: list[planning.Workload]
    notes: list[str] = dataclasses.field(default_factory=list)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kube-reloader impact",
        usage=(
            "%(prog)s KIND/NAME [-n NAMESPACE] [-f FILE] [--format text|json]\n"
            "                            [CONTROLLER-FLAG ...]"
        ),
        description="Preview one content change of a ConfigMap, Secret or SecretProviderClass: "
        "every workload that would reload, how, and whether it would be written now or wait. "
        + CONTROLLER_FLAGS
        + " Here that includes --max-concurrent-rollouts, --freeze and --namespace-policies.",
        formatter_class=HelpFormatter,
        allow_abbrev=False,
    )
    p.add_argument(
        "target",
        metavar="KIND/NAME",
        help="configmap/NAME, secret/NAME, secretproviderclass/NAME, or KIND/NAMESPACE/NAME",
    )
    p.add_argument(
        "-n",
        "--namespace",
        default=None,
        help="the namespace (default: the kubeconfig's; with -f, the object's)",
    )
    p.add_argument(
        "-f",
        "--filename",
        metavar="FILE",
        help="read the objects from this YAML file, not a cluster (default: the cluster)",
    )
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format")
    flagset.add_flags(p)
    return p


def parse_target(text: str, namespace: str | None) -> tuple[ResourceType, str | None, str]:
    """`KIND/NAME` or `KIND/NAMESPACE/NAME` -> (type, namespace or None, name)."""
    parts = text.split("/")
    rtype = TYPES.get(parts[0].lower())
    if rtype is None or len(parts) not in (2, 3) or not all(parts[1:]):
        raise ValueError(
            f"{text!r}: expected KIND/NAME or KIND/NAMESPACE/NAME with KIND one of "
            "configmap (cm), secret, secretproviderclass (spc)"
        )
    if len(parts) == 3:
        if namespace is not None and namespace != parts[1]:
            raise ValueError(f"{text!r} names namespace {parts[1]!r}, -n says {namespace!r}")
        return rtype, parts[1], parts[2]
    return rtype, namespace, parts[1]


def sentinel(current: str) -> str:
    """The hash of the previewed content: never one a workload carries."""
    return hashlib.sha256(f"{current}\0kube-reloader-impact".encode()).hexdigest()[:40]


def in_flight(workloads: Iterable[planning.Workload], cap: int) -> frozenset[ObjectKey]:
    """The rollouts that hold a slot when the change arrives, as the scheduler adopts them
    (`ledger.adopts`; none without a cap)."""
    return frozenset(w.key for w in workloads if cap > 0 and ledger.adopts(w))


def _change(rtype: ResourceType, ns: str, name: str, obj: Mapping[str, Any]) -> planning.Change:
    meta = obj.get("metadata") or {}
    if rtype is ResourceType.SECRETPROVIDERCLASS:
        current = f"{rtype.value}/{ns}/{name}/{meta.get('resourceVersion', '')}"
    else:
        current = content_hash(obj)
    annotations = dict(meta.get("annotations") or {})
    tls = rtype is ResourceType.SECRET and is_tls_secret(str(obj.get("type") or ""), annotations)
    return planning.Change(rtype, ns, name, sentinel(current), annotations=annotations, tls=tls)


def _docs(path: Path) -> list[Doc]:
    out: list[Doc] = []
    for d in yaml.safe_load_all(path.read_text()):
        if isinstance(d, dict) and d.get("kind") == "List":
            out += [i for i in d.get("items") or () if isinstance(i, dict)]
        elif isinstance(d, dict):
            out.append(d)
    # YAML timestamps become datetimes; the API gives strings
    return list(json.loads(json.dumps(out, default=str)))


def from_file(
    path: Path, rtype: ResourceType, namespace: str | None, name: str, keys: Keys
) -> Inputs:
    """The inputs read from a YAML stream; workloads read with the annotation names `keys`."""
    docs = _docs(path)

    def ns_of(d: Doc) -> str | None:
        return (d.get("metadata") or {}).get("namespace")

    kind = rtype.kind
    found = [
        d
        for d in docs
        if d.get("kind") == kind
        and (d.get("metadata") or {}).get("name") == name
        and (namespace is None or ns_of(d) in (None, namespace))
    ]
    if not found:
        where = "" if namespace is None else f" in namespace {namespace!r}"
        raise ValueError(f"{path}: no {kind} named {name!r}{where}")
    if namespace is None:
        spaces = {ns_of(d) or "default" for d in found}
        if len(spaces) > 1:
            raise ValueError(f"{path}: {kind} {name!r} is in namespaces {sorted(spaces)}; say -n")
        namespace = spaces.pop()
    ns_annotations: dict[str, str] = {}
    workloads: list[planning.Workload] = []
    for d in docs:
        meta = d.get("metadata") or {}
        if d.get("kind") == "Namespace" and meta.get("name") == namespace:
            ns_annotations = dict(meta.get("annotations") or {})
        elif d.get("kind") in BUILTIN:
            workloads.append(workload_of(d, namespace, keys))
    change = _change(rtype, namespace, name, found[0])
    mine = [w for w in workloads if w.namespace == namespace]
    return Inputs(change, mine, ns_annotations, workloads)


async def _list(client: Client, res: resources.Resource, namespace: str | None) -> list[Doc]:
    items = (await client.list(res, namespace=namespace)).items
    return [{**i, "kind": res.kind} for i in items]  # a LIST's items carry no kind


async def from_cluster(
    args: argparse.Namespace,
    rtype: ResourceType,
    namespace: str | None,
    name: str,
    cap: int,
    keys: Keys,
) -> Inputs:
    """The inputs read from the cluster; workloads read with the annotation names `keys`."""
    conn = config.load(args.kubeconfig, context=args.context)
    ns = namespace or conn.namespace
    notes: list[str] = []
    async with Client(conn, user_agent="kube-reloader-impact") as client:
        try:
            obj = await client.get(API[rtype], name, namespace=ns)
        except errors.NotFound:
            raise ValueError(f"{rtype.kind} {ns}/{name} not found") from None
        try:
            ns_obj = await client.get(resources.NAMESPACES, ns)
            ns_annotations = dict((ns_obj.get("metadata") or {}).get("annotations") or {})
        except errors.Forbidden:
            ns_annotations = {}
            notes.append(
                f"namespace {ns} is not readable (403): its freeze and reload-window "
                "are not applied"
            )
        docs: list[Doc] = []
        for res in (*REQUIRED, *OPTIONAL):
            try:
                docs += await _list(client, res, ns)
            except errors.NotFound:
                if res not in OPTIONAL:
                    raise
        workloads = [workload_of(d, ns, keys) for d in docs]
        rolling = list(workloads)
        if cap > 0:
            rolling = await _cluster_rolling(client, workloads, ns, notes, keys)
    return Inputs(_change(rtype, ns, name, obj), workloads, ns_annotations, rolling, notes)


async def _cluster_rolling(
    client: Client, mine: list[planning.Workload], ns: str, notes: list[str], keys: Keys
) -> list[planning.Workload]:
    """Every namespace's rollouts (the cap is cluster-wide); this namespace's on a 403."""
    out = list(mine)
    try:
        for res in (*ROLLING, resources.ROLLOUTS):
            try:
                out += [
                    workload_of(d, "", keys)
                    for d in await _list(client, res, None)
                    if (d.get("metadata") or {}).get("namespace") != ns
                ]
            except errors.NotFound:
                continue
    except errors.Forbidden:
        notes.append(
            "rollouts of other namespaces are not readable (403): only this "
            "namespace's are counted in flight"
        )
        return list(mine)
    return out


def main(argv: Sequence[str]) -> int:
    args, run = parse_args(build_parser(), argv)
    try:
        inputs, rows, state = _preview(args, run.options)
    except (ValueError, OSError, yaml.YAMLError, errors.KubeError) as exc:
        print(f"error: {exc}".splitlines()[0], file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - total: one line, never a traceback
        print(f"error: {type(exc).__name__}: {exc}".splitlines()[0], file=sys.stderr)
        return 1
    text = (
        json.dumps(impact_report.to_json(inputs.change, inputs.notes, rows, state), indent=2) + "\n"
        if args.format == "json"
        else impact_report.render_text(inputs.change, inputs.notes, rows)
    )
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # `| head`: the reader is gone, and so is the point
        return 0
    return 0


def _preview(
    args: argparse.Namespace, opts: Options
) -> tuple[Inputs, list[impacting.Row], impacting.State]:
    """Read the inputs (file or cluster) and preview the change under the controller's
    options (`flags.settings`)."""
    rtype, namespace, name = parse_target(args.target, args.namespace)
    cap, keys = opts.max_concurrent_rollouts, opts.plan.match.keys
    if args.filename:
        inputs = from_file(Path(args.filename), rtype, namespace, name, keys)
    else:
        inputs = asyncio.run(from_cluster(args, rtype, namespace, name, cap, keys))
    if rtype is ResourceType.SECRETPROVIDERCLASS:
        inputs.notes.append(CSI_NOTE)
    state = impacting.State(cap=cap, freeze=opts.freeze, in_flight=in_flight(inputs.rolling, cap))
    rows = impacting.preview(
        inputs.change,
        inputs.workloads,
        config=opts.plan,
        now=time.time(),
        state=state,
        namespace_annotations=inputs.namespace_annotations if opts.namespace_policies else {},
    )
    return inputs, list(rows), state
