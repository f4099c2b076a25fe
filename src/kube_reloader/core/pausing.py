"""The Deployment pause period (`deployment.reloader.stakater.com/pause-period`), as values.

After a reload, a Deployment carrying a pause period is paused (`spec.paused: true`) and
stamped with `paused-at`; it is resumed once the period has elapsed. The state lives only in
those two annotations and `spec.paused`, so any controller instance (after a restart or a
leader change) computes the same resume time from the object alone. User pauses (paused with
no `paused-at`) are never touched. Durations use Go's `time.ParseDuration` syntax.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from kube_reloader.core.parsing import quote
from kube_reloader.core.records import record

_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,  # U+00B5
    "μs": 1e-6,  # U+03BC
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
#: Go's time.Duration is int64 nanoseconds: ParseDuration refuses anything longer
MAX_DURATION_SECONDS = (2**63 - 1) / 1e9
#: a duration string longer than this is refused before it is scanned
MAX_DURATION_TEXT = 256
_LATEST = dt.datetime.max.replace(tzinfo=dt.UTC)
_EARLIEST = dt.datetime.min.replace(tzinfo=dt.UTC)


class DurationError(ValueError):
    pass


def parse_duration(text: str) -> float:
    """Go's `time.ParseDuration`, in seconds (`1h30m`, `90s`, `1.5h`, `-5m`; no `d`)."""
    s = text
    if len(s) > MAX_DURATION_TEXT:
        raise DurationError(f"invalid duration: longer than {MAX_DURATION_TEXT} characters")
    if s in ("0", "+0", "-0"):
        return 0.0
    if not s:
        raise DurationError('invalid duration ""')
    sign = 1.0
    if s[0] in "+-":
        sign = -1.0 if s[0] == "-" else 1.0
        s = s[1:]
    pos, total = 0, 0.0
    if not s:
        raise DurationError(f"invalid duration {quote(text)}")
    while pos < len(s):
        m = _PART.match(s, pos)
        if not m:
            raise DurationError(f"invalid duration {quote(text)}")
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if total > MAX_DURATION_SECONDS:
        raise DurationError(f"invalid duration {quote(text)}: out of range")
    return sign * total


def shift(when: dt.datetime, seconds: float) -> dt.datetime:
    """`when` moved by `seconds`, clamped to the representable range (never raises)."""
    try:
        return when + dt.timedelta(seconds=seconds)
    except OverflowError:
        return _LATEST if seconds > 0 else _EARLIEST


#: a paused-at further in the future than this (clock skew) is not a pause of ours
FUTURE_TOLERANCE = dt.timedelta(minutes=5)


def format_time(when: dt.datetime) -> str:
    """RFC 3339 to the second, as Go's `time.RFC3339` prints a UTC time."""
    try:
        when = when.astimezone(dt.UTC)
    except OverflowError:
        when = _LATEST if when.year > 1 else _EARLIEST
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def format_zoned_time(when: dt.datetime) -> str:
    """Go's `time.RFC3339` of a time in its own zone: to the second, `Z` for UTC, else
    `+hh:mm` (Reloader v2's log `time` and structured alert `timestamp`, local time)."""
    text = when.replace(microsecond=0).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def parse_time(text: str) -> dt.datetime | None:
    """An RFC 3339 time, or None for anything else (never raises)."""
    if len(text) > 64:
        return None
    try:
        parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        return parsed.astimezone(dt.UTC) if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)
    except (ValueError, OverflowError):
        return None


def _stamp(text: str, now: dt.datetime) -> dt.datetime | None:
    """A paused-at stamp, or None when it does not parse or lies in the future (a stamp
    from year 9999 must not keep a Deployment paused until then)."""
    since = parse_time(text)
    if since is None or since > shift(now, FUTURE_TOLERANCE.total_seconds()):
        return None
    return since


class PauseAction(StrEnum):
    NONE = "none"  # no pause period on this Deployment
    PAUSE = "pause"  # pause now, resume at `resume_at`
    KEEP = "keep"  # already paused by us: do not extend, resume at `resume_at`
    USER_PAUSED = "user_paused"  # paused by someone else: leave it alone
    INVALID = "invalid"  # the period does not parse: reload without pausing


@record
class PausePlan:
    action: PauseAction
    message: str
    resume_at: dt.datetime | None = None


def plan_pause(
    *,
    annotations: dict[str, str],
    paused: bool,
    now: dt.datetime,
    period_key: str,
    paused_at_key: str,
    extend: bool = False,
) -> PausePlan:
    """What to do about pausing when a Deployment is about to be reloaded. With `extend`
    (Reloader v2's rule), a pause of ours is stamped again: it lasts the period from now."""
    if period_key not in annotations:
        return PausePlan(PauseAction.NONE, "no pause period")
    raw = annotations[period_key]
    try:
        period = parse_duration(raw)
    except DurationError:
        return PausePlan(
            PauseAction.INVALID,
            f"{period_key}={quote(raw)} is not a duration (Go syntax, e.g. 5m, 1h30m); "
            "reloading without pausing",
        )
    stamp = annotations.get(paused_at_key, "")
    if paused and stamp and extend:
        return PausePlan(PauseAction.PAUSE, f"pausing again for {raw}", shift(now, period))
    if paused and stamp:
        since = _stamp(stamp, now)
        resume = now if since is None else shift(since, period)
        return PausePlan(
            PauseAction.KEEP,
            f"already paused by kube-reloader until {format_time(resume)}",
            max(resume, now),
        )
    if paused:
        return PausePlan(PauseAction.USER_PAUSED, "paused by someone else; not managing the pause")
    return PausePlan(PauseAction.PAUSE, f"pausing for {raw}", shift(now, period))


def paused_by_us(annotations: Mapping[str, str], paused: bool, paused_at_key: str) -> bool:
    """Whether a Deployment is paused and carries our paused-at stamp (a pause of ours)."""
    return paused and bool(annotations.get(paused_at_key))


def resume_due(
    *,
    annotations: Mapping[str, str],
    paused: bool,
    now: dt.datetime,
    period_key: str,
    paused_at_key: str,
) -> tuple[bool, dt.datetime | None]:
    """For a Deployment seen in the cache: is a pause of ours due for resuming, and when?

    Returns (False, None) when it is not paused by us. A paused-at that does not parse, or a
    period that is missing or invalid, resumes at once: a Deployment must never stay paused
    forever because of a bad annotation.
    """
    if not paused_by_us(annotations, paused, paused_at_key):
        return False, None
    since = _stamp(annotations[paused_at_key], now)
    try:
        period = parse_duration(annotations.get(period_key, ""))
    except DurationError:
        return True, now
    if since is None:
        return True, now
    when = shift(since, period)
    return when <= now, when


def pause_patch(paused_at_key: str, now: dt.datetime) -> dict[str, Any]:
    """v1's body (Go sorts map keys, so metadata comes before spec)."""
    return {
        "metadata": {"annotations": {paused_at_key: format_time(now)}},
        "spec": {"paused": True},
    }


def resume_patch(paused_at_key: str) -> dict[str, Any]:
    return {"metadata": {"annotations": {paused_at_key: None}}, "spec": {"paused": False}}
