"""The dev cluster's and the tests' loopback ports: distinct, free, outside the ephemeral range."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kube_reloader.devcluster import ports
from kube_reloader.devcluster.ports import (
    LOWEST,
    PortPicker,
    ephemeral_range,
    free_port,
    outside,
    reserve,
)

EPHEMERAL = (32_768, 60_999)


def test_free_port_never_gives_one_process_the_same_port_twice_though_each_is_released() -> None:
    given = [free_port() for _ in range(300)]
    assert len(set(given)) == len(given)


def test_ports_come_from_outside_the_ephemeral_range_so_the_kernel_never_hands_them_out() -> None:
    picker = PortPicker(seed=os.getpid(), ephemeral=EPHEMERAL)
    given = [picker.take() for _ in range(200)]
    assert all(LOWEST <= port < EPHEMERAL[0] or port > EPHEMERAL[1] for port in given)


def test_the_ports_outside_a_range_are_those_below_it_then_those_above_it() -> None:
    assert outside((32_768, 60_999)) == [*range(10_000, 32_768), *range(61_000, 65_536)]
    assert outside((1_024, 40_000)) == list(range(40_001, 65_536))
    assert outside((1_024, 65_535)) == []


def test_a_port_another_socket_holds_is_skipped() -> None:
    seed = os.getpid() + 17
    first = PortPicker(seed, EPHEMERAL).take()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", first))
        holder.listen()
        assert PortPicker(seed, EPHEMERAL).take() != first


def test_a_reserved_port_is_never_picked() -> None:
    seed = os.getpid() + 29
    first = PortPicker(seed, EPHEMERAL).take()
    picker = PortPicker(seed, EPHEMERAL)
    picker.reserve(first)
    assert picker.take() != first


def test_a_port_reserved_in_this_process_is_not_given_by_free_port() -> None:
    probe = PortPicker(0, EPHEMERAL)
    wanted = [probe.take() for _ in range(5)]
    for port in wanted:
        reserve(port)
    assert not set(wanted) & {free_port() for _ in range(200)}


def test_a_port_given_can_be_listened_on() -> None:
    port = free_port()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", port))
        listener.listen()


def test_two_processes_start_their_walks_at_different_places() -> None:
    """A start drawn at random: even two processes with one PID (two containers sharing a
    network) do not walk the same ports in step."""
    code = "from kube_reloader.devcluster.ports import free_port; print(free_port())"
    firsts = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.strip()
        for _ in range(3)
    }
    assert len(firsts) == 3


def test_a_forked_child_keeps_the_ports_its_parent_gave(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ports, "_PICKERS", {})
    monkeypatch.setattr(os, "urandom", lambda n: b"\x00\x00\x30\x39"[:n])  # one start
    given = {free_port() for _ in range(20)}
    monkeypatch.setattr(os, "getpid", lambda: -1)  # as a forked child sees a new PID
    assert not given & {free_port() for _ in range(20)}


def test_with_no_room_outside_the_ephemeral_range_the_kernels_picks_are_used_still_distinct() -> (
    None
):
    picker = PortPicker(seed=1, ephemeral=(1_024, 65_535))
    given = [picker.take() for _ in range(50)]
    assert len(set(given)) == 50
    assert all(1_024 <= port <= 65_535 for port in given)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("20000\t40000\n", (20_000, 40_000)),
        ("40000 20000\n", ports.DEFAULT_EPHEMERAL),
        ("garbage\n", ports.DEFAULT_EPHEMERAL),
        ("0 70000", ports.DEFAULT_EPHEMERAL),
        ("", ports.DEFAULT_EPHEMERAL),
    ],
)
def test_the_ephemeral_range_is_read_from_the_kernel_or_defaults(
    tmp_path: Path, text: str, expected: tuple[int, int]
) -> None:
    path = tmp_path / "ip_local_port_range"
    path.write_text(text)
    assert ephemeral_range(path) == expected


def test_a_missing_range_file_gives_linuxs_default(tmp_path: Path) -> None:
    assert ephemeral_range(tmp_path / "absent") == ports.DEFAULT_EPHEMERAL
