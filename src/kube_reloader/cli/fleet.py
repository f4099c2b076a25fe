"""The fleet-safety flags (ours): `--max-concurrent-rollouts`, `--halt-after-failures`,
`--freeze`, `--namespace-policies`; parsed into `Options` fields."""

from __future__ import annotations

import argparse
from typing import Any

#: bare boolean flags of this group (pflag: `--freeze` means `--freeze=true`)
BOOL_FLAGS = ("freeze", "namespace-policies")
MAX_COUNT = 100_000


class FleetFlagError(ValueError):
    pass


def add(parser: Any) -> None:
    """The group's flags, on a parser or an argument group."""
    flags = (
        (
            ("max-concurrent-rollouts", "0", "N"),
            "rollouts in flight at once, cluster-wide; more wait their turn (0: no cap)",
        ),
        (
            ("halt-after-failures", "0", "N"),
            "after this many failed rollouts with one content, halt that content's reloads "
            "(0: off)",
        ),
        (("freeze", "false", "BOOL"), "hold every reload until the flag is removed"),
        (
            ("namespace-policies", "true", "BOOL"),
            "honour the freeze and reload-window annotations of namespaces",
        ),
    )
    for (flag, default, metavar), text in flags:
        parser.add_argument(f"--{flag}", default=default, metavar=metavar, help=text)


def _count(flag: str, raw: str) -> int:
    text = raw.strip()
    if not text.isdigit() or int(text) > MAX_COUNT:
        raise FleetFlagError(f"--{flag}: {raw!r} must be a whole number from 0 to {MAX_COUNT}")
    return int(text)


def _bool(flag: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("1", "t", "true"):
        return True
    if value in ("0", "f", "false"):
        return False
    raise FleetFlagError(f"--{flag}: {raw!r} must be true or false")


def options(ns: argparse.Namespace) -> dict[str, Any]:
    """The `Options` fields these flags set."""
    return {
        "max_concurrent_rollouts": _count("max-concurrent-rollouts", ns.max_concurrent_rollouts),
        "halt_after_failures": _count("halt-after-failures", ns.halt_after_failures),
        "freeze": _bool("freeze", ns.freeze),
        "namespace_policies": _bool("namespace-policies", ns.namespace_policies),
    }
