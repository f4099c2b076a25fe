"""bench.controllers.process_cpu: another process's CPU to well under /proc's 10 ms ticks."""

from __future__ import annotations

import subprocess
import sys

import pytest
from bench.controllers import process_cpu

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


def test_another_processs_cpu_is_read_to_well_under_a_tick() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", BURN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        reported = float(child.stdout.readline())
        measured = process_cpu(child.pid, fallback=-1.0)
    finally:
        child.communicate("")
    assert measured != -1.0, "the process clock could be read"
    # after its report the child only writes a line and blocks reading: a fraction of a ms
    assert reported <= measured < reported + 0.002


def test_no_process_id_reads_the_fallback_not_the_benchs_own_clock() -> None:
    assert process_cpu(0, fallback=-1.0) == -1.0
    assert process_cpu(-5, fallback=-1.0) == -1.0
