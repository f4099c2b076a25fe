"""`kube-reloader dev-cluster ...`: build, start, inspect and stop the local control plane.

Exit codes: 0 success, 1 the operation failed, 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kube_reloader.devcluster.building import Builder, BuildError
from kube_reloader.devcluster.cluster import ClusterError, DevCluster, default_state_dir


def _report(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _cluster(args: argparse.Namespace) -> DevCluster:
    state_dir = Path(args.state_dir) if args.state_dir else default_state_dir(args.name)
    return DevCluster(state_dir, report=_report)


def _cmd_build(args: argparse.Namespace) -> int:
    t0 = time.monotonic()
    builder = Builder(report=_report)
    builder.ensure()
    print(builder.binaries.bin)
    _report(f"[build] binaries ready in {time.monotonic() - t0:.1f}s")
    return 0


def _cmd_up(args: argparse.Namespace) -> int:
    if args.nodes < 1:
        raise SystemExit("dev-cluster up: --nodes must be at least 1")
    cluster = _cluster(args)
    state = cluster.up(
        nodes=args.nodes,
        build=not args.no_build,
        timeout=args.timeout,
        real_node=args.real_node,
    )
    print(state.kubeconfig)
    return 0


def _cmd_down(args: argparse.Namespace) -> int:
    cluster = _cluster(args)
    stopped = cluster.down()
    _report(
        f"[dev-cluster] stopped {', '.join(stopped)}"
        if stopped
        else "[dev-cluster] nothing running"
    )
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    cluster = _cluster(args)
    statuses = cluster.status()
    if not statuses:
        print(f"dev-cluster {args.name}: not running ({cluster.state_dir})")
        return 1
    if args.format == "json":
        print(json.dumps([s.__dict__ for s in statuses], indent=2))
    else:
        for s in statuses:
            pid = str(s.pid) if s.pid else "-"
            print(f"{s.name:<24} pid {pid:<8} {s.detail}")
    return 0 if all(s.healthy for s in statuses) else 1


def _cmd_kubeconfig(args: argparse.Namespace) -> int:
    cluster = _cluster(args)
    state = cluster.load_state()
    if state is None:
        print(
            f"dev-cluster {args.name}: not running (start it with `kube-reloader dev-cluster up`)",
            file=sys.stderr,
        )
        return 1
    print(state.kubeconfig)
    return 0


def build_parser() -> argparse.ArgumentParser:
    dev = argparse.ArgumentParser(
        prog="kube-reloader dev-cluster",
        description="A local control plane: etcd, kube-apiserver, controller-manager, "
        "scheduler and kwok fake nodes, built from the Go module proxy.",
        allow_abbrev=False,
    )
    dev_sub = dev.add_subparsers(
        dest="dev_command", metavar="ACTION", required=True, help="what to do (ACTION --help)"
    )

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--name", default="default", help="cluster name (default: %(default)s)")
        p.add_argument(
            "--state-dir", help="state directory (default: per-name, under XDG_STATE_HOME)"
        )

    p = _action(dev_sub, "build", "build the binaries into the cache (no cluster)")
    p.set_defaults(func=_cmd_build)
    p = _action(dev_sub, "up", "build if needed, start in the background, wait until ready")
    common(p)
    p.add_argument("--nodes", type=int, default=1, help="kwok fake nodes (default: %(default)s)")
    p.add_argument(
        "--no-build", action="store_true", help="fail instead of building missing binaries"
    )
    p.add_argument(
        "--timeout", type=float, default=120.0, help="seconds to become ready (default: 120)"
    )
    p.add_argument(
        "--real-node",
        action="store_true",
        help="also run a real node (kubelet, containerd, runc) on this machine, in a network "
        "namespace of its own; needs root",
    )
    p.set_defaults(func=_cmd_up)
    p = _action(dev_sub, "down", "stop every process the cluster started; remove its state")
    common(p)
    p.set_defaults(func=_cmd_down)
    p = _action(dev_sub, "status", "health of each component")
    common(p)
    p.add_argument(
        "--format", choices=("text", "json"), default="text", help="output (default: text)"
    )
    p.set_defaults(func=_cmd_status)
    p = _action(dev_sub, "kubeconfig", "print the path of the cluster's kubeconfig")
    common(p)
    p.set_defaults(func=_cmd_kubeconfig)
    return dev


def _action(sub: Any, name: str, text: str) -> argparse.ArgumentParser:
    """One ACTION, its line in `dev-cluster --help` also its own --help's description."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name, allow_abbrev=False, help=text, description=text[0].upper() + text[1:] + "."
    )
    return parser


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (BuildError, ClusterError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
