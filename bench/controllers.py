"""The controllers under test as local processes: their command lines (Reloader-equivalent
flags) and the process wrapper that samples CPU and RSS from /proc and restarts on a signal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from .baseline import is_kube_reloader
from .runs import Scenario


class Controller:
    """One controller process, with /proc sampling of CPU and RSS."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.name, self.argv, self.env, self.log = name, argv, env, log
        self.samples: list[tuple[float, float, int]] = []  # (t, cpu seconds, rss bytes)
        self.cpu_before_restart = 0.0
        self.peak = 0  # highest VmHWM of the controller's processes (bytes)
        self.started = time.monotonic()
        self.proc = self._start()
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _start(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            self.argv, env=self.env, stdout=self.log.open("a"), stderr=subprocess.STDOUT
        )

    def _read(self) -> tuple[float, int] | None:
        try:
            stat = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            rss = int(Path(f"/proc/{self.proc.pid}/statm").read_text().split()[1]) * os.sysconf(
                "SC_PAGE_SIZE"
            )
            # The kernel's high-water mark: a peak shorter than the sampling interval counts.
            status = Path(f"/proc/{self.proc.pid}/status").read_text()
            hwm = int(status.split("VmHWM:", 1)[1].split()[0]) * 1024
        except (OSError, IndexError, ValueError):
            return None
        self.peak = max(self.peak, hwm)
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(stat[11]) + int(stat[12])) / ticks, rss

    def _sample(self) -> None:
        while not self._stop.wait(0.5):
            got = self._read()
            if got is not None:
                self.samples.append(
                    (time.monotonic() - self.started, self.cpu_before_restart + got[0], got[1])
                )

    def restart(self, sig: int) -> None:
        last = self._read()
        self.cpu_before_restart += last[0] if last else 0.0
        self.proc.send_signal(sig)
        self.proc.wait(timeout=30)
        self.proc = self._start()

    def stop(self) -> None:
        self._stop.set()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def controller_argv(name: str, bins: Path, scenario: Scenario) -> list[str]:
    if is_kube_reloader(name):  # a baseline runs the same command from its own source
        same = (
            []
            if scenario.id == "M2"
            else ["--reload-coalesce-window=0", "--reload-min-interval=0", "--reload-rate=0"]
        )
        return [
            sys.executable,
            "-m",
            "kube_reloader",
            "--log-format=json",
            "--metrics-addr=127.0.0.1:0",
            *same,
            *scenario.kube_reloader_args,
        ]
    return [str(bins / "reloader"), "--log-format=json", *scenario.reloader_args]
