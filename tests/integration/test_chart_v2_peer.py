"""Stakater's own v2 chart beside ours, differentially: the same values file written for v2's
chart (tests/data/stakater-v2-chart-values.yaml: custom annotations, monitors, VPA, PDB, HA,
alerts) rendered by both, and the controller each starts parsed by kube-reloader's own flag
parser (v2's binary takes v2's flags only: `--compat=v2` is added to its args). The effective
settings must be the same, field for field; where our chart renders a flag v2's does not, the
value it sets must be the one the binary takes without it."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from tests.integration.test_chart import (
    APIS,
    CHART,
    IMAGE_VALUES,
    V2_OVERLAYS,
    V2_VALUES,
    container_of,
    helm,
    parse_as_the_pod_would,
    v2_docs,
)

pytestmark = pytest.mark.cluster

PEER_CHART = (
    Path(__file__).resolve().parents[3]
    / "shared/peers/reloader-v2/deployments/kubernetes/chart/reloader"
)


def their_chart(tmp_path: Path) -> Path:
    """A copy of v2's chart without its enterprise sub-chart (an OCI dependency, off by
    default: `enterprise.enabled`), which cannot be fetched here."""
    if not PEER_CHART.is_dir():
        pytest.skip(f"Stakater's v2 chart is not at {PEER_CHART} (set KUBE_RELOADER_PEERS)")
    chart = tmp_path / "reloader"
    shutil.copytree(PEER_CHART, chart)
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    meta.pop("dependencies", None)
    (chart / "Chart.yaml").write_text(yaml.safe_dump(meta))
    return chart


def rendered(
    chart: Path, overlay: dict[str, Any], *extra: str, values: bool = True
) -> list[dict[str, Any]]:
    """`chart` rendered with the v2 values file (unless not `values`), then `overlay`."""
    files = ["-f", str(IMAGE_VALUES), *(["-f", str(V2_VALUES)] if values else [])]
    out = subprocess.run(
        [str(helm()), "template", "rel", str(chart), "--namespace", "ns", "--kube-version", "1.36.3",
         *files, "-f", "-", *APIS, *extra],
        input=yaml.safe_dump(overlay), capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def their_docs(chart: Path, overlay: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return rendered(chart, overlay or {})


def plain(value: Any) -> Any:
    """Settings as plain data, field by field, whether a value is a Struct or a dataclass."""
    if isinstance(value, msgspec.Struct):
        return {k: plain(v) for k, v in msgspec.structs.asdict(value).items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def effective(container: dict[str, Any]) -> dict[str, Any]:
    """What the controller is started with, as our parser reads it, field by field (but the
    Lease identity, new at every start, and the kinds' registry, the same built-in one)."""
    settings = parse_as_the_pod_would(container)
    found = plain(settings)
    options = found.pop("options")
    options.pop("kinds")
    if found["ha"] is not None:
        found["ha"].pop("identity")
    return {**found, **{f"options.{k}": v for k, v in options.items()}}


OVERLAYS = {
    **V2_OVERLAYS,
    "openshift, HA and pprof off": {"reloader": {"isOpenshift": False, "enableHA": False,
                                                 "enablePProf": False}},
}  # fmt: skip


@pytest.mark.parametrize("overlay", list(OVERLAYS.values()), ids=list(OVERLAYS))
def test_a_v2_values_file_starts_the_controller_stakaters_own_v2_chart_starts(
    tmp_path: Path, overlay: dict[str, Any]
) -> None:
    theirs = container_of(their_docs(their_chart(tmp_path), overlay))
    theirs = {**theirs, "args": [*theirs["args"], "--compat=v2"]}
    ours = container_of(v2_docs(overlay))
    want, got = effective(theirs), effective(ours)
    differs = {k: (want[k], got.get(k)) for k in want if want[k] != got.get(k)}
    assert not differs, differs


V2 = {"reloader": {"compat": "v2"}}


@pytest.mark.parametrize("values", [True, False], ids=["the v2 values file", "defaults"])
def test_the_containers_resources_are_v2_charts_with_its_values_and_with_its_defaults(
    tmp_path: Path, values: bool
) -> None:
    want = container_of(rendered(their_chart(tmp_path), {}, values=values)).get("resources")
    got = container_of(rendered(CHART, V2, values=values)).get("resources")
    assert got == want


@pytest.mark.parametrize("served", [True, False], ids=["openshift", "no openshift API"])
def test_deploymentconfigs_are_granted_as_v2s_chart_grants_them(
    tmp_path: Path, served: bool
) -> None:
    extra = ("--api-versions", "apps.openshift.io/v1") if served else ()

    def granted(docs: list[dict[str, Any]]) -> bool:
        role = next(d for d in docs if d["kind"] == "ClusterRole")
        return any("deploymentconfigs" in r["resources"] for r in role["rules"])

    theirs = rendered(their_chart(tmp_path), {}, *extra)
    ours = rendered(CHART, V2, *extra)
    assert granted(ours) is granted(theirs) is served
