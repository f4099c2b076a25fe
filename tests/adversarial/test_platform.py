"""Cases 3, 5, 6, 9 and 10 against the real controller process (and the real `lint` command).

3. A real Argo Rollout (status written by Argo's own controller): before, the Rollout LIST
   failed forever (`observedGeneration` is a string), the controller never became ready and
   no Deployment reloaded either.
5. 20 namespaces in `--namespaces`: before, the watches filled the single 100-connection pool
   and the controller never became ready.
6. 2,000 half-open connections to the metrics port: before, each was held for 130 s+ and at
   about 1,000 the process could not open its own API connections.
9. kubeconfig `insecure-skip-tls-verify: "false"` (a string): before, TLS verification was
   turned off; a CA together with `insecure-skip-tls-verify: true` was accepted.
10. `kube-reloader lint` on a YAML alias bomb: before, 6.5 GB and still running.
"""

from __future__ import annotations

import contextlib
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from kube_reloader import limits
from kube_reloader.devcluster.argo import RolloutsController
from kube_reloader.kube import resources
from kube_reloader.kube.client import Client
from tests.adversarial.tenant import (
    Canary,
    child_env,
    controller,
    drop_namespace,
    new_namespace,
)
from tests.integration.test_argo import argo, argo_observed, rollout
from tests.waiting import eventually

# serial: adversarial: bounds on the event loop's lag and on other namespaces' reloads
pytestmark = [pytest.mark.cluster, pytest.mark.serial]
__all__ = ["argo"]  # the fixture, shared with the Argo integration tests


@pytest.mark.rollout
@pytest.mark.timeout(1800)
async def test_a_real_argo_rollout_neither_blocks_readiness_nor_the_canary(
    argo: RolloutsController, client: Client, kubeconfig_path: Path, tenant: str, canary: Canary
) -> None:
    from kube_reloader.kube.client import PatchType
    from tests import builders

    await client.create(resources.CONFIGMAPS, builders.configmap("c", tenant, {"a": "1"}))
    await client.create(resources.ROLLOUTS, rollout("r", tenant))
    await eventually(lambda: argo_observed(client, tenant, "r"), what="Argo's status", timeout=60)
    async with controller(
        kubeconfig_path, [tenant, canary.namespace], "--is-Argo-Rollouts=true", client=client
    ) as proc:
        seconds = await canary.reloads(within=15)
        await client.patch(
            resources.CONFIGMAPS, "c", {"data": {"a": "2"}}, namespace=tenant,
            patch_type=PatchType.MERGE,
        )  # fmt: skip

        async def rollout_reloaded() -> bool:
            r = await client.get(resources.ROLLOUTS, "r", namespace=tenant)
            env = r["spec"]["template"]["spec"]["containers"][0].get("env") or []
            return any(e["name"] == "STAKATER_C_CONFIGMAP" for e in env)

        await eventually(rollout_reloaded, what="the Rollout's reload")
        assert (await proc.probe("/readyz")).status == 200
    print(f"canary reloaded {seconds:.2f}s after its change")


async def test_twenty_watched_namespaces_get_ready_and_reload_in_the_last_one(
    client: Client, kubeconfig_path: Path, canary: Canary
) -> None:
    others = [await new_namespace(client, "many") for _ in range(19)]
    try:
        async with controller(kubeconfig_path, [*others, canary.namespace]) as proc:
            seconds = await canary.reloads(within=15)
            lease_like = await proc.probe("/readyz")
            started = time.monotonic()
            await client.get(resources.NAMESPACES, canary.namespace)
            get_seconds = time.monotonic() - started
    finally:
        for ns in others:
            await drop_namespace(client, ns)
    assert lease_like.status == 200
    print(f"canary reloaded {seconds:.2f}s after its change")
    print(f"a GET beside the watches took {get_seconds:.3f}s")


@contextlib.contextmanager
def half_open(port: int, count: int) -> Iterator[list[socket.socket]]:
    """`count` connections that send half a request and then nothing."""
    limits.raise_open_files_limit()
    held: list[socket.socket] = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.setblocking(True)
            try:
                s.connect(("127.0.0.1", port))
                s.sendall(b"GET /live HTTP/1.1\r\nHost: x\r\n")
            except OSError:
                s.close()  # the server closed it to make room: what it should do
                continue
            held.append(s)
        yield held
    finally:
        for s in held:
            s.close()


async def test_two_thousand_half_open_connections_leave_probes_and_reloads_working(
    client: Client, kubeconfig_path: Path, tenant: str, canary: Canary
) -> None:
    async with controller(
        kubeconfig_path, [tenant, canary.namespace], client=client, open_files=1024
    ) as proc:
        with half_open(proc.port, 2000):
            live = await proc.probe("/live", timeout=5)
            ready = await proc.probe("/readyz", timeout=5)
            seconds = await canary.reloads(within=15)
    assert live.status == 200
    assert ready.status == 200
    print(f"canary reloaded {seconds:.2f}s after its change")


def kubeconfig_with(path: Path, out: Path, **cluster_fields: object) -> Path:
    doc = yaml.safe_load(path.read_text())
    doc["clusters"][0]["cluster"].update(cluster_fields)
    out.write_text(yaml.safe_dump(doc))
    return out


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"insecure-skip-tls-verify": "false"}, "insecure-skip-tls-verify"),
        ({"insecure-skip-tls-verify": True}, "insecure flag is not allowed"),
    ],
    ids=["a quoted boolean", "a CA together with insecure"],
)
def test_a_kubeconfig_that_would_weaken_tls_stops_the_start_with_one_line(
    kubeconfig_path: Path, tmp_path: Path, fields: dict[str, object], problem: str
) -> None:
    bad = kubeconfig_with(kubeconfig_path, tmp_path / "kubeconfig", **fields)
    done = subprocess.run(
        [sys.executable, "-m", "kube_reloader", f"--kubeconfig={bad}", "--metrics-addr=127.0.0.1:0"],
        capture_output=True, text=True, timeout=60, check=False, env=child_env(),
    )  # fmt: skip
    assert done.returncode == 1
    assert problem in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def test_lint_refuses_an_alias_bomb_in_bounded_memory_and_time(tmp_path: Path) -> None:
    layers = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        prev, name = chr(ord("a") + i - 1), chr(ord("a") + i)
        layers.append(f"{name}: &{name} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, "
                      f"*{prev}, *{prev}, *{prev}, *{prev}]")  # fmt: skip
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(layers) + "\n")
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "kube_reloader", "lint", str(bomb)],
        capture_output=True, text=True, timeout=120, check=False, preexec_fn=_cap_memory,
        env=child_env(),
    )  # fmt: skip
    print(f"lint refused the bomb in {time.monotonic() - started:.1f}s")
    assert done.returncode != 0
    assert "KR000" in done.stdout
    assert "alias" in done.stdout
