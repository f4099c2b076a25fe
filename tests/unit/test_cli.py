"""The command line's exit codes and messages."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest

from kube_reloader import __version__, cli
from kube_reloader.cli import run as cli_run
from kube_reloader.cli.flags import parse
from kube_reloader.kube import config
from kube_reloader.kube.client import Client
from kube_reloader.runtime.controller import Controller
from kube_reloader.runtime.manager import ManagerSettings


def test_no_command_runs_the_controller_which_needs_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cli.main([]) == 1
    assert "no Kubernetes credentials" in capsys.readouterr().err


def test_an_unknown_flag_exits_one_as_reloader_does(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--no-such-flag=1"]) == 1
    assert capsys.readouterr().err.strip() == "error: unrecognized arguments: --no-such-flag=1"


def test_a_bad_flag_value_fails_with_one_line_naming_the_flag(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["--reload-strategy=rolling"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == "error: --reload-strategy: 'rolling' must be env-vars or annotations"


def test_help_lists_reloaders_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "--auto-reload-all" in out
    assert "--is-Argo-Rollouts" in out
    assert "dev-cluster" in out


def test_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"kube-reloader {__version__}"


def test_kubeconfig_of_a_cluster_that_is_not_running_fails_with_a_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["dev-cluster", "kubeconfig", "--state-dir", str(tmp_path / "none")]) == 1
    assert "dev-cluster up" in capsys.readouterr().err


def test_status_of_a_cluster_that_is_not_running_exits_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["dev-cluster", "status", "--state-dir", str(tmp_path / "none")]) == 1
    assert "not running" in capsys.readouterr().out


def test_down_of_nothing_is_fine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["dev-cluster", "down", "--state-dir", str(tmp_path / "none")]) == 0
    assert "nothing running" in capsys.readouterr().err


def test_unknown_abbreviations_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["dev-cluster", "up", "--node", "2", "--no-build", "--state-dir", str(tmp_path)])
    assert info.value.code == 2


def test_a_corrupt_state_file_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "state.json").write_text("{not json")
    assert cli.main(["dev-cluster", "down", "--state-dir", str(tmp_path)]) == 0  # down still cleans
    assert not tmp_path.exists()


def test_the_controller_starts_without_the_dev_cluster_extra_installed() -> None:
    # The image installs the package without `[dev-cluster]`: `cryptography` is absent there.
    code = (
        "import sys; sys.modules['cryptography'] = None\n"
        "from kube_reloader import cli\n"
        "try:\n"
        "    cli.main(['--help'])\n"
        "except SystemExit as e:\n"
        "    sys.exit(e.code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "--auto-reload-all" in done.stdout


KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


class FakeManager:
    """Stands in for `runtime.manager.Manager`: records what the command line gave it."""

    made: ClassVar[list[FakeManager]] = []
    code = 7

    def __init__(self, settings: ManagerSettings, **factories: Any) -> None:
        self.settings = settings
        self.factories = factories
        self.conn: config.ConnectionConfig | None = None
        self.stopped_by_sigterm = False
        FakeManager.made.append(self)

    async def run(self, conn: config.ConnectionConfig, stop: asyncio.Event) -> int:
        self.conn = conn
        # the SIGTERM the kubelet sends must set `stop` (raise it only once handled)
        if signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None):
            signal.raise_signal(signal.SIGTERM)
            await asyncio.wait_for(stop.wait(), 5)
            self.stopped_by_sigterm = True
        return self.code


@pytest.fixture
def fake_manager(monkeypatch: pytest.MonkeyPatch) -> type[FakeManager]:
    monkeypatch.setattr(cli_run, "Manager", FakeManager)
    FakeManager.made.clear()
    return FakeManager


def test_the_command_line_hands_its_settings_to_the_manager_and_exits_with_its_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_manager: type[FakeManager]
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    for var in ("KUBERNETES_NAMESPACE", "ALERT_ON_RELOAD"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("POD_NAME", "reloader-0")
    monkeypatch.setenv("POD_NAMESPACE", "tools")
    argv = [
        f"--kubeconfig={kubeconfig}", "--enable-ha", "--metrics-addr=127.0.0.1:9999",
        "--enable-pprof", "--hash-algorithm=hmac-sha256", "--namespaces=team-a",
    ]  # fmt: skip
    assert cli.main(argv) == FakeManager.code
    [manager] = fake_manager.made
    s = manager.settings
    assert manager.conn is not None
    assert manager.conn.server == "https://127.0.0.1:6443"
    assert s.options.namespaces == ("team-a",)
    assert (s.metrics_addr, s.pprof_addr) == ("127.0.0.1:9999", "127.0.0.1:6060")
    assert s.ha is not None
    assert (s.ha.identity, s.ha.namespace) == ("reloader-0", "tools")
    assert s.hash_key is not None
    assert s.hash_key.namespace == "tools"
    assert manager.factories == {"new_client": Client, "new_controller": Controller}
    assert manager.stopped_by_sigterm, "SIGTERM stops the manager"


@pytest.mark.parametrize(("extra", "health"), [([], None), (["--compat=v2"], ":8080"),
                                                (["--health-addr=:8181"], ":8181")])  # fmt: skip
def test_manager_settings_carry_every_field_the_manager_runs_with(
    extra: list[str], health: str | None
) -> None:
    settings = parse(
        ["--metrics-addr=:9191", "--enable-ha", *extra], env={"POD_NAME": "p", "POD_NAMESPACE": "n"}
    )
    got = cli_run.manager_settings(settings)
    assert got == ManagerSettings(
        options=settings.options,
        metrics_addr=":9191",
        pprof_addr=None,
        health_addr=health,
        ha=settings.ha,
        hash_key=None,
    )
