"""`kube-reloader lint --cluster` against the live control plane."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kube_reloader.kube import resources
from kube_reloader.kube.client import Client
from tests import builders
from tests.harness import app

pytestmark = pytest.mark.cluster


async def test_lint_cluster_finds_shadowed_annotations_and_unreloaded_tls(
    client: Client, namespace: str, kubeconfig_path: Path
) -> None:
    await client.create(
        resources.SECRETS,
        builders.secret(
            "tls", namespace, {"tls.crt": "x", "tls.key": "y"}, type="kubernetes.io/tls"
        ),
    )
    tmpl = app(volume_mounts=("tls",), volumes=[{"name": "tls", "secret": {"secretName": "tls"}}], labels={"app": "w"},
               template_annotations={"configmap.reloader.stakater.com/auto": "true"})  # fmt: skip
    await client.create(resources.DEPLOYMENTS, builders.deployment("w", namespace, replicas=0, template=tmpl,
                        annotations={"configmap.reloader.stakater.com/reload": "missing"}))  # fmt: skip
    out = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "kube_reloader", "lint", "--cluster", "-n", namespace, "--format", "json"],
        env={**os.environ, "KUBECONFIG": str(kubeconfig_path)}, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert out.returncode == 1, out.stderr
    findings = json.loads(out.stdout)
    rules = {(f["rule"], f["file"]) for f in findings}
    ref = f"Deployment {namespace}/w"
    assert ("KR002", ref) in rules
    assert ("KR004", ref) in rules
    assert ("KR005", ref) in rules
