"""Maintenance windows: when a tenant lets reloads happen (`kube-reloader.io/reload-window`).

The value is `<cron> <duration> [<timezone>]`, e.g. `0 2 * * mon-fri 90m Europe/Berlin`:

- `<cron>`: five fields `minute hour day-of-month month day-of-week`. Each is a comma list of
  `*`, `n`, `a-b`, `*/n`, `a-b/n` or `a/n` (`a` up to the field's maximum); months take
  `jan`-`dec`, weekdays `sun`-`sat` (any case), and weekday 7 is Sunday too. A macro
  `@yearly` (`@annually`), `@monthly`, `@weekly`, `@daily` (`@midnight`) or `@hourly` may
  stand for all five. As in Vixie cron, a day-of-month or day-of-week field is *restricted*
  unless it begins with `*`; when both are, a day matches if either one does, otherwise both
  must match.
- `<duration>`: Go-like, numbers with units `h`, `m`, `s`, combined (`1h30m`, `1.5h`); more
  than zero, at most 168h. It is elapsed time: a window opened at `start` is open while
  `start <= now < start + duration`, whatever the clock does meanwhile.
- `<timezone>`: an IANA name, `UTC` by default. Cron times are wall-clock times there and are
  turned into instants as `datetime(..., fold=0)` does: a wall time skipped by a spring-forward
  change fires as if the change had not happened yet (02:30 in a 02:00→03:00 gap fires at
  03:30 of the new offset), and a wall time repeated by a fall-back change fires once, at its
  first occurrence.

`parse_window` is total: a `Window` or a one-line error, never an exception. Evaluation walks
days (months it can skip whole), never minutes, so it is cheap enough for the hot path.
"""

from __future__ import annotations

import bisect
import calendar
import datetime as dt
import functools
import math
import re
from collections.abc import Iterator, Sequence

from kube_reloader.core.records import record

MAX_LENGTH = 256
MAX_DURATION = 7 * 86400.0
HORIZON_DAYS = 5 * 366
_DAY = dt.timedelta(days=1)
_HOUR = dt.timedelta(hours=1)
_EARLIEST, _LATEST = -(2**31), 2**35
_DIGITS = frozenset("0123456789")
_TZ_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/_+-")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0}
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)([^0-9.]*)")
_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_FORMAT = "expected '<cron> <duration> [<timezone>]' (5 cron fields or a macro)"


@record
class _Field:
    name: str
    lo: int
    hi: int
    names: tuple[str, ...] = ()
    first_name: int = 0


_FIELDS = (
    _Field("minute", 0, 59),
    _Field("hour", 0, 23),
    _Field("day-of-month", 1, 31),
    _Field("month", 1, 12, _MONTHS, 1),
    _Field("day-of-week", 0, 7, _WEEKDAYS, 0),
)


@record
class Window:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    dom_restricted: bool
    dow_restricted: bool
    duration: float
    tz: str
    source: str

    def is_open(self, now: float) -> bool:
        return self.open_until(now) is not None

    def open_until(self, now: float) -> float | None:
        """When the window covering `now` closes (the latest one, if several overlap)."""
        last = self._last_start(now)
        if last is None or last + self.duration <= now:
            return None
        return last + self.duration

    def next_open(self, now: float) -> float | None:
        """`now` if open, else the first start after it (None if none within 5 years)."""
        if self.is_open(now):
            return now
        return self._next_start(now)

    def _next_start(self, now: float) -> float | None:
        """Days are searched in order, plus one past the first hit: a wall time skipped by a
        change near midnight lands after the next day's first starts, so neither per-day nor
        day-to-day order of instants is guaranteed (the lookback below mirrors this)."""
        zone, today = _locate(self.tz, now)
        if zone is None or today is None:
            return None
        best: float | None = None
        found: dt.date | None = None
        for day in self._days(today - _DAY, today + dt.timedelta(days=HORIZON_DAYS)):
            if found is not None and day > found + _DAY:
                break
            base, starts = self._starts(zone, day)
            i = bisect.bisect_right(starts, now - base)
            if i < len(starts) and (best is None or base + starts[i] < best):
                best, found = base + starts[i], found or day
        return best

    def _last_start(self, now: float) -> float | None:
        zone, today = _locate(self.tz, now)
        if zone is None or today is None or not 0 < self.duration <= MAX_DURATION:
            return None
        back = dt.timedelta(days=math.ceil(self.duration / 86400) + 1)
        best: float | None = None
        found: dt.date | None = None
        for day in self._days(today + _DAY, today - back):
            if found is not None and day < found - _DAY:
                break
            base, starts = self._starts(zone, day)
            i = bisect.bisect_right(starts, now - base) - 1
            if i >= 0 and (best is None or base + starts[i] > best):
                best, found = base + starts[i], found or day
        return best

    def _days(self, first: dt.date, last: dt.date) -> Iterator[dt.date]:
        """Matching days from `first` to `last` inclusive, in that direction."""
        step = 1 if last >= first else -1
        low, high = min(first, last), max(first, last)
        index, stop = first.year * 12 + first.month - 1, last.year * 12 + last.month - 1
        while True:
            year, month = index // 12, index % 12 + 1
            if month in self.months:
                days = self._month_days(year, month)
                for number in days if step > 0 else reversed(days):
                    day = dt.date(year, month, number)
                    if low <= day <= high:
                        yield day
            if index == stop:
                return
            index += step

    def _month_days(self, year: int, month: int) -> list[int]:
        first_weekday, count = calendar.monthrange(year, month)
        either = self.dom_restricted and self.dow_restricted
        out = []
        for number in range(1, count + 1):
            dom = number in self.days
            dow = (first_weekday + number) % 7 in self.weekdays
            if (dom or dow) if either else (dom and dow):
                out.append(number)
        return out

    def _starts(self, zone: dt.tzinfo, day: dt.date) -> tuple[float, Sequence[float]]:
        """The day's start instants as `base + starts[i]`, sorted ascending."""
        midnight = dt.datetime(day.year, day.month, day.day, tzinfo=zone)
        if midnight.utcoffset() == (midnight + _DAY).utcoffset():
            return midnight.timestamp(), _seconds_of_day(self.hours, self.minutes)
        return 0.0, _irregular_starts(midnight, _sorted(self.hours), _sorted(self.minutes))


def _locate(tz: str, now: float) -> tuple[dt.tzinfo | None, dt.date | None]:
    zone = _zone(tz)
    if zone is None or not _EARLIEST <= now <= _LATEST:
        return zone, None
    return zone, dt.datetime.fromtimestamp(now, zone).date()


@functools.lru_cache(maxsize=256)
def _zone(name: str) -> dt.tzinfo | None:
    if name == "UTC":
        return dt.UTC
    from zoneinfo import ZoneInfo  # a window with a zone other than UTC: not on every start

    try:
        return ZoneInfo(name)
    except Exception:  # noqa: BLE001 - odd keys and odd files under TZPATH raise all sorts
        return None


@functools.lru_cache(maxsize=512)
def _sorted(values: frozenset[int]) -> tuple[int, ...]:
    return tuple(sorted(values))


@functools.lru_cache(maxsize=256)
def _seconds_of_day(hours: frozenset[int], minutes: frozenset[int]) -> tuple[int, ...]:
    return tuple(sorted(3600 * h + 60 * m for h in hours for m in minutes))


def _irregular_starts(
    midnight: dt.datetime, hours: tuple[int, ...], minutes: tuple[int, ...]
) -> list[float]:
    """Start instants on a day with an offset change: hour by hour, minute by minute only in
    the hour(s) the change happens in."""
    starts: list[float] = []
    for hour in hours:
        top = midnight.replace(hour=hour)
        if top.utcoffset() == (top + _HOUR).utcoffset():
            base = top.timestamp()
            starts.extend(base + 60 * minute for minute in minutes)
        else:
            starts.extend(top.replace(minute=minute).timestamp() for minute in minutes)
    return sorted(starts)


@functools.lru_cache(maxsize=2048)
def parse_window(value: str) -> tuple[Window | None, str | None]:
    """`(window, None)` or `(None, error)`; the error is one line and names the bad part."""
    if len(value) > MAX_LENGTH:
        return None, f"reload-window is {len(value)} characters long, the limit is {MAX_LENGTH}"
    source = value.strip()
    parts = source.split()
    if not parts:
        return None, f"reload-window is empty; {_FORMAT}"
    if parts[0].startswith("@"):
        macro = _MACROS.get(parts[0].lower())
        if macro is None:
            known = ", ".join(_MACROS)
            return None, f"unknown cron macro {parts[0]!r}; use one of {known}"
        cron, rest = macro.split(), parts[1:]
    else:
        cron, rest = parts[:5], parts[5:]
    if len(cron) < 5 or not rest:
        return None, f"{_FORMAT}, got {len(parts)} part(s)"
    if len(rest) > 2:
        return None, f"{_FORMAT}, got unexpected {' '.join(rest[2:])!r} after the timezone"
    sets: list[frozenset[int]] = []
    for text, field in zip(cron, _FIELDS, strict=True):
        parsed = _parse_field(text, field)
        if isinstance(parsed, str):
            return None, parsed
        sets.append(parsed)
    duration = _parse_duration(rest[0])
    if isinstance(duration, str):
        return None, duration
    tz = rest[1] if len(rest) == 2 else "UTC"
    problem = _check_timezone(tz)
    if problem is not None:
        return None, problem
    minutes, hours, days, months, weekdays = sets
    window = Window(
        minutes=minutes,
        hours=hours,
        days=days,
        months=months,
        weekdays=weekdays,
        dom_restricted=not cron[2].startswith("*"),
        dow_restricted=not cron[4].startswith("*"),
        duration=duration,
        tz=tz,
        source=source,
    )
    return window, None


def _parse_field(text: str, field: _Field) -> frozenset[int] | str:
    values: set[int] = set()
    for item in text.split(","):
        got = _parse_item(item, field)
        if isinstance(got, str):
            return f"{field.name} field {text!r}: {got}"
        values.update(got)
    if field.names is _WEEKDAYS:
        return frozenset(v % 7 for v in values)
    return frozenset(values)


def _parse_item(item: str, field: _Field) -> range | str:
    if not item:
        return "empty list item"
    base, slash, step_text = item.partition("/")
    step = 1
    if slash:
        if not step_text or not _DIGITS.issuperset(step_text):
            return f"step {step_text!r} is not a positive integer"
        step = int(step_text)
        if not 1 <= step <= field.hi:
            return f"step {step_text!r} must be between 1 and {field.hi}"
    if base == "*":
        return range(field.lo, field.hi + 1, step)
    first_text, dash, last_text = base.partition("-")
    first = _parse_value(first_text, field)
    if isinstance(first, str):
        return first
    last = _parse_value(last_text, field) if dash else (field.hi if slash else first)
    if isinstance(last, str):
        return last
    if first > last:
        return f"range {base!r} is reversed"
    return range(first, last + 1, step)


def _parse_value(text: str, field: _Field) -> int | str:
    lowered = text.lower()
    if lowered in field.names:
        return field.names.index(lowered) + field.first_name
    if not text:
        return "a number is missing"
    if not _DIGITS.issuperset(text):
        return f"{text!r} is not a number" + (" or a name" if field.names else "")
    number = int(text)
    if not field.lo <= number <= field.hi:
        return f"{text!r} is out of range {field.lo}-{field.hi}"
    return number


def _parse_duration(text: str) -> float | str:
    total, position = 0.0, 0
    while position < len(text):
        match = _DURATION_PART.match(text, position)
        if match is None:
            return f"duration {text!r}: expected a number at {text[position:]!r}"
        number, unit = match.groups()
        if unit not in _UNITS:
            what = f"unit {unit!r} is not" if unit else f"{number!r} needs a unit:"
            return f"duration {text!r}: {what} h, m or s (e.g. 1h30m)"
        total += float(number) * _UNITS[unit]
        position = match.end()
    if total <= 0:
        return f"duration {text!r} must be more than zero"
    if total > MAX_DURATION:
        return f"duration {text!r} is longer than 168h"
    return total


def _check_timezone(tz: str) -> str | None:
    if len(tz) > 64 or not _TZ_CHARS.issuperset(tz) or tz.startswith("/") or ".." in tz:
        return f"timezone {tz!r} is not an IANA name like Europe/Berlin"
    if _zone(tz) is None:
        return f"unknown timezone {tz!r}"
    return None
