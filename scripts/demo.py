"""`make demo`: a dev cluster, kube-reloader, a sample app, a ConfigMap change, the rollout.

Every step is printed with a timestamp; the cluster and the controller are left running so
you can keep experimenting (`export KUBECONFIG=...`), and the last line says how to stop them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from kube_reloader.devcluster.cluster import DevCluster, default_state_dir
from kube_reloader.kube import config, errors, resources
from kube_reloader.kube.client import Client, PatchType

ROOT = Path(__file__).resolve().parent.parent
NS = "kube-reloader-demo"
T0 = time.monotonic()


def say(msg: str) -> None:
    stamp = time.strftime("%H:%M:%S")
    print(f"[{stamp} +{time.monotonic() - T0:6.2f}s] {msg}", flush=True)


KINDS = {
    "Namespace": resources.NAMESPACES,
    "ConfigMap": resources.CONFIGMAPS,
    "Secret": resources.SECRETS,
    "Deployment": resources.DEPLOYMENTS,
}


async def pods(client: Client) -> dict[str, str]:
    listed = await client.list(resources.PODS, namespace=NS, label_selector="app=web")
    return {
        p["metadata"]["name"]: p["status"].get("phase", "?")
        for p in listed.items
        if not p["metadata"].get("deletionTimestamp")
    }


async def wait_for(what: str, probe: Any, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = await probe()
        if result:
            return result
        await asyncio.sleep(0.1)
    raise SystemExit(f"demo: timed out waiting for {what}")


async def demo(kubeconfig: Path, log_path: Path) -> None:
    async with Client(config.load_kubeconfig([kubeconfig])) as client:
        with contextlib.suppress(errors.NotFound):
            await client.delete(resources.NAMESPACES, NS)
        await wait_for("the previous demo namespace to go away", lambda: _gone(client))
        for doc in yaml.safe_load_all((ROOT / "examples" / "demo.yaml").read_text()):
            await client.create(KINDS[doc["kind"]], doc)
        say(
            f'applied examples/demo.yaml: Deployment {NS}/web (reloader.stakater.com/auto: "true"), ConfigMap web-config, Secret web-tls'
        )

        async def running() -> dict[str, str] | None:
            p = await pods(client)
            return p if len(p) == 2 and all(v == "Running" for v in p.values()) else None

        before = await wait_for("2 running pods", running)
        say(f"pods Running: {', '.join(sorted(before))}")
        await asyncio.sleep(1.0)  # let kube-reloader's caches sync the new objects

        changed_at = time.monotonic()
        await client.patch(resources.CONFIGMAPS, "web-config", {"data": {"GREETING": "hello, reloaded"}},
                           namespace=NS, patch_type=PatchType.MERGE)  # fmt: skip
        say("changed ConfigMap web-config: GREETING=hello, reloaded")

        async def patched() -> str | None:
            d = await client.get(resources.DEPLOYMENTS, "web", namespace=NS)
            for e in d["spec"]["template"]["spec"]["containers"][0].get("env") or []:
                if e["name"] == "STAKATER_WEB_CONFIG_CONFIGMAP":
                    return str(e["value"])
            return None

        value = await wait_for("kube-reloader to patch the Deployment", patched)
        say(
            f"Deployment patched after {1000 * (time.monotonic() - changed_at):.0f} ms: STAKATER_WEB_CONFIG_CONFIGMAP={value}"
        )
        for line in log_path.read_text().splitlines():
            if "change detected" in line or "reloaded workload" in line:
                say(f"kube-reloader log: {line[:200]}")

        async def rolled() -> dict[str, str] | None:
            p = await pods(client)
            new = {k: v for k, v in p.items() if k not in before}
            return (
                p
                if len(new) == 2 and len(p) == 2 and all(v == "Running" for v in p.values())
                else None
            )

        after = await wait_for("the rollout to replace both pods", rolled)
        say(
            f"rollout done after {time.monotonic() - changed_at:.1f}s: new pods {', '.join(sorted(after))} Running; old pods gone"
        )
        for e in (await client.list(resources.EVENTS, namespace=NS)).items:
            if e["reason"] == "Reloaded":
                say(f"Event {e['type']}/{e['reason']} on Deployment web: {e['message']}")


async def _gone(client: Client) -> bool:
    try:
        await client.get(resources.NAMESPACES, NS)
    except errors.NotFound:
        return True
    return False


def main() -> int:
    state_dir = default_state_dir("demo")
    say("starting the dev cluster (etcd, kube-apiserver, controller-manager, scheduler, kwok)")
    cluster = DevCluster(state_dir, report=lambda line: print(f"           {line}", flush=True))
    state = cluster.up()
    kubeconfig = Path(state.kubeconfig)
    log_path = state_dir / "kube-reloader.log"
    pid_path = state_dir / "kube-reloader.pid"
    if pid_path.exists():
        with contextlib.suppress(OSError, ValueError):
            os.killpg(int(pid_path.read_text()), signal.SIGTERM)
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kube_reloader", f"--namespaces={NS}"],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    pid_path.write_text(str(proc.pid))
    say(f"started kube-reloader (pid {proc.pid}, log {log_path})")
    try:
        asyncio.run(demo(kubeconfig, log_path))
    except BaseException:
        print(f"demo failed; kube-reloader log: {log_path}", file=sys.stderr)
        raise
    print()
    print(f"The cluster and kube-reloader keep running. Try it:  export KUBECONFIG={kubeconfig}")
    print("Tear everything down with:  make demo-down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
