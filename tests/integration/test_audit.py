"""The staleness audit on the real control plane: among 200 Deployments (kwok pods), it finds
exactly the planted stale ones, with their reasons, through `kube-reloader audit` (json) and
through the controller's `kube_reloader_stale_workloads` gauge and `StaleCertificate` Events.

Planted (pods started, then the content changed, and no rule reloads them):
  NATS       a TLS Secret mounted, no annotation                         -> no_annotation (TLS)
  qdrant     `auto` under the pod template, `search` on the workload      -> pod_template_annotation
  ignored    `auto`, but the ConfigMap carries reloader's ignore           -> ignored
  excluded   `auto`, but the ConfigMap is in the workload's exclude list   -> excluded
  plain      a changed ConfigMap, no annotation                           -> no_annotation
Controls (not stale): `auto` workloads on the changed ConfigMap (the rules reload them); one
naming the TLS Secret in its reload list; workloads whose pods were restarted after the
change; workloads on a ConfigMap that never changed.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kube_reloader.kube import config, resources
from kube_reloader.kube.client import Client, PatchType
from kube_reloader.runtime.manager import Manager, ManagerSettings
from kube_reloader.runtime.options import Options
from tests import builders as b
from tests.harness import update_cm
from tests.waiting import eventually, next_second, past_pod_starts

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]

AUTO = {"reloader.stakater.com/auto": "true"}
IGNORE = {"reloader.stakater.com/ignore": "true"}


def certificate(days: int) -> dict[str, str]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "nats")])
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now).not_valid_after(now + dt.timedelta(days=days))
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    pem_key = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())  # fmt: skip
    return {"tls.crt": cert.public_bytes(serialization.Encoding.PEM).decode(),
            "tls.key": pem_key.decode()}  # fmt: skip


def deployment(name: str, ns: str, *, cm: str = "", secret: str = "",
               annotations: dict[str, str] | None = None,
               template_annotations: dict[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    volumes = [{"name": "tls", "secret": {"secretName": secret}}] if secret else []
    container = b.container("app", env_from_configmaps=(cm,) if cm else (),
                            volume_mounts=("tls",) if secret else ())  # fmt: skip
    tmpl = b.pod_template({"app": name}, containers=[container], volumes=volumes,
                          annotations=template_annotations)  # fmt: skip
    return b.deployment(name, ns, replicas=1, template=tmpl, annotations=annotations or {})


def plan(ns: str) -> tuple[list[dict[str, Any]], dict[tuple[str, str], str], list[str]]:
    """The 200 Deployments; the planted stale (name, resource) -> reason; the restarted."""
    out: list[dict[str, Any]] = []
    stale: dict[tuple[str, str], str] = {}
    for i in range(5):
        out.append(deployment(f"nats-{i}", ns, secret="nats-tls"))
        stale[(f"nats-{i}", "Secret/nats-tls")] = "no_annotation"
        out.append(deployment(f"qdrant-{i}", ns, cm="shared",
                              annotations={"reloader.stakater.com/search": "true"},
                              template_annotations=AUTO))  # fmt: skip
        stale[(f"qdrant-{i}", "ConfigMap/shared")] = "pod_template_annotation"
        out.append(deployment(f"ignored-{i}", ns, cm="ignored", annotations=AUTO))
        stale[(f"ignored-{i}", "ConfigMap/ignored")] = "ignored"
        exclude = {**AUTO, "configmaps.exclude.reloader.stakater.com/reload": "shared"}
        out.append(deployment(f"excluded-{i}", ns, cm="shared", annotations=exclude))
        stale[(f"excluded-{i}", "ConfigMap/shared")] = "excluded"
        out.append(deployment(f"plain-{i}", ns, cm="shared"))
        stale[(f"plain-{i}", "ConfigMap/shared")] = "no_annotation"
    out += [deployment(f"auto-{i}", ns, cm="shared", annotations=AUTO) for i in range(99)]
    out.append(deployment("named-tls", ns, secret="nats-tls",
                          annotations={"secret.reloader.stakater.com/reload": "nats-tls"}))  # fmt: skip
    restarted = [f"restarted-{i}" for i in range(10)]
    out += [deployment(n, ns, cm="shared") for n in restarted]
    out += [deployment(f"stable-{i}", ns, cm="stable") for i in range(65)]
    assert len(out) == 200
    assert len(stale) == 25
    return out, stale, restarted


async def running_pods(client: Client, ns: str) -> int:
    listed = await client.list(resources.PODS, namespace=ns)
    return sum(1 for p in listed.items
               if p.get("status", {}).get("phase") == "Running"
               and not p["metadata"].get("deletionTimestamp"))  # fmt: skip


async def restarted_everywhere(client: Client, ns: str, names: list[str]) -> bool:
    """Each restarted Deployment runs one pod, of its new ReplicaSet, and no old pod."""
    for n in names:
        d = await client.get(resources.DEPLOYMENTS, n, namespace=ns)
        st = d.get("status", {})
        if not (st.get("observedGeneration") == d["metadata"]["generation"]
                and st.get("replicas") == st.get("updatedReplicas") == st.get("availableReplicas") == 1):  # fmt: skip
            return False
    listed = await client.list(resources.PODS, namespace=ns)
    old = [p for p in listed.items if p["metadata"]["name"].startswith("restarted-")
           and p["metadata"].get("deletionTimestamp")]  # fmt: skip
    return not old


@pytest.fixture
async def planted(client: Client, namespace: str) -> dict[tuple[str, str], str]:
    ns = namespace
    await client.create(resources.CONFIGMAPS, b.configmap("shared", ns, {"v": "1"}))
    await client.create(resources.CONFIGMAPS, b.configmap("ignored", ns, {"v": "1"},
                                                          annotations=IGNORE))  # fmt: skip
    await client.create(resources.CONFIGMAPS, b.configmap("stable", ns, {"v": "1"}))
    await client.create(resources.SECRETS, b.secret("nats-tls", ns, certificate(30),
                                                    type="kubernetes.io/tls"))  # fmt: skip
    workloads, stale, restarted = plan(ns)
    for i in range(0, len(workloads), 20):
        await asyncio.gather(
            *(client.create(resources.DEPLOYMENTS, w) for w in workloads[i : i + 20])
        )

    async def all_running() -> bool:
        return await running_pods(client, ns) == 200

    await eventually(all_running, what="200 running pods", timeout=300, interval=1.0)
    await eventually(lambda: past_pod_starts(client, [ns]), what="pods' start + margin")
    await update_cm(client, ns, "shared", {"v": "2"})
    await update_cm(client, ns, "ignored", {"v": "2"})
    await client.patch(resources.SECRETS, "nats-tls", {"stringData": certificate(60)},
                       namespace=ns, patch_type=PatchType.MERGE)  # fmt: skip
    await next_second()  # the restart's time is later than the change's
    at = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    restart = {"spec": {"template": {"metadata": {"annotations": {
        "kubectl.kubernetes.io/restartedAt": at}}}}}  # fmt: skip
    for n in restarted:
        await client.patch(resources.DEPLOYMENTS, n, restart, namespace=ns,
                           patch_type=PatchType.MERGE)  # fmt: skip

    async def settled() -> bool:
        return await restarted_everywhere(client, ns, restarted)

    await eventually(settled, what="the restarted Deployments on new pods", timeout=120,
                     interval=1.0)  # fmt: skip
    return stale


async def test_the_audit_cli_reports_exactly_the_planted_stale_workloads_among_200(
    planted: dict[tuple[str, str], str], namespace: str, kubeconfig_path: Path
) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kube_reloader", "audit", "-n", namespace, "--format", "json",
        "--kubeconfig", str(kubeconfig_path),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=dict(os.environ),
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode == 1, err.decode()
    report = json.loads(out)
    assert report["errors"] == []
    assert report["workloads"] == 200
    found = {(f["name"], f["resource"]): f["reason"] for f in report["stale"]}
    assert found == planted  # every planted one, and 0 false positives
    for f in report["stale"]:
        assert f["kind"] == "Deployment"
        assert f["namespace"] == namespace
        assert f["podsBeforeChange"] == f["pods"] == 1
        if f["resource"] == "Secret/nats-tls":
            assert f["tls"] is True
            cert = f["certificate"]
            days = (dt.datetime.fromisoformat(cert["notAfter"].replace("Z", "+00:00"))
                    - dt.datetime.fromisoformat(cert["notBefore"].replace("Z", "+00:00"))).days  # fmt: skip
            assert days == 60, "the current (rotated) certificate is reported"
        else:
            assert f["tls"] is False
            assert "certificate" not in f
    assert "tls.key" not in out.decode()
    assert "PRIVATE" not in out.decode()


def stale_series(text: str) -> dict[tuple[str, str], float]:
    out = {}
    for line in text.splitlines():
        if line.startswith("kube_reloader_stale_workloads{"):
            labels = dict(
                part.split("=", 1)
                for part in line[line.index("{") + 1 : line.index("}")].split(",")
            )
            clean = {k: v.strip('"') for k, v in labels.items()}
            out[(clean["name"], clean["resource"])] = float(line.rsplit(" ", 1)[1])
    return out


async def test_the_controllers_audit_sets_the_gauge_and_warns_of_stale_certificates(
    planted: dict[tuple[str, str], str], client: Client, namespace: str,
    connection: config.ConnectionConfig,
) -> None:  # fmt: skip
    options = Options(namespaces=(namespace,), audit_interval=1.0)
    manager = Manager(ManagerSettings(options, metrics_addr="127.0.0.1:0"))
    stop = asyncio.Event()
    task = asyncio.create_task(manager.run(connection, stop))
    try:

        async def exactly_planted() -> bool:
            series = stale_series(manager.recorder.exposition().decode())
            return set(series) == set(planted) and set(series.values()) == {1.0}

        await eventually(exactly_planted, what="the gauge to show the 25 planted pairs",
                         timeout=120, interval=0.5)  # fmt: skip

        async def warned() -> set[str]:
            listed = await client.list(resources.EVENTS, namespace=namespace)
            return {e["involvedObject"]["name"] for e in listed.items
                    if e.get("reason") == "StaleCertificate" and e.get("type") == "Warning"}  # fmt: skip

        async def five() -> set[str] | None:
            names = await warned()
            return names if len(names) == 5 else None

        assert await eventually(five, what="5 StaleCertificate Events", timeout=60) == {
            f"nats-{i}" for i in range(5)
        }
        # the next audits change nothing: the same series, no Event for a non-TLS pair
        await asyncio.sleep(3)
        assert await exactly_planted()
        assert await warned() == {f"nats-{i}" for i in range(5)}
        # a stale workload restarted by hand is no longer stale: its series goes away
        at = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        restart = {"spec": {"template": {"metadata": {"annotations": {
            "kubectl.kubernetes.io/restartedAt": at}}}}}  # fmt: skip
        await client.patch(resources.DEPLOYMENTS, "plain-0", restart, namespace=namespace,
                           patch_type=PatchType.MERGE)  # fmt: skip
        rest = {k for k in planted if k[0] != "plain-0"}

        async def dropped() -> bool:
            return set(stale_series(manager.recorder.exposition().decode())) == rest

        await eventually(dropped, what="the restarted workload's series to go", timeout=120,
                         interval=0.5)  # fmt: skip
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 60) == 0
