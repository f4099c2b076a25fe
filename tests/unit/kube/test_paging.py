"""How many items the next LIST page asks for when pages are sized by bytes."""

from __future__ import annotations

import pytest

from kube_reloader.kube.paging import next_page_limit

MiB = 1024 * 1024


@pytest.mark.parametrize(
    ("asked", "got", "body_bytes", "target", "cap", "expected"),
    [
        (50, 50, 50 * 11_000, 2 * MiB, 500, 190),  # 8 KiB Secrets: about 2 MiB per page
        (50, 50, 50 * 400, 2 * MiB, 500, 500),  # small ConfigMaps: up to the cap at once
        (190, 190, 190 * 900_000, 2 * MiB, 500, 2),  # near-limit objects: a couple per page
        (10, 10, 10 * 3 * MiB, 2 * MiB, 500, 1),  # larger than the target: still one at a time
        (50, 20, 20 * 400, 2 * MiB, 500, 50),  # a short page is the last: nothing to learn
        (50, 0, 0, 2 * MiB, 500, 50),  # an empty page
        (100, 100, 100 * 11_000, 2 * MiB, 150, 150),  # never more than the cap
    ],
    ids=["large secrets shrink the page", "small objects grow it to the cap",
         "huge objects", "objects beyond the target", "short page", "empty page", "cap"],
)  # fmt: skip
def test_next_page_asks_for_about_the_target_bytes(
    asked: int, got: int, body_bytes: int, target: int, cap: int, expected: int
) -> None:
    assert next_page_limit(asked, got, body_bytes, target, cap) == expected
