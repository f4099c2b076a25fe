"""Releasing: one version (pyproject.toml's) everywhere, the license and changelog, and the
release workflow: what it builds and pushes, with what rights, and actionlint's verdict."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import yaml

import kube_reloader
from kube_reloader.devcluster import actionlint

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "kube-reloader"
WORKFLOWS = ROOT / ".github" / "workflows"


def project() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as fh:
        table: dict[str, Any] = tomllib.load(fh)["project"]
    return table


def release() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((WORKFLOWS / "release.yml").read_text())
    return loaded


def steps() -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = release()["jobs"]["release"]["steps"]
    return found


def test_the_package_the_chart_and_its_app_version_carry_pyprojects_version() -> None:
    version = project()["version"]
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert kube_reloader.__version__ == version
    assert chart["version"] == version
    assert chart["appVersion"] == version


def test_the_version_is_read_from_the_package_metadata_not_written_twice() -> None:
    source = (ROOT / "src" / "kube_reloader" / "__init__.py").read_text()
    assert 'metadata.version("kube-reloader")' in source
    assert not re.search(r"__version__ = \"\d+\.\d+", source)


def test_the_license_is_the_apache_2_0_text_pyproject_names() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text
    assert "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert project()["license"] == {"text": "Apache-2.0"}


def test_the_changelog_keeps_a_changelog_and_has_an_entry_for_this_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    assert "keepachangelog.com" in text
    assert "## [Unreleased]" in text
    assert re.search(rf"^## \[{re.escape(project()['version'])}\] - ", text, re.M)


def test_the_release_runs_on_version_tags_with_only_the_rights_it_needs() -> None:
    workflow = release()
    assert workflow[True] == {"push": {"tags": ["v*"]}}  # YAML 1.1 reads `on:` as true
    assert workflow["permissions"] == {}
    (job,) = workflow["jobs"].values()
    assert job["permissions"] == {"contents": "read", "packages": "write"}


def test_every_action_is_pinned_to_a_full_version_or_a_commit() -> None:
    uses = [s["uses"] for s in steps() if "uses" in s]
    assert uses
    for ref in uses:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+@(v\d+\.\d+\.\d+|[0-9a-f]{40})", ref), ref


def test_the_image_is_built_for_amd64_and_arm64_with_an_sbom_into_the_projects_namespace() -> None:
    build = next(s for s in steps() if s.get("uses", "").startswith("docker/build-push-action"))
    assert build["with"]["file"] == "Dockerfile"
    assert build["with"]["platforms"] == "linux/amd64,linux/arm64"
    assert build["with"]["sbom"] is True
    assert build["with"]["push"] is True
    assert any(s.get("uses", "").startswith("docker/setup-qemu-action") for s in steps())
    assert any(s.get("uses", "").startswith("docker/setup-buildx-action") for s in steps())
    version = next(s for s in steps() if s.get("id") == "version")
    assert version["env"]["REPOSITORY"] == "${{ github.repository }}"
    assert 'echo "image=ghcr.io/${REPOSITORY,,}"' in version["run"]


def test_the_chart_is_packaged_for_the_pushed_image_and_pushed_as_an_oci_artifact() -> None:
    (chart,) = [s for s in steps() if "helm push" in s.get("run", "")]
    assert chart["env"]["DIGEST"] == "${{ steps.build.outputs.digest }}"
    assert "helm package deploy/helm/kube-reloader" in chart["run"]
    assert 'helm push "dist/kube-reloader-$VERSION.tgz" "$CHARTS"' in chart["run"]
    # the lines the workflow rewrites are in values.yaml, once each
    values = (CHART / "values.yaml").read_text().splitlines()
    assert values.count('  repository: ""') == 1
    assert values.count("  # digest: sha256:...") == 1


def test_pull_requests_build_the_dockerfile_and_push_nothing() -> None:
    workflow = yaml.safe_load((WORKFLOWS / "image.yml").read_text())
    assert set(workflow[True]) == {"pull_request", "push"}
    assert workflow["permissions"] == {}
    (job,) = workflow["jobs"].values()
    assert job["permissions"] == {"contents": "read"}
    build = next(s for s in job["steps"] if s.get("uses", "").startswith("docker/build-push"))
    assert build["with"]["file"] == "Dockerfile"
    assert build["with"]["push"] is False
    assert "--version" in job["steps"][-1]["run"]
    assert "login" not in str(job["steps"])


def test_actionlint_finds_nothing_wrong_in_the_workflows() -> None:
    workflows = sorted(WORKFLOWS.glob("*.y*ml"))
    assert workflows
    # built from the Go module proxy on first use; a failed build fails this test
    code, output = actionlint.check(workflows)
    assert code == 0, output
    assert output == ""
