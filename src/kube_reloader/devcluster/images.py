"""OCI image archives written without a Docker engine, for the real node's containerd.

An image here is a list of uncompressed tar layers plus a config (entrypoint, environment,
user). `oci_archive` writes the OCI image layout (`oci-layout`, `index.json`, `blobs/`) as one
tar file that `ctr images import` reads; the index names the image through containerd's
`io.containerd.image.name` annotation, so it is imported under exactly that reference.

Layers are reproducible: entries sorted, owner root, modification time `SOURCE_EPOCH`; the
same inputs give the same digests, so a cached image is rebuilt only when its inputs change.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import shutil
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["File", "ImageConfig", "directory_layer", "files_layer", "oci_archive", "renamed"]

#: modification time of every entry (reproducible layers)
SOURCE_EPOCH = 0
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar"
#: the image's architecture: this machine's (its layers hold this machine's binaries)
ARCHITECTURE = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())


@dataclass(frozen=True, slots=True)
class File:
    """One file of a layer: its path in the image and its content (bytes or a host file)."""

    path: str
    content: bytes | Path
    mode: int = 0o755


@dataclass(frozen=True, slots=True)
class ImageConfig:
    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...] = ()
    env: tuple[str, ...] = ("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",)
    user: str = ""
    workdir: str = "/"
    labels: dict[str, str] = field(default_factory=dict)


def _info(name: str, kind: bytes, mode: int, size: int = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.size = size
    info.mtime = SOURCE_EPOCH
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def files_layer(out: Path, files: Iterable[File]) -> Path:
    """A layer holding `files` and the directories above them."""
    entries = sorted(files, key=lambda f: f.path)
    dirs: set[str] = set()
    for f in entries:
        parts = f.path.strip("/").split("/")[:-1]
        dirs.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        for d in sorted(dirs):
            tar.addfile(_info(d + "/", tarfile.DIRTYPE, 0o755))
        for f in entries:
            data = f.content.read_bytes() if isinstance(f.content, Path) else f.content
            info = _info(f.path.strip("/"), tarfile.REGTYPE, f.mode, len(data))
            tar.addfile(info, io.BytesIO(data))
    return out


def directory_layer(out: Path, root: Path, *, exclude: Iterable[str] = ()) -> Path:
    """A layer holding the tree under `root` as it is (owners, modes, links kept), entries
    sorted and timestamps set to `SOURCE_EPOCH`. `exclude`: paths relative to `root` left out
    with everything under them."""
    skipped = {e.strip("/") for e in exclude}

    def keep(rel: str) -> bool:
        return not any(rel == s or rel.startswith(s + "/") for s in skipped)

    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            base = Path(dirpath)
            names = sorted(dirnames + filenames)
            for name in names:
                path = base / name
                rel = path.relative_to(root).as_posix()
                if not keep(rel):
                    if name in dirnames:
                        dirnames.remove(name)
                    continue
                info = tar.gettarinfo(str(path), arcname=rel)
                info.mtime = SOURCE_EPOCH
                info.uname = info.gname = ""
                if info.isreg():
                    with path.open("rb") as fh:
                        tar.addfile(info, fh)
                else:
                    tar.addfile(info)
            # symlinks to directories are not walked into (os.walk's default)
    return out


def _blob(blobs: Path, data: bytes) -> tuple[str, int]:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    (blobs / digest.split(":", 1)[1]).write_bytes(data)
    return digest, len(data)


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def oci_archive(out: Path, reference: str, layers: Iterable[Path], config: ImageConfig) -> str:
    """Write the image `reference` (`host/name:tag`) made of `layers` (uncompressed tars,
    lowest first) to the archive `out`; returns the manifest's digest."""
    work = out.with_suffix(".layout")
    blobs = work / "blobs" / "sha256"
    blobs.mkdir(parents=True, exist_ok=True)
    layer_descs, diff_ids = [], []
    for layer in layers:
        digest = _file_digest(layer)
        target = blobs / digest.split(":", 1)[1]
        if not target.exists():
            try:
                os.link(layer, target)
            except OSError:  # another filesystem
                shutil.copyfile(layer, target)
        size = layer.stat().st_size
        layer_descs.append({"mediaType": LAYER_TYPE, "digest": digest, "size": size})
        diff_ids.append(digest)
    cfg_doc = {
        "architecture": ARCHITECTURE,
        "os": "linux",
        "config": _runtime_config(config),
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }
    cfg_digest, cfg_size = _blob(blobs, _canonical(cfg_doc))
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "config": {"mediaType": CONFIG_TYPE, "digest": cfg_digest, "size": cfg_size},
        "layers": layer_descs,
    }
    man_digest, man_size = _blob(blobs, _canonical(manifest))
    described = {
        "mediaType": MANIFEST_TYPE,
        "digest": man_digest,
        "size": man_size,
        "platform": {"architecture": ARCHITECTURE, "os": "linux"},
        "annotations": _names(reference),
    }
    _pack(out, work, {"schemaVersion": 2, "manifests": [described]})
    return man_digest


def _pack(out: Path, work: Path, index: dict[str, object]) -> None:
    """The layout directory `work` (its blobs written) with `index` as the archive `out`;
    `work` removed."""
    blobs = work / "blobs" / "sha256"
    (work / "index.json").write_bytes(_canonical(index))
    (work / "oci-layout").write_bytes(_canonical({"imageLayoutVersion": "1.0.0"}))
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        for name in ("oci-layout", "index.json"):
            tar.add(str(work / name), arcname=name)
        for blob in sorted(blobs.iterdir()):
            tar.add(str(blob), arcname=f"blobs/sha256/{blob.name}")
    for blob in blobs.iterdir():
        blob.unlink()
    for leftover in (work / "index.json", work / "oci-layout"):
        leftover.unlink()
    blobs.rmdir()
    (work / "blobs").rmdir()
    work.rmdir()


def _runtime_config(config: ImageConfig) -> dict[str, object]:
    """The OCI image config's `config`: what a runtime starts (optional fields only when set)."""
    image_config: dict[str, object] = {
        "Entrypoint": list(config.entrypoint),
        "Env": list(config.env),
        "WorkingDir": config.workdir,
    }
    if config.cmd:
        image_config["Cmd"] = list(config.cmd)
    if config.user:
        image_config["User"] = config.user
    if config.labels:
        image_config["Labels"] = dict(config.labels)
    return image_config


def _names(reference: str) -> dict[str, str]:
    return {
        "io.containerd.image.name": reference,
        "org.opencontainers.image.ref.name": reference.rpartition(":")[2],
    }


def renamed(archive: Path, out: Path, reference: str) -> Path:
    """A copy of the OCI archive `archive` at `out` naming its image `reference` instead: the
    same blobs (so the same manifest digest), only `index.json`'s names differ."""
    tmp = out.with_name(out.name + ".partial")
    with tarfile.open(archive) as src, tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as dst:
        for member in src:
            data = src.extractfile(member) if member.isreg() else None
            if member.name == "index.json" and data is not None:
                index = json.loads(data.read())
                for manifest in index["manifests"]:
                    manifest.setdefault("annotations", {}).update(_names(reference))
                body = _canonical(index)
                member.size = len(body)
                data = io.BytesIO(body)
            dst.addfile(member, data)
    tmp.replace(out)
    return out


def _canonical(doc: object) -> bytes:
    return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()
