"""`make demo-tls`: a certificate rotated by cert-manager reaches a real NATS server with no
restart and no error.

On a dev cluster with a real node (root; the node's programs, NATS and cert-manager are built
from the Go module proxy on first use): a private CA, a NATS server whose TLS certificate lives
60 s and is renewed every 20 s, kube-reloader started as its command runs
(`--reload-tls-secrets`; NATS carries `kube-reloader.io/strategy: signal`, no Reloader
annotation), and a client inside the node that connects over TLS every 100 ms and keeps one
NATS session open. Every renewal and every newly served serial is printed with a timestamp;
then a summary, and the cluster is taken down.

    make demo-tls [RENEWALS=3]
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the node tests' helpers (tests/node) are the demo's too

from tests.node import tlsharness as t  # noqa: E402
from tests.node import tlsworkloads as w  # noqa: E402
from tests.node.nodeharness import agent_sidecar, import_images  # noqa: E402
from tests.waiting import eventually  # noqa: E402

from kube_reloader.core.annotations import POD_STRATEGY, SIGNAL  # noqa: E402
from kube_reloader.devcluster import certmanager  # noqa: E402
from kube_reloader.devcluster.cluster import DevCluster  # noqa: E402
from kube_reloader.devcluster.node import RealNode  # noqa: E402
from kube_reloader.devcluster.nodebuild import NodeBuilder  # noqa: E402
from kube_reloader.kube import config, resources  # noqa: E402
from kube_reloader.kube.client import Client  # noqa: E402

NS = "kube-reloader-demo-tls"
T0 = time.monotonic()


def say(msg: str) -> None:
    stamp = time.strftime("%H:%M:%S")
    print(f"[{stamp} +{time.monotonic() - T0:6.2f}s] {msg}", flush=True)


async def show(client: Client, node: RealNode, image: str, renewals: int) -> int:
    await client.create(resources.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                               "metadata": {"name": NS}})  # fmt: skip
    ca, host = await t.issue(client, NS, "nats")
    say(f"cert-manager: private CA issued; Certificate nats-tls lives {t.LIFETIME} s, "
        f"renewed every {t.RENEW_AFTER} s")  # fmt: skip
    agent = agent_sidecar(image, restart=False, volumes={"tls": "/tls"}, process="nats-server")
    await w.create_all(client, NS, *w.nats_statefulset(
        "nats", agent=agent, annotations={POD_STRATEGY: "signal", SIGNAL: "SIGHUP"}))  # fmt: skip
    say("NATS StatefulSet applied: TLS from Secret nats-tls, kube-reloader.io/strategy: signal")
    async with t.following(client, NS, "nats", 4222) as targets:
        say(f"NATS Ready at {targets.addresses[0][0]}:4222")
        with t.Prober(node.netns_path, targets, ca, host, t.nats_handshake,
                      session=True) as prober:  # fmt: skip
            serial = await t.first_served(prober)
            say(f"NATS serves serial {serial:x} (cert-manager's first issuance)")
            for _ in range(renewals):
                serial = await t.renewals_after(client, NS, "nats-tls", serial)
                renewed = time.monotonic()
                say(f"cert-manager renewed nats-tls: serial {serial:x}")
                await eventually(lambda s=serial: t.all_serving(prober, targets, s),  # type: ignore[misc]
                                 timeout=t.RENEW_AFTER, what="the new serial served")  # fmt: skip
                say(f"NATS serves serial {serial:x} ({time.monotonic() - renewed:.1f} s later); "
                    f"failed connections so far: {len(prober.record.failures)}, "
                    f"dropped sessions: {len(prober.record.drops)}")  # fmt: skip
        r = prober.record
        restarted, _ = await t.pod_state(client, NS, "nats")
    say(f"{renewals} renewals: {r.ok} TLS connections (one every 100 ms), "
        f"{len(r.failures)} failed, {len(r.drops)} dropped sessions, {restarted} restarts")  # fmt: skip
    return 0 if not r.failures and not r.drops and not restarted else 1


def main() -> int:
    renewals = int(os.environ.get("RENEWALS", "3"))
    state = Path(tempfile.mkdtemp(prefix="kr-demo-tls-"))
    say("starting a dev cluster with a real node (kubelet, containerd, runc; needs root)")
    cluster = DevCluster(state, report=lambda line: print(f"           {line}", flush=True))
    proc: subprocess.Popen[bytes] | None = None
    try:
        cluster.up(nodes=1, build=True, real_node=True, timeout=600)
        node = RealNode(state, NodeBuilder().ensure().binaries)
        images = import_images(node)
        t.import_tls_images(node)
        say("images imported (kube-reloader, nats-server)")
        log = state / "kube-reloader.log"
        env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
        with log.open("w") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "kube_reloader", f"--namespaces={NS}",
                 "--reload-tls-secrets"], env=env, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        say(f"kube-reloader started: --namespaces={NS} --reload-tls-secrets (log {log})")

        async def run() -> int:
            async with Client(config.load_kubeconfig([cluster.kubeconfig])) as client:
                with certmanager.running(cluster.kubeconfig, state / "cert-manager.log"):
                    say("cert-manager's controller running")
                    return await show(client, node, images.controller, renewals)

        return asyncio.run(run())
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        cluster.down()
        say("dev cluster stopped")


if __name__ == "__main__":
    sys.exit(main())
