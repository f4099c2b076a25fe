"""The Argo Rollouts build and the environment every Go build runs in (no Go needed)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from kube_reloader.devcluster import argo
from kube_reloader.devcluster.building import Builder
from kube_reloader.devcluster.gobuild import BuildError, Run


def test_no_go_build_inherits_a_switch_that_turns_checksum_verification_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GONOSUMDB", "*")
    monkeypatch.setenv("GOPRIVATE", "github.com")
    monkeypatch.setenv("GOINSECURE", "*")
    monkeypatch.setenv("GOSUMDB", "off")
    for builder in (Builder(root=tmp_path), argo.ArgoBuilder(root=tmp_path)):
        env = builder._env()
        assert not {"GONOSUMDB", "GOPRIVATE", "GOINSECURE"} & env.keys()
        assert "GOSUMDB" not in env
        assert env["GOFLAGS"] == "-mod=mod"


def test_only_the_reloader_download_names_a_module_exempt_from_the_checksum_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, dict[str, str] | None]] = []

    def module_source(
        self: Builder, component: str, module: str, *, env: dict[str, str] | None = None
    ) -> tuple[Path, dict[str, Any]]:
        seen.append((module, env))
        raise BuildError("stop here")

    monkeypatch.setattr(Builder, "_module_source", module_source)
    with pytest.raises(BuildError, match="stop here"):
        Builder(root=tmp_path)._build_reloader()
    assert seen[0][1] == {"GONOSUMDB": "github.com/stakater/Reloader"}


def test_the_reloader_build_refuses_a_download_whose_checksums_differ_from_the_pinned_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def module_source(
        self: Builder, component: str, module: str, *, env: dict[str, str] | None = None
    ) -> tuple[Path, dict[str, Any]]:
        return tmp_path, {"Sum": "h1:tampered=", "GoModSum": "h1:tampered="}

    monkeypatch.setattr(Builder, "_module_source", module_source)
    with pytest.raises(BuildError, match="has checksums"):
        Builder(root=tmp_path)._build_reloader()


def test_the_crds_alone_are_one_component_and_the_controller_another(tmp_path: Path) -> None:
    assert argo.ArgoBuilder(root=tmp_path, controller=False).missing() == ["argo-crds"]
    both = argo.ArgoBuilder(root=tmp_path)
    assert both.missing() == ["argo-crds", "argo-rollouts"]
    both.bin.mkdir(parents=True)
    both.binary.write_text("")
    (both.bin / ".argo-rollouts.stamp").write_text(both._stamp_text("argo-rollouts"))
    assert both.missing() == ["argo-crds"]


def _fake_source(tmp_path: Path, controller_go: str) -> Path:
    (tmp_path / "src" / "controller").mkdir(parents=True)
    (tmp_path / "src" / "controller" / "controller.go").write_text(controller_go)
    return tmp_path / "src"


def test_the_controller_is_compiled_with_its_servers_bound_to_loopback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = _fake_source(tmp_path, f"const (\n\t{argo.LISTEN_ANY}\n)\n")
    compiled: list[Sequence[str]] = []
    builder = argo.ArgoBuilder(root=tmp_path)
    builder.logs.mkdir(parents=True)
    monkeypatch.setattr(builder, "_module_source", lambda *a, **k: (src, {}))

    def compile_(run: Run, component: str, packages: Sequence[str], *a: Any, **k: Any) -> None:
        compiled.append(packages)

    monkeypatch.setattr(builder, "_compile", compile_)
    builder._build_argo_rollouts()
    text = (src / "controller" / "controller.go").read_text()
    assert argo.LISTEN_ANY not in text
    assert '"127.0.0.1:%d"' in text
    assert compiled == [["./cmd/rollouts-controller"]]


def test_the_controller_build_stops_when_upstream_no_longer_declares_the_listen_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = _fake_source(tmp_path, 'const listenAddr = ":%d"\n')
    builder = argo.ArgoBuilder(root=tmp_path)
    monkeypatch.setattr(builder, "_module_source", lambda *a, **k: (src, {}))
    with pytest.raises(BuildError, match="cannot bind its servers to loopback"):
        builder._build_argo_rollouts()
