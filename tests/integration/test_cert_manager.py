"""A real certificate rotation: cert-manager's controller renews a short-lived Certificate on
the dev cluster and kube-reloader reloads what mounts its Secret.

cert-manager is built from the Go module proxy on first use (`devcluster.certmanager`). Each
Certificate here lives 1 h, the shortest duration cert-manager's webhook accepts, with a
renewBefore of 59m35s (renewBefore must be shorter than the duration and over 5 min), so
cert-manager itself renews it about 25 s after each issuance: a new key, serial and notBefore
every time, written by cert-manager as it does in production.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import secrets
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from kube_reloader.core import hashing
from kube_reloader.core.annotations import IGNORE_TLS
from kube_reloader.core.matching import MatchConfig
from kube_reloader.devcluster import certmanager
from kube_reloader.devcluster.certmanager import (
    CERTIFICATES,
    ISSUERS,
    CertManagerController,
)
from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client, PatchType
from kube_reloader.kube.resources import Resource
from tests import builders
from tests.harness import app, generation, running
from tests.waiting import alongside, eventually, past_pod_starts

#: the first test also builds the controller when it is not cached yet (minutes, see certmanager.py)
# serial: installs cert-manager's CRDs and runs it
pytestmark = [
    pytest.mark.cluster,
    pytest.mark.rollout,
    pytest.mark.timeout(2400),
    pytest.mark.serial,
]

#: cert-manager renews this long after each issuance (duration 1h minus renewBefore)
RENEW_EVERY = 25
RENEW_BEFORE = "59m35s"


@pytest.fixture(scope="module")
def cert_manager(kubeconfig_path: Path) -> Iterator[CertManagerController]:
    """cert-manager's CRDs installed and its controller running against the dev cluster."""
    log = Path(tempfile.mkdtemp(prefix="kube-reloader-test-certmanager-")) / "controller.log"
    with certmanager.running(kubeconfig_path, log, report=_print) as controller:
        yield controller


def _print(line: str) -> None:
    print(line, flush=True)


@contextlib.asynccontextmanager
async def other_namespace(client: Client) -> AsyncIterator[str]:
    name = f"t-{secrets.token_hex(4)}"
    await client.create(
        resources.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    try:
        yield name
    finally:
        with contextlib.suppress(errors.NotFound):
            await client.delete(resources.NAMESPACES, name)


async def issue(client: Client, namespace: str, name: str = "tls") -> None:
    """A SelfSigned Issuer and Certificate `name` (Secret `name`) renewed every RENEW_EVERY s."""
    await client.create(
        ISSUERS,
        {
            "apiVersion": "cert-manager.io/v1", "kind": "Issuer",
            "metadata": {"name": "selfsigned", "namespace": namespace},
            "spec": {"selfSigned": {}},
        },
    )  # fmt: skip
    await client.create(
        CERTIFICATES,
        {
            "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "secretName": name,
                "commonName": f"{name}.{namespace}.svc",
                "dnsNames": [f"{name}.{namespace}.svc"],
                "duration": "1h",
                "renewBefore": RENEW_BEFORE,
                "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
                "issuerRef": {"name": "selfsigned", "kind": "Issuer", "group": "cert-manager.io"},
            },
        },
    )  # fmt: skip


@dataclass(frozen=True)
class Issued:
    """One issuance as the Certificate's status and its Secret show it."""

    revision: int
    serial: int
    not_before: datetime
    not_after: datetime
    data: dict[str, bytes]


async def issued(client: Client, namespace: str, name: str = "tls") -> Issued | None:
    """The current issuance, once the Certificate is Ready and its Secret holds that revision's
    certificate (None before)."""
    crt = await client.get(CERTIFICATES, name, namespace=namespace)
    status = crt.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    if not ready or not status.get("revision"):
        return None
    try:
        secret = await client.get(resources.SECRETS, name, namespace=namespace)
    except errors.NotFound:
        return None
    data = {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}
    cert = x509.load_pem_x509_certificate(data["tls.crt"])
    if cert.not_valid_after_utc.isoformat().replace("+00:00", "Z") != status.get("notAfter"):
        return None  # the status already names a newer issuance than the Secret holds
    return Issued(
        int(status["revision"]), cert.serial_number, cert.not_valid_before_utc,
        cert.not_valid_after_utc, data,
    )  # fmt: skip


async def first_issuance(client: Client, namespace: str, name: str = "tls") -> Issued:
    """Wait for the Certificate's first issuance. cert-manager signs with a temporary key
    Secret and retries, with a growing backoff, while its cache has not seen that Secret yet:
    the first issuance has taken over 30 s here (a liveness bound, not a timing claim)."""
    return await eventually(
        lambda: issued(client, namespace, name), what="the first issuance", timeout=120
    )


async def renewed_after(client: Client, namespace: str, last: Issued, name: str = "tls") -> Issued:
    """Wait for cert-manager's next issuance after `last` (its own renewal, no one asks)."""

    async def newer() -> Issued | None:
        now = await issued(client, namespace, name)
        return now if now is not None and now.revision > last.revision else None

    try:
        return await eventually(
            newer, what=f"cert-manager to renew {name}", timeout=RENEW_EVERY * 4
        )
    except AssertionError as e:  # name what cert-manager says of it (a failure, a backoff)
        status = (await client.get(CERTIFICATES, name, namespace=namespace)).get("status")
        raise AssertionError(f"{e}; the Certificate's status: {status}") from None


async def stop_renewing(client: Client, namespace: str, name: str = "tls") -> Issued:
    """Give the Certificate a renewBefore far from now (no re-issuance: renewBefore is not part
    of what is issued), then wait until cert-manager has scheduled its next renewal minutes
    away; the issuance current then is the last one."""
    await client.patch(
        CERTIFICATES, name, {"spec": {"renewBefore": "30m"}},
        namespace=namespace, patch_type=PatchType.MERGE,
    )  # fmt: skip

    async def settled() -> Issued | None:
        crt = await client.get(CERTIFICATES, name, namespace=namespace)
        status = crt.get("status") or {}
        now = await issued(client, namespace, name)
        if now is None or not status.get("renewalTime"):
            return None
        renewal = datetime.fromisoformat(status["renewalTime"].replace("Z", "+00:00"))
        return now if (renewal - now.not_before).total_seconds() > 600 else None

    return await eventually(settled, what=f"{name}'s renewal to be rescheduled", timeout=60)


async def test_cert_manager_renews_a_short_lived_certificate_with_a_new_key_and_serial_each_time(
    cert_manager: CertManagerController, client: Client, namespace: str
) -> None:
    await issue(client, namespace)
    first = await first_issuance(client, namespace)
    second = await renewed_after(client, namespace, first)
    third = await renewed_after(client, namespace, second)
    assert [first.revision + 1, first.revision + 2] == [second.revision, third.revision]
    assert len({first.serial, second.serial, third.serial}) == 3
    assert first.not_before < second.not_before < third.not_before
    assert len({first.data["tls.key"], second.data["tls.key"], third.data["tls.key"]}) == 3
    secret = await client.get(resources.SECRETS, "tls", namespace=namespace)
    assert secret["type"] == "kubernetes.io/tls"
    assert secret["metadata"]["annotations"]["cert-manager.io/certificate-name"] == "tls"
    last = await stop_renewing(client, namespace)
    assert last.revision >= third.revision


def mounting(name: str, namespace: str, **meta: Any) -> dict[str, Any]:
    """Deployment `name` mounting Secret `tls` as a volume, no reload annotation (`meta`:
    annotations of its own)."""
    tmpl = app(
        volume_mounts=("tls",), volumes=[{"name": "tls", "secret": {"secretName": "tls"}}],
        labels={"app": name},
    )  # fmt: skip
    return builders.deployment(name, namespace, template=tmpl, **meta)


async def renew_again(client: Client, namespace: str, name: str = "tls") -> None:
    """Back to a renewBefore of RENEW_BEFORE: the renewal time is already past, so cert-manager
    renews now, then every RENEW_EVERY s."""
    await client.patch(
        CERTIFICATES, name, {"spec": {"renewBefore": RENEW_BEFORE}},
        namespace=namespace, patch_type=PatchType.MERGE,
    )  # fmt: skip


async def carries(client: Client, namespace: str, name: str, digest: str) -> bool:
    """Whether Deployment `name`'s template holds `digest` (an env var or an annotation)."""
    d = await client.get(resources.DEPLOYMENTS, name, namespace=namespace)
    tmpl = d["spec"]["template"]
    values = [e.get("value") for c in tmpl["spec"]["containers"] for e in c.get("env") or []]
    values += list((tmpl["metadata"].get("annotations") or {}).values())
    return any(digest in str(v) for v in values)


async def follow(
    client: Client, resource: Resource, namespace: str, name: str,
    seen: Callable[[dict[str, Any]], None],
) -> None:  # fmt: skip
    """Call `seen` with object `name` as it is now and with every version a watch shows."""
    obj = await client.get(resource, name, namespace=namespace)
    seen(obj)
    version = obj["metadata"]["resourceVersion"]
    while True:  # a watch ends after its timeout: go on from the last version seen
        async for ev in client.watch(resource, namespace=namespace, allow_bookmarks=False,
                                     field_selector=f"metadata.name={name}",
                                     resource_version=version):  # fmt: skip
            version = ev.object["metadata"]["resourceVersion"]
            if ev.type == "MODIFIED":
                seen(ev.object)


@dataclass
class Timeline:
    """Each data version of Secret `tls` (when the test first saw it, its hash) and each
    generation of Deployment `web` (its pod template as text)."""

    secret: list[tuple[float, str]] = field(default_factory=list)
    web: dict[int, str] = field(default_factory=dict)

    def saw_secret(self, obj: dict[str, Any]) -> None:
        data = {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
        digest = hashing.secret_hash(data)
        if not self.secret or self.secret[-1][1] != digest:
            self.secret.append((time.monotonic(), digest))

    def saw_web(self, obj: dict[str, Any]) -> None:
        self.web.setdefault(obj["metadata"]["generation"], json.dumps(obj["spec"]["template"]))

    def carried(self) -> list[str]:
        """For each roll of web (generation 2 on), the Secret version its template carries."""
        return [
            next((h for _, h in self.secret if h in text), "none")
            for gen, text in sorted(self.web.items()) if gen > 1
        ]  # fmt: skip

    def lasting(self, seconds: float) -> list[str]:
        """The Secret versions after the first that stayed current at least `seconds`."""
        ends = [t for t, _ in self.secret[1:]] + [time.monotonic()]
        spans = zip(self.secret[1:], ends[1:], strict=True)
        return [h for (t, h), end in spans if end - t >= seconds]


#: a renewal that stays current this long must have reached web (a reload takes well under a
#: second; changes closer than the coalescing window, or than the minimum interval between two
#: reloads of one workload (5 s), are one reload by design)
LASTING = 10.0


async def test_annotation_less_workloads_reload_once_per_renewal_only_with_reload_tls_secrets(
    cert_manager: CertManagerController, client: Client, namespace: str
) -> None:
    async with other_namespace(client) as plain:
        spaces = (namespace, plain)  # ours with --reload-tls-secrets; the other without it
        for ns in spaces:
            await issue(client, ns)
        for ns in spaces:
            await first_issuance(client, ns)
        start = {ns: await stop_renewing(client, ns) for ns in spaces}
        await client.create(resources.DEPLOYMENTS, mounting("web", namespace))
        await client.create(
            resources.DEPLOYMENTS,
            mounting("opted-out", namespace, annotations={IGNORE_TLS: "true"}),
        )
        await client.create(resources.DEPLOYMENTS, mounting("nats", plain))
        tls = MatchConfig(reload_tls_secrets=True)
        seen = Timeline()
        async with (
            alongside(follow(client, resources.SECRETS, namespace, "tls", seen.saw_secret)),
            alongside(follow(client, resources.DEPLOYMENTS, namespace, "web", seen.saw_web)),
            running(client, namespace, match=tls),
            running(client, plain),
        ):
            for ns in spaces:
                await renew_again(client, ns)
            for ns in spaces:
                last = start[ns]
                for _ in range(2):
                    last = await renewed_after(client, ns, last)
            end = {ns: await stop_renewing(client, ns) for ns in spaces}
            digest = hashing.secret_hash(end[namespace].data)
            await eventually(
                lambda: carries(client, namespace, "web", digest),
                what="web to carry the last certificate's hash",
            )

            async def followed() -> bool:
                return seen.secret[-1][1] == digest and digest in seen.web[max(seen.web)]

            await eventually(followed, what="the watches to have seen the last renewal on web")
            renewals = end[namespace].revision - start[namespace].revision
            carried = seen.carried()
            print(f"{renewals} renewals; secret versions (s, hash) "
                  f"{[(round(t - seen.secret[0][0], 2), h[:8]) for t, h in seen.secret]}; "
                  f"web's rolls carried {[h[:8] for h in carried]}")  # fmt: skip
            assert renewals >= 2
            order = [h for _, h in seen.secret]
            assert all(h in order[1:] for h in carried), "each roll carries a renewal"
            assert carried == sorted(set(carried), key=order.index), "no renewal rolled twice"
            assert carried[-1] == digest
            assert set(seen.lasting(LASTING)) <= set(carried), "no renewal was left out"
            assert len(seen.lasting(LASTING)) >= 2
            assert await generation(client, namespace, "opted-out") == 1
            assert end[plain].revision - start[plain].revision >= 2
            assert await generation(client, plain, "nats") == 1


async def pod_running(client: Client, namespace: str, app_label: str) -> bool:
    listed = await client.list(
        resources.PODS, namespace=namespace, label_selector=f"app={app_label}"
    )
    return any((p.get("status") or {}).get("phase") == "Running" for p in listed.items)


async def audit(namespace: str, kubeconfig: Path) -> dict[str, Any]:
    """`kube-reloader audit -n namespace --format json` (exit 0 or 1), its report."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kube_reloader", "audit", "-n", namespace, "--format", "json",
        "--kubeconfig", str(kubeconfig),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=dict(os.environ),
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode in (0, 1), err.decode()
    report: dict[str, Any] = json.loads(out)
    assert report["errors"] == []
    assert "PRIVATE" not in out.decode()
    return report


async def test_audit_reports_a_nats_like_workload_stale_within_30_s_of_a_renewal(
    cert_manager: CertManagerController, client: Client, namespace: str, kubeconfig_path: Path
) -> None:
    await issue(client, namespace)
    await first_issuance(client, namespace)
    start = await stop_renewing(client, namespace)
    await client.create(resources.DEPLOYMENTS, mounting("nats", namespace))
    await eventually(lambda: pod_running(client, namespace, "nats"), what="nats's pod", timeout=60)
    # the renewal must come later than the pod's start by more than the audit's margin
    await eventually(lambda: past_pod_starts(client, [namespace]), what="nats's start + margin")
    async with running(client, namespace):  # the controller without --reload-tls-secrets
        assert (await audit(namespace, kubeconfig_path))["stale"] == []
        await renew_again(client, namespace)
        renewed = await renewed_after(client, namespace, start)

        async def reported() -> dict[str, Any] | None:
            for f in (await audit(namespace, kubeconfig_path))["stale"]:
                cert = f.get("certificate") or {}
                at = datetime.fromisoformat(str(cert.get("notBefore")).replace("Z", "+00:00"))
                if (f["name"], f["resource"]) == (
                    "nats",
                    "Secret/tls",
                ) and at >= renewed.not_before:
                    return dict(f)
            return None

        # from cert-manager's renewal (seen here within a poll of 0.1 s) to the audit's report
        seen = time.monotonic()
        found = await eventually(reported, what="audit to report nats", timeout=30, interval=0.5)
        print(f"audit reported nats {time.monotonic() - seen:.1f}s after the renewal was seen")
        await stop_renewing(client, namespace)
        assert await generation(client, namespace, "nats") == 1
    assert (found["kind"], found["namespace"], found["reason"]) == (
        "Deployment", namespace, "no_annotation",
    )  # fmt: skip
    assert found["tls"] is True
    assert found["podsBeforeChange"] == found["pods"] == 1
