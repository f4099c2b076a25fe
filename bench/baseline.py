"""Before/after in one run: kube-reloader from another git ref, next to the current tree.

The ref's `src/` is exported with `git archive` into a temporary directory and the controller
process runs from it with the same interpreter and virtualenv (`PYTHONPATH=<tmp>/src` comes
before the editable install on `sys.path`), like `KUBE_RELOADER_UNDER_TEST_SRC` in
tests/adversarial/tenant.py. Only the controller under test changes: the harness itself (its
client, hashing, analysis) is the current tree's for every column.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

CURRENT = "kube-reloader"
#: the peers, as `devcluster.peers` builds them from `../shared/peers/`
RELOADER_V1 = "reloader-v1"
RELOADER_V2 = "reloader-v2"
PEER_NAMES = (RELOADER_V1, RELOADER_V2)
REPO = Path(__file__).resolve().parent.parent


def is_kube_reloader(name: str) -> bool:
    """The current tree's kube-reloader or a baseline's (`kube-reloader@<ref>`)."""
    return name == CURRENT or name.startswith(CURRENT + "@")


def file_safe(name: str) -> str:
    """A controller name as part of a file name (a ref may contain '/')."""
    return "".join(c if c.isalnum() or c in "._@-" else "_" for c in name)


@dataclass(frozen=True)
class Baseline:
    ref: str  # as given on the command line
    commit: str  # full hash
    subject: str  # "<short hash> <subject>"
    root: Path  # temporary directory holding the exported src/

    @property
    def name(self) -> str:
        return f"{CURRENT}@{self.ref}"

    @property
    def src(self) -> Path:
        return self.root / "src"

    def env(self, env: dict[str, str]) -> dict[str, str]:
        """The controller's environment with the baseline's source first on the path."""
        old = env.get("PYTHONPATH")
        return {**env, "PYTHONPATH": f"{self.src}{os.pathsep}{old}" if old else str(self.src)}

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def _short(line: str, width: int = 90) -> str:
    """A commit's "<hash> <subject>" for a report line (some subjects are paragraphs)."""
    return line if len(line) <= width else line[: width - 1].rstrip() + "…"


def _git(*args: str, repo: Path = REPO) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def export(ref: str, repo: Path = REPO) -> Baseline:
    """Export `ref`'s src/ and check that the interpreter imports kube_reloader from there."""
    try:
        commit = _git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", repo=repo)
    except subprocess.CalledProcessError as e:
        raise SystemExit(f"--baseline: {ref!r} is not a commit in {repo}") from e
    subject = _short(_git("log", "-1", "--format=%h %s", commit, repo=repo))
    root = Path(tempfile.mkdtemp(prefix="kube-reloader-baseline-"))
    base = Baseline(ref, commit, subject, root)
    try:
        archive = subprocess.Popen(
            ["git", "-C", str(repo), "archive", commit, "src"], stdout=subprocess.PIPE
        )
        subprocess.run(["tar", "-x", "-C", str(root)], stdin=archive.stdout, check=True)
        assert archive.stdout is not None
        archive.stdout.close()
        if archive.wait() != 0:
            raise SystemExit(f"--baseline: git archive {commit} src failed")
        byte_compile(base.src)
        probe = subprocess.run(
            [sys.executable, "-c", "import kube_reloader; print(kube_reloader.__file__)"],
            env=base.env({**os.environ}),
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        if not Path(probe).resolve().is_relative_to(base.src.resolve()):
            raise SystemExit(f"--baseline: kube_reloader imports from {probe}, not {base.src}")
    except BaseException:
        base.remove()
        raise
    return base


def byte_compile(src: Path) -> None:
    """Compile every module under `src` once, as the image is (ownimage.COMPILE): a
    kube-reloader under test never pays for compiling its sources at start, even where
    PYTHONDONTWRITEBYTECODE is set."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(src)], check=True, stdout=subprocess.DEVNULL
    )


def current_tree(repo: Path = REPO) -> str:
    """What the current column runs: HEAD, and whether src/ has uncommitted changes."""
    try:
        head = _short(_git("log", "-1", "--format=%h %s", repo=repo))
        dirty = _git("status", "--porcelain", "--", "src", repo=repo)
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return f"{head}{' + uncommitted changes in src/' if dirty else ''}"
