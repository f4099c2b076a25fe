"""The cert-manager build: the module it is compiled as, the replaced pin, the stamps (no Go
needed)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from kube_reloader.devcluster import certmanager
from kube_reloader.devcluster.gobuild import BuildError, Run

PIN = "\tgithub.com/Venafi/vcert/v5 v5.13.7\n"


def _builder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, go_mod: str) -> tuple[
    certmanager.CertManagerBuilder, list[tuple[Sequence[str], Sequence[str], str]]
]:  # fmt: skip
    """A builder whose `go mod download` answers with a fake upstream tree holding `go_mod`,
    and whose compile step is recorded instead of run."""
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    (upstream / "go.mod").write_text(go_mod)
    (upstream / "go.sum").write_text("example.com/dep v1.0.0 h1:dep=\n")
    builder = certmanager.CertManagerBuilder(root=tmp_path / "cache")
    builder.logs.mkdir(parents=True)

    def workdir(component: str, module: str) -> Path:
        work = builder.root / "src" / component
        work.mkdir(parents=True)
        return work

    answer = {"Dir": str(upstream), "Sum": "h1:zip=", "GoModSum": "h1:mod="}

    def runner(component: str, work: Path, env: dict[str, str] | None = None) -> Run:
        return lambda phase, cmd: json.dumps(answer)

    compiled: list[tuple[Sequence[str], Sequence[str], str]] = []

    def compile_(
        run: Run, component: str, packages: Sequence[str], out: Sequence[str], **k: Any
    ) -> None:
        compiled.append((packages, out, k["ldflags"]))

    monkeypatch.setattr(builder, "_workdir", workdir)
    monkeypatch.setattr(builder, "_runner", runner)
    monkeypatch.setattr(builder, "_compile", compile_)
    return builder, compiled


def test_the_controller_is_built_as_upstreams_controller_module_with_the_refused_pin_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    builder, compiled = _builder(tmp_path, monkeypatch, f"module x\n\nrequire (\n{PIN})\n")
    builder._build_cert_manager()
    work = builder.root / "src" / "cert-manager"
    go_mod = (work / "go.mod").read_text()
    assert go_mod.startswith(f"module {certmanager.CONTROLLER_MODULE}\n")
    assert f"require {certmanager.MODULE} v{builder.version}\n" in go_mod
    assert "replace github.com/Venafi/vcert/v5 => github.com/Venafi/vcert/v5 v5.13.8\n" in go_mod
    assert (work / "go.sum").read_text().splitlines() == [
        "example.com/dep v1.0.0 h1:dep=",
        f"{certmanager.MODULE} v{builder.version} h1:zip=",
        f"{certmanager.MODULE} v{builder.version}/go.mod h1:mod=",
    ]
    assert (work / "main.go").read_bytes() == certmanager.MAIN_SOURCE.read_bytes()
    [(packages, out, ldflags)] = compiled
    assert (list(packages), list(out)) == (["."], ["-o", str(builder.binary)])
    assert f"pkg/util.AppVersion=v{builder.version}" in ldflags


def test_the_controller_build_stops_when_upstream_no_longer_pins_the_replaced_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    go_mod = "module x\n\nrequire (\n\tgithub.com/Venafi/vcert/v5 v5.14.0\n)\n"
    builder, compiled = _builder(tmp_path, monkeypatch, go_mod)
    with pytest.raises(
        BuildError, match=re.escape("no longer pins github.com/Venafi/vcert/v5 v5.13.7")
    ):
        builder._build_cert_manager()
    assert compiled == []


def test_the_crds_alone_are_one_component_and_the_controller_another(tmp_path: Path) -> None:
    assert certmanager.CertManagerBuilder(root=tmp_path, controller=False).missing() == [
        "cert-manager-crds"
    ]
    both = certmanager.CertManagerBuilder(root=tmp_path)
    assert both.missing() == ["cert-manager-crds", "cert-manager"]
    both.bin.mkdir(parents=True)
    both.binary.write_text("")
    (both.bin / ".cert-manager.stamp").write_text(both._stamp_text("cert-manager"))
    assert both.missing() == ["cert-manager-crds"]


def test_a_binary_built_from_another_main_source_or_version_is_built_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    builder = certmanager.CertManagerBuilder(root=tmp_path)
    builder.bin.mkdir(parents=True)
    builder.binary.write_text("")
    stamp = builder.bin / ".cert-manager.stamp"
    stamp.write_text(builder._stamp_text("cert-manager"))
    assert "cert-manager" not in builder.missing()
    older = certmanager.CertManagerBuilder(root=tmp_path, version="1.21.1")
    assert "cert-manager" in older.missing()
    edited = tmp_path / "main.go"
    edited.write_text(certmanager.MAIN_SOURCE.read_text() + "// edited\n")
    monkeypatch.setattr(certmanager, "MAIN_SOURCE", edited)
    assert "cert-manager" in builder.missing()
