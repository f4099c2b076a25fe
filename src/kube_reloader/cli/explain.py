"""`kube-reloader explain KIND/NAME`: the decision, step by step, for one workload."""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from kube_reloader.core import explaining, hashing, planning, scoping
from kube_reloader.core.evicting import PodStrategy
from kube_reloader.core.matching import MatchConfig, carries_named_list, is_tls_secret
from kube_reloader.core.objects import ResourceType
from kube_reloader.core.strategies import Strategy
from kube_reloader.kube import config, errors, resources
from kube_reloader.kube.client import Client
from kube_reloader.kube.resources import Resource, workload_resource

Resources = dict[tuple[ResourceType, str], explaining.Found | None]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kube-reloader explain",
        description="Say why a workload would or would not reload, step by step.",
        allow_abbrev=False,
    )
    p.add_argument("target", metavar="KIND/NAME", help="e.g. deployment/web, sts/db")
    p.add_argument("-n", "--namespace", default=None)
    p.add_argument("--change", metavar="configmap/NAME|secret/NAME", help="explain this one change")
    p.add_argument(
        "-f", "--filename", help="read the workload (and its configs) from this YAML file"
    )
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--kubeconfig", default=None)
    p.add_argument("--context", default=None)
    p.add_argument("--auto-reload-all", action="store_true", help="as the controller's flag")
    p.add_argument("--reload-strategy", choices=("env-vars", "annotations"), default="env-vars")
    p.add_argument("--reload-scope", choices=("object", "keys"), default="object",
                   help="as the controller's flag")  # fmt: skip
    p.add_argument("--reload-tls-secrets", action="store_true", help="as the controller's flag")
    p.add_argument("--default-strategy", choices=("patch", "evict"), default="patch",
                   help="as the controller's flag")  # fmt: skip
    return p


def _target(text: str) -> tuple[Resource, str]:
    kind, sep, name = text.partition("/")
    resource = workload_resource(kind)
    if not sep or not name or resource is None:
        raise ValueError(f"{text!r}: expected KIND/NAME with KIND one of deployment, statefulset, "
                         "daemonset, cronjob, job, rollout, deploymentconfig")  # fmt: skip
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
    return explaining.Found(hashing.items_hash(items), annotations, scoping.digests(items), tls)


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
    args: argparse.Namespace, resource: Resource, name: str
) -> tuple[dict[str, Any], Resources]:
    conn = config.load(args.kubeconfig, context=args.context)
    ns = args.namespace or conn.namespace
    async with Client(conn, user_agent="kube-reloader-explain") as client:
        workload = await client.get(resource, name, namespace=ns)
        w = planning.workload_from_manifest(workload)
        wanted = set(w.template.references())
        keys = MatchConfig().keys
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
    args = build_parser().parse_args(argv)
    try:
        resource, name = _target(args.target)
        only = _change(args.change)
        if args.filename:
            workload, found = from_file(Path(args.filename), resource.kind, name, args.namespace)
        else:
            workload, found = asyncio.run(from_cluster(args, resource, name))
    except (ValueError, OSError, yaml.YAMLError, errors.KubeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if only is not None and only not in found:
        found[only] = None
    cfg = planning.Config(
        match=MatchConfig(
            auto_reload_all=args.auto_reload_all, reload_tls_secrets=args.reload_tls_secrets
        ),
        strategy=Strategy(args.reload_strategy),
        scope=scoping.Scope(args.reload_scope),
    )
    result = explaining.explain(
        workload=workload,
        resources=found,
        config=cfg,
        now=time.time(),
        only=only,
        default_strategy=PodStrategy(args.default_strategy),
    )
    if args.format == "json":
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(explaining.render_text(result), end="")
    return 0
