"""The command line's exit codes and messages."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kube_reloader import __version__, cli


def test_no_command_runs_the_controller_which_needs_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cli.main([]) == 1
    assert "no Kubernetes credentials" in capsys.readouterr().err


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
