"""Structured logging: constant messages, variables as key-values, text or JSON lines.

`--log-format=json` mirrors Reloader v1's logrus JSON formatter (`level`, `msg`, `time`) with
every `extra=` key-value added as a field, so log pipelines built for Reloader keep working.
With `--compat=v2` it mirrors Reloader v2's zerolog/zerologr lines instead: `level` (zerolog's
names), `v` (the logr verbosity, info and below), `logger`, the call's fields, `time` (RFC 3339,
seconds, local time zone) and `message` last; v2 writes its log to stdout, and so do we then.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
import sys
import time
from collections.abc import Callable
from json.encoder import encode_basestring
from typing import Any, TextIO

from kube_reloader.core.pausing import format_zoned_time
from kube_reloader.core.strategies import Compat

#: attributes every LogRecord has: anything else came from `extra=` and is a field (and a key
#: of `extra=` with one of these names makes logging raise at the call)
RESERVED_FIELDS = frozenset(
    logging.LogRecord("", 0, "", 0, "", (), None).__dict__.keys() | {"message", "asctime"}
)

LEVELS = {
    "trace": 5,
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "fatal": logging.CRITICAL,
    "panic": logging.CRITICAL,
}
_LEVEL_NAMES = {5: "trace", 10: "debug", 20: "info", 30: "warning", 40: "error", 50: "fatal"}

#: `json.dumps(line, default=str, ensure_ascii=False)`, with its encoder made once, not per line
_JSON = json.JSONEncoder(default=str, ensure_ascii=False)


class _Stamps:
    """A line's time, to the second, rendered once a second: lines come many to a second.
    `second` tells which second a time renders as, as the renderer itself would."""

    def __init__(self, second: Callable[[float], int], render: Callable[[int], str]) -> None:
        self.second, self.render = second, render
        self.last: tuple[int | None, str] = (None, "")  # one tuple: never a torn pair

    def __call__(self, created: float) -> str:
        second = self.second(created)
        last = self.last
        if last[0] != second:
            last = self.last = (second, self.render(second))
        return last[1]


def _floor(created: float) -> int:
    """The second `gmtime` renders: it rounds down."""
    return math.floor(created)


def _rounded(created: float) -> int:
    """The second `datetime.fromtimestamp` renders: it rounds to the microsecond (half to
    even) first, so a time in the last half microsecond of a second is the next one."""
    whole = math.floor(created)
    return whole + 1 if round((created - whole) * 1e6) >= 1_000_000 else whole


def _utc(second: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))


def _zoned(second: int) -> str:
    return format_zoned_time(dt.datetime.fromtimestamp(second).astimezone())


def fields(record: logging.LogRecord) -> dict[str, Any]:
    return {
        k: v
        for k, v in record.__dict__.items()
        if k not in RESERVED_FIELDS and not k.startswith("_")
    }


class _Stamped(logging.Formatter):
    """A formatter whose line times are rendered once a second (`_Stamps`): UTC, to the
    second, unless told otherwise."""

    def __init__(
        self, second: Callable[[float], int] = _floor, render: Callable[[int], str] = _utc
    ) -> None:
        super().__init__()
        self.stamp = _Stamps(second, render)


class JsonFormatter(_Stamped):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "level": _LEVEL_NAMES.get(record.levelno, record.levelname.lower()),
            "msg": record.getMessage(),
            "time": self.stamp(record.created),
            "logger": record.name,
        }
        for key, value in fields(record).items():
            out.setdefault(key, value)
        if record.exc_info:
            out["error_trace"] = self.formatException(record.exc_info)
        return _JSON.encode(out)


#: zerolog's level names, and the logr verbosity zerologr writes as `v` (info and below only)
_ZEROLOG = {
    5: ("trace", 2),
    10: ("debug", 1),
    20: ("info", 0),
    30: ("warn", None),
    40: ("error", None),
    50: ("fatal", None),
}
_V2_RESERVED = frozenset({"level", "v", "logger", "time", "message"})


class V2JsonFormatter(_Stamped):
    """Reloader v2's JSON line: zerolog's key order (level, v, logger, fields, time, message)."""

    def __init__(self) -> None:
        super().__init__(_rounded, _zoned)

    def format(self, record: logging.LogRecord) -> str:
        name, verbosity = _ZEROLOG.get(record.levelno, (record.levelname.lower(), None))
        out: dict[str, Any] = {"level": name}
        if verbosity is not None:
            out["v"] = verbosity
        out["logger"] = record.name
        for key, value in fields(record).items():
            if key not in _V2_RESERVED:
                out[key] = value
        if record.exc_info:
            exc = record.exc_info[1]
            out.setdefault("error", f"{type(exc).__name__}: {exc}")
            out["error_trace"] = self.formatException(record.exc_info)
        out["time"] = self.stamp(record.created)
        out["message"] = record.getMessage()
        return _JSON.encode(out)


class TextFormatter(_Stamped):
    def format(self, record: logging.LogRecord) -> str:
        stamp = self.stamp(record.created)
        level = _LEVEL_NAMES.get(record.levelno, record.levelname.lower())
        kv = " ".join([f"{k}={_quote(v)}" for k, v in fields(record).items()])
        line = f"{stamp} {level:<7} {record.getMessage()}" + (f" {kv}" if kv else "")
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def _quote(value: Any) -> str:
    text = str(value)
    # `json.dumps(text, ensure_ascii=False)` is this call, after making an encoder
    return encode_basestring(text) if (not text or " " in text or '"' in text) else text


def setup(
    level: str = "info",
    fmt: str = "text",
    stream: TextIO | None = None,
    *,
    compat: Compat = Compat.V1,
) -> None:
    """Configure the root logger once for the whole process (stderr; stdout with v2)."""
    if level not in LEVELS:
        raise ValueError(f"--log-level: {level!r} is not one of {', '.join(LEVELS)}")
    if fmt not in ("text", "json", ""):
        raise ValueError(f"--log-format: {fmt!r} is not one of text, json")
    logging.addLevelName(5, "TRACE")
    # No line names the calling function, thread or process, so none is looked up (the logging
    # HOWTO's "Optimization"): a stack walk, a getpid and two lookups fewer per line.
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    v2 = compat is Compat.V2
    handler = logging.StreamHandler(stream or (sys.stdout if v2 else sys.stderr))
    json_formatter = V2JsonFormatter() if v2 else JsonFormatter()
    handler.setFormatter(json_formatter if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(LEVELS[level])
