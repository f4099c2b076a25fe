"""bench.controllers: another process's CPU to well under /proc's 10 ms ticks, to its exit."""

from __future__ import annotations

import errno
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from bench import controllers
from bench.controllers import Controller, exit_cpu, process_cpu, tick_cpu

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux's process CPU clocks")

#: the child burns CPU until its own clock reads half way between two 10 ms ticks, then
#: reports it and waits: a reading in ticks is 5 ms off, the process clock well under one
BURN = """
import sys, time
while time.process_time() < 0.03 or not 0.004 <= time.process_time() % 0.01 <= 0.006:
    pass
print(time.process_time(), flush=True)
sys.stdin.read()
"""

#: the child says it is ready (on stdout, and into the FIFO `READY` names, if any), then on
#: SIGTERM burns 60 ms of CPU shutting down, reports its clock and exits
SLOW_EXIT = """
import os, signal, sys, time
def shut_down(*_):
    start = time.process_time()
    while time.process_time() < start + 0.06:
        pass
    print("exiting", time.process_time(), flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, shut_down)
print("ready", flush=True)
if "READY" in os.environ:
    with open(os.environ["READY"], "w") as fifo:
        fifo.write("ready")
while True:
    signal.pause()
"""


def test_another_processs_cpu_is_read_to_well_under_a_tick() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", BURN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        reported = float(child.stdout.readline())
        measured = process_cpu(child.pid)
        ticks = tick_cpu(child.pid)
    finally:
        child.communicate("")
    assert measured is not None, "the process clock could be read"
    # after its report the child only writes a line and blocks reading: a fraction of a ms
    assert reported <= measured < reported + 0.002
    assert ticks is not None, "the fallback, /proc's ticks, could be read"
    assert abs(ticks - reported) < 0.02


def test_no_process_id_reads_nothing_not_the_benchs_own_clock() -> None:
    assert process_cpu(0) is None
    assert process_cpu(-5) is None


def test_a_signalled_process_is_charged_what_it_spent_shutting_down() -> None:
    child = subprocess.Popen([sys.executable, "-c", SLOW_EXIT], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    assert child.stdout.readline() == "ready\n"
    before = process_cpu(child.pid)
    assert before is not None
    child.send_signal(signal.SIGTERM)
    spent = exit_cpu(child, timeout=30)
    final = float(child.stdout.readline().split()[1])
    assert child.returncode == 0, "exit_cpu reaps the child"
    assert spent is not None, "its exit was seen before it was reaped"
    assert spent >= before + 0.06, "the 60 ms of its shutdown count"
    assert final <= spent < final + 0.05  # then only the interpreter's own exit


def test_a_process_that_does_not_exit_in_time_times_out_and_is_left_running() -> None:
    child = subprocess.Popen([sys.executable, "-c", SLOW_EXIT], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    assert child.stdout.readline() == "ready\n"
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            exit_cpu(child, timeout=0.05)  # not signalled: it waits for ever
        assert child.poll() is None
    finally:
        child.kill()
        child.wait()


def test_without_pidfds_a_process_is_waited_for_and_its_end_not_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refused(pid: int) -> int:
        raise OSError(errno.ENOSYS, "pidfd_open")

    monkeypatch.setattr(controllers.os, "pidfd_open", refused)
    child = subprocess.Popen([sys.executable, "-c", SLOW_EXIT], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    assert child.stdout.readline() == "ready\n"
    child.send_signal(signal.SIGTERM)
    assert exit_cpu(child, timeout=30) is None
    assert child.returncode == 0, "waited for all the same"


def _ready_fifo(tmp_path: Path) -> tuple[dict[str, str], int]:
    """An environment naming a FIFO the child says it is ready into, and the FIFO's read end
    (opened for writing too, so that it never reads an end between two children)."""
    path = tmp_path / "ready"
    os.mkfifo(path)
    return dict(os.environ, READY=str(path)), os.open(path, os.O_RDWR)


def _await_ready(fifo: int) -> None:
    poller = select.poll()
    poller.register(fifo, select.POLLIN)
    assert poller.poll(20_000), "the child said it was ready within 20 s"
    assert os.read(fifo, 5) == b"ready"


def _lines(log: Path, prefix: str) -> list[str]:
    return [x for x in log.read_text().splitlines() if x.startswith(prefix)]


def test_a_restarted_controller_is_charged_its_shutdown(tmp_path: Path) -> None:
    log = tmp_path / "ctrl.log"
    env, fifo = _ready_fifo(tmp_path)
    ctrl = Controller("slow-exit", [sys.executable, "-c", SLOW_EXIT], env, log)
    try:
        _await_ready(fifo)
        first = ctrl.proc.pid
        ctrl.restart(signal.SIGTERM)  # returns once the first has exited: its line is written
        assert ctrl.proc.pid != first
        (exiting,) = _lines(log, "exiting")
        assert ctrl.cpu_before_restart >= float(exiting.split()[1])
        _await_ready(fifo)
        assert ctrl.cpu_now() >= ctrl.cpu_before_restart
    finally:
        ctrl.stop()
        os.close(fifo)


#: the child says it is ready, burns 50 ms of CPU, reports its clock and exits by itself
CRASH = """
import time
print("ready", flush=True)
while time.process_time() < 0.05:
    pass
print("exiting", time.process_time(), flush=True)
raise SystemExit(3)
"""


def test_a_controller_that_crashed_is_charged_what_it_spent_before_it_died(
    tmp_path: Path,
) -> None:
    log = tmp_path / "ctrl.log"
    ctrl = Controller("crash", [sys.executable, "-c", CRASH], dict(os.environ), log)
    try:
        pid = ctrl.proc.pid
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # it has exited, not yet reaped
        (exiting,) = _lines(log, "exiting")
        ctrl.restart(signal.SIGTERM)  # the signal's poll reaps it: its end cannot be seen
        assert ctrl.cpu_before_restart >= float(exiting.split()[1])
    finally:
        ctrl.stop()


def test_profiling_without_py_spy_fails_before_a_controller_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[Controller] = []
    monkeypatch.setattr(controllers.sys, "executable", str(tmp_path / "python"))
    monkeypatch.setattr(Controller, "_start", lambda self: started.append(self))
    with pytest.raises(FileNotFoundError, match=r"requirements/bench\.txt"):
        Controller("c", ["true"], {}, tmp_path / "c.log", profile=tmp_path / "c.folded")
    assert started == []
