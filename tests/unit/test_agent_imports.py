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


#: what the controller's start never imports unless a flag asks for it (issue 33): a web
#: framework (aiohttp: the admission webhook and alert webhooks only), the admission webhook's
#: server and certificates, and lint's YAML editor
NOT_AT_START = (
    "aiohttp",
    "cryptography",
    "ruamel",
    "kube_reloader.runtime.admitter",
    "kube_reloader.runtime.servingcerts",
    "kube_reloader.edges.admitserving",
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
