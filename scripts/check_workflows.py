"""`make workflows`: actionlint (built from the Go module proxy on first use) on every workflow
in .github/workflows/."""

from __future__ import annotations

import sys
from pathlib import Path

from kube_reloader.devcluster.actionlint import ACTIONLINT, check
from kube_reloader.devcluster.gobuild import BuildError

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.y*ml"))


def main() -> int:
    if not WORKFLOWS:
        print("make workflows: no workflow in .github/workflows/", file=sys.stderr)
        return 1
    try:
        code, output = check(WORKFLOWS)
    except BuildError as exc:
        print(f"make workflows: {exc}", file=sys.stderr)
        return 1
    if output:
        print(output)
    names = ", ".join(p.name for p in WORKFLOWS)
    verdict = "no problems" if code == 0 else f"problems found (exit {code})"
    print(f"actionlint v{ACTIONLINT} on {names}: {verdict}")
    return code


if __name__ == "__main__":
    sys.exit(main())
