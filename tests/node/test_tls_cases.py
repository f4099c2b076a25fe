"""The four TLS cases that started the project, end to end on the real node: cert-manager
issues short-lived certificates from a private CA (each lives LIFETIME s and is renewed every
RENEW_AFTER s, so an old one expires during the test), real servers serve them, and a prober
inside the node's network connects every PROBE_EVERY s over TLS, verifying the certificate,
recording each served serial and every failure.

1. NATS (the real `nats-server`) with no reload annotation: `signal` (SIGHUP) follows every
   renewal with no restart and no dropped connection; `--reload-tls-secrets` alone rolls it,
   at a cost the prober counts. With no reload at all it fails once its certificate expires
   (the control), after `StaleCertificate` warned.
2. A webhook server that loads its certificate once, `failurePolicy: Fail`: with
   `restart-in-place`, pod creation elsewhere never fails across renewals.
3. The qdrant mistake (the reload annotation on the pod template, shadowed): `lint` flags it,
   the controller warns once, and `--reload-tls-secrets` reloads it anyway.
4. An operator-owned DaemonSet: `evict` moves its pod onto the new certificate and never
   writes its template.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kube_reloader.core.annotations import POD_STRATEGY, SIGNAL
from kube_reloader.core.matching import MatchConfig
from kube_reloader.devcluster.certmanager import CertManagerController
from kube_reloader.devcluster.node import RealNode
from kube_reloader.kube import resources
from kube_reloader.kube.client import Client
from kube_reloader.kube.config import ConnectionConfig
from kube_reloader.runtime.manager import Manager, ManagerSettings
from kube_reloader.runtime.options import Options
from tests.harness import find_event, reverting_operator, running
from tests.node import tlsharness as t
from tests.node import tlsworkloads as w
from tests.node import webhookpath as wp
from tests.node.nodeharness import Images, agent_sidecar
from tests.node.tlsharness import LIFETIME
from tests.node.tlsworkloads import (
    nats_statefulset,
    tls_server,
    webhook_configuration,
    workload,
)
from tests.waiting import eventually

pytestmark = [pytest.mark.cluster, pytest.mark.rollout, pytest.mark.timeout(600)]
TLS = MatchConfig(reload_tls_secrets=True)


async def served(prober: t.Prober, serial: int, timeout: float) -> float:
    """Wait until `serial` is served; seconds it took from now."""
    start = time.monotonic()
    try:
        await eventually(lambda: _seen(prober, serial), timeout=timeout, interval=0.1,
                         what=f"serial {serial:x} served")  # fmt: skip
    except AssertionError as exc:
        r = prober.record
        seen = [f"{s:x}" for _, s in r.serials]
        raise AssertionError(f"{exc} (prober: {r.ok} ok, serials {seen}, "
                             f"last failures {r.failures[-3:]})") from None  # fmt: skip
    return time.monotonic() - start


async def _seen(prober: t.Prober, serial: int) -> bool:
    return prober.record.first_seen(serial) is not None


async def follow_renewals(client: Client, ns: str, secret: str, prober: t.Prober,
                          count: int) -> tuple[list[int], list[float]]:  # fmt: skip
    """From the certificate the server was first seen serving, `count` renewals: the serials
    (the first included) and the seconds until each renewal's serial was served."""
    serials = [await t.first_served(prober)]
    took = []
    for _ in range(count):
        serials.append(await t.renewals_after(client, ns, secret, serials[-1]))
        took.append(round(await served(prober, serials[-1], LIFETIME - t.RENEW_AFTER), 1))
    return serials, took


async def test_nats_follows_every_renewal_by_sighup_with_no_restart_and_no_dropped_connection(
    client: Client, namespace: str, real_node: RealNode, tls_images: Images,
    cert_manager: CertManagerController,
) -> None:  # fmt: skip
    ca, host = await t.issue(client, namespace, "nats")
    agent = agent_sidecar(tls_images.controller, restart=False, volumes={"tls": "/tls"},
                          process="nats-server")  # fmt: skip
    sts = nats_statefulset("nats", agent=agent,
                           annotations={POD_STRATEGY: "signal", SIGNAL: "SIGHUP"})  # fmt: skip
    await w.create_all(client, namespace, *sts)
    async with running(client, namespace, match=TLS), \
            t.following(client, namespace, "nats", 4222) as targets:  # fmt: skip
        before = await t.pod_state(client, namespace, "nats")
        with t.Prober(real_node.netns_path, targets, ca, host,
                      t.nats_handshake, session=True) as prober:  # fmt: skip
            renewed, took = await follow_renewals(client, namespace, "nats-tls", prober, 2)
        after = await t.pod_state(client, namespace, "nats")
    print(
        f"nats signal: new serial served {took} s after each renewal; "
        f"{prober.record.ok} probes, {len(prober.record.failures)} failed"
    )
    assert prober.record.failures == [], prober.record.failures[:5]
    assert prober.record.drops == [], prober.record.drops[:5]
    assert after == before, "no container restarted, no pod replaced"
    assert [s for _, s in prober.record.serials] == renewed, "each served, in order"


async def test_nats_rolled_by_reload_tls_secrets_follows_renewals_and_the_prober_counts_the_cost(
    client: Client, namespace: str, real_node: RealNode, tls_images: Images,
    cert_manager: CertManagerController,
) -> None:  # fmt: skip
    ca, host = await t.issue(client, namespace, "nats")
    await w.create_all(client, namespace, *nats_statefulset("nats"))
    async with running(client, namespace, match=TLS), \
            t.following(client, namespace, "nats", 4222) as targets:  # fmt: skip
        _, uids = await t.pod_state(client, namespace, "nats")
        with t.Prober(real_node.netns_path, targets, ca, host,
                      t.nats_handshake, session=True) as prober:  # fmt: skip
            _, took = await follow_renewals(client, namespace, "nats-tls", prober, 1)
        _, later = await t.pod_state(client, namespace, "nats")
    r = prober.record
    print(
        f"nats rolling restart: new serial served {took} s after the renewal; "
        f"{r.failed_seconds()} s of failed connections, {len(r.drops)} dropped sessions"
    )
    assert later.isdisjoint(uids), "the pod was replaced"
    assert r.drops, "the prober sees a restart: its zeros elsewhere mean something"
    assert not any("expired" in e for _, e in r.failures), "never an expired certificate"


@contextlib.asynccontextmanager
async def auditing(connection: ConnectionConfig, namespace: str) -> AsyncIterator[Manager]:
    """kube-reloader as its command runs it, auditing every second."""
    options = Options(namespaces=(namespace,), audit_interval=1.0)
    manager = Manager(ManagerSettings(options, metrics_addr="127.0.0.1:0"))
    stop = asyncio.Event()
    task = asyncio.create_task(manager.run(connection, stop))
    try:
        yield manager
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 60) == 0


async def test_without_a_reload_nats_serves_an_expired_certificate_after_stalecertificate_warned(
    client: Client, namespace: str, real_node: RealNode, tls_images: Images,
    cert_manager: CertManagerController, connection: ConnectionConfig,
) -> None:  # fmt: skip
    """The control: nothing reloads NATS (no rule applies; the controller only audits)."""
    ca, host = await t.issue(client, namespace, "nats")
    await w.create_all(client, namespace, *nats_statefulset("nats"))
    async with auditing(connection, namespace), \
            t.following(client, namespace, "nats", 4222) as targets:  # fmt: skip
        with t.Prober(real_node.netns_path, targets, ca, host,
                      t.nats_handshake) as prober:  # fmt: skip
            first = await t.first_served(prober)
            await t.renewals_after(client, namespace, "nats-tls", first)
            warned = await eventually(
                lambda: find_event(client, namespace, stale_on_nats), timeout=30,
                what="a StaleCertificate Warning")  # fmt: skip
            await eventually(lambda: _expired(prober), timeout=LIFETIME + 30, interval=0.5,
                             what="the old certificate expiring")  # fmt: skip
    assert warned["type"] == "Warning"
    assert [s for _, s in prober.record.serials] == [first], "the first certificate, always"


def stale_on_nats(event: dict[str, Any]) -> bool:
    return event.get("reason") == "StaleCertificate" and event["involvedObject"]["name"] == "nats"


async def _expired(prober: t.Prober) -> bool:
    return any("expired" in e for _, e in prober.record.failures)


async def test_a_webhook_that_loads_its_certificate_once_never_fails_admission_with_restart_in_place(
    client: Client, namespace: str, real_node: RealNode, tls_images: Images,
    cert_manager: CertManagerController,
) -> None:  # fmt: skip
    ca, host = await t.issue(client, namespace, "webhook", ips=("127.0.0.1",))
    agent = agent_sidecar(tls_images.controller, restart=True)
    dep = workload("Deployment", "webhook", tls_server("webhook-tls", agent=agent), replicas=2,
                   annotations={POD_STRATEGY: "restart-in-place"})  # fmt: skip
    await w.create_all(client, namespace, dep)
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(running(client, namespace, match=TLS))
        targets = await stack.enter_async_context(t.following(client, namespace, "webhook", 8443))
        elsewhere = await stack.enter_async_context(w.guarded_namespace(client))
        relay = await stack.enter_async_context(wp.Relay(real_node.netns_path, targets))
        configuration = webhook_configuration(namespace, relay.port, ca, elsewhere)
        await stack.enter_async_context(w.registered(client, configuration))
        await wp.webhook_in_path(client, elsewhere, relay)
        called = relay.accepted
        admissions = await stack.enter_async_context(wp.admitting(client, elsewhere))
        prober = stack.enter_context(
            t.Prober(real_node.netns_path, targets, ca, host, t.https_handshake)
        )
        renewed, took = await follow_renewals(client, namespace, "webhook-tls", prober, 2)
        await eventually(lambda: t.all_serving(prober, targets, renewed[-1]), timeout=LIFETIME,
                         what="every pod serving the newest certificate")  # fmt: skip
    print(
        f"webhook restart-in-place: new serial served {took} s after each renewal; "
        f"{admissions.ok} admissions, {len(admissions.failures)} failed "
        f"({len(admissions.errors)} other API errors); "
        f"relay refused {relay.refused}"
    )
    assert admissions.failures == [], admissions.failures[:5]
    assert admissions.ok > 20
    # keep-alives are off: every admission was a call of its own through the relay
    assert relay.accepted - called >= admissions.ok
    assert prober.record.failures == [], prober.record.failures[:5]


async def test_the_qdrant_mistake_is_linted_warned_once_and_reloaded_with_reload_tls_secrets(
    client: Client, namespace: str, real_node: RealNode, tls_images: Images,
    cert_manager: CertManagerController, tmp_path: Path,
) -> None:  # fmt: skip
    ca, host = await t.issue(client, namespace, "qdrant")
    sts = workload("StatefulSet", "qdrant", tls_server("qdrant-tls"),
                   annotations={"secret.reloader.stakater.com/reload": "qdrant-apikey"},
                   template_annotations={"secret.reloader.stakater.com/reload": "qdrant-tls"})  # fmt: skip
    apikey = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "qdrant-apikey"},
              "stringData": {"key": "k"}}  # fmt: skip
    manifest = tmp_path / "qdrant.yaml"
    manifest.write_text(yaml.safe_dump_all([apikey, sts]))
    lint = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kube_reloader", "lint", str(manifest),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)  # fmt: skip
    out = (await lint.communicate())[0].decode()
    assert lint.returncode != 0, out
    assert "KR002" in out, out
    await w.create_all(client, namespace, apikey, sts)
    async with running(client, namespace, match=TLS), \
            t.following(client, namespace, "qdrant", 8443) as targets:  # fmt: skip
        with t.Prober(real_node.netns_path, targets, ca, host,
                      t.https_handshake) as prober:  # fmt: skip
            _, took = await follow_renewals(client, namespace, "qdrant-tls", prober, 1)
        warnings = await w.events(client, namespace, "qdrant", "ReloadAnnotationInvalid")
    print(f"qdrant: new serial served {took} s after the renewal")
    assert len(warnings) == 1, warnings
    assert warnings[0].get("count", 1) == 1, warnings
    assert "never used" in warnings[0]["message"]


async def test_an_operator_owned_daemonset_is_evicted_onto_the_new_certificate_untouched(
    client: Client, namespace: str, real_node: RealNode, tls_images: Images,
    cert_manager: CertManagerController,
) -> None:  # fmt: skip
    ca, host = await t.issue(client, namespace, "satellite")
    ds = workload("DaemonSet", "satellite", tls_server("satellite-tls"),
                  annotations={POD_STRATEGY: "evict"})  # fmt: skip
    await w.create_all(client, namespace, ds)
    generation = (await client.get(resources.DAEMONSETS, "satellite", namespace=namespace))[
        "metadata"]["generation"]  # fmt: skip
    async with running(client, namespace, match=TLS), \
            reverting_operator(client, resources.DAEMONSETS, namespace, "satellite") as reverted, \
            t.following(client, namespace, "satellite", 8443) as targets:  # fmt: skip
        _, uids = await t.pod_state(client, namespace, "satellite")
        with t.Prober(real_node.netns_path, targets, ca, host,
                      t.https_handshake) as prober:  # fmt: skip
            _, took = await follow_renewals(client, namespace, "satellite-tls", prober, 1)
        _, later = await t.pod_state(client, namespace, "satellite")
    print(f"daemonset evict: new serial served {took} s after the renewal")
    assert later.isdisjoint(uids), "the pod was evicted and replaced"
    assert reverted == [], "nothing for the operator to revert"
    current = await client.get(resources.DAEMONSETS, "satellite", namespace=namespace)
    assert current["metadata"]["generation"] == generation, "the template was never written"
