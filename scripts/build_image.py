"""`make image`: kube-reloader's container image as an OCI archive under dist/.

The image is the one the real-node tests run (kube_reloader.devcluster.ownimage: Debian
bookworm's python3, the hashed locks, user 65534), built without a container engine (needs
root: debootstrap and chroot), named `localhost/kube-reloader:<version>`. Pushing it is left to
the tool of your choice; this prints how.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from kube_reloader.devcluster import images
from kube_reloader.devcluster.gobuild import BuildError
from kube_reloader.devcluster.ownimage import ImageBuilder

ROOT = Path(__file__).resolve().parent.parent
DIST = ROOT / "dist"
NOT_ROOT = (
    "make image: the image is built with debootstrap and chroot, which need root; run it as "
    "root, or build the Dockerfile with a container engine (docker build -t <registry>/"
    "kube-reloader:<version> .)"
)


def instructions(reference: str, archive: Path) -> str:
    """How to push `archive` and install the chart with it."""
    tag = reference.rpartition(":")[2]
    target = f"<registry>/kube-reloader:{tag}"
    return f"""
Push it to your registry with the tool of your choice:
  skopeo copy oci-archive:{archive} docker://{target}
  mkdir -p dist/layout && tar -xf {archive} -C dist/layout && crane push dist/layout {target}
  podman load -i {archive}   # then: podman push <the image it names> docker://{target}
Then install the chart with it:
  helm install reloader deploy/helm/kube-reloader -n reloader --create-namespace \\
    --set image.repository=<registry>/kube-reloader
or, with the kustomize base, in your kustomization.yaml:
  images: [{{name: localhost/kube-reloader, newName: <registry>/kube-reloader, newTag: "{tag}"}}]"""


def main() -> int:
    started = time.monotonic()
    try:
        reference, archive = ImageBuilder().export(DIST)
    except BuildError as exc:
        print(f"make image: {exc}", file=sys.stderr)
        if os.geteuid() != 0:
            print(NOT_ROOT, file=sys.stderr)
        return 1
    elapsed = time.monotonic() - started
    shown = archive.relative_to(ROOT) if archive.is_relative_to(ROOT) else archive
    size = archive.stat().st_size / 2**20
    print(f"{reference} (linux/{images.ARCHITECTURE}), {size:.0f} MiB, in {elapsed:.1f} s:")
    print(f"  {shown}")
    print(instructions(reference, shown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
