"""Render deploy/kubernetes/ (plain manifests + a kustomize base) from the Helm chart.

`make manifests` rewrites the files; the test suite checks they match the chart, so the
plain manifests never drift from it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kube_reloader.devcluster.building import Builder

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "deploy" / "helm" / "kube-reloader"
OUT = ROOT / "deploy" / "kubernetes"
NAMESPACE = "kube-reloader"
KUBE_VERSION = "1.36.3"

HEADER = (
    "# Rendered from deploy/helm/kube-reloader with default values by scripts/render_manifests.py\n"
    "# (`make manifests`); do not edit by hand.\n"
)
NAMESPACE_YAML = f"""apiVersion: v1
kind: Namespace
metadata:
  name: {NAMESPACE}
"""
KUSTOMIZATION = f"""# kustomize base: `kubectl apply -k deploy/kubernetes` (set the image with an overlay:
#   images: [{{name: kube-reloader/kube-reloader, newName: <registry>/kube-reloader, newTag: <tag>}}])
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
         "--kube-version", KUBE_VERSION, "--set", "fullnameOverride=kube-reloader"],
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
