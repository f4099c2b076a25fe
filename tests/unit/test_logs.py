"""Structured log output: constant messages, key-values, Reloader-compatible JSON keys."""

from __future__ import annotations

import datetime as dt
import io
import json
import logging
import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kube_reloader import logs
from kube_reloader.core.pausing import format_zoned_time
from kube_reloader.core.strategies import Compat

_LOOKUPS = ("_srcfile", "logThreads", "logProcesses", "logMultiprocessing")


@pytest.fixture(autouse=True)
def restore_root_logger() -> object:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    lookups = {name: getattr(logging, name) for name in _LOOKUPS}
    yield None
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, value in lookups.items():
        setattr(logging, name, value)


def test_a_line_looks_up_no_caller_thread_or_process_and_keeps_its_fields() -> None:
    out = io.StringIO()
    logs.setup("info", "json", stream=out)
    seen: list[logging.LogRecord] = []

    def keep(record: logging.LogRecord) -> bool:
        seen.append(record)
        return True

    logging.getLogger().handlers[0].addFilter(keep)
    logging.getLogger("kube_reloader.test").info("reloaded workload", extra={"kind": "Job"})
    (record,) = seen
    assert record.funcName == "(unknown function)", "no stack walk for the caller"
    assert (record.process, record.thread, record.processName) == (None, None, None)
    line = json.loads(out.getvalue())
    assert (line["msg"], line["kind"], line["logger"]) == (
        "reloaded workload",
        "Job",
        "kube_reloader.test",
    )


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


# ---------------------------------------------------------------------- --compat=v2


def v2_line(level: int, extra: dict[str, object] | None = None, exc: bool = False) -> str:
    out = io.StringIO()
    logs.setup("trace", "json", stream=out, compat=Compat.V2)
    logger = logging.getLogger("kube_reloader.test")
    if exc:
        try:
            raise OSError("disk gone")
        except OSError:
            logger.log(level, "write failed", extra=extra, exc_info=True)
    else:
        logger.log(level, "reloaded workload", extra=extra)
    return out.getvalue()


@pytest.mark.parametrize(("level", "keys", "name", "v"), [
    (logging.INFO, ["level", "v", "logger", "workload", "kind", "time", "message"], "info", 0),
    (logging.DEBUG, ["level", "v", "logger", "workload", "kind", "time", "message"], "debug", 1),
    (5, ["level", "v", "logger", "workload", "kind", "time", "message"], "trace", 2),
    (logging.WARNING, ["level", "logger", "workload", "kind", "time", "message"], "warn", None),
    (logging.ERROR, ["level", "logger", "workload", "kind", "time", "message"], "error", None),
])  # fmt: skip
def test_v2_json_lines_have_reloader_v2s_key_order_and_level_names(
    level: int, keys: list[str], name: str, v: int | None
) -> None:
    line = json.loads(v2_line(level, {"workload": "ns/web", "kind": "Deployment"}))
    assert list(line) == keys
    assert (line["level"], line.get("v"), line["message"]) == (name, v, "reloaded workload")
    assert (line["workload"], line["kind"], line["logger"]) == (
        "ns/web", "Deployment", "kube_reloader.test",
    )  # fmt: skip
    assert "msg" not in line


def test_v2_json_time_is_rfc3339_to_the_second_in_the_local_zone() -> None:
    stamp = json.loads(v2_line(logging.INFO))["time"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d)", stamp), stamp


def test_v2_json_puts_an_exception_in_error_and_keeps_an_error_field_given() -> None:
    line = json.loads(v2_line(logging.ERROR, exc=True))
    assert line["error"] == "OSError: disk gone"
    assert "disk gone" in line["error_trace"]
    given = json.loads(v2_line(logging.ERROR, {"error": "HTTP 500"}, exc=True))
    assert given["error"] == "HTTP 500"


def test_v2_json_fields_named_like_its_own_keys_do_not_replace_them() -> None:
    line = json.loads(v2_line(logging.INFO, {"time": "x", "v": 9, "level": "y"}))
    assert (line["level"], line["v"]) == ("info", 0)
    assert line["time"] != "x"


@pytest.mark.parametrize(("compat", "stream"), [(Compat.V1, "err"), (Compat.V2, "out")])
def test_v2_logs_to_stdout_as_reloader_v2_and_v1_to_stderr(
    compat: Compat, stream: str, capsys: pytest.CaptureFixture[str]
) -> None:
    logs.setup("info", "json", compat=compat)
    logging.getLogger("x").info("hello")
    captured = capsys.readouterr()
    assert "hello" in getattr(captured, stream)
    assert "hello" not in (captured.out if stream == "err" else captured.err)


def test_v2_text_lines_keep_our_layout() -> None:
    out = io.StringIO()
    logs.setup("info", "text", stream=out, compat=Compat.V2)
    logging.getLogger("x").info("watch expired", extra={"resource": "configmaps"})
    assert out.getvalue().strip().split(" ", 1)[1] == "info    watch expired resource=configmaps"


@pytest.mark.parametrize(("when", "text"), [
    (dt.datetime(2026, 1, 2, 3, 4, 5, 678900, tzinfo=dt.UTC), "2026-01-02T03:04:05Z"),
    (dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone(dt.timedelta(hours=2))),
     "2026-01-02T03:04:05+02:00"),
    (dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone(-dt.timedelta(hours=5, minutes=30))),
     "2026-01-02T03:04:05-05:30"),
])  # fmt: skip
def test_go_rfc3339_prints_seconds_and_z_for_utc(when: dt.datetime, text: str) -> None:
    assert format_zoned_time(when) == text


# ---------------------------------------------------------------------- cost per line


def _record(created: float, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord("kube_reloader.test", logging.INFO, "", 0, "reloaded", (), None)
    record.created = created
    record.__dict__.update(extra)
    return record


#: seconds in one second, the next, back to an earlier one, a far one; the last half
#: microsecond of a second (`fromtimestamp` rounds it up, `gmtime` down); before 1970
_TIMES = (
    1_700_000_000.1, 1_700_000_000.9, 1_700_000_001.0, 1_699_999_999.5, 1_800_000_000.0,
    1_700_000_000.9999996, 1_700_000_000.9999994, 1.9999995231628418, -0.5, -1.5, -2.5,
)  # fmt: skip


@pytest.mark.parametrize("fresh", [False, True], ids=["one formatter", "a formatter a line"])
def test_line_times_rendered_once_a_second_are_those_of_each_line(fresh: bool) -> None:
    text, v1, v2 = logs.TextFormatter(), logs.JsonFormatter(), logs.V2JsonFormatter()
    for created in _TIMES:
        if fresh:
            text, v1, v2 = logs.TextFormatter(), logs.JsonFormatter(), logs.V2JsonFormatter()
        utc = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(created))
        zoned = format_zoned_time(dt.datetime.fromtimestamp(created).astimezone())
        assert text.format(_record(created)).startswith(utc + " ")
        assert json.loads(v1.format(_record(created)))["time"] == utc
        assert json.loads(v2.format(_record(created)))["time"] == zoned


class _Opaque:
    def __str__(self) -> str:
        return "opaque ü"


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_a_text_value_is_quoted_as_json_dumps_quotes_it(value: str) -> None:
    quoted = logs.TextFormatter().format(_record(_TIMES[0], value=value)).split(" value=", 1)[1]
    plain = value and " " not in value and '"' not in value
    assert quoted == (value if plain else json.dumps(value, ensure_ascii=False))


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text(min_size=1).map(lambda k: "x" + k), st.text() | st.integers()))
def test_a_json_line_is_the_bytes_json_dumps_makes(extra: dict[str, object]) -> None:
    line = logs.JsonFormatter().format(_record(_TIMES[0], **extra, opaque=_Opaque()))
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(_TIMES[0]))
    fields = {"level": "info", "msg": "reloaded", "time": stamp, "logger": "kube_reloader.test"}
    assert line == json.dumps(fields | extra | {"opaque": "opaque ü"}, ensure_ascii=False)


def test_a_second_is_rendered_once_however_many_lines_it_has() -> None:
    rendered: list[int] = []
    stamp = logs._Stamps(int, lambda second: rendered.append(second) or str(second))
    assert [stamp(t) for t in (10.1, 10.5, 10.9, 11.0, 11.2)] == ["10", "10", "10", "11", "11"]
    assert rendered == [10, 11]
