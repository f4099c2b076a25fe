"""The install path without guessing: the chart names no image it does not own, `make image`
writes the image the tests run as an OCI archive, and the Dockerfile (never built here: no
container engine) says what that recipe does (devcluster/ownimage.py)."""

from __future__ import annotations

import io
import json
import re
import tarfile
from pathlib import Path

import pytest
import yaml

from kube_reloader.devcluster import images, ownimage

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "kube-reloader"


def dockerfile_stages() -> list[list[tuple[str, str]]]:
    """The Dockerfile's instructions (continuation lines joined, comments dropped), by stage."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    stages: list[list[tuple[str, str]]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        op, _, rest = line.partition(" ")
        if op.upper() == "FROM":
            stages.append([])
        stages[-1].append((op.upper(), " ".join(rest.split())))
    return stages


def runs(stage: list[tuple[str, str]]) -> list[str]:
    """Each shell command of the stage's RUN instructions (split at `&&`)."""
    return [c.strip() for op, arg in stage if op == "RUN" for c in arg.split("&&")]


def test_every_stage_of_the_dockerfile_starts_from_the_recipes_debian_release() -> None:
    stages = dockerfile_stages()
    assert len(stages) == 2
    for stage in stages:
        assert stage[0][1].split()[0] == f"debian:{ownimage.SUITE}-slim"


def test_every_stage_installs_exactly_the_recipes_debian_packages() -> None:
    for stage in dockerfile_stages():
        installs = [c for c in runs(stage) if c.startswith("apt-get install")]
        assert len(installs) == 1
        packages = [w for w in installs[0].split()[2:] if not w.startswith("-")]
        assert sorted(packages) == sorted(ownimage.PACKAGES)


def test_the_virtualenv_is_made_by_debians_python_and_filled_from_the_locks_in_order() -> None:
    build = runs(dockerfile_stages()[0])
    assert f"/usr/bin/python3 -m venv {ownimage.VENV}" in build
    pip = f"{ownimage.VENV}/bin/pip install"
    locks = [c.split(" -r ")[1] for c in build if c.startswith(pip) and " -r " in c]
    assert locks == list(ownimage.LOCKS)
    for command in (c for c in build if c.startswith(pip) and " -r " in c):
        assert "--require-hashes" in command
    assert any(c.startswith(pip) and "--no-deps" in c and c.endswith(" .") for c in build)
    uninstall = next(c for c in build if c.startswith(f"{ownimage.VENV}/bin/pip uninstall"))
    assert uninstall.split()[-len(ownimage.BUILD_ONLY) :] == list(ownimage.BUILD_ONLY)


def test_the_virtualenv_is_byte_compiled_as_the_recipe_compiles_it() -> None:
    build = dockerfile_stages()[0]
    compile_line = f"{ownimage.VENV}/bin/python {' '.join(ownimage.COMPILE)}"
    assert runs(build)[-1] == compile_line, "compiled last, after the build backend is gone"
    assert not any("__pycache__" in cmd for cmd in runs(build)), "the bytecode is kept"


def test_the_runtime_stage_trims_what_the_recipe_trims() -> None:
    runtime = " ".join(runs(dockerfile_stages()[1]))
    for path in ownimage.TRIM:
        assert f" /{path}" in runtime, path


def test_user_entrypoint_environment_and_labels_are_the_recipes() -> None:
    runtime = dockerfile_stages()[1]
    config = ownimage.image_config("0")
    (user,) = [arg for op, arg in runtime if op == "USER"]
    assert user == config.user == "65534:65534"
    (entrypoint,) = [arg for op, arg in runtime if op == "ENTRYPOINT"]
    assert json.loads(entrypoint) == list(config.entrypoint)
    env = [w for op, arg in runtime if op == "ENV" for w in arg.split()]
    assert env == list(config.env)
    labels = dict(w.split("=", 1) for op, arg in runtime if op == "LABEL" for w in arg.split())
    assert {k: v.strip('"') for k, v in labels.items()} == {
        k: v for k, v in config.labels.items() if k != "org.opencontainers.image.version"
    }
    assert ("COPY", f"--from=build {ownimage.VENV} {ownimage.VENV}") in runtime


def tiny_archive(tmp_path: Path, reference: str) -> Path:
    layer = images.files_layer(tmp_path / "l.tar", [images.File("hello", b"hi\n")])
    out = tmp_path / "built.tar"
    images.oci_archive(out, reference, [layer], images.ImageConfig(entrypoint=("/hello",)))
    return out


def read_archive(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {
            m.name: tar.extractfile(m).read()  # type: ignore[union-attr]
            for m in tar
            if m.isreg()
        }


def test_renaming_an_archive_changes_only_the_names_in_its_index(tmp_path: Path) -> None:
    built = tiny_archive(tmp_path, "kube-reloader.local/kube-reloader:abc")
    renamed = images.renamed(built, tmp_path / "out.oci.tar", "localhost/kube-reloader:1.2.3")
    before, after = read_archive(built), read_archive(renamed)
    assert before.keys() == after.keys()
    assert all(before[n] == after[n] for n in before if n != "index.json")
    (entry,) = json.loads(after["index.json"])["manifests"]
    (old,) = json.loads(before["index.json"])["manifests"]
    assert entry["digest"] == old["digest"]
    assert entry["annotations"] == {
        "io.containerd.image.name": "localhost/kube-reloader:1.2.3",
        "org.opencontainers.image.ref.name": "1.2.3",
    }


def test_make_image_names_the_tests_image_after_the_project_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = tiny_archive(tmp_path, "kube-reloader.local/kube-reloader:abc")
    builder = ownimage.ImageBuilder(root=tmp_path / "cache", report=lambda _: None)
    monkeypatch.setattr(builder, "build", lambda: ("kube-reloader.local/x:abc", built))
    reference, archive = builder.export(tmp_path / "dist")
    version = ownimage.project_version(ROOT)
    assert reference == f"localhost/kube-reloader:{version}"
    assert archive == tmp_path / "dist" / f"kube-reloader-{version}.oci.tar"
    index = json.loads(read_archive(archive)["index.json"])
    assert index["manifests"][0]["annotations"]["io.containerd.image.name"] == reference


def test_make_image_is_a_target_that_runs_the_image_script() -> None:
    makefile = (ROOT / "Makefile").read_text()
    phony = next(line for line in makefile.splitlines() if line.startswith(".PHONY:"))
    assert "image" in phony.split()
    assert re.search(r"^image: venv\n\t@\$\(PY\) scripts/build_image\.py$", makefile, re.M)


def test_the_push_instructions_name_the_archive_and_three_tools() -> None:
    from scripts.build_image import instructions

    text = instructions("localhost/kube-reloader:1.2.3", Path("dist/k.oci.tar"))
    assert "skopeo copy oci-archive:dist/k.oci.tar docker://<registry>/kube-reloader:1.2.3" in text
    assert "crane push" in text
    assert "podman load -i dist/k.oci.tar" in text
    assert "--set image.repository=<registry>/kube-reloader" in text


def test_the_chart_has_no_default_image_repository() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["image"]["repository"] == ""
    helpers = (CHART / "templates" / "_helpers.tpl").read_text()
    (message,) = re.findall(r'fail "(image\.repository is not set[^"]*)"', helpers)
    assert "`make image`" in message
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert schema["properties"]["image"]["properties"]["repository"] == {
        "type": "string",
        "description": schema["properties"]["image"]["properties"]["repository"]["description"],
    }


def test_nothing_installable_names_an_image_in_a_namespace_this_project_does_not_own() -> None:
    places = [ROOT / "Dockerfile", *sorted((ROOT / "deploy").rglob("*.*"))]
    for path in places:
        if path.is_file() and path.suffix in {"", ".yaml", ".yml", ".tpl", ".json", ".txt"}:
            assert "kube-reloader/kube-reloader" not in path.read_text(), path


def test_the_kustomize_base_runs_the_local_image_of_this_version_and_says_how_to_set_it() -> None:
    base = ROOT / "deploy" / "kubernetes"
    version = ownimage.project_version(ROOT)
    docs = list(yaml.safe_load_all((base / "kube-reloader.yaml").read_text()))
    deployment = next(d for d in docs if d and d["kind"] == "Deployment")
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == f"{ownimage.LOCAL_REPOSITORY}:{version}"
    kustomization = (base / "kustomization.yaml").read_text()
    assert f"images: [{{name: {ownimage.LOCAL_REPOSITORY}, newName:" in kustomization


def test_the_archive_config_carries_the_version_label(tmp_path: Path) -> None:
    layer = images.files_layer(tmp_path / "l.tar", [images.File("x", b"")])
    out = tmp_path / "a.tar"
    images.oci_archive(out, "localhost/k:1", [layer], ownimage.image_config("1.2.3"))
    blobs = read_archive(out)
    index = json.loads(blobs["index.json"])
    manifest = json.loads(blobs["blobs/sha256/" + index["manifests"][0]["digest"][7:]])
    config = json.load(io.BytesIO(blobs["blobs/sha256/" + manifest["config"]["digest"][7:]]))
    assert config["config"]["Labels"]["org.opencontainers.image.version"] == "1.2.3"
    assert config["config"]["User"] == "65534:65534"
