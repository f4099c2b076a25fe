"""OCI archives written without a Docker engine: reproducible (same inputs, same digests), in
the layout `ctr images import` reads, named by containerd's annotation."""

from __future__ import annotations

import hashlib
import json
import tarfile
from pathlib import Path

from kube_reloader.devcluster import images


def build(tmp: Path, name: str, content: bytes) -> tuple[str, Path]:
    work = tmp / name
    work.mkdir()
    layer = images.files_layer(work / "layer.tar", [images.File("bin/app", content),
                                                    images.File("etc/app.conf", b"x", 0o644)])  # fmt: skip
    out = work / "image.tar"
    digest = images.oci_archive(out, "kube-reloader.local/app:1", [layer],
                                images.ImageConfig(entrypoint=("/bin/app",), user="65534:65534"))  # fmt: skip
    return digest, out


def test_the_same_inputs_give_the_same_image(tmp_path: Path) -> None:
    first, _ = build(tmp_path, "a", b"program")
    second, _ = build(tmp_path, "b", b"program")
    third, _ = build(tmp_path, "c", b"other program")
    assert first == second
    assert third != first


def test_the_archive_is_an_oci_layout_naming_the_image(tmp_path: Path) -> None:
    digest, archive = build(tmp_path, "a", b"program")
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        index = json.load(tar.extractfile("index.json"))  # type: ignore[arg-type]
        blobs = {n.rsplit("/", 1)[1]: tar.extractfile(n).read()  # type: ignore[union-attr]
                 for n in names if n.startswith("blobs/sha256/")}  # fmt: skip
    assert "oci-layout" in names
    entry = index["manifests"][0]
    assert entry["digest"] == digest
    assert entry["annotations"]["io.containerd.image.name"] == "kube-reloader.local/app:1"
    for blob, data in blobs.items():  # content-addressed
        assert hashlib.sha256(data).hexdigest() == blob
    manifest = json.loads(blobs[digest.split(":")[1]])
    config = json.loads(blobs[manifest["config"]["digest"].split(":")[1]])
    assert config["config"]["User"] == "65534:65534"
    assert config["rootfs"]["diff_ids"] == [manifest["layers"][0]["digest"]]


def test_layers_hold_sorted_root_owned_entries_with_a_fixed_time(tmp_path: Path) -> None:
    layer = images.files_layer(tmp_path / "l.tar", [images.File("z/b", b"1"),
                                                    images.File("a", b"2")])  # fmt: skip
    with tarfile.open(layer) as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == ["z", "a", "z/b"]  # directories first
    assert {(m.uid, m.gid, m.mtime) for m in members} == {(0, 0, images.SOURCE_EPOCH)}


def test_a_directory_layer_keeps_links_and_leaves_out_what_is_excluded(tmp_path: Path) -> None:
    root = tmp_path / "rootfs"
    (root / "usr" / "bin").mkdir(parents=True)
    (root / "usr" / "bin" / "python3").write_bytes(b"elf")
    (root / "bin").symlink_to("usr/bin")
    (root / "var" / "cache").mkdir(parents=True)
    (root / "var" / "cache" / "junk").write_bytes(b"j")
    layer = images.directory_layer(tmp_path / "d.tar", root, exclude=("var/cache",))
    with tarfile.open(layer) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert members["bin"].issym()
    assert members["bin"].linkname == "usr/bin"
    assert "usr/bin/python3" in members
    assert not any(n.startswith("var/cache") for n in members)
