"""Small process and loopback-HTTP helpers the dev cluster uses to start, probe and stop.

TLS contexts and health probes, etcd's JSON API, and `/proc` checks
that a recorded PID is still alive and still runs the binary that was recorded.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kube_reloader.devcluster.state import ClusterError, Proc


def insecure() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def http_ok(url: str, ctx: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2, context=ctx) as resp:  # noqa: S310
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def post_json(url: str, body: Mapping[str, Any]) -> Any:
    req = urllib.request.Request(  # noqa: S310 - a loopback etcd URL we built
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:  # noqa: S310
            return json.loads(resp.read())
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ClusterError(f"dev-cluster: etcd request {url} failed: {exc}") from exc


def alive(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)  # reap our own children
        if done == pid:
            return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def same_process(proc: Proc) -> bool:
    """Guard against PID reuse: the recorded binary must still be what runs there."""
    try:
        with open(f"/proc/{proc.pid}/cmdline", "rb") as fh:
            argv0 = fh.read().split(b"\0", 1)[0].decode(errors="replace")
    except OSError:
        return False
    return argv0 == proc.argv0


def last_error_line(log: Path) -> str:
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    for line in reversed(lines[-40:]):
        low = line.lower()
        if any(w in low for w in ("error", "fatal", "failed", "panic", "address already in use")):
            return line.strip()[:240]
    return lines[-1].strip()[:240] if lines else ""


def health_probes(ports: Mapping[str, int], ca: Path) -> dict[str, Callable[[], bool]]:
    """One health check per component; the apiserver's is verified against `ca` if present."""
    p = ports
    ca_ctx = ssl.create_default_context(cafile=str(ca)) if ca.exists() else insecure()
    return {
        "etcd": lambda: http_ok(f"http://127.0.0.1:{p['etcd']}/readyz"),
        "kube-apiserver": lambda: http_ok(
            f"https://127.0.0.1:{p['kube-apiserver']}/readyz", ca_ctx
        ),
        "kube-controller-manager": lambda: http_ok(
            f"https://127.0.0.1:{p['kube-controller-manager']}/healthz", insecure()
        ),
        "kube-scheduler": lambda: http_ok(
            f"https://127.0.0.1:{p['kube-scheduler']}/healthz", insecure()
        ),
        "kwok": lambda: http_ok(f"http://127.0.0.1:{p['kwok']}/healthz"),
    }


def stop_process(proc: Proc, grace: float) -> bool:
    """SIGTERM the process group, SIGKILL it after `grace` seconds. False if not running."""
    if not (alive(proc.pid) and same_process(proc)):
        return False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    if alive(proc.pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        while alive(proc.pid):
            time.sleep(0.02)
    return True
