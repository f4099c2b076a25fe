"""The Kubernetes wrapper module and the build cache bookkeeping (no Go run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kube_reloader.devcluster import building
from kube_reloader.devcluster.versions import Versions, cache_dir

UPSTREAM = """module k8s.io/kubernetes

go 1.26.0

godebug default=go1.26

require (
\tgithub.com/x/y v1.0.0
\tk8s.io/api v0.0.0
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
\tk8s.io/cri-streaming => ./staging/src/k8s.io/cri-streaming
)
"""


def test_wrapper_pins_every_staging_module_to_its_published_tag() -> None:
    text = building.wrapper_go_mod(UPSTREAM, "example.local/w", Versions(kubernetes="1.36.3"))
    assert text == (
        "module example.local/w\n\n"
        "go 1.26.0\n\n"
        "godebug default=go1.26\n\n"
        "require k8s.io/kubernetes v1.36.3\n\n"
        "replace (\n"
        "\tk8s.io/api => k8s.io/api v0.36.3\n"
        "\tk8s.io/client-go => k8s.io/client-go v0.36.3\n"
        "\tk8s.io/cri-streaming => k8s.io/cri-streaming v0.36.3\n"
        ")\n"
    )


def test_an_upstream_go_mod_without_staging_replaces_is_refused() -> None:
    with pytest.raises(building.BuildError, match=r"no \./staging replace lines"):
        building.wrapper_go_mod("module k8s.io/kubernetes\n\ngo 1.26.0\n", "m", Versions())


def test_versions_derive_the_staging_tag_and_the_cache_directory() -> None:
    v = Versions(kubernetes="1.35.4", etcd="3.6.16", kwok="0.8.0")
    assert v.staging == "0.35.4"
    assert v.minor == "35"
    env = {"XDG_CACHE_HOME": "/c"}
    assert cache_dir(v, env) == Path("/c/kube-reloader/k8s-v1.35.4_etcd-v3.6.16_kwok-v0.8.0")
    assert cache_dir(v, {"KUBE_RELOADER_CACHE_DIR": "/x"}) == Path(
        "/x/k8s-v1.35.4_etcd-v3.6.16_kwok-v0.8.0"
    )


def test_a_component_counts_as_built_only_with_its_files_and_a_matching_stamp(
    tmp_path: Path,
) -> None:
    builder = building.Builder(root=tmp_path, report=lambda line: None)
    assert builder.missing() == ["etcd", "kwok", "kubernetes", "helm"]
    bins = builder.binaries
    bins.bin.mkdir(parents=True)
    bins.path("etcd").write_text("")
    assert "etcd" in builder.missing(), "no stamp yet: an interrupted build"
    (bins.bin / ".etcd.stamp").write_text(f"etcd v{builder.versions.etcd}")
    assert "etcd" not in builder.missing()
    (bins.bin / ".etcd.stamp").write_text("etcd v0.0.1")
    assert "etcd" in builder.missing(), "a stamp of another version does not count"


def test_a_missing_go_toolchain_is_a_clear_error(tmp_path: Path) -> None:
    builder = building.Builder(root=tmp_path, report=lambda line: None, go="no-such-go-binary")
    with pytest.raises(building.BuildError, match=r"needs Go .*not on PATH"):
        builder.ensure()
