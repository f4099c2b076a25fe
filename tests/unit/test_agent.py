"""The in-place reload agent against files laid out as the kubelet lays them (a downward-API
annotations file, a ConfigMap volume's `..data` symlink swap) and a fake /proc: it restarts
only on a new token, signals only once the watched volume holds the requested digest, once,
and reads everything as hostile input."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kube_reloader import agent as ag
from kube_reloader.core import inplace


def go_quote(value: str) -> str:
    """As the kubelet writes an annotation value (Go's strconv.Quote, for these inputs)."""
    return json.dumps(value, ensure_ascii=False)


def write_annotations(path: Path, values: dict[str, str]) -> None:
    path.write_text("".join(f"{k}={go_quote(v)}\n" for k, v in sorted(values.items())))


def kubelet_volume(root: Path, files: dict[str, bytes], generation: int) -> None:
    """The kubelet's atomic writer: files in `..<ts>`, `..data` pointing at it, and the
    user-visible names pointing into `..data`."""
    root.mkdir(exist_ok=True)
    data = root / f"..2026_12_02_{generation}"
    data.mkdir()
    for name, content in files.items():
        (data / name).write_bytes(content)
    tmp = root / "..data_tmp"
    tmp.symlink_to(data.name)
    tmp.replace(root / "..data")
    for name in files:
        link = root / name
        if not link.is_symlink():
            link.symlink_to(f"..data/{name}")


@given(st.dictionaries(st.from_regex(r"[a-z][a-z0-9./-]{0,20}", fullmatch=True),
                       st.text(max_size=80), max_size=5))  # fmt: skip
@settings(max_examples=200)
def test_annotations_written_by_the_kubelet_read_back_as_they_were(
    values: dict[str, str],
) -> None:
    text = "".join(f"{k}={go_quote(v)}\n" for k, v in values.items())
    assert ag.parse_annotations(text) == values


@given(st.text(max_size=400))
def test_reading_the_annotations_file_is_total(text: str) -> None:
    assert isinstance(ag.parse_annotations(text), dict)


def test_go_escapes_are_decoded() -> None:
    assert ag.parse_annotations('k="a\\x41\\u00e9\\tb"\nbad line\nj="unterminated\n') == {
        "k": "aA\u00e9\tb"
    }


def test_a_volume_digest_is_the_digest_of_its_files_contents(tmp_path: Path) -> None:
    vol = tmp_path / "config"
    kubelet_volume(vol, {"a.conf": b"one", "b.conf": b"two"}, 1)
    assert ag.volume_digest(vol) == inplace.files_digest([b"one", b"two"])
    kubelet_volume(vol, {"a.conf": b"ONE", "b.conf": b"two"}, 2)
    assert ag.volume_digest(vol) == inplace.files_digest([b"ONE", b"two"])
    assert ag.volume_digest(tmp_path / "missing") is None


def fake_proc(root: Path, procs: dict[int, tuple[int, str]]) -> Path:
    """pid -> (parent pid, command)."""
    for pid, (ppid, comm) in procs.items():
        d = root / str(pid)
        d.mkdir(parents=True)
        (d / "stat").write_text(f"{pid} ({comm}) S {ppid} 1 1 0")
        (d / "comm").write_text(comm + "\n")
        (d / "cmdline").write_bytes(f"/usr/bin/{comm}\0--flag\0".encode())
    return root


def test_the_application_is_found_by_its_name_only(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, {1: (0, "pause"), 7: (0, "python3"), 9: (0, "app"),
                                12: (9, "app-worker"), 20: (0, "sidecar")})  # fmt: skip
    assert ag.named_processes("app", proc, own=7) == [9]
    assert ag.named_processes("python3", proc, own=7) == []  # never the agent itself
    assert ag.named_processes("pause", proc, own=7) == []  # the sandbox, never


class Rig:
    def __init__(self, tmp: Path) -> None:
        self.annotations = tmp / "annotations"
        self.volume = tmp / "config"
        self.kills: list[tuple[int, int]] = []
        kubelet_volume(self.volume, {"config.txt": b"v1"}, 1)
        self.secret = tmp / "secret"
        kubelet_volume(self.secret, {"token": b"s1"}, 1)
        write_annotations(self.annotations, {})
        proc = fake_proc(tmp / "proc", {1: (0, "pause"), 42: (0, "app"), 50: (0, "other")})
        self.agent = ag.Agent(
            self.annotations, {"config": self.volume, "creds": self.secret}, process="app",
            state=tmp / "state", termination_log=tmp / "termination-log",
            kill=lambda pid, sig: self.kills.append((pid, sig)), proc=proc,
        )  # fmt: skip


def test_a_new_restart_token_makes_the_agent_exit_with_the_agreed_code(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    write_annotations(rig.annotations, {inplace.RESTART: "100-0"})
    rig.agent.start()
    assert rig.agent.step() is None  # the token it started with: already served
    write_annotations(rig.annotations, {inplace.RESTART: "200-0"})
    assert rig.agent.step() == inplace.RESTART_EXIT_CODE
    assert "200-0" in (tmp_path / "termination-log").read_text()


def test_a_signal_waits_for_the_kubelet_then_is_sent_once(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    rig.agent.start()
    request = inplace.signal_request("SIGHUP", {"config": inplace.files_digest([b"v2"])})
    write_annotations(rig.annotations, {inplace.SIGNAL_REQUEST: request})
    assert rig.agent.step() is None
    assert rig.kills == []  # the volume still holds v1
    kubelet_volume(rig.volume, {"config.txt": b"v2"}, 2)
    rig.agent.step()
    rig.agent.step()
    assert rig.kills == [(42, int(signal.SIGHUP))]
    assert json.loads((tmp_path / "state").read_text())["served"] == request


def test_a_restarted_agent_keeps_what_it_served_and_misses_nothing(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    served = inplace.signal_request("SIGHUP", {"config": inplace.files_digest([b"v1"])})
    (tmp_path / "state").write_text(json.dumps({"served": served}))
    write_annotations(rig.annotations, {inplace.SIGNAL_REQUEST: served})
    rig.agent.start()
    rig.agent.step()
    assert rig.kills == []  # served before the restart: not again
    kubelet_volume(rig.volume, {"config.txt": b"v3"}, 3)
    newer = inplace.signal_request("SIGUSR1", {"config": inplace.files_digest([b"v3"])})
    write_annotations(rig.annotations, {inplace.SIGNAL_REQUEST: newer})
    rig.agent.step()
    assert rig.kills == [(42, int(signal.SIGUSR1))]


@pytest.mark.parametrize("request_text", ['{"signal":"SIGKILL","digests":{}}', "not json",
                                          '{"signal":"SIGTERM","digests":{}}',
                                          '{"digests":{"config":"x"}}', "[" * 5000])  # fmt: skip
def test_an_unreadable_or_forbidden_request_never_signals(
    tmp_path: Path, request_text: str
) -> None:
    rig = Rig(tmp_path)
    rig.agent.start()
    write_annotations(rig.annotations, {inplace.SIGNAL_REQUEST: request_text})
    for _ in range(3):
        assert rig.agent.step() is None
    assert rig.kills == []


def test_the_agent_entry_point_loads_none_of_the_controller() -> None:
    code = (
        "import sys\nfrom kube_reloader import cli\ntry:\n    cli.main(['agent', '--help'])\n"
        "except SystemExit:\n    pass\nprint(sorted(m for m in sys.modules if m.startswith("
        "('aiohttp', 'msgspec', 'kube_reloader.runtime', 'kube_reloader.kube'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)  # fmt: skip
    assert "kube-reloader agent" in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_a_secret_volume_is_ready_once_its_files_differ_from_what_the_app_loaded(
    tmp_path: Path,
) -> None:
    rig = Rig(tmp_path)
    rig.agent.start()
    request = inplace.signal_request("SIGHUP", {"creds": inplace.CHANGED})
    write_annotations(rig.annotations, {inplace.SIGNAL_REQUEST: request})
    rig.agent.step()
    assert rig.kills == []  # the kubelet has not written the new Secret yet
    kubelet_volume(rig.secret, {"token": b"s2"}, 2)
    rig.agent.step()
    assert rig.kills == [(42, int(signal.SIGHUP))]
    kept = json.loads((tmp_path / "state").read_text())["loaded"]
    assert kept["creds"] == inplace.files_digest([b"s2"])  # the next change is told from this


def test_without_process_the_agent_never_signals(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    rig.agent.process = None
    rig.agent.start()
    request = inplace.signal_request("SIGHUP", {})
    write_annotations(rig.annotations, {inplace.SIGNAL_REQUEST: request})
    rig.agent.step()
    assert rig.kills == []


def test_a_second_change_of_a_secret_is_signalled_once_its_new_files_are_mounted(
    tmp_path: Path,
) -> None:
    rig = Rig(tmp_path)
    rig.agent.start()
    first = inplace.signal_request("SIGHUP", {"creds": inplace.CHANGED}, "a1")
    write_annotations(rig.annotations, {inplace.SIGNAL_REQUEST: first})
    kubelet_volume(rig.secret, {"token": b"s2"}, 2)
    rig.agent.step()
    second = inplace.signal_request("SIGHUP", {"creds": inplace.CHANGED}, "b2")
    write_annotations(rig.annotations, {inplace.SIGNAL_REQUEST: second})
    rig.agent.step()
    assert len(rig.kills) == 1, "the files are still those the first signal loaded"
    kubelet_volume(rig.secret, {"token": b"s3"}, 3)
    rig.agent.step()
    assert rig.kills == [(42, int(signal.SIGHUP))] * 2
