"""Render deploy/kubernetes/ (plain manifests + a kustomize base) from the Helm chart.

`make manifests` rewrites the files; the test suite checks they match the chart, so the
plain manifests never drift from it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kube_reloader.devcluster.building import Builder
from kube_reloader.devcluster.ownimage import LOCAL_REPOSITORY

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "deploy" / "helm" / "kube-reloader"
OUT = ROOT / "deploy" / "kubernetes"
NAMESPACE = "kube-reloader"
KUBE_VERSION = "1.36.3"

HEADER = (
    "# Rendered from deploy/helm/kube-reloader with default values (image.repository\n"
    f"# {LOCAL_REPOSITORY}) by scripts/render_manifests.py\n"
    "# (`make manifests`); do not edit by hand.\n"
)
NAMESPACE_YAML = f"""apiVersion: v1
kind: Namespace
metadata:
  name: {NAMESPACE}
"""
KUSTOMIZATION = f"""# kustomize base. The image is {LOCAL_REPOSITORY}, the name `make image` gives it: a name
# on localhost, which no public registry can serve, so nothing is pulled from someone else's
# namespace. Push the image to your registry (`make image` prints how), then in your own
# kustomization.yaml (with this directory in its resources):
#   images: [{{name: {LOCAL_REPOSITORY}, newName: <registry>/kube-reloader, newTag: <tag>}}]
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: {NAMESPACE}
resources:
  - namespace.yaml
  - kube-reloader.yaml
"""


def render(helm: Path) -> dict[str, str]:
    manifests = subprocess.run(
        [str(helm), "template", "kube-reloader", str(CHART), "--namespace", NAMESPACE,
         "--kube-version", KUBE_VERSION, "--set", "fullnameOverride=kube-reloader",
         "--set", f"image.repository={LOCAL_REPOSITORY}"],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    return {
        "kube-reloader.yaml": HEADER + manifests.lstrip("-\n"),
        "namespace.yaml": HEADER + NAMESPACE_YAML,
        "kustomization.yaml": HEADER + KUSTOMIZATION,
    }


def main() -> int:
    helm = Builder().ensure().path("helm")
    OUT.mkdir(parents=True, exist_ok=True)
    for name, text in render(helm).items():
        (OUT / name).write_text(text)
        print(f"wrote {OUT / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
