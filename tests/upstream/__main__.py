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
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

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
    out = Path(args.out).resolve()
    shutil.rmtree(out / "reports", ignore_errors=True)  # an earlier run's are not this one's
    for old in ("results.json", "summary.md"):
        (out / old).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    targets = [_target(t) for t in args.targets.split(",")]
    chosen = [_suite(s) for s in args.suites.split(",") if s]
    state_dir = Path(args.state_dir or tempfile.mkdtemp(prefix="kr-upstream-")).resolve()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cluster = DevCluster(state_dir, report=_say)
    cluster.up(nodes=0, build=True, real_node=True, timeout=600)
    try:
        results = _run_all(args, cluster, targets, chosen, out)
    finally:
        if not args.keep_cluster:
            cluster.down()
    (out / "summary.md").write_text(report.summary(results))
    print(report.summary(results))
    missing = report.incomplete(results)
    if missing:
        _say(f"[upstream] no report from {', '.join(missing)}: see their logs under {out}")
    lost = [r for v in ("v1", "v2") if f"{v}-peer" in results and f"{v}-ours" in results
            for r in report.lost(results[f"{v}-peer"], results[f"{v}-ours"])]  # fmt: skip
    return 1 if missing or lost else 0


def _run_all(
    args: argparse.Namespace,
    cluster: DevCluster,
    targets: list[suites.Target],
    chosen: list[str],
    out: Path,
) -> report.Results:
    kubectl = tools.KubectlBuilder(report=_say).ensure() / "kubectl"
    builder = Builder(extra=tuple(PEERS), report=_say)
    binaries = builder.ensure()
    _schedulable(kubectl, cluster.kubeconfig)
    node = RealNode(cluster.state_dir, NodeBuilder(report=_say).ensure().binaries)
    images = _images(node, binaries.bin, out / "images")
    results: report.Results = {}
    with contextlib.ExitStack() as stack:
        if not args.no_argo:
            stack.enter_context(_argo(cluster.kubeconfig, out))
        for target in targets:
            _no_controller_left(kubectl, cluster.kubeconfig)
            results[target.name] = _run_target(
                target, args, cluster.kubeconfig, images[target.name],
                [kubectl.parent, binaries.bin], out, chosen, builder,
            )  # fmt: skip
            (out / "results.json").write_text(json.dumps(results, indent=1, sort_keys=True))
    return results


def _run_target(
    target: suites.Target,
    args: argparse.Namespace,
    kubeconfig: Path,
    image: str,
    tools_dirs: list[Path],
    out: Path,
    chosen: list[str],
    builder: Builder,
) -> dict[str, dict[str, Any]]:
    peer = f"reloader-{target.version}"
    tree = suites.prepare_tree(source_tree(peer), out / "trees" / target.name, target, OUR_CHART)
    env = suites.go_env(kubeconfig, image, tools_dirs)
    suites.pin_served_modules(tree, builder)
    reports = out / "reports" / target.name
    reports.mkdir(parents=True, exist_ok=True)
    done: dict[str, dict[str, Any]] = {}
    for suite in chosen:
        _say(f"[upstream] {target.name}: {suite} ...")
        outcome = suites.run_suite(
            tree, suite, env=env, label_filter=args.label_filter, report_dir=reports,
            timeout_minutes=args.timeout_minutes, log=reports / f"{suite}.log", focus=args.focus,
        )  # fmt: skip
        _say(
            f"[upstream] {target.name}: {suite}: {outcome.count('passed')} passed, "
            f"{outcome.count(*suites.FAILED_STATES)} failed, {outcome.count('skipped')} skipped "
            f"in {outcome.seconds:.0f} s (exit {outcome.exit_code})"
        )
        done[suite] = outcome.result()
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
    off (it keeps its label); already off on a reused cluster."""
    argv = [str(kubectl), "--kubeconfig", str(kubeconfig), "taint", "nodes", NODE_NAME, f"{TAINT}-"]
    done = subprocess.run(argv, check=False, capture_output=True, text=True)
    if done.returncode != 0 and "not found" not in done.stderr:
        raise SystemExit(f"[upstream] cannot untaint {NODE_NAME}: {done.stderr.strip()}")


def _no_controller_left(kubectl: Path, kubeconfig: Path) -> None:
    """Refuse to start a run while a Reloader of an earlier one (an interrupted run on a
    reused cluster) still runs: it would do the reloads the run under test is judged on."""
    template = '{range .items[*]}{.metadata.namespace}/{.metadata.name} {.spec.template.spec.containers[*].image}{"\\n"}{end}'
    argv = [str(kubectl), "--kubeconfig", str(kubeconfig), "get", "deployments", "-A",
            "-o", f"jsonpath={template}"]  # fmt: skip
    listed = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    left = [line.split()[0] for line in listed.splitlines() if "kube-reloader.local/" in line]
    if left:
        raise SystemExit(f"[upstream] a controller of an earlier run still runs: {', '.join(left)}")


def _suite(name: str) -> str:
    if name not in suites.SUITES:
        raise SystemExit(f"--suites: {name!r} is not one of {', '.join(suites.SUITES)}")
    return name


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
        "--state-dir",
        default=None,
        help="a real-node cluster's state directory, started if needed (default: a new "
        "one); stopped at the end unless --keep-cluster",
    )
    p.add_argument("--out", default=str(ROOT / ".upstream-e2e"))
    p.add_argument("--keep-cluster", action="store_true")
    p.add_argument(
        "--no-argo",
        action="store_true",
        help="no Argo Rollouts controller (on a fresh cluster, no CRDs either: its specs skip)",
    )
    return p


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
