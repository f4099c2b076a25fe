"""Command line: argv -> the right entry point, with one-line errors and exit codes.

`kube-reloader [flags]` and `kube-reloader run [flags]` run the controller with Reloader's
flags (so Stakater's chart works by swapping the image); `kube-reloader dev-cluster ...`
manages the local control plane; `kube-reloader agent` is the in-place reload sidecar.
Exit codes: 0 success, 1 failure (for the controller, a bad flag too, as Reloader), 2 a
usage error of the other commands.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from kube_reloader import __version__


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "agent":
        # the in-place reload sidecar: standard library only, none of the controller loaded
        from kube_reloader import agent

        return agent.main(args[1:])
    from kube_reloader.cli import run

    if args and args[0] == "dev-cluster":
        # Imported on demand: it needs `cryptography` (the `dev-cluster` extra), which the
        # controller's image does not install, and it would cost the controller ~8 MiB RSS.
        from kube_reloader.cli import devcluster

        return devcluster.main(args[1:])
    if args and args[0] == "run":
        return run.main(args[1:])
    if args and args[0] == "lint":
        from kube_reloader.cli import lint

        return lint.main(args[1:])
    if args and args[0] == "explain":
        from kube_reloader.cli import explain

        return explain.main(args[1:])
    if args and args[0] == "audit":
        from kube_reloader.cli import audit

        return audit.main(args[1:])
    if args and args[0] == "impact":
        from kube_reloader.cli import impact

        return impact.main(args[1:])
    if args and args[0] in ("--version", "version"):
        print(f"kube-reloader {__version__}")
        return 0
    return run.main(args)
