"""The dev cluster's and the tests' loopback ports: distinct, free, outside the ephemeral range."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from kube_reloader.devcluster import ports
from kube_reloader.devcluster.ports import LOWEST, PortPicker, ephemeral_range, free_port

EPHEMERAL = (32_768, 60_999)


def test_free_port_never_gives_one_process_the_same_port_twice_though_each_is_released() -> None:
    given = [free_port() for _ in range(300)]
    assert len(set(given)) == len(given)


def test_ports_come_from_below_the_ephemeral_range_so_the_kernel_never_hands_them_out() -> None:
    picker = PortPicker(seed=os.getpid(), ephemeral=EPHEMERAL)
    given = [picker.take() for _ in range(100)]
    assert all(LOWEST <= port < EPHEMERAL[0] for port in given)


def test_a_port_another_socket_holds_is_skipped() -> None:
    seed = os.getpid() + 17
    first = PortPicker(seed, EPHEMERAL).take()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", first))
        holder.listen()
        assert PortPicker(seed, EPHEMERAL).take() != first


def test_a_port_given_can_be_listened_on() -> None:
    port = free_port()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", port))
        listener.listen()


def test_neighbouring_pids_start_their_walks_far_apart() -> None:
    a, b = (PortPicker(seed, EPHEMERAL).take() for seed in (4_000, 4_001))
    assert abs(a - b) > 1_000


def test_with_no_room_below_the_ephemeral_range_the_kernels_picks_are_used_still_distinct() -> None:
    picker = PortPicker(seed=1, ephemeral=(1_024, 60_999))
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
