"""`make demo-down`: stop the demo's kube-reloader and its dev cluster."""

from __future__ import annotations

import contextlib
import os
import signal

from kube_reloader.devcluster.cluster import DevCluster, default_state_dir

state_dir = default_state_dir("demo")
pid_path = state_dir / "kube-reloader.pid"
if pid_path.exists():
    with contextlib.suppress(OSError, ValueError):
        os.killpg(int(pid_path.read_text()), signal.SIGTERM)
        print(f"stopped kube-reloader (pid {pid_path.read_text()})")
stopped = DevCluster(state_dir).down()
print(f"stopped {', '.join(stopped)}" if stopped else "dev cluster was not running")
