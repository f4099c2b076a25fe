"""kube-reloader's own container image, built without a Docker engine: for the real node's
tests, and for users as `make image` (`ImageBuilder.export`: `localhost/kube-reloader:<version>`
in an OCI archive under dist/).

The image the Dockerfile describes (the same Debian release and packages, locks, user,
entrypoint and environment; tests/unit/test_install_image.py compares them), made with
debootstrap from Debian's packages instead of the debian:bookworm-slim base image (no registry
is reachable here):

1. a Debian bookworm root filesystem (`debootstrap --variant=minbase` with python3 and
   python3-venv, from the mirror this machine's apt is configured with), cached by its
   package list;
2. a copy of it where, chrooted, a virtualenv at `/opt/kube-reloader` gets pip and the build
   backend from `requirements/build.txt`, the runtime dependencies from
   `requirements/runtime.txt` (every file checked against its sha256, wheels only), then the
   project's wheel, built from this source tree, with `--no-deps`;
3. apt's lists, docs, man pages and the build backend removed; one layer, the entrypoint
   `/opt/kube-reloader/bin/kube-reloader`, user 65534:65534 (so it runs on a read-only root
   filesystem, as the chart asks), OCI labels naming the title, license and version.

The result is an OCI archive of `REPOSITORY:<digest>`, rebuilt only when the source tree or
the locks change (their digest is the tag).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from kube_reloader.devcluster import images
from kube_reloader.devcluster.gobuild import BuildError, Reporter, _stderr
from kube_reloader.devcluster.versions import cache_root

REPOSITORY = "kube-reloader.local/kube-reloader"
SUITE = "bookworm"
PACKAGES = ("python3", "python3-venv", "ca-certificates")
VENV = "/opt/kube-reloader"
#: where the wheels wait inside the root filesystem while it is built (removed after)
DIST = "/kr-dist"
#: removed from the image: caches and documentation nothing reads at run time
TRIM = (
    "var/cache/apt",
    "var/lib/apt/lists",
    "usr/share/doc",
    "usr/share/man",
    "usr/share/info",
    "usr/share/locale",
    "var/log",
)
SOURCES = Path("/etc/apt/sources.list.d/debian.sources")
#: the image's user (nobody:nogroup, as Stakater's chart runs it) and entrypoint; the
#: Dockerfile says the same (tests/unit/test_install_image.py compares them)
USER = "65534:65534"
ENTRYPOINT = (f"{VENV}/bin/kube-reloader",)
ENV = (
    f"PATH={VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "PYTHONDONTWRITEBYTECODE=1",
    "PYTHONUNBUFFERED=1",
)
#: the hashed locks installed into the image, in this order
LOCKS = ("requirements/build.txt", "requirements/runtime.txt")
#: the build backend, removed once the package is installed (nothing at run time needs it)
BUILD_ONLY = ("setuptools", "wheel", "packaging")
#: every module byte-compiled once, at build time: the image's Python never compiles (its
#: root may be read-only, and PYTHONDONTWRITEBYTECODE keeps it from writing), so without
#: this each start compiled every module it imports (issue 33: about 0.1 CPU-s a start).
#: `unchecked-hash`: the files never change in an image, so nothing is checked at import
COMPILE = ("-m", "compileall", "-q", "--invalidation-mode", "unchecked-hash", f"{VENV}/lib")
#: what `make image` names the archive's image (a name no registry can hand to someone else)
LOCAL_REPOSITORY = "localhost/kube-reloader"


def image_config(version: str) -> images.ImageConfig:
    """The image's configuration: entrypoint, environment, user and its OCI labels."""
    return images.ImageConfig(
        entrypoint=ENTRYPOINT,
        env=ENV,
        user=USER,
        labels={
            "org.opencontainers.image.title": "kube-reloader",
            "org.opencontainers.image.licenses": "Apache-2.0",
            "org.opencontainers.image.version": version,
        },
    )


def project_version(root: Path) -> str:
    """pyproject.toml's `version`: the one version of the package, the chart and the image."""
    with (root / "pyproject.toml").open("rb") as fh:
        return str(tomllib.load(fh)["project"]["version"])


def source_tree() -> Path:
    """The project's source tree (an editable install's): the image is built from it."""
    root = Path(__file__).resolve().parents[3]
    if not (root / "pyproject.toml").is_file() or not (root / "requirements").is_dir():
        raise BuildError(
            "building kube-reloader's image needs the project's source tree (pyproject.toml, "
            f"requirements/); none above {Path(__file__).parent}"
        )
    return root


def tree_digest(root: Path) -> str:
    """What the image depends on: the package's sources and the locks."""
    h = hashlib.sha256()
    files = [root / "pyproject.toml", *(root / lock for lock in LOCKS)]
    files += sorted(
        p for p in (root / "src").rglob("*") if p.is_file() and "__pycache__" not in p.parts
    )
    for path in files:
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def apt_mirror(sources: Path = SOURCES) -> str:
    """The Debian mirror this machine's apt uses (its first `URIs:` for the main archive)."""
    try:
        text = sources.read_text()
    except OSError as exc:
        raise BuildError(f"building the image needs apt's sources ({sources}): {exc}") from exc
    for stanza in text.split("\n\n"):
        fields = dict(
            line.split(":", 1) for line in stanza.splitlines() if ":" in line and line[0] != "#"
        )
        uri = fields.get("URIs", "").split()
        if uri and SUITE in fields.get("Suites", "").split() and "security" not in uri[0]:
            return uri[0]
    raise BuildError(f"no {SUITE} archive in {sources}")


class ImageBuilder:
    def __init__(self, *, root: Path | None = None, report: Reporter = _stderr) -> None:
        self.root = root or cache_root() / "images"
        self.report = report

    def rootfs(self) -> Path:
        key = hashlib.sha256(" ".join((SUITE, *PACKAGES)).encode()).hexdigest()[:12]
        base = self.root / f"rootfs-{SUITE}-{key}"
        if (base / ".complete").exists():
            return base
        if shutil.which("debootstrap") is None:
            raise BuildError(
                "building the image needs debootstrap (apt-get install -y debootstrap)"
            )
        shutil.rmtree(base, ignore_errors=True)
        base.parent.mkdir(parents=True, exist_ok=True)
        self.report(f"[image] debootstrap {SUITE} into {base}")
        include = f"--include={','.join(PACKAGES)}"
        self._run(["debootstrap", "--variant=minbase", include, SUITE, str(base), apt_mirror()])
        (base / ".complete").touch()
        return base

    def build(self) -> tuple[str, Path]:
        """(image reference, OCI archive), built if the source tree changed."""
        src = source_tree()
        tag = tree_digest(src)
        reference = f"{REPOSITORY}:{tag}"
        archive = self.root / f"kube-reloader-{tag}.tar"
        if archive.exists():
            return reference, archive
        base = self.rootfs()
        work = self.root / "work"
        shutil.rmtree(work, ignore_errors=True)
        self.report("[image] copying the root filesystem")
        self._run(["cp", "-a", str(base), str(work)])
        (work / ".complete").unlink(missing_ok=True)
        dist = work / DIST.strip("/")
        self._wheels(src, dist)
        self._install(work, dist)
        for rel in TRIM:
            shutil.rmtree(work / rel, ignore_errors=True)
        self.report("[image] writing the OCI archive")
        layer = images.directory_layer(self.root / f"layer-{tag}.tar", work)
        images.oci_archive(archive, reference, [layer], image_config(project_version(src)))
        layer.unlink()
        shutil.rmtree(work, ignore_errors=True)
        return reference, archive

    def export(self, out_dir: Path) -> tuple[str, Path]:
        """`make image`: the image the tests use (built if the source tree changed), as an OCI
        archive in `out_dir` named `localhost/kube-reloader:<version>`: (reference, archive)."""
        _, built = self.build()
        reference = f"{LOCAL_REPOSITORY}:{project_version(source_tree())}"
        out_dir.mkdir(parents=True, exist_ok=True)
        archive = out_dir / f"kube-reloader-{reference.rpartition(':')[2]}.oci.tar"
        images.renamed(built, archive, reference)
        return reference, archive

    def _wheels(self, src: Path, dist: Path) -> None:
        """The project's wheel, the locks and the wheels they pin, in `dist`."""
        dist.mkdir(parents=True, exist_ok=True)
        self.report("[image] building the project's wheel")
        wheel = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps"]
        self._run([*wheel, "--no-build-isolation", "-w", str(dist), str(src)])
        for lock in LOCKS:
            shutil.copyfile(src / lock, dist / Path(lock).name)
        # downloaded here, with this machine's pip configuration (its index and CA bundle),
        # then installed in the chroot with no network: the image holds no such settings
        self.report("[image] downloading the locked wheels")
        download = [sys.executable, "-m", "pip", "download", "--quiet", "--require-hashes"]
        download += ["--only-binary=:all:", "--no-deps", "-d", str(dist)]
        for lock in LOCKS:
            self._run([*download, "-r", str(dist / Path(lock).name)])

    def _install(self, work: Path, dist: Path) -> None:
        """The virtualenv in the root filesystem `work`, from the wheels in `dist` (`DIST`
        inside it), without the build backend; `dist` removed."""
        pip = [f"{VENV}/bin/pip", "install", "--quiet", "--no-cache-dir", "--no-index"]
        pip += [f"--find-links={DIST}", "--disable-pip-version-check"]
        self.report("[image] installing them in the image")
        self._chroot(work, ["/usr/bin/python3", "-m", "venv", VENV])
        for lock in LOCKS:
            self._chroot(work, [*pip, "--require-hashes", "-r", f"{DIST}/{Path(lock).name}"])
        wheel = next(dist.glob("kube_reloader-*.whl")).name
        self._chroot(work, [*pip, "--no-deps", f"{DIST}/{wheel}"])
        self._chroot(work, [f"{VENV}/bin/pip", "uninstall", "--yes", "--quiet", *BUILD_ONLY])
        self._chroot(work, [f"{VENV}/bin/python", *COMPILE])
        shutil.rmtree(dist)

    def _chroot(self, root: Path, argv: list[str]) -> None:
        self._run(["chroot", str(root), *argv])

    def _run(self, argv: list[str]) -> None:
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-8:]
            command, lines = " ".join(argv[:4]), "\n  ".join(tail)
            raise BuildError(
                f"building the image: `{command} …` failed (exit {done.returncode}):\n  {lines}"
            )
