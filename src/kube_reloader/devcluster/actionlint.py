"""actionlint, the GitHub Actions workflow checker, built from the Go module proxy on first use.

The same mechanism as the control plane's binaries (`gobuild.GoBuilder`: a stamp per version,
a build lock, Go's checksum verification on), into `<cache>/tools/bin/actionlint`, so a fresh
machine gets it from `make workflows` or the test that checks `.github/workflows/`.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from kube_reloader.devcluster.gobuild import GoBuilder, Reporter, _stderr
from kube_reloader.devcluster.versions import cache_root

#: the newest version go get and go mod tidy accepted with Go 1.26 (2026-12)
ACTIONLINT = "1.7.12"
MODULE = "github.com/rhysd/actionlint"


class ActionlintBuilder(GoBuilder):
    """Builds `actionlint` v`ACTIONLINT` into `<cache>/tools/bin` unless it is there."""

    def __init__(
        self,
        *,
        version: str = ACTIONLINT,
        root: Path | None = None,
        report: Reporter = _stderr,
        go: str = "go",
    ) -> None:
        self.version = version
        super().__init__(root or cache_root() / "tools", report=report, go=go)

    @property
    def binary(self) -> Path:
        return self.bin / "actionlint"

    def ensure(self) -> Path:
        """The binary's path, built first if missing (raises `BuildError` when it cannot be)."""
        self.build_missing()
        return self.binary

    def _components(self) -> dict[str, list[Path]]:
        return {"actionlint": [self.binary]}

    def _stamp_text(self, component: str) -> str:
        return f"actionlint v{self.version}\n"

    def _build_actionlint(self) -> None:
        work = self._workdir("actionlint", "kube-reloader.local/actionlintbin")
        run = self._runner("actionlint", work)
        run("resolving modules", [self.go, "get", f"{MODULE}@v{self.version}"])
        self._compile(
            run,
            "actionlint",
            [f"{MODULE}/cmd/actionlint"],
            ["-o", str(self.binary)],
            ldflags=f"-s -w -X {MODULE}.version=v{self.version}",
        )


def check(paths: list[Path], *, builder: ActionlintBuilder | None = None) -> tuple[int, str]:
    """Run actionlint on `paths`: (exit code, its output; empty when nothing is wrong)."""
    binary = (builder or ActionlintBuilder()).ensure()
    done = subprocess.run(
        [str(binary), "-no-color", *map(str, paths)],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode, (done.stdout + done.stderr).strip()
