"""The in-place agent runs as a sidecar in every pod that uses it: its start loads only what it
needs (kube_reloader.__version__ is read on use, not at import)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("importlib.metadata", "aiohttp", "msgspec", "prometheus_client", "yaml", "ruamel")


def modules_loaded_by(code: str) -> set[str]:
    probe = f"{code}\nimport sys\nprint('\\n'.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_starting_the_agent_through_the_cli_loads_no_heavy_module() -> None:
    loaded = modules_loaded_by("from kube_reloader import cli\nfrom kube_reloader import agent")
    assert "kube_reloader.agent" in loaded
    heavy = sorted(m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY))
    assert heavy == []


def test_the_version_is_still_read_from_the_package_metadata_on_use() -> None:
    import kube_reloader

    out = subprocess.run(
        [sys.executable, "-m", "kube_reloader", "--version"], capture_output=True, text=True
    )
    assert out.returncode == 0
    assert out.stdout.strip() == f"kube-reloader {kube_reloader.__version__}"
    assert kube_reloader.__version__ != "0+unknown"


def test_the_version_read_without_importlib_metadata_is_the_one_it_would_give() -> None:
    from importlib import metadata

    import kube_reloader

    assert kube_reloader.installed_version() == metadata.version("kube-reloader")


def site(tmp_path: Path, entries: dict[str, str]) -> list[str]:
    """Two path entries: `tmp_path` holding `entries` (file name -> text), then another
    holding an install of version 0.9, never reached past what is unsure."""
    for name, text in entries.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(text.encode())
    later = tmp_path.parent / f"{tmp_path.name}-site" / "kube_reloader-0.9.dist-info"
    later.mkdir(parents=True)
    (later / "METADATA").write_text("Version: 0.9\n")
    return [str(tmp_path), str(later.parent)]


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        (
            {"kube_reloader-1.2.3.dist-info/METADATA": "Name: kube-reloader\nVersion: 1.2.3\n"},
            "1.2.3",
        ),
        (
            {
                "kube-reloader-compare-x1/log": "",
                "kube_reloader-run.log": "",
                "kube_reloader-1.2.3.dist-info/METADATA": "Version: 1.2.3\n",
            },
            "1.2.3",
        ),
        ({"kube_reloader-1.2.3.dist-info/METADATA": "Name: x\n\nVersion: 9\n"}, None),
        ({"kube_reloader-1.egg-info/PKG-INFO": "Version: 1\n"}, None),
        (
            {
                "kube_reloader-1.dist-info/METADATA": "Version: 1\n",
                "kube_reloader-2.dist-info/METADATA": "Version: 2\n",
            },
            None,
        ),
        ({"kube_reloader-1.dist-info/RECORD": ""}, None),
        ({"kube_reloader.egg-info/PKG-INFO": "Version: 9.9\n"}, None),
        ({"Kube.Reloader-2.0.dist-info/METADATA": "Version: 2.0\n"}, None),
        (
            {
                "kube_reloader/__init__.py": "",
                "kube_reloader_extras-1.dist-info/METADATA": "Version: 1\n",
            },
            None,
        ),
    ],
    ids=[
        "one dist-info",
        "a directory named like the project beside it",
        "no version among its headers",
        "an egg",
        "two installs",
        "no METADATA",
        "a source tree's egg-info",
        "a name spelt otherwise",
        "a look-alike",
    ],
)
def test_the_fast_version_read_defers_to_importlib_metadata_when_unsure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entries: dict[str, str], expected: str | None
) -> None:
    import kube_reloader

    monkeypatch.setattr(sys, "path", [str(tmp_path / "missing"), *site(tmp_path, entries)])
    assert kube_reloader.installed_version() == expected


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        ({"kube_reloader-1.dist-info/METADATA": "version: 3.0\nVersion: 4\n"}, "3.0"),
        ({"kube_reloader-1.dist-info/METADATA": "Version:   1.0 \r\n\nVersion: 2\n"}, "1.0 "),
        ({"kube_reloader-1.dist-info/METADATA": "Version: 1.0\n  folded\n"}, None),
        ({"kube_reloader-1.dist-info/METADATA": "Name: kube-reloader\n\tx\nVersion: 5\n"}, "5"),
        ({"Kube__Reloader-9.9.dist-info/METADATA": "Version: 9.9\n"}, None),
        ({"kube--reloader-9.9.dist-info/METADATA": "Version: 9.9\n"}, None),
    ],
    ids=[
        "a header name in another case",
        "blanks around the value",
        "a folded value",
        "a folded header before it",
        "a run of underscores",
        "a run of dashes",
    ],
)
def test_the_fast_version_read_gives_what_importlib_metadata_gives_or_defers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entries: dict[str, str], expected: str | None
) -> None:
    from importlib import metadata

    import kube_reloader

    path = site(tmp_path, entries)
    monkeypatch.setattr(sys, "path", path)
    fast = kube_reloader.installed_version()
    assert fast == expected
    if fast is not None:
        [first, *_] = metadata.distributions(name="kube-reloader", path=path)
        assert first.version == fast


@pytest.mark.parametrize("first", ["archive.zip", "kube_reloader-0.1-py3.11.egg"])
def test_a_zip_or_an_egg_on_the_path_before_the_dist_info_defers_to_importlib_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first: str
) -> None:
    import kube_reloader

    (tmp_path / first).write_bytes(b"PK")  # a file: listdir says it is not a directory
    later = tmp_path / "site"
    (later / "kube_reloader-1.0.dist-info").mkdir(parents=True)
    (later / "kube_reloader-1.0.dist-info" / "METADATA").write_text("Version: 1.0\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path / first), str(later)])
    assert kube_reloader.installed_version() is None
    monkeypatch.setattr(sys, "path", [str(later)])
    assert kube_reloader.installed_version() == "1.0"


#: what the controller's start never imports unless a flag asks for it (issue 33): a web
#: framework (aiohttp: the admission webhook and alert webhooks only), the admission webhook's
#: server and certificates, lint's YAML editor, the pprof listener's
#: tracemalloc, time zones (a window outside UTC), a typo's suggestions, importlib.metadata
#: (the version is read from the dist-info directly), and prometheus_client with the HTTP
#: servers and mail parsing its import pulls in (`promseries` and `promtext` replace it), and
#: the staleness audit, loaded when its first round is due (`runtime.auditroom`)
NOT_AT_START = (
    "importlib.metadata",
    "prometheus_client",
    "http.server",
    "http.client",
    "wsgiref",
    "urllib.request",
    "email",
    "difflib",
    "tracemalloc",
    "zoneinfo",
    "aiohttp",
    "cryptography",
    "ruamel",
    "kube_reloader.runtime.admitter",
    "kube_reloader.runtime.servingcerts",
    "kube_reloader.edges.admitserving",
    "kube_reloader.runtime.auditing",
    "kube_reloader.core.staleness",
    "kube_reloader.core.x509",
    "kube_reloader.kube.podstarts",
)


def test_the_controllers_start_loads_no_web_framework_and_no_admission_webhook() -> None:
    loaded = modules_loaded_by(
        "from kube_reloader.cli import run\nfrom kube_reloader.runtime import controller, manager"
    )
    assert "kube_reloader.kube.wire" in loaded, "the probe imported the controller"
    assert "kube_reloader.edges.plainhttp" in loaded
    unwanted = sorted(
        m for m in loaded if any(m == h or m.startswith(h + ".") for h in NOT_AT_START)
    )
    assert unwanted == []


def test_a_kubeconfig_in_json_is_read_without_loading_a_yaml_parser(tmp_path: Path) -> None:
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "x",
           "clusters": [{"name": "c", "cluster": {"server": "https://a:6443"}}],
           "users": [{"name": "u", "user": {"token": "t"}}],
           "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}]}  # fmt: skip
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(doc))
    code = (
        "from kube_reloader.kube import config\n"
        f"assert config.load_kubeconfig([__import__('pathlib').Path({str(path)!r})], env={{}})"
        ".server == 'https://a:6443'"
    )
    loaded = modules_loaded_by(code)
    assert "kube_reloader.kube.kubeconfig" in loaded
    assert sorted(m for m in loaded if m == "yaml" or m.startswith("yaml.")) == []
