"""The official SARIF 2.1.0 JSON schema, for validating `lint --format sarif` in tests.

It is not committed: it ships inside the npm package @microsoft/jest-sarif, which this helper
fetches once with `npm pack` into the project's cache (like the control-plane binaries)."""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from kube_reloader.devcluster.versions import cache_root

PACKAGE = "@microsoft/jest-sarif@1.0.0-beta.0"
MEMBER = "package/lib/schemas/sarif-2.1.0-rtm.5.json"


def schema() -> dict[str, Any]:
    target = cache_root() / "sarif" / "sarif-2.1.0-rtm.5.json"
    if not target.exists():
        npm = shutil.which("npm")
        if npm is None:
            raise RuntimeError(
                "npm is needed once to fetch the SARIF schema (Node.js is on the machine image)"
            )
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(
                [npm, "pack", PACKAGE, "--silent"],
                cwd=tmp,
                check=True,
                capture_output=True,
                timeout=300,
            )
            tgz = next(Path(tmp).glob("*.tgz"))
            with tarfile.open(tgz) as tar:
                member = tar.extractfile(MEMBER)
                assert member is not None
                data = member.read()
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return json.loads(target.read_text())  # type: ignore[no-any-return]
