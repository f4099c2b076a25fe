"""The processes of one dev cluster, started and waited for: each component runs in the
background with its log file and is recorded in the cluster's state (saved at once, so `down`
finds it even if `up` dies next), is checked still alive while others start, and is waited
for until its probe says healthy. `DevCluster` starts, restarts and brings back its
components through a `Launcher`; `realnode` starts the real node's processes through the same
`spawn`.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from kube_reloader.devcluster.node import enter_netns
from kube_reloader.devcluster.processes import alive, last_error_line
from kube_reloader.devcluster.state import ClusterError, Proc, State


class Launcher:
    """Starts the processes of `state` in `cwd`, their logs in `logs`; `save` writes the
    state, `report` tells progress."""

    def __init__(
        self,
        state: State,
        *,
        cwd: Path,
        logs: Path,
        save: Callable[[State], None],
        report: Callable[[str], None],
    ) -> None:
        self.state = state
        self.cwd, self.logs = cwd, logs
        self.save, self.report = save, report

    def spawn(
        self,
        name: str,
        argv: Sequence[str],
        *,
        netns: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """Start `name` in the background, recorded in the state. `netns`: the path of a
        network namespace it starts in (the real node's processes)."""
        log_path = self.logs / f"{name}.log"
        with log_path.open("ab") as log:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=self.cwd,
                env=dict(env) if env is not None else None,
                preexec_fn=enter_netns(netns) if netns else None,
            )
        record = Proc(name=name, pid=proc.pid, argv=list(argv), log=str(log_path))
        procs = self.state.procs
        names = [p.name for p in procs]
        if name in names:
            procs[names.index(name)] = record  # keep start order for `down`
        else:
            procs.append(record)
        self.save(self.state)
        self.report(f"[dev-cluster] started {name} (pid {proc.pid})")

    def check_alive(self, only: str | None = None) -> None:
        """Raise naming the first recorded process (or `only`) that has exited."""
        for proc in self.state.procs:
            if only is not None and proc.name != only:
                continue
            if not alive(proc.pid):
                hint = last_error_line(Path(proc.log))
                raise ClusterError(
                    f"dev-cluster: {proc.name} exited during startup"
                    f"{': ' + hint if hint else ''} (log: {proc.log})"
                )

    def wait(
        self, name: str, deadline: float, probe: Callable[[], bool], *, only: bool = False
    ) -> None:
        """Until `probe` says `name` is healthy; every process (or, with `only`, `name`
        alone) must stay alive meanwhile."""
        t0 = time.monotonic()
        while True:
            self.check_alive(name if only else None)
            if probe():
                self.report(f"[dev-cluster] {name} healthy after {time.monotonic() - t0:.1f}s")
                return
            if time.monotonic() > deadline:
                log = next(p.log for p in self.state.procs if p.name == name)
                raise ClusterError(
                    f"dev-cluster: {name} did not become healthy in time (log: {log})"
                )
            time.sleep(0.1)
