"""`--compat=v2` against the real control plane: kube-reloader takes Reloader v2's Lease
(`reloader-leader-election`), writes its reloads with v2's field manager (`reloader`) and
`last-reloaded-from` shape, serves `/healthz` and `/readyz` on the health address, logs v2's
JSON keys; and it shares that Lease with a real Reloader v2 (controller-runtime's elector)
in both directions."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kube_reloader.core import hashing
from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client
from tests.harness import auto_deployment_on_configmap, update_cm
from tests.peers import free_port, start_peer
from tests.waiting import eventually, template_env

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]
LEASE = "reloader-leader-election"
LAST_RELOADED_FROM = "reloader.stakater.com/last-reloaded-from"
TIMING = ["--leader-election-lease-duration=4s", "--leader-election-renew-deadline=3s",
          "--leader-election-retry-period=1s"]  # fmt: skip
LEASE_TERM = dt.timedelta(seconds=4)  # TIMING's lease duration


class Replica:
    """One kube-reloader process with `--compat=v2 --enable-ha`, scoped to `namespace`."""

    def __init__(self, name: str, namespace: str, kubeconfig: Path, log_dir: Path) -> None:
        self.name = name
        self.log = log_dir / f"{name}.log"
        self.health_port = free_port()
        env = {k: v for k, v in os.environ.items() if k not in ("KUBERNETES_NAMESPACE",)}
        env.update(KUBECONFIG=str(kubeconfig), POD_NAME=name, POD_NAMESPACE=namespace)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kube_reloader", "--compat=v2", "--enable-ha",
             f"--namespaces={namespace}", "--metrics-addr=127.0.0.1:0",
             f"--health-addr=127.0.0.1:{self.health_port}", "--log-format=json", *TIMING],
            env=env, stdout=self.log.open("w"), stderr=subprocess.STDOUT,
        )  # fmt: skip

    def probe(self, path: str) -> tuple[int, str]:
        url = f"http://127.0.0.1:{self.health_port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                return int(resp.status), resp.read().decode()
        except urllib.error.HTTPError as exc:
            return int(exc.code), exc.read().decode()
        except (urllib.error.URLError, OSError):
            return 0, ""

    def lines(self) -> list[dict[str, Any]]:
        out = []
        for line in self.log.read_text().splitlines():
            with contextlib.suppress(ValueError):
                out.append(json.loads(line))
        return out

    def identity(self) -> str | None:
        """The identity it campaigns with (v2's: `<hostname>_<uuid>`), once it has led."""
        for line in self.lines():
            if line.get("message") == "became leader":
                return str(line.get("identity"))
        return None

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=30)


@contextlib.contextmanager
def replica(name: str, namespace: str, kubeconfig: Path, log_dir: Path) -> Iterator[Replica]:
    r = Replica(name, namespace, kubeconfig, log_dir)
    try:
        yield r
    finally:
        r.stop(signal.SIGKILL)


async def lease(client: Client, namespace: str, name: str = LEASE) -> dict[str, Any] | None:
    try:
        obj: dict[str, Any] = await client.get(resources.LEASES, name, namespace=namespace)
    except errors.NotFound:
        return None
    return obj


async def held_by(client: Client, namespace: str, holder: Replica) -> dict[str, Any] | None:
    obj = await lease(client, namespace)
    identity = holder.identity()
    return obj if obj and identity and obj["spec"].get("holderIdentity") == identity else None


async def contending(log_text: str, marker: str) -> bool:
    """Whether a replica's log shows it running its elector (`marker`; client-go's elector
    logs "Attempting to acquire leader lease", "attempting" in older releases)."""
    return marker in log_text


async def renewed_through_a_term(client: Client, namespace: str) -> None:
    """Until the holder has renewed the Lease a full lease term after now: a contender started
    before this call has had a whole term to take a Lease that was not renewed."""
    since = dt.datetime.now(dt.UTC) + LEASE_TERM

    async def renewed() -> bool:
        obj = await lease(client, namespace)
        stamp = (obj or {}).get("spec", {}).get("renewTime") or ""
        return bool(stamp) and dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")) >= since

    await eventually(renewed, what="a renewal a lease term later", timeout=30, interval=0.2)


async def test_v2_mode_takes_v2s_lease_writes_v2s_marks_and_serves_v2s_probes(
    client: Client, namespace: str, kubeconfig_path: Path, tmp_path: Path
) -> None:
    await auto_deployment_on_configmap(client, namespace, data={"a": "1"}, replicas=0)
    with replica("ours", namespace, kubeconfig_path, tmp_path) as ours:
        led = await eventually(lambda: held_by(client, namespace, ours), what="ours to lead")
        holder = led["spec"]["holderIdentity"]
        assert re.fullmatch(re.escape(socket.gethostname()) + "_[0-9a-f-]{36}", holder), holder
        assert await lease(client, namespace, "stakater-reloader-lock") is None

        async def ready() -> bool:
            return ours.probe("/readyz") == (200, "ok")

        await eventually(ready, what="/readyz on the health address", timeout=30)
        assert ours.probe("/healthz") == (200, "ok")
        assert ours.probe("/healthz?verbose") == (200, "[+]healthz ok\nhealthz check passed\n")

        await update_cm(client, namespace, "c", {"a": "2"})
        want = hashing.configmap_hash({"a": "2"})

        async def reloaded() -> dict[str, Any] | None:
            d = await client.get(resources.DEPLOYMENTS, "w", namespace=namespace)
            return d if template_env(d, "STAKATER_C_CONFIGMAP") == want else None

        d = await eventually(reloaded, what="the reload", timeout=30)
        managers = {(f["manager"], f["operation"]) for f in d["metadata"]["managedFields"]}
        assert ("reloader", "Update") in managers, managers
        assert not any(m == "Reloader" for m, _ in managers), managers
        raw = d["spec"]["template"]["metadata"]["annotations"][LAST_RELOADED_FROM]
        mark = json.loads(raw)
        assert list(mark) == ["kind", "name", "namespace", "hash", "containers", "reloadedAt"]
        assert (mark["kind"], mark["name"], mark["namespace"], mark["hash"]) == (
            "configmap", "c", namespace, want,
        )  # fmt: skip
        assert mark["containers"] == ["app"]
        assert mark["reloadedAt"].endswith("Z")
        assert ours.stop() == 0
    released = await lease(client, namespace)
    assert released is not None
    assert released["spec"]["holderIdentity"] == "", "SIGTERM released the Lease"
    lines = ours.lines()
    assert lines, "JSON log lines"
    assert all("message" in line and "msg" not in line for line in lines)
    assert {"serving", "became leader", "released leadership"} <= {
        line["message"] for line in lines
    }  # fmt: skip
    served = [line["address"] for line in lines if line["message"] == "serving"]
    assert f"127.0.0.1:{ours.health_port}" in served


async def test_the_v2_lease_passes_between_reloader_v2_and_kube_reloader_both_ways(
    client: Client, namespace: str, kubeconfig_path: Path, tmp_path: Path
) -> None:
    peer_flags = TIMING  # v2's own leader-election flags
    with replica("ours", namespace, kubeconfig_path, tmp_path) as ours:
        first = await eventually(lambda: held_by(client, namespace, ours), what="ours to lead")
        transitions = first["spec"].get("leaseTransitions", 0)
        with start_peer("reloader-v2", kubeconfig_path, namespace, tmp_path / "peer",
                        flags=peer_flags) as peer:  # fmt: skip
            await eventually(lambda: contending(peer.log_text(), "ttempting to acquire leader lease"),
                             what="Reloader v2 contending", timeout=30)  # fmt: skip
            await renewed_through_a_term(client, namespace)  # the peer only waits
            assert await held_by(client, namespace, ours), "a renewed lease is never taken"
            assert peer.alive()
            assert ours.stop() == 0

            async def peer_leads() -> dict[str, Any] | None:
                obj = await lease(client, namespace)
                holder = obj["spec"].get("holderIdentity", "") if obj else ""
                return obj if obj and peer.holds(holder) else None

            taken = await eventually(peer_leads, what="Reloader v2 to take the Lease", timeout=20)
            assert taken["spec"]["leaseTransitions"] == transitions + 1
            with replica("ours-2", namespace, kubeconfig_path, tmp_path) as again:
                await eventually(lambda: contending(again.log.read_text(), '"serving"'),
                                 what="kube-reloader contending", timeout=30)  # fmt: skip
                await renewed_through_a_term(client, namespace)
                assert await peer_leads(), "kube-reloader waits while Reloader v2 renews"
                assert again.proc.poll() is None
                peer.stop()
                back = await eventually(
                    lambda: held_by(client, namespace, again),
                    what="kube-reloader to take the Lease back", timeout=20,
                )  # fmt: skip
                assert back["spec"]["leaseTransitions"] == transitions + 2
