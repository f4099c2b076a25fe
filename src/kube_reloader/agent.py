"""`kube-reloader agent`: the sidecar that carries out in-place reloads (core/inplace.py).

It has no API credentials and needs none: it reads its own pod's annotations from a
downward-API file (`--annotations`), which the kubelet keeps up to date, and

* for `restart-in-place`: when the `kube-reloader.io/restart` token differs from the one it
  started with, it writes a termination message and exits with `RESTART_EXIT_CODE`; its
  restart rule (`RestartAllContainers` on that exit code) has the kubelet restart every
  container of the pod in place. It then starts again with the new token as its own;
* for `signal`: when `kube-reloader.io/signal-request` names digests, it waits until every
  watched volume (`--volume NAME=PATH`) that the request names holds files of that digest
  (the kubelet refreshes mounted ConfigMaps and Secrets some seconds after the change), then
  sends the request's signal to the processes named `--process` (PID namespace shared:
  `shareProcessNamespace`; without `--process` it never signals). A volume holding Secrets
  is named with `changed` instead of a digest: it is ready once its files differ from what
  they were when the application last loaded them (at the agent's start or its last
  signal). The last request served and those baselines are kept in `--state` (an emptyDir)
  when given, so an agent restarted on its own neither signals twice nor misses one.

Everything it reads is treated as hostile: an unreadable file or request is logged and
ignored, never a reason to signal or exit. Standard library only (a small resident set).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kube_reloader.core import inplace

#: the most of the annotations file read (the API server caps annotations at 256 KiB)
MAX_ANNOTATIONS = 256 * 1024
#: the most read of one mounted file while hashing (a ConfigMap holds at most 1 MiB)
MAX_FILE = 4 * 1024 * 1024


def log(event: str, **fields: object) -> None:
    doc = {"ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "msg": event, **fields}
    print(json.dumps(doc, default=str), file=sys.stderr, flush=True)


def _unquote(text: str) -> str | None:
    """A Go-quoted string (`strconv.Quote`, as the kubelet writes annotation values)."""
    if len(text) < 2 or text[0] != '"' or text[-1] != '"':
        return None
    body, out, i = text[1:-1], [], 0
    simple = {
        "n": "\n",
        "t": "\t",
        "r": "\r",
        '"': '"',
        "\\": "\\",
        "a": "\a",
        "b": "\b",
        "f": "\f",
        "v": "\v",
        "'": "'",
    }
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1 : i + 2]
        if nxt in simple:
            out.append(simple[nxt])
            i += 2
            continue
        width = {"x": 2, "u": 4, "U": 8}.get(nxt)
        digits = body[i + 2 : i + 2 + (width or 0)]
        if width is None or len(digits) != width:
            return None
        try:
            out.append(chr(int(digits, 16)))
        except ValueError:
            return None
        i += 2 + width
    return "".join(out)


def parse_annotations(text: str) -> dict[str, str]:
    """The downward API's `key="value"` lines; lines that do not parse are skipped."""
    out: dict[str, str] = {}
    for line in text.split("\n"):  # not splitlines(): a value may hold U+0085 or U+2028
        key, sep, quoted = line.rstrip("\r").partition("=")
        value = _unquote(quoted) if sep else None
        if key and value is not None:
            out[key] = value
    return out


def volume_digest(root: Path) -> str | None:
    """The digest of the files a ConfigMap or Secret volume shows under `root` (the kubelet's
    `..data` machinery skipped; the user-visible names followed); None when unreadable."""
    contents: list[bytes] = []

    def walk(path: Path, depth: int) -> Iterator[Path]:
        if depth > 8:
            return
        for entry in sorted(path.iterdir()):
            if entry.name.startswith(".."):
                continue
            if entry.is_dir():
                yield from walk(entry, depth + 1)
            elif entry.is_file():
                yield entry

    try:
        for f in walk(root, 0):
            with f.open("rb") as fh:
                contents.append(fh.read(MAX_FILE + 1)[:MAX_FILE])
    except OSError:
        return None
    return inplace.files_digest(contents)


def named_processes(name: str, proc: Path = Path("/proc"), own: int | None = None) -> list[int]:
    """The processes whose command (`comm`) or program name is `name`."""
    own = os.getpid() if own is None else own
    out = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) in (1, own):
            continue
        with contextlib.suppress(OSError):
            comm = (entry / "comm").read_text().strip()
            argv0 = (entry / "cmdline").read_bytes().split(b"\0", 1)[0].decode(errors="replace")
            if name in (comm, os.path.basename(argv0)):
                out.append(int(entry.name))
    return sorted(out)


@dataclass(eq=False, repr=False)  # state, not a value: compared by identity
class Agent:
    annotations: Path
    volumes: dict[str, Path] = field(default_factory=dict)
    process: str | None = None
    state: Path | None = None
    termination_log: Path = Path("/dev/termination-log")
    kill: Callable[[int, int], None] = os.kill
    proc: Path = Path("/proc")
    #: the restart token it started with, and the last signal request it served
    baseline: str | None = None
    served: str | None = None
    #: each watched volume's digest when the application last loaded it
    loaded: dict[str, str | None] = field(default_factory=dict)
    waiting_for: str | None = None

    def read(self) -> dict[str, str]:
        try:
            with self.annotations.open(encoding="utf-8", errors="replace") as fh:
                return parse_annotations(fh.read(MAX_ANNOTATIONS))
        except OSError as exc:
            log("cannot read the annotations file", path=str(self.annotations), error=str(exc))
            return {}

    def start(self) -> None:
        current = self.read()
        self.baseline = current.get(inplace.RESTART)
        kept: dict[str, object] = {}
        if self.state is not None:
            with contextlib.suppress(OSError, ValueError, RecursionError):
                doc = json.loads(self.state.read_text()[: 2 * inplace.MAX_REQUEST_TEXT])
                kept = doc if isinstance(doc, dict) else {}
        served, loaded = kept.get("served"), kept.get("loaded")
        # without a kept state, what is asked now is taken as served: the application read
        # the files as they are when it started
        self.served = served if isinstance(served, str) else current.get(inplace.SIGNAL_REQUEST)
        self.loaded = {n: volume_digest(path) for n, path in self.volumes.items()}
        if isinstance(loaded, dict):
            self.loaded.update({str(k): str(v) for k, v in loaded.items() if k in self.volumes})
        log("agent started", restart_token=self.baseline, volumes=sorted(self.volumes))

    def step(self) -> int | None:
        """One look; the exit code to leave with, or None to carry on."""
        current = self.read()
        token = current.get(inplace.RESTART)
        if token and token != self.baseline:
            log("restart requested", token=token)
            with contextlib.suppress(OSError):
                self.termination_log.write_text(f"kube-reloader: restart requested ({token})")
            return inplace.RESTART_EXIT_CODE
        text = current.get(inplace.SIGNAL_REQUEST)
        if text and text != self.served:
            self._serve(text)
        return None

    def _serve(self, text: str) -> None:
        request = inplace.parse_request(text)
        if request is None:
            self._once(text, "unreadable signal request ignored")
            return
        sig, digests = request
        if not self.process:
            self._once(text, "a signal was asked for, but the agent has no --process")
            return
        for name, want in digests.items():
            path = self.volumes.get(name)
            if path is None:
                continue  # not watched here: nothing to wait for
            got = volume_digest(path)
            ready = got != self.loaded.get(name) if want == inplace.CHANGED else got == want
            if got is None or not ready:
                why = "cannot read the volume" if got is None else "waiting for the kubelet"
                self._once(text, f"{why} to serve the request", volume=name, path=str(path))
                return
        pids = named_processes(self.process, self.proc)
        for pid in pids:
            try:
                self.kill(pid, inplace.signal_number(sig))
            except OSError as exc:
                log("cannot signal", pid=pid, signal=sig, error=str(exc))
        log("signalled", signal=sig, pids=pids)
        self.served = text
        self.loaded = {n: volume_digest(path) for n, path in self.volumes.items()}
        if self.state is not None:
            with contextlib.suppress(OSError):
                self.state.write_text(json.dumps({"served": text, "loaded": self.loaded}))

    def _once(self, text: str, message: str, **fields: object) -> None:
        """Log `message` once per request."""
        if self.waiting_for != text:
            log(message, **fields)
            self.waiting_for = text


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(
        prog="kube-reloader agent", allow_abbrev=False, description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--annotations", required=True, help="the downward-API annotations file")
    p.add_argument(
        "--volume",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="a watched ConfigMap/Secret volume and where it is mounted here",
    )
    p.add_argument("--process", help="signal the processes of this name (signal strategy)")
    p.add_argument("--state", help="a file on an emptyDir keeping the last request served")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between looks")
    args = p.parse_args(argv)
    volumes: dict[str, Path] = {}
    for spec in args.volume:
        name, sep, path = spec.partition("=")
        if not (name and sep and path):
            p.error(f"--volume {spec!r}: want NAME=PATH")
        volumes[name] = Path(path)
    agent = Agent(
        Path(args.annotations), volumes, args.process, Path(args.state) if args.state else None
    )
    agent.start()
    interval = min(max(args.interval, 0.1), 60.0)
    while True:
        try:
            code = agent.step()
        except Exception as exc:  # noqa: BLE001 - one odd look never stops the agent
            log("agent step failed", error=f"{type(exc).__name__}: {exc}")
            code = None
        if code is not None:
            return code
        time.sleep(interval)
