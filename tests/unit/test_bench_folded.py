"""A py-spy profile in collapsed-stack form tallied (bench/folded.py). No cluster."""

from __future__ import annotations

import pytest
from bench import folded

SITE = "/venv/lib/python3.11/site-packages"
LIB = "/usr/lib/python3.11"


@pytest.mark.parametrize(
    ("path", "module"),
    [
        (f"{SITE}/kube_reloader/kube/wire.py", "kube_reloader/kube/wire.py"),
        ("/work/src/kube_reloader/runtime/intake.py", "kube_reloader/runtime/intake.py"),
        (f"{LIB}/asyncio/events.py", "asyncio/events.py"),
        (f"{LIB}/ssl.py", "python3.11/ssl.py"),
        ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap>"),
    ],
)
def test_a_file_is_named_by_its_place_in_the_package_or_its_last_two_parts(
    path: str, module: str
) -> None:
    assert folded.module_of(path) == module


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("read (/x/ssl.py:1100)", ("read", "x/ssl.py")),
        ("_run (/x/asyncio/events.py)", ("_run", "asyncio/events.py")),
        ("<module> (/x/a (b).py:3)", ("<module> (/x/a (b).py:3)", "<module> (/x/a (b).py:3)")),
        ("process 42", ("process 42", "process 42")),
    ],
)
def test_a_frame_is_split_into_function_and_module_or_kept_whole(
    text: str, expected: tuple[str, str]
) -> None:
    assert folded.frame(text) == expected


def test_self_goes_to_the_innermost_frame_and_inclusive_to_every_function_of_ours_once() -> None:
    kr = f"{SITE}/kube_reloader"
    lines = [
        f"run (/l/asyncio/base_events.py:1);patch ({kr}/kube/client.py:9);"
        f"send ({kr}/kube/wire.py:3);read (/l/python3.11/ssl.py:1) 6\n",
        f"run (/l/asyncio/base_events.py:1);patch ({kr}/kube/client.py:9);"
        f"patch ({kr}/kube/client.py:9) 3\n",
        "run (/l/asyncio/base_events.py:1) 1\n",
        "run (/l/asyncio/base_events.py:1);EpollSelector.select (selectors.py:468) 7\n",
        "garbage without a count\n",
        "\n",
    ]
    t = folded.tally(lines)
    assert t.total == 10
    assert t.waiting == 7  # the loop's wait for I/O, apart
    assert t.by_module == {"python3.11/ssl.py": 6, "kube_reloader/kube/client.py": 3,
                           "asyncio/base_events.py": 1}  # fmt: skip
    # a recursive function counts once per sample
    assert t.by_function == {"kube/client.py:patch": 9, "kube/wire.py:send": 6}
    text = folded.render(t, top=1)
    assert "10 samples (7 more waiting in the selector, left out)" in text
    assert "| `python3.11/ssl.py` | 60.0% |" in text
    assert "| `kube/client.py:patch` | 90.0% |" in text
    assert "wire.py:send" not in text  # past --top


def test_a_profile_without_samples_says_so() -> None:
    assert folded.render(folded.tally(["", "x y\n"]), top=5) == "no samples"
