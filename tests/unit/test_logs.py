"""Structured log output: constant messages, key-values, Reloader-compatible JSON keys."""

from __future__ import annotations

import io
import json
import logging

import pytest

from kube_reloader import logs


@pytest.fixture(autouse=True)
def restore_root_logger() -> object:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield None
    root.handlers[:] = handlers
    root.setLevel(level)


def test_json_lines_carry_level_msg_time_and_every_extra_field() -> None:
    out = io.StringIO()
    logs.setup("info", "json", stream=out)
    logging.getLogger("kube_reloader.test").info(
        "reloaded workload", extra={"workload": "ns/web", "kind": "Deployment"}
    )
    line = json.loads(out.getvalue())
    assert line["level"] == "info"
    assert line["msg"] == "reloaded workload"
    assert line["workload"] == "ns/web"
    assert line["kind"] == "Deployment"
    assert line["time"].endswith("Z")


def test_text_lines_put_key_values_after_the_message() -> None:
    out = io.StringIO()
    logs.setup("debug", "text", stream=out)
    logging.getLogger("x").debug("watch expired", extra={"resource": "configmaps", "why": "a b"})
    text = out.getvalue().strip()
    assert text.split(" ", 2)[1:] == ["debug", '  watch expired resource=configmaps why="a b"']


def test_levels_follow_reloader_names() -> None:
    out = io.StringIO()
    logs.setup("warning", "json", stream=out)
    logging.getLogger("x").info("hidden")
    logging.getLogger("x").error("shown")
    assert [json.loads(x)["msg"] for x in out.getvalue().splitlines()] == ["shown"]


@pytest.mark.parametrize(
    ("level", "fmt", "flag"), [("loud", "json", "--log-level"), ("info", "xml", "--log-format")]
)
def test_invalid_level_or_format_names_the_flag(level: str, fmt: str, flag: str) -> None:
    with pytest.raises(ValueError, match=flag):
        logs.setup(level, fmt)
