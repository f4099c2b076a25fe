"""Helpers of the TLS scenarios (test_tls_cases.py): a private CA issued by cert-manager,
short-lived Certificates, the servers' images, and probers that run inside the node's network
namespace and record every served certificate serial and every failure.

A prober dials the *ready* pods of a workload, as a Service would route (`Targets`, kept up
to date from the pods' Ready condition); there is no kube-proxy on the dev cluster. The API
server's way to the webhook is `webhookpath.py`.
"""

from __future__ import annotations

import base64
import contextlib
import random
import socket
import ssl
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from cryptography import x509

from kube_reloader.devcluster import images as oci
from kube_reloader.devcluster.certmanager import CERTIFICATES, ISSUERS
from kube_reloader.devcluster.node import RealNode
from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client
from tests.node.nodeharness import _enter, pods_of, ready
from tests.waiting import alongside, eventually

NATS_IMAGE = "kube-reloader.local/nats-server:1"
WEBHOOK_IMAGE = "kube-reloader.local/tls-once:1"
#: each leaf certificate lives this long and cert-manager renews it RENEW_AFTER seconds after
#: its issuance: the old one then has LIFETIME - RENEW_AFTER seconds left, longer than the
#: kubelet takes to refresh a mounted Secret (its sync period is 10 s on the dev node)
LIFETIME = 60
RENEW_AFTER = 20
#: the probers' period
PROBE_EVERY = 0.1
#: seconds a connection or TLS handshake may take before it counts as failed (a CPU stall
#: on a busy 2-core machine is not an outage)
CONNECT_TIMEOUT = 5.0


def import_tls_images(node: RealNode) -> None:
    """The NATS server's and the webhook server's images, built like our own, imported."""
    work = node.dir / "images"
    work.mkdir(parents=True, exist_ok=True)
    for ref, program in ((NATS_IMAGE, "nats-server"), (WEBHOOK_IMAGE, "tls-once")):
        layer = oci.files_layer(work / f"{program}.layer",
                                [oci.File(program, node.bins.path(program))])  # fmt: skip
        config = oci.ImageConfig(entrypoint=(f"/{program}",), user="65534:65534")
        oci.oci_archive(work / f"{program}.tar", ref, [layer], config)
        node.import_image(work / f"{program}.tar")


# -- cert-manager: a private CA and short-lived leaves ----------------------------------------
async def private_ca(client: Client, namespace: str) -> bytes:
    """A self-signed root (a Certificate of cert-manager's) and a CA Issuer `ca` signing with
    it; returns the root's PEM once issued."""
    issuer = {"apiVersion": "cert-manager.io/v1", "kind": "Issuer"}
    await client.create(ISSUERS, {**issuer, "metadata": {"name": "selfsigned"},
                                  "spec": {"selfSigned": {}}}, namespace=namespace)  # fmt: skip
    await client.create(
        CERTIFICATES,
        {"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
         "metadata": {"name": "root"},
         "spec": {"secretName": "root", "isCA": True, "commonName": f"{namespace} test CA",
                  "duration": "2h", "privateKey": {"algorithm": "ECDSA", "size": 256},
                  "issuerRef": {"name": "selfsigned", "kind": "Issuer"}}},
        namespace=namespace,
    )  # fmt: skip

    async def root() -> bytes | None:
        try:
            secret = await client.get(resources.SECRETS, "root", namespace=namespace)
        except errors.NotFound:
            return None
        pem = (secret.get("data") or {}).get("tls.crt")
        return base64.b64decode(pem) if pem else None

    pem = await eventually(root, timeout=60, what="the private CA issued")
    await client.create(ISSUERS, {**issuer, "metadata": {"name": "ca"},
                                  "spec": {"ca": {"secretName": "root"}}}, namespace=namespace)  # fmt: skip
    return pem


async def leaf(client: Client, namespace: str, name: str, *, dns: tuple[str, ...] = (),
               ips: tuple[str, ...] = ()) -> int:  # fmt: skip
    """Certificate `name` (Secret `name`) from the CA Issuer: LIFETIME s long, renewed by
    cert-manager itself every RENEW_AFTER s with a new key. Returns once issued, with the
    first serial (workloads created after it start on a certificate)."""
    await client.create(
        CERTIFICATES,
        {"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
         "metadata": {"name": name},
         "spec": {"secretName": name, "commonName": (dns or ips)[0],
                  "dnsNames": list(dns), "ipAddresses": list(ips),
                  "duration": f"{LIFETIME}s", "renewBefore": f"{LIFETIME - RENEW_AFTER}s",
                  "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
                  "issuerRef": {"name": "ca", "kind": "Issuer"}}},
        namespace=namespace,
    )  # fmt: skip
    return await eventually(lambda: serial_of(client, namespace, name), timeout=60,
                            what=f"{name} issued")  # fmt: skip


async def issue(client: Client, namespace: str, app: str, *,
                ips: tuple[str, ...] = ()) -> tuple[bytes, str]:  # fmt: skip
    """A private CA, and Certificate `<app>-tls` from it for `<app>.<namespace>.svc` (and
    `ips`), issued: the CA's PEM and the name a client verifies."""
    ca = await private_ca(client, namespace)
    host = f"{app}.{namespace}.svc"
    await leaf(client, namespace, f"{app}-tls", dns=(host,), ips=ips)
    return ca, host


async def serial_of(client: Client, namespace: str, name: str) -> int | None:
    """The serial of the certificate Secret `name` holds now (None: not issued yet)."""
    try:
        secret = await client.get(resources.SECRETS, name, namespace=namespace)
    except errors.NotFound:
        return None
    pem = (secret.get("data") or {}).get("tls.crt")
    return x509.load_pem_x509_certificate(base64.b64decode(pem)).serial_number if pem else None


async def renewals_after(client: Client, namespace: str, name: str, serial: int) -> int:
    """Wait for cert-manager's next issuance of `name` after the one of `serial` (its own
    renewal, no one asks); the new serial."""

    async def newer() -> int | None:
        now = await serial_of(client, namespace, name)
        return now if now is not None and now != serial else None

    return await eventually(newer, timeout=RENEW_AFTER * 4, interval=0.2,
                            what=f"cert-manager renewing {name}")  # fmt: skip


# -- where the ready pods are ------------------------------------------------------------------
@dataclass
class Targets:
    """The addresses (IP, port) of a workload's ready pods, as a Service would route."""

    port: int
    addresses: list[tuple[str, int]] = field(default_factory=list)
    #: every pod UID seen (replaced pods included)
    uids: set[str] = field(default_factory=set)

    def pick(self) -> list[tuple[str, int]]:
        out = list(self.addresses)
        random.shuffle(out)
        return out


@contextlib.asynccontextmanager
async def following(client: Client, namespace: str, app: str, port: int) -> AsyncIterator[Targets]:
    """`Targets` of the pods labelled app=`app`, updated from a watch of them (each readiness
    change as it is written) while the block runs."""
    targets = Targets(port)
    selector = f"app={app}"

    def publish(pods: dict[str, dict[str, Any]]) -> None:
        live = [p for p in pods.values() if not p["metadata"].get("deletionTimestamp")]
        targets.uids.update(pods)
        targets.addresses = [(p["status"]["podIP"], port) for p in live
                             if ready(p) and p["status"].get("podIP")]  # fmt: skip

    async def watch() -> None:
        while True:  # a watch ends after its timeout: list and watch again
            listed = await client.list(resources.PODS, namespace=namespace,
                                       label_selector=selector)  # fmt: skip
            pods = {p["metadata"]["uid"]: p for p in listed.items}
            publish(pods)
            async for ev in client.watch(resources.PODS, namespace=namespace,
                                         label_selector=selector, allow_bookmarks=False,
                                         resource_version=listed.resource_version):  # fmt: skip
                uid = ev.object["metadata"]["uid"]
                if ev.type == "DELETED":
                    pods.pop(uid, None)
                else:
                    pods[uid] = ev.object
                publish(pods)

    async with alongside(watch()):
        await eventually(lambda: _some(targets), timeout=120, what=f"a ready pod of {app}")
        yield targets


async def pod_state(client: Client, namespace: str, app: str) -> tuple[int, set[str]]:
    """The restarts of the application containers (not the agent sidecar) of the pods
    labelled app=`app`, summed, and their UIDs."""
    pods = await pods_of(client, namespace, app)
    counts = sum(int(c.get("restartCount", 0)) for p in pods
                 for c in p["status"].get("containerStatuses") or [])  # fmt: skip
    return counts, {p["metadata"]["uid"] for p in pods}


async def _some(targets: Targets) -> bool:
    return bool(targets.addresses)


# -- probers -----------------------------------------------------------------------------------
@dataclass
class Record:
    """What a prober saw: each serial served (in the order first seen, with when), failed
    attempts (time, error) and successful ones."""

    ok: int = 0
    serials: list[tuple[float, int]] = field(default_factory=list)
    failures: list[tuple[float, str]] = field(default_factory=list)
    #: connections of the long-lived session that dropped
    drops: list[tuple[float, str]] = field(default_factory=list)
    #: the serial each pod address served last
    last: dict[str, int] = field(default_factory=dict)

    def saw(self, address: str, serial: int) -> None:
        if serial not in {s for _, s in self.serials}:
            self.serials.append((time.time(), serial))
        self.last[address] = serial
        self.ok += 1

    def failed_seconds(self) -> float:
        """Seconds of failed probing: failed attempts times the probing period."""
        return round(len(self.failures) * PROBE_EVERY, 1)

    def first_seen(self, serial: int) -> float | None:
        return next((t for t, s in self.serials if s == serial), None)


def _context(ca_pem: bytes) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cadata=ca_pem.decode())
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


def _serial(tls: ssl.SSLSocket) -> int:
    der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def _line(sock: socket.socket | ssl.SSLSocket) -> bytes:
    out = b""
    while not out.endswith(b"\r\n"):
        chunk = sock.recv(1)
        if not chunk:
            raise ConnectionError("closed by the server")
        out += chunk
        if len(out) > 65536:
            raise ConnectionError("line too long")
    return out


def nats_handshake(address: tuple[str, int], ctx: ssl.SSLContext, name: str) -> ssl.SSLSocket:
    """A NATS client's connection: the server's INFO in clear, then TLS (the certificate
    verified against the CA and `name`), CONNECT and PING answered by PONG."""
    raw = socket.create_connection(address, timeout=CONNECT_TIMEOUT)
    try:
        info = _line(raw)
        if not info.startswith(b"INFO "):
            raise ConnectionError(f"not a NATS INFO line: {info[:40]!r}")
        tls = ctx.wrap_socket(raw, server_hostname=name)
        tls.sendall(b'CONNECT {"verbose":false,"pedantic":false,"tls_required":true}\r\nPING\r\n')
        _pong(tls)
        return tls
    except BaseException:
        raw.close()
        raise


def _pong(tls: ssl.SSLSocket) -> None:
    while (line := _line(tls)) != b"PONG\r\n":
        if line.startswith(b"-ERR"):
            raise ConnectionError(line.decode(errors="replace").strip())


def https_handshake(address: tuple[str, int], ctx: ssl.SSLContext, name: str) -> ssl.SSLSocket:
    raw = socket.create_connection(address, timeout=CONNECT_TIMEOUT)
    try:
        return ctx.wrap_socket(raw, server_hostname=name)
    except BaseException:
        raw.close()
        raise


Handshake = Callable[[tuple[str, int], ssl.SSLContext, str], ssl.SSLSocket]


class Prober:
    """Every PROBE_EVERY s, from inside the node's network namespace: a new TLS connection to
    one ready pod (the served serial, or the failure); with `session`, also a PING on one
    long-lived NATS connection, whose drops are counted (and reconnected)."""

    def __init__(self, netns: str, targets: Targets, ca_pem: bytes, name: str,
                 handshake: Handshake, *, session: bool = False) -> None:  # fmt: skip
        self.netns, self.targets, self.name, self.handshake = netns, targets, name, handshake
        self.ctx = _context(ca_pem)
        self.session = session
        self.record = Record()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._conn: ssl.SSLSocket | None = None

    def _run(self) -> None:
        _enter(self.netns)
        while not self._stop.is_set():
            started = time.monotonic()
            self._probe()
            if self.session:
                self._ping()
            self._stop.wait(max(0.0, PROBE_EVERY - (time.monotonic() - started)))
        if self._conn is not None:
            self._conn.close()

    def _probe(self) -> None:
        """One attempt: a pod that refuses the connection (stopping, not yet out of the
        ready set) is followed by the next ready one, as a client of several endpoints
        does; any other failure counts at once (a certificate that fails verification, an
        expired one included)."""
        picked = self.targets.pick()
        if not picked:
            self.record.failures.append((time.time(), "no ready pod"))
            return
        for n, address in enumerate(picked, 1):
            try:
                with self.handshake(address, self.ctx, self.name) as tls:
                    self.record.saw(address[0], _serial(tls))
                return
            except ConnectionRefusedError as exc:
                if n == len(picked):
                    self.record.failures.append((time.time(), f"{address[0]}: {exc}"))
            except (OSError, ssl.SSLError, ConnectionError) as exc:
                self.record.failures.append((time.time(), f"{address[0]}: {exc}"))
                return

    def _ping(self) -> None:
        try:
            if self._conn is None:
                picked = self.targets.pick()
                if not picked:
                    return
                self._conn = nats_handshake(picked[0], self.ctx, self.name)
                return
            self._conn.sendall(b"PING\r\n")
            _pong(self._conn)
        except (OSError, ssl.SSLError, ConnectionError) as exc:
            if self._conn is not None:
                self.record.drops.append((time.time(), str(exc)))
                self._conn.close()
            self._conn = None

    def __enter__(self) -> Prober:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


async def first_served(prober: Prober) -> int:
    """The first serial the prober saw served (waits for it)."""

    async def seen() -> int | None:
        return prober.record.serials[0][1] if prober.record.serials else None

    return await eventually(seen, timeout=60, what="a first served certificate")


async def all_serving(prober: Prober, targets: Targets, serial: int) -> bool:
    """Whether every ready pod last served `serial` or a certificate first seen after it (a
    later renewal may already have reached a pod)."""
    order = [s for _, s in prober.record.serials]
    if serial not in order:
        return False
    last = prober.record.last
    fresh = set(order[order.index(serial) :])
    return bool(targets.addresses) and all(last.get(ip) in fresh for ip, _ in targets.addresses)
