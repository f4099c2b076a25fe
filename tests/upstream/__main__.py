"""`make test-upstream`: Stakater Reloader's own end-to-end suites (Ginkgo, in the peers' trees
under `../shared/peers/*/test/e2e`) against kube-reloader installed by our chart, and against
the real peer as the control, on a dev cluster with the real node (root only; outside CI).

    python -m tests.upstream [--targets v2-peer,v2-ours,v1-peer,v1-ours] [--suites core,...]

Each target copies the peer's tree, swaps in our chart for a run of ours (`suites.prepare_tree`)
and runs each suite package with `go test`; the suites install the controller themselves with
`helm upgrade --install` and drive the cluster with `kubectl`. Results: `<out>/results.json`
(every spec's state per target and suite) and `<out>/summary.md` (the pass counts, and the specs
the peer passes and we do not)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from kube_reloader.devcluster.argo import ArgoBuilder, RolloutsController, install_crds
from kube_reloader.devcluster.building import Builder
from kube_reloader.devcluster.cluster import DevCluster
from kube_reloader.devcluster.node import TAINT, RealNode
from kube_reloader.devcluster.nodebuild import NodeBuilder
from kube_reloader.devcluster.nodeconfig import NODE_NAME
from kube_reloader.devcluster.ownimage import ImageBuilder
from kube_reloader.devcluster.peers import PEERS, source_tree
from kube_reloader.kube import config
from kube_reloader.kube.client import Client
from tests.upstream import report, suites, tools

ROOT = Path(__file__).resolve().parents[2]
OUR_CHART = ROOT / "deploy" / "helm" / "kube-reloader"


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    targets = [_target(t) for t in args.targets.split(",")]
    chosen = [s for s in args.suites.split(",") if s]
    cluster = DevCluster(
        Path(args.state_dir or tempfile.mkdtemp(prefix="kr-upstream-")), report=_say
    )
    cluster.up(nodes=0, build=True, real_node=True, timeout=600)
    try:
        kubectl = tools.KubectlBuilder(report=_say).ensure()
        binaries = Builder(extra=tuple(PEERS), report=_say).ensure()
        _schedulable(kubectl / "kubectl", cluster.kubeconfig)
        node = RealNode(cluster.state_dir, NodeBuilder(report=_say).ensure().binaries)
        images = _images(node, binaries.bin, out / "images")
        results: dict[str, dict[str, dict[str, object]]] = {}
        with contextlib.ExitStack() as stack:
            if not args.no_argo:
                stack.enter_context(_argo(cluster.kubeconfig, out))
            for target in targets:
                results[target.name] = _run_target(
                    target, args, cluster.kubeconfig, images[target.name],
                    [kubectl, binaries.bin], out, chosen,
                )  # fmt: skip
                (out / "results.json").write_text(json.dumps(results, indent=1, sort_keys=True))
        (out / "summary.md").write_text(report.summary(results))
        print(report.summary(results))
    finally:
        if not args.keep_cluster:
            cluster.down()
    return 0


def _run_target(
    target: suites.Target,
    args: argparse.Namespace,
    kubeconfig: Path,
    image: str,
    tools_dirs: list[Path],
    out: Path,
    chosen: list[str],
) -> dict[str, dict[str, object]]:
    peer = f"reloader-{target.version}"
    tree = suites.prepare_tree(source_tree(peer), out / "trees" / target.name, target, OUR_CHART)
    env = suites.go_env(kubeconfig, image, tools_dirs)
    suites.pin_served_modules(tree, env)
    reports = out / "reports" / target.name
    reports.mkdir(parents=True, exist_ok=True)
    done: dict[str, dict[str, object]] = {}
    for suite in chosen:
        _say(f"[upstream] {target.name}: {suite} ...")
        outcome = suites.run_suite(
            tree, suite, env=env, label_filter=args.label_filter, report_dir=reports,
            timeout_minutes=args.timeout_minutes, log=reports / f"{suite}.log", focus=args.focus,
        )  # fmt: skip
        _say(
            f"[upstream] {target.name}: {suite}: {outcome.count('passed')} passed, "
            f"{outcome.count('failed')} failed, {outcome.count('skipped')} skipped "
            f"in {outcome.seconds:.0f} s (exit {outcome.exit_code})"
        )
        done[suite] = {
            "specs": outcome.specs,
            "seconds": round(outcome.seconds, 1),
            "exit_code": outcome.exit_code,
        }
    return done


def _images(node: RealNode, peer_bin: Path, work: Path) -> dict[str, str]:
    """Every image the runs need, imported into the node's containerd; by target name, the
    image under test."""
    work.mkdir(parents=True, exist_ok=True)
    node.import_image(tools.busybox_archive(work))
    ours, archive = ImageBuilder(report=_say).build()
    node.import_image(archive)
    chosen = {}
    for version in ("v1", "v2"):
        ref, peer_archive = tools.peer_archive(
            work, f"reloader-{version}", peer_bin / f"reloader-{version}"
        )
        node.import_image(peer_archive)
        chosen[f"{version}-peer"] = ref
        chosen[f"{version}-ours"] = ours
    return chosen


def _argo(kubeconfig: Path, out: Path) -> RolloutsController:
    """Argo Rollouts' CRDs installed and its controller running (built from the Go module
    proxy on first use): the suites' `argo` specs and the Rollout rows of the others."""
    built = ArgoBuilder(controller=True, report=_say).ensure()

    async def install() -> None:
        async with Client(config.load_kubeconfig([kubeconfig])) as client:
            await install_crds(client, built.crds)

    asyncio.run(install())
    return RolloutsController(built.binary, kubeconfig, out / "rollouts-controller.log")


def _schedulable(kubectl: Path, kubeconfig: Path) -> None:
    """The suites' pods carry no toleration: the real node, the only node, takes its taint
    off (it keeps its label)."""
    subprocess.run(
        [str(kubectl), "--kubeconfig", str(kubeconfig), "taint", "nodes", NODE_NAME,
         f"{TAINT}-"],
        check=False, capture_output=True,
    )  # fmt: skip


def _target(text: str) -> suites.Target:
    version, _, controller = text.partition("-")
    if version not in ("v1", "v2") or controller not in ("peer", "ours"):
        raise SystemExit(f"--targets: {text!r} is not one of v1-peer, v1-ours, v2-peer, v2-ours")
    return suites.Target(version, controller)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tests.upstream", description=__doc__)
    p.add_argument("--targets", default="v2-peer,v2-ours,v1-peer,v1-ours")
    p.add_argument("--suites", default=",".join(s for s in suites.SUITES if s != "csi"))
    p.add_argument("--label-filter", default=suites.DEFAULT_LABEL_FILTER)
    p.add_argument("--focus", default="", help="only the specs this regex matches (Ginkgo's)")
    p.add_argument("--timeout-minutes", type=int, default=90)
    p.add_argument(
        "--state-dir", default=None, help="a real-node cluster's state (default: a new one)"
    )
    p.add_argument("--out", default=str(ROOT / ".upstream-e2e"))
    p.add_argument("--keep-cluster", action="store_true")
    p.add_argument("--no-argo", action="store_true", help="no Argo Rollouts (its specs skip)")
    return p


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
