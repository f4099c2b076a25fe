"""`kube-reloader explain KIND/NAME`: the decision, step by step, for one workload."""

from __future__ import annotations

import argparse
import asyncio
import base64
import dataclasses
import json
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec
import yaml

from kube_reloader.cli import flags, flagset
from kube_reloader.cli.flaghelp import HelpFormatter
from kube_reloader.core import explaining, hashing, planning, scoping
from kube_reloader.core.annotations import Keys
from kube_reloader.core.matching import carries_named_list, is_tls_secret
from kube_reloader.core.objects import ResourceType, parse_workload_kind
from kube_reloader.kube import config, contents, errors, resources
from kube_reloader.kube.client import Client
from kube_reloader.kube.resources import Resource, workload_resource
from kube_reloader.runtime.cache import configmap_entry, secret_entry, workload_entry
from kube_reloader.runtime.kinds import BUILTIN

Resources = dict[tuple[ResourceType, str], explaining.Found | None]
#: the controller's default annotation names
DEFAULT_KEYS = Keys()


#: the environment `flags.settings` sees here: none of the shell's (a tool's verdict must not
#: depend on RELOAD_STRATEGY or KUBERNETES_NAMESPACE), and a pod identity, so flags that need
#: one in the controller (--enable-ha, --hash-algorithm=hmac-sha256) are accepted too
TOOL_ENV = {"POD_NAME": "kube-reloader-tool", "POD_NAMESPACE": "default"}
CONTROLLER_FLAGS = (
    "Every controller flag is accepted, in the controller's syntax (--flag=value; a bare "
    "boolean flag means true), and read by the controller's own code: those that decide "
    "a reload (the annotation names, --auto-reload-all, --reload-strategy, --reload-scope, "
    "--reload-tls-secrets, --default-strategy, --compat, ...) are applied, the others are "
    "checked and ignored."
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kube-reloader explain",
        usage=(
            "%(prog)s KIND/NAME [-n NAMESPACE] [-f FILE] [--change KIND/NAME]\n"
            "                             [--format text|json] [CONTROLLER-FLAG ...]"
        ),
        description="Say why a workload would or would not reload, step by step: for each "
        "ConfigMap/Secret it references, whether a change reloads it, and whether a reload is "
        "due now (a controller starting now would reload it: its template carries an older "
        "hash, or none and the content was written after the pod template). "
        + CONTROLLER_FLAGS
        + " --hash-algorithm=hmac-sha256 is refused: keyed hashes are not computed here.",
        formatter_class=HelpFormatter,
        allow_abbrev=False,
    )
    p.add_argument("target", metavar="KIND/NAME", help="the workload, e.g. deployment/web, sts/db")
    p.add_argument(
        "-n",
        "--namespace",
        default=None,
        help="its namespace (default: the kubeconfig's; with -f, any)",
    )
    p.add_argument(
        "--change",
        metavar="configmap/NAME|secret/NAME",
        help="explain this one change (default: every referenced resource)",
    )
    p.add_argument(
        "-f",
        "--filename",
        metavar="FILE",
        help="read the workload and its configs from this YAML file, not a cluster "
        "(default: the cluster)",
    )
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format")
    flagset.add_flags(p)
    return p


#: the one line `--hash-algorithm=hmac-sha256` is refused with (exit 2)
NO_KEYED_HASHES = (
    "{tool} cannot compute keyed hashes (--hash-algorithm=hmac-sha256): the controller's key "
    "lives in a Secret it reads at start, and SHA-1 hashes compared with keyed ones would call "
    "every up-to-date workload stale"
)


def controller_settings(args: argparse.Namespace, argv: Sequence[str]) -> flags.RunSettings:
    """The controller flags given to a tool, read by the controller's code (`flags.settings`)."""
    return flags.settings(args, argv, TOOL_ENV)


def parse_args(
    parser: argparse.ArgumentParser, argv: Sequence[str]
) -> tuple[argparse.Namespace, flags.RunSettings]:
    """A tool's arguments, with the controller's flags as the controller reads them; a bad
    flag value is a usage error (exit 2)."""
    argv = flagset.normalize_bools(argv)
    args = parser.parse_args(argv)
    try:
        return args, controller_settings(args, argv)
    except flags.FlagError as exc:
        parser.error(str(exc))


def _target(text: str) -> tuple[Resource, str]:
    kind, sep, name = text.partition("/")
    resource = workload_resource(kind)
    if not sep or not name or resource is None:
        raise ValueError(
            f"{text!r}: expected KIND/NAME with KIND one of deployment, statefulset, "
            "daemonset, cronjob, job, rollout, deploymentconfig"
        )
    return resource, name


def _change(text: str | None) -> tuple[ResourceType, str] | None:
    if not text:
        return None
    kind, _, name = text.partition("/")
    types = {
        "configmap": ResourceType.CONFIGMAP,
        "cm": ResourceType.CONFIGMAP,
        "secret": ResourceType.SECRET,
    }
    if kind.lower() not in types or not name:
        raise ValueError(f"--change {text!r}: expected configmap/NAME or secret/NAME")
    return types[kind.lower()], name


def _items(obj: Mapping[str, Any]) -> list[tuple[str, bytes]]:
    if obj.get("kind") == "Secret":
        data = {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
        data.update({k: str(v).encode() for k, v in (obj.get("stringData") or {}).items()})
        return hashing.secret_items(data)
    binary = {k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()}
    return hashing.configmap_items({k: str(v) for k, v in (obj.get("data") or {}).items()}, binary)


def content_hash(obj: Mapping[str, Any]) -> str:
    """Reloader's hash of a ConfigMap or Secret manifest (live or from a file)."""
    return hashing.items_hash(_items(obj))


def content(obj: Mapping[str, Any]) -> explaining.Found:
    """What `explain` needs of a ConfigMap or Secret: hash, annotations, per-key digests and
    whether it is a TLS Secret (its data is dropped here)."""
    items = _items(obj)
    annotations = dict((obj.get("metadata") or {}).get("annotations") or {})
    tls = obj.get("kind") == "Secret" and is_tls_secret(str(obj.get("type") or ""), annotations)
    return explaining.Found(
        hashing.items_hash(items), annotations, scoping.digests(items), tls, content_time(obj)
    )


def content_time(obj: Mapping[str, Any]) -> float | None:
    """When a ConfigMap's or Secret's content was last written (managedFields; else its
    creation; None: unknown), read as the controller's cache reads it at start
    (`cache.configmap_entry`, `cache.secret_entry`)."""
    raw = msgspec.json.encode(obj)
    try:
        if obj.get("kind") == "Secret":
            secret = msgspec.json.decode(raw, type=contents.SecretContent, strict=False)
            return secret_entry(secret, Keys()).changed_at
        cm = msgspec.json.decode(raw, type=contents.ConfigMapContent, strict=False)
        return configmap_entry(cm, Keys()).changed_at
    except (msgspec.ValidationError, msgspec.EncodeError, TypeError, ValueError):
        return None


def workload_of(
    doc: Mapping[str, Any], namespace: str, keys: Keys = DEFAULT_KEYS
) -> planning.Workload:
    """A workload manifest as the controller's cache holds it (projection, the annotations
    `keys` name: pass the options' when the annotation names may be renamed, rollout status,
    Job pods); without a namespace, it is in `namespace`. A manifest without a status (a
    file's) has no rollout in progress."""
    parsed = parse_workload_kind(doc.get("kind"))
    spec = None if parsed.error else BUILTIN.get(parsed.kind)
    meta = dict(doc.get("metadata") or {})
    if spec is None:
        raise ValueError(f"{doc.get('kind')!r} is not a workload kind")
    meta["namespace"] = meta.get("namespace") or namespace
    try:  # decoded from JSON, as the controller's watches are (managedFields stay raw)
        raw = msgspec.json.encode({**doc, "metadata": meta})
        obj = msgspec.json.decode(raw, type=spec.projection, strict=False)
    except (msgspec.ValidationError, msgspec.EncodeError, TypeError) as exc:
        raise ValueError(f"{parsed.kind} {meta.get('name')!r}: {exc}") from None
    w = workload_entry(parsed.kind, spec.workload(obj), keys, spec.status).workload
    return w if "status" in doc else dataclasses.replace(w, status=None)


def template_time(doc: Mapping[str, Any], keys: Keys) -> float | None:
    """When the workload's pod template was last written, as the controller reads it at
    start (`workload_of`; None: unknown or unreadable)."""
    try:
        return workload_of(doc, "default", keys).template_changed_at
    except ValueError:
        return None


def from_file(
    path: Path, kind: str, name: str, namespace: str | None
) -> tuple[dict[str, Any], Resources]:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]

    def matches(d: dict[str, Any]) -> bool:
        meta = d.get("metadata") or {}
        in_ns = namespace is None or meta.get("namespace", "default") == namespace
        return d.get("kind") == kind and meta.get("name") == name and in_ns

    workload = next((d for d in docs if matches(d)), None)
    if workload is None:
        raise ValueError(f"{path}: no {kind} named {name!r}")
    ns = (workload.get("metadata") or {}).get("namespace", "default")
    found: Resources = {}
    for d in docs:
        meta = d.get("metadata") or {}
        if d.get("kind") in ("ConfigMap", "Secret") and meta.get("namespace", "default") == ns:
            rtype = ResourceType.CONFIGMAP if d["kind"] == "ConfigMap" else ResourceType.SECRET
            found[(rtype, meta.get("name", ""))] = content(d)
    return workload, found


async def from_cluster(
    args: argparse.Namespace, resource: Resource, name: str, keys: Keys | None = None
) -> tuple[dict[str, Any], Resources]:
    conn = config.load(args.kubeconfig, context=args.context)
    ns = args.namespace or conn.namespace
    async with Client(conn, user_agent="kube-reloader-explain") as client:
        workload = await client.get(resource, name, namespace=ns)
        w = planning.workload_from_manifest(workload)
        wanted = set(w.template.references())
        keys = keys or Keys()
        found: Resources = {}
        for rtype, res in (
            (ResourceType.CONFIGMAP, resources.CONFIGMAPS),
            (ResourceType.SECRET, resources.SECRETS),
        ):
            if carries_named_list(keys, rtype, w.annotations, w.template.annotations):
                for obj in (await client.list(res, namespace=ns)).items:
                    wanted.add((rtype, obj["metadata"]["name"]))
        for rtype, rname in wanted:
            if rtype is ResourceType.SECRETPROVIDERCLASS:
                continue
            res = resources.CONFIGMAPS if rtype is ResourceType.CONFIGMAP else resources.SECRETS
            try:
                obj = await client.get(res, rname, namespace=ns)
            except errors.NotFound:
                found[(rtype, rname)] = None
                continue
            found[(rtype, rname)] = content(obj)
    return workload, found


def main(argv: Sequence[str]) -> int:
    args, run = parse_args(build_parser(), argv)
    if args.hash_algorithm == "hmac-sha256":
        print(f"error: {NO_KEYED_HASHES.format(tool='explain')}", file=sys.stderr)
        return 2
    cfg = run.options.plan
    try:
        resource, name = _target(args.target)
        only = _change(args.change)
        if args.filename:
            workload, found = from_file(Path(args.filename), resource.kind, name, args.namespace)
        else:
            workload, found = asyncio.run(from_cluster(args, resource, name, cfg.match.keys))
    except (ValueError, OSError, yaml.YAMLError, errors.KubeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if only is not None and only not in found:
        found[only] = None
    result = explaining.explain(
        workload=workload,
        resources=found,
        config=cfg,
        now=time.time(),
        only=only,
        template_changed_at=template_time(workload, cfg.match.keys),
        reconcile_on_start=run.options.reconcile_on_start,
    )
    if args.format == "json":
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(explaining.render_text(result), end="")
    return 0
