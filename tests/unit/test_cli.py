"""The command line's exit codes and messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from kube_reloader import __version__, cli


def test_no_command_prints_help_and_exits_with_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main([]) == 2
    assert "dev-cluster" in capsys.readouterr().err


def test_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["--version"])
    assert info.value.code == 0
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
