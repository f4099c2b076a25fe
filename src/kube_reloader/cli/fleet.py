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


def add(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-concurrent-rollouts", default="0", metavar="N",
                        help="rollouts in flight cluster-wide (0: no cap)")  # fmt: skip
    parser.add_argument("--halt-after-failures", default="0", metavar="N",
                        help="failed rollouts with one content that halt it (0: off)")  # fmt: skip
    parser.add_argument("--freeze", default="false", metavar="BOOL",
                        help="hold every reload until the flag is removed")  # fmt: skip
    parser.add_argument("--namespace-policies", default="true", metavar="BOOL",
                        help="read freeze and reload-window annotations of namespaces")  # fmt: skip


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
