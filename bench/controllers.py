"""The controllers under test as local processes: their command lines (Reloader-equivalent
flags) and the process wrapper that samples CPU and RSS from /proc and restarts on a signal."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from kube_reloader.devcluster.peers import LISTEN_ENV
from kube_reloader.devcluster.ports import free_port

from .baseline import RELOADER_V1, RELOADER_V2, is_kube_reloader
from .runs import Scenario


def process_cpu(pid: int) -> float | None:
    """CPU seconds process `pid` has used, all its threads (those gone included), to the
    nanosecond: Linux's clock of another process's CPU (`clock_getcpuclockid`: the process id
    complemented, shifted by 3, ORed with the scheduler clock's 2). It reads until the process
    is reaped (an exited child not yet waited for has it still). None where it cannot be read,
    and for a pid <= 0 (0 would name this process's own clock)."""
    if pid <= 0:
        return None
    try:
        return time.clock_gettime(((~pid) << 3) | 2)
    except OSError:
        return None


def tick_cpu(pid: int) -> float | None:
    """The same from /proc's utime and stime: 10 ms ticks, a tenth of what a quick run's
    no-op scenario spends after its start (the fallback where the clock cannot be read)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def cpu_of(pid: int) -> float | None:
    """`process_cpu`, else `tick_cpu`: what the process has spent, None once it is reaped."""
    spent = process_cpu(pid)
    return spent if spent is not None else tick_cpu(pid)


def exit_cpu(proc: subprocess.Popen[bytes], timeout: float) -> float | None:
    """Wait for `proc`, already signalled, to exit (and reap it), and return the CPU it used
    to the end: its clock is read once it has exited and before it is reaped (a pidfd turns
    readable at the exit; the zombie keeps its clock until `wait`), so what it spent shutting
    down counts. None when its exit cannot be seen before it is reaped: reaped already (by
    the signal's `poll`: it had crashed), or no pidfds (a kernel before 5.3, a sandbox that
    refuses them), then it is only waited for. `subprocess.TimeoutExpired` if it is still
    running after `timeout`."""
    if proc.returncode is None:
        try:
            fd = os.pidfd_open(proc.pid)
        except OSError:
            fd = None
        if fd is not None:
            try:
                poller = select.poll()  # not select(): any descriptor number
                poller.register(fd, select.POLLIN)
                if not poller.poll(timeout * 1000):
                    raise subprocess.TimeoutExpired(proc.args, timeout)
            finally:
                os.close(fd)
            spent = cpu_of(proc.pid)
            proc.wait()
            return spent
    proc.wait(timeout)
    return None


class Controller:
    """One controller process, with /proc sampling of CPU and RSS.

    With `profile` (a path: `.svg` for a flame graph, `.folded` for collapsed stacks), py-spy
    samples `rate` times a second the first process (not a restarted one) in
    non-blocking mode, so the controller is never stopped for a sample: its own CPU seconds
    do not include the profiler's, which runs as a process of its own."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log: Path,
                 profile: Path | None = None, rate: int = 100) -> None:  # fmt: skip
        self.name, self.argv, self.env, self.log = name, argv, env, log
        self.samples: list[tuple[float, float, int]] = []  # (t, cpu seconds, rss bytes)
        self.cpu_before_restart = 0.0
        self.peak = 0  # highest VmHWM of the controller's processes (bytes)
        self.started = time.monotonic()
        self.stopped: float | None = None
        self.driving: tuple[float, float] | None = None  # (t, CPU seconds) when updates start
        spy = Path(sys.executable).with_name("py-spy")
        if profile is not None and not spy.is_file():  # before the controller: none is left running
            raise FileNotFoundError(
                f"{spy} is not installed: pip install --require-hashes -r requirements/bench.txt"
            )
        self.proc = self._start()
        self.profiler: subprocess.Popen[bytes] | None = None
        if profile is not None:
            self.profiler = subprocess.Popen(
                [str(spy), "record", "--pid", str(self.proc.pid), "--rate", str(rate),
                 "--nonblocking", "--format", "raw" if profile.suffix == ".folded" else "flamegraph",
                 "--output", str(profile)],
                stdout=subprocess.DEVNULL, stderr=profile.with_suffix(".log").open("w"),
            )  # fmt: skip
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _start(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            self.argv, env=self.env, stdout=self.log.open("a"), stderr=subprocess.STDOUT
        )

    def _read(self) -> tuple[float, int] | None:
        pid = self.proc.pid
        try:
            rss = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf(
                "SC_PAGE_SIZE"
            )
            # The kernel's high-water mark: a peak shorter than the sampling interval counts.
            status = Path(f"/proc/{pid}/status").read_text()
            hwm = int(status.split("VmHWM:", 1)[1].split()[0]) * 1024
        except (OSError, IndexError, ValueError):
            return None
        cpu = cpu_of(pid)
        if cpu is None:
            return None
        self.peak = max(self.peak, hwm)
        return cpu, rss

    def _sample(self) -> None:
        while not self._stop.wait(0.5):
            with self._lock:  # never a process between its exit and its successor's start
                got = self._read()
                if got is not None:
                    self.samples.append(
                        (time.monotonic() - self.started, self.cpu_before_restart + got[0], got[1])
                    )

    def cpu_now(self) -> float:
        """CPU seconds of the controller so far (over restarts)."""
        with self._lock:
            got = self._read()
            return self.cpu_before_restart + (got[0] if got else 0.0)

    def mark_driving(self) -> None:
        """The updates start now: what the controller spent before is its start-up."""
        self.driving = (time.monotonic(), self.cpu_now())

    def restart(self, sig: int) -> None:
        """Signal the controller, wait for it to exit, and start it again. Its CPU counts to
        its exit: a controller's shutdown (draining, releasing its lease) is part of the run."""
        with self._lock:
            signalled = cpu_of(self.proc.pid)  # a crashed one's too: its zombie's clock
            self.proc.send_signal(sig)
            spent = exit_cpu(self.proc, timeout=30)
            self.cpu_before_restart += spent if spent is not None else (signalled or 0.0)
            self.proc = self._start()

    def stop(self) -> None:
        self.stopped = time.monotonic()
        self._stop.set()
        self._sampler.join()
        got = self._read()  # the CPU spent since the last 0.5 s sample counts too
        if got is not None:
            self.samples.append(
                (time.monotonic() - self.started, self.cpu_before_restart + got[0], got[1])
            )
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.profiler is not None:  # it writes the flame graph once its target has exited
            try:
                self.profiler.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.profiler.kill()


#: variables that would change a peer's scope or make it take part in leader election
SCRUBBED = ("KUBERNETES_NAMESPACE", "RELOADER_NAMESPACE", "POD_NAME", "POD_NAMESPACE")


def controller_argv(
    name: str, bins: Path, scenario: Scenario, env: dict[str, str]
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of one controller under test.

    Every server a controller opens listens on a free 127.0.0.1 port: kube-reloader's metrics
    (`:0`), Reloader v1's one server (its build reads `peers.LISTEN_ENV`), v2's metrics and
    health servers (`--metrics-addr`, `--health-addr`)."""
    env = {k: v for k, v in env.items() if k not in SCRUBBED}
    if is_kube_reloader(name):  # a baseline runs the same command from its own source
        same = (
            []
            if scenario.id == "M2"
            else ["--reload-coalesce-window=0", "--reload-min-interval=0", "--reload-rate=0"]
        )
        argv = [sys.executable, "-m", "kube_reloader", "--log-format=json",
                "--metrics-addr=127.0.0.1:0", *same, *scenario.kube_reloader_args]  # fmt: skip
        return argv, env
    return peer_argv(name, bins, env, scenario.reloader_args)


def peer_argv(
    name: str, bins: Path, env: dict[str, str], args: Sequence[str]
) -> tuple[list[str], dict[str, str]]:
    """A Reloader peer's command line (`args` appended) and environment, its servers on free
    127.0.0.1 ports, out of leader election and namespace scoping."""
    env = {k: v for k, v in env.items() if k not in SCRUBBED}
    if name == RELOADER_V1:
        env[LISTEN_ENV] = f"127.0.0.1:{free_port()}"
        return [str(bins / name), "--log-format=json", *args], env
    if name == RELOADER_V2:
        argv = [str(bins / name), "--log-format=json", f"--metrics-addr=127.0.0.1:{free_port()}",
                f"--health-addr=127.0.0.1:{free_port()}", *args]  # fmt: skip
        return argv, env
    raise ValueError(f"unknown controller {name!r}")
