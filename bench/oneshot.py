"""What the one-run tools (bench.bad_rotation, bench.combined_apply) share: the `--peers` and
`--results` options, the peers' versions for a results file, a namespace deleted and gone,
and the run itself on a private dev cluster sized for N one-replica Deployments."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

from kube_reloader.devcluster.building import Builder
from kube_reloader.devcluster.cluster import DevCluster
from kube_reloader.devcluster.peers import PEERS
from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client

from .baseline import PEER_NAMES

#: run(args, kubeconfig, bins, out, workdir): fills out["results"]
Runner = Callable[[argparse.Namespace, Path, Path, dict[str, Any], Path], Awaitable[None]]


def peer_versions(peers: Iterable[str]) -> dict[str, str]:
    """Each peer's version and commit, as results files record them."""
    return {p: f"{PEERS[p].version} ({PEERS[p].commit[:12]})" for p in peers}


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--peers", type=lambda v: [x for x in v.split(",") if x],
                        default=list(PEER_NAMES), help=f"of {','.join(PEER_NAMES)}")  # fmt: skip
    parser.add_argument("--results", default=str(Path(__file__).parent / "results"))


def parse(parser: argparse.ArgumentParser) -> argparse.Namespace:
    args = parser.parse_args()
    if any(p not in PEER_NAMES for p in args.peers):
        parser.error(f"--peers: one or more of {','.join(PEER_NAMES)}")
    return args


async def delete_namespace(client: Client, ns: str) -> None:
    """Delete `ns` and wait until it is gone: the next controller starts on a quiet cluster."""
    await client.delete(resources.NAMESPACES, ns)
    while True:
        try:
            await client.get(resources.NAMESPACES, ns)
        except errors.NotFound:
            return
        await asyncio.sleep(2)


def header(peers: Iterable[str], params: dict[str, Any], results: Any) -> dict[str, Any]:
    """A one-shot tool's results.json before its results: when, on what, against which peers."""
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "peers": peer_versions(peers),
        "params": params,
        "results": results,
    }  # fmt: skip


def run_tool(args: argparse.Namespace, name: str, run: Runner) -> int:
    """Build the peers, start a dev cluster with kwok nodes for `args.deployments` pods and as
    many surge pods (250 each), `run`, and write `<results>/<stamp>-<name>/results.json`."""
    workdir = Path(args.results) / time.strftime(f"%Y%m%dT%H%M%SZ-{name}", time.gmtime())
    workdir.mkdir(parents=True, exist_ok=True)
    bins = (
        Builder(extra=tuple(args.peers), report=lambda line: print(line, flush=True)).ensure().bin
    )
    cluster = DevCluster(Path(tempfile.mkdtemp(prefix=f"kube-reloader-bench-{name}-")))
    out = header(args.peers, {k: v for k, v in vars(args).items() if k != "results"}, {})
    try:
        cluster.up(nodes=2 * args.deployments // 250 + 1)
        asyncio.run(run(args, cluster.kubeconfig, bins, out, workdir))
    finally:
        cluster.down()
    (workdir / "results.json").write_text(json.dumps(out, indent=2))
    print(json.dumps(out, indent=2))
    return 0
