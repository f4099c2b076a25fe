"""The hashed locks in requirements/ agree with pyproject.toml, and the Makefile and the
Dockerfile install only from them: a dependency added, dropped or re-ranged in pyproject.toml
without `make lock` fails here instead of drifting silently."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
LOCKS = ROOT / "requirements"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = canonicalize_name(PYPROJECT["project"]["name"])


@dataclass(frozen=True)
class Pin:
    name: NormalizedName
    version: Version
    marker: str
    hashes: tuple[str, ...]


def entries(text: str) -> list[str]:
    """One string per requirement: continuation lines joined, comments dropped."""
    out: list[str] = []
    current = ""
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if not line:
            if current:
                out.append(current)
                current = ""
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        out.append(current + line)
        current = ""
    if current:
        out.append(current)
    return [e.strip() for e in out if e.strip()]


PIN = re.compile(
    r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s;]+)"
    r"(?:\s*;\s*(?P<marker>[^-][^\n]*?))?\s+(?P<hashes>(?:--hash=sha256:[0-9a-f]{64}\s*)+)$"
)


def pins(lock: str) -> list[Pin]:
    out = []
    for entry in entries((LOCKS / lock).read_text()):
        m = PIN.match(entry)
        assert m, f"requirements/{lock}: not an exact pin with sha256 hashes: {entry[:120]!r}"
        out.append(
            Pin(
                name=canonicalize_name(m["name"]),
                version=Version(m["version"]),
                marker=(m["marker"] or "").strip(),
                hashes=tuple(re.findall(r"sha256:([0-9a-f]{64})", m["hashes"])),
            )
        )
    return out


def by_name(lock: str) -> dict[NormalizedName, list[Pin]]:
    out: dict[NormalizedName, list[Pin]] = {}
    for p in pins(lock):
        out.setdefault(p.name, []).append(p)
    return out


def requirements_of(*extras: str) -> list[Requirement]:
    """project.dependencies plus the extras, with self-references (`pkg[x]`) expanded."""
    reqs = [Requirement(r) for r in PYPROJECT["project"]["dependencies"]]
    todo, seen = list(extras), set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for text in PYPROJECT["project"]["optional-dependencies"][extra]:
            req = Requirement(text)
            if canonicalize_name(req.name) == PROJECT:
                todo.extend(req.extras)
            else:
                reqs.append(req)
    return reqs


LOCKED_EXTRAS = {
    "runtime.txt": (),
    "dev.txt": ("test", "lint", "docs"),
    "bench.txt": ("test", "lint", "docs", "bench"),
}


@pytest.mark.parametrize("lock", ["build.txt", *LOCKED_EXTRAS])
def test_every_line_of_a_lock_is_an_exact_pin_with_hashes(lock: str) -> None:
    locked = pins(lock)
    assert locked, f"requirements/{lock} pins nothing"
    for p in locked:
        assert p.hashes, f"requirements/{lock}: {p.name} has no hash"
    text = (LOCKS / lock).read_text()
    assert "make lock" in text.splitlines()[1], "the header names the regeneration command"
    assert not re.search(r"^\s*(-e|--editable|-i|--index-url|--extra-index-url|-f|--find-links)\b",
                         text, re.MULTILINE), f"requirements/{lock} must not add sources"  # fmt: skip


@pytest.mark.parametrize("lock", list(LOCKED_EXTRAS))
def test_each_lock_covers_every_pyproject_dependency_with_a_version_it_allows(lock: str) -> None:
    locked = by_name(lock)
    for req in requirements_of(*LOCKED_EXTRAS[lock]):
        name = canonicalize_name(req.name)
        assert name in locked, (
            f"{req} (pyproject.toml) is missing from requirements/{lock}: run `make lock`"
        )
        for p in locked[name]:
            assert req.specifier.contains(p.version, prereleases=True), (
                f"requirements/{lock} pins {name}=={p.version}, outside pyproject.toml's {req}: "
                "run `make lock`"
            )


def test_the_runtime_lock_has_google_re2() -> None:
    assert "google-re2" in by_name("runtime.txt")


def test_the_build_lock_pins_pip_and_the_build_backend() -> None:
    locked = by_name("build.txt")
    assert "pip" in locked
    for text in PYPROJECT["build-system"]["requires"]:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        assert name in locked, (
            f"build-system requirement {req} is missing from requirements/build.txt"
        )
        assert all(req.specifier.contains(p.version) for p in locked[name])


def test_the_locks_agree_on_every_package_they_share() -> None:
    """dev.txt is resolved under runtime.txt and build.txt, bench.txt under dev.txt: a shared
    package has one version everywhere, and each bigger lock contains the smaller one."""

    def versions(lock: str) -> dict[NormalizedName, set[Version]]:
        # markers may differ (a package needed on more platforms in a bigger lock), versions not
        return {name: {p.version for p in ps} for name, ps in by_name(lock).items()}

    runtime, build, dev, bench = (
        versions(f) for f in ("runtime.txt", "build.txt", "dev.txt", "bench.txt")
    )
    for small, big, names in (
        (runtime, dev, "runtime.txt in dev.txt"),
        (dev, bench, "dev.txt in bench.txt"),
    ):
        for name, v in small.items():
            assert big.get(name) == v, f"{name}: {names} differ ({v} vs {big.get(name)})"
    for name, v in build.items():
        if name in dev:
            assert dev[name] == v, f"{name}: build.txt and dev.txt disagree"


def _pip_installs(path: Path) -> list[str]:
    """Every `pip install` command in a Makefile or Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", path.read_text())
    return re.findall(r"pip install[^\n&;]*", text)


@pytest.mark.parametrize("name", ["Makefile", "Dockerfile"])
def test_the_makefile_and_the_dockerfile_install_only_what_the_locks_pin(name: str) -> None:
    installs = _pip_installs(ROOT / name)
    assert installs
    for cmd in installs:
        assert "--upgrade" not in cmd, f"{name}: unpinned upgrade in {cmd!r}"
        if re.search(r"\buv==\S+$", cmd.strip()):
            continue  # `make lock`'s throwaway resolver, pinned by version
        if "--no-deps" in cmd:
            assert re.search(r"--no-deps --no-build-isolation (-e )?\.$", cmd.strip()), cmd
            continue
        assert "--require-hashes" in cmd, f"{name}: {cmd!r} does not check hashes"
        assert re.search(r"-r requirements/\w+\.txt", cmd), f"{name}: {cmd!r} is not from a lock"
    joined = "\n".join(installs)
    wanted = ["requirements/build.txt"]
    wanted.append("requirements/dev.txt" if name == "Makefile" else "requirements/runtime.txt")
    for lock in wanted:
        assert lock in joined, f"{name} never installs {lock}"
