"""Command line: argv -> the right entry point, with one-line errors and exit codes.

`kube-reloader [flags]` and `kube-reloader run [flags]` run the controller with Reloader's
flags (so Stakater's chart works by swapping the image); `kube-reloader dev-cluster ...`
manages the local control plane; `kube-reloader agent` is the in-place reload sidecar;
`COMMANDS` names the others. A first argument that is neither a flag nor a command is a
usage error, answered with the nearest command's name.
Exit codes: 0 success, 1 failure (for the controller, a bad flag too, as Reloader), 2 a
usage error of the other commands.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from kube_reloader.cli.flaghelp import COMMANDS

__all__ = ["COMMANDS", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "agent":
        # the in-place reload sidecar: standard library only, none of the controller loaded
        from kube_reloader import agent

        return agent.main(args[1:])
    if args and args[0] in ("--version", "version"):
        from kube_reloader import __version__  # read on use (kube_reloader.__getattr__)

        print(f"kube-reloader {__version__}")
        return 0
    if args and args[0] == "help":
        return _help(args[1:])
    if args and args[0] and not args[0].startswith("-") and args[0] not in COMMANDS:
        return _unknown(args[0])
    command, rest = (args[0], args[1:]) if args and args[0] in COMMANDS else ("run", args)
    return _dispatch(command, rest)


def _dispatch(command: str, args: list[str]) -> int:
    if command == "dev-cluster":
        # Imported on demand, as every command is: `cryptography` (which the dev cluster's PKI
        # needs) adds ~9 MiB RSS that the controller, alone, never needs.
        from kube_reloader.cli import devcluster

        return devcluster.main(args)
    if command == "lint":
        from kube_reloader.cli import lint

        return lint.main(args)
    if command == "explain":
        from kube_reloader.cli import explain

        return explain.main(args)
    if command == "audit":
        from kube_reloader.cli import audit

        return audit.main(args)
    if command == "impact":
        from kube_reloader.cli import impact

        return impact.main(args)
    from kube_reloader.runtime import memory

    with memory.loading_modules():
        from kube_reloader.cli import run
    return run.main(args)


def _unknown(word: str) -> int:
    """A bare word before any flag was never valid for the controller: most likely a typo."""
    import difflib  # only for this message: not on every start

    near = difflib.get_close_matches(word, COMMANDS, n=1)
    hint = f"; did you mean {near[0]!r}?" if near else f"; commands: {', '.join(COMMANDS)}"
    print(f"error: unknown command {word!r}{hint} (kube-reloader --help)", file=sys.stderr)
    return 2


def _help(args: list[str]) -> int:
    """`kube-reloader help [COMMAND]`: the command's --help (the controller's by default)."""
    if args and args[0] not in COMMANDS:
        return _unknown(args[0])
    command = args[0] if args else "run"
    if command in ("help", "version"):
        command = "run"
    if command == "agent":
        from kube_reloader import agent

        return agent.main(["--help"])
    return _dispatch(command, ["--help"])
