"""Structured logging: constant messages, variables as key-values, text or JSON lines.

`--log-format=json` mirrors Reloader's logrus JSON formatter (`level`, `msg`, `time`) with
every `extra=` key-value added as a field, so log pipelines built for Reloader keep working.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, TextIO

# Attributes every LogRecord has; anything else came from `extra=` and is a field.
_STANDARD = frozenset(
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


def fields(record: logging.LogRecord) -> dict[str, Any]:
    return {
        k: v for k, v in record.__dict__.items() if k not in _STANDARD and not k.startswith("_")
    }


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "level": _LEVEL_NAMES.get(record.levelno, record.levelname.lower()),
            "msg": record.getMessage(),
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.created)),
            "logger": record.name,
        }
        for key, value in fields(record).items():
            out.setdefault(key, value)
        if record.exc_info:
            out["error_trace"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.created))
        level = _LEVEL_NAMES.get(record.levelno, record.levelname.lower())
        kv = " ".join(f"{k}={_quote(v)}" for k, v in fields(record).items())
        line = f"{stamp} {level:<7} {record.getMessage()}" + (f" {kv}" if kv else "")
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def _quote(value: Any) -> str:
    text = str(value)
    return (
        json.dumps(text, ensure_ascii=False) if (not text or " " in text or '"' in text) else text
    )


def setup(level: str = "info", fmt: str = "text", stream: TextIO | None = None) -> None:
    """Configure the root logger once for the whole process."""
    if level not in LEVELS:
        raise ValueError(f"--log-level: {level!r} is not one of {', '.join(LEVELS)}")
    if fmt not in ("text", "json", ""):
        raise ValueError(f"--log-format: {fmt!r} is not one of text, json")
    logging.addLevelName(5, "TRACE")
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(LEVELS[level])
