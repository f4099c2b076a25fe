"""The in-place agent runs as a sidecar in every pod that uses it: its start loads only what it
needs (kube_reloader.__version__ is read on use, not at import)."""

from __future__ import annotations

import subprocess
import sys

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
