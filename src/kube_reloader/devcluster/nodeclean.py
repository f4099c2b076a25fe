"""What a stopped real node leaves behind, cleaned: containerd's shims and the containers'
processes (they outlive containerd by design), mounts under the node's directories (volumes,
overlay root filesystems, pod network namespaces), and the kubelet's cgroups."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import signal
import subprocess
import time
from pathlib import Path

CGROUPS = Path("/sys/fs/cgroup")


def kill_leftovers(shim: Path, run: Path, cgroup_root: str) -> None:
    """SIGKILL the node's shims (by binary and socket directory) and every process left in its
    cgroups."""
    for pid in _pids():
        if _argv0(pid) == str(shim) and str(run) in _cmdline(pid):
            _kill(pid)
    for _ in range(3):
        victims = cgroup_pids(cgroup_root)
        for pid in victims:
            _kill(pid)
        if not victims:
            break
        time.sleep(0.3)


def unmount_under(roots: tuple[Path, ...]) -> None:
    """Lazily unmount everything mounted at or below `roots`, deepest first."""
    for target in sorted(mounts_under(roots), key=len, reverse=True):
        subprocess.run(["umount", "-l", target], capture_output=True, check=False)


def cgroup_dirs(cgroup_root: str) -> list[Path]:
    out = []
    for hierarchy in CGROUPS.iterdir():
        top = hierarchy / cgroup_root.strip("/")
        if top.is_dir():
            out += [Path(p) for p, _d, _f in os.walk(top)]
    return out


def cgroup_pids(cgroup_root: str) -> set[int]:
    pids: set[int] = set()
    for d in cgroup_dirs(cgroup_root):
        with contextlib.suppress(OSError, ValueError):
            pids |= {int(x) for x in (d / "cgroup.procs").read_text().split()}
    return pids


def remove_cgroups(cgroup_root: str) -> None:
    for d in sorted(cgroup_dirs(cgroup_root), key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):
            d.rmdir()


def mounts_under(roots: tuple[Path, ...]) -> list[str]:
    prefixes = [str(r.resolve()) for r in roots]
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        if len(fields) > 4:
            point = fields[4].replace("\\040", " ")
            if any(point == p or point.startswith(p + "/") for p in prefixes):
                out.append(point)
    return out


def routes_overlapping(cidrs: tuple[str, ...]) -> list[str]:
    """The host's routes (other than the default and the real nodes' own blackholes) whose
    destination overlaps `cidrs`."""
    cmd = ["ip", "-j", "route", "show"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    try:
        routes = json.loads(done.stdout or "[]")
    except ValueError:
        return []
    wanted = [ipaddress.ip_network(c) for c in cidrs]
    out = []
    for r in routes if isinstance(routes, list) else ():
        dst = str(r.get("dst", "")) if isinstance(r, dict) else ""
        if not dst or dst == "default" or (r.get("type") == "blackhole" and dst in cidrs):
            continue
        with contextlib.suppress(ValueError):
            net = ipaddress.ip_network(dst, strict=False)
            if any(net.version == w.version and net.overlaps(w) for w in wanted):
                out.append(dst)
    return out


def namespaces() -> list[str]:
    """The named network namespaces (`ip netns`'s, under /run/netns)."""
    try:
        return sorted(os.listdir("/run/netns"))
    except OSError:
        return []


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace")


def _argv0(pid: int) -> str:
    return _cmdline(pid).split(" ", 1)[0]


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)
