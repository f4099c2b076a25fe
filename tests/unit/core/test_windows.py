"""Maintenance windows (`kube-reloader.io/reload-window`): parsing tenant text totally, and
evaluating cron + duration + timezone without walking minutes, checked against tables, a DST
change in each direction and a minute-by-minute brute force."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kube_reloader.core.windows import MAX_LENGTH, Window, parse_window

UTC = dt.UTC
ALL_MINUTES = frozenset(range(60))
ALL_HOURS = frozenset(range(24))
ALL_DAYS = frozenset(range(1, 32))
ALL_MONTHS = frozenset(range(1, 13))
ALL_WEEKDAYS = frozenset(range(7))


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> float:
    return dt.datetime(year, month, day, hour, minute, second, tzinfo=UTC).timestamp()


def window(value: str) -> Window:
    parsed, error = parse_window(value)
    assert error is None, error
    assert parsed is not None
    return parsed


# ---------------------------------------------------------------- parsing


def test_a_daily_cron_with_a_duration_parses_to_full_sets_for_its_stars() -> None:
    assert window("0 2 * * * 2h") == Window(
        minutes=frozenset({0}),
        hours=frozenset({2}),
        days=ALL_DAYS,
        months=ALL_MONTHS,
        weekdays=ALL_WEEKDAYS,
        dom_restricted=False,
        dow_restricted=False,
        duration=7200.0,
        tz="UTC",
        source="0 2 * * * 2h",
    )


@pytest.mark.parametrize(
    ("value", "attribute", "expected"),
    [
        ("*/20 * * * * 1h", "minutes", {0, 20, 40}),
        ("10-30/10 * * * * 1h", "minutes", {10, 20, 30}),
        ("50/5 * * * * 1h", "minutes", {50, 55}),
        ("1,5-7,*/30 * * * * 1h", "minutes", {0, 1, 5, 6, 7, 30}),
        ("00,05 * * * * 1h", "minutes", {0, 5}),
        ("0 2/7 * * * 1h", "hours", {2, 9, 16, 23}),
        ("0 9-17/4 * * * 1h", "hours", {9, 13, 17}),
        ("0 0 1,15,31 * * 1h", "days", {1, 15, 31}),
        ("0 0 25/3 * * 1h", "days", {25, 28, 31}),
        ("0 0 1 jan,JUL,Dec * 1h", "months", {1, 7, 12}),
        ("0 0 1 jan-mar/2 * 1h", "months", {1, 3}),
        ("0 0 1 */6 * 1h", "months", {1, 7}),
        ("0 0 * * mon-fri 1h", "weekdays", {1, 2, 3, 4, 5}),
        ("0 0 * * 7 1h", "weekdays", {0}),
        ("0 0 * * sun,7,SAT 1h", "weekdays", {0, 6}),
        ("0 0 * * 5-7 1h", "weekdays", {5, 6, 0}),
        ("0 0 * * 0-7 1h", "weekdays", set(range(7))),
        ("0 0 * * */7 1h", "weekdays", {0}),
        ("0 0 13 * fri 1h", "dom_restricted", True),
        ("0 0 13 * fri 1h", "dow_restricted", True),
        ("0 0 */2 * fri 1h", "dom_restricted", False),
        ("0 0 1 * */2 1h", "dow_restricted", False),
        ("0 0 1-31 * * 1h", "dom_restricted", True),
        ("0 2 * * * 90m", "duration", 5400.0),
        ("0 2 * * * 1h30m", "duration", 5400.0),
        ("0 2 * * * 1.5h", "duration", 5400.0),
        ("0 2 * * * .5h", "duration", 1800.0),
        ("0 2 * * * 45s", "duration", 45.0),
        ("0 2 * * * 1h1m1s", "duration", 3661.0),
        ("0 2 * * * 168h", "duration", 604800.0),
        ("0 2 * * * 167h59m60s", "duration", 604800.0),
        ("0 2 * * * 1h Europe/Berlin", "tz", "Europe/Berlin"),
        ("0 2 * * * 1h America/Argentina/Buenos_Aires", "tz", "America/Argentina/Buenos_Aires"),
        ("0 2 * * * 1h Etc/GMT+5", "tz", "Etc/GMT+5"),
        ("0 2 * * * 1h UTC", "tz", "UTC"),
        ("  0 2 * * *\t1h  ", "source", "0 2 * * *\t1h"),
    ],
)
def test_valid_values_parse_to_the_sets_and_settings_they_spell(
    value: str, attribute: str, expected: object
) -> None:
    parsed = getattr(window(value), attribute)
    assert parsed == (frozenset(expected) if isinstance(expected, set) else expected)


@pytest.mark.parametrize(
    ("value", "cron"),
    [
        ("@yearly 1h", "0 0 1 1 *"),
        ("@annually 1h", "0 0 1 1 *"),
        ("@monthly 1h", "0 0 1 * *"),
        ("@weekly 1h", "0 0 * * 0"),
        ("@daily 1h", "0 0 * * *"),
        ("@midnight 1h", "0 0 * * *"),
        ("@hourly 1h", "0 * * * *"),
        ("@DAILY 1h", "0 0 * * *"),
    ],
)
def test_a_macro_means_the_same_as_its_five_fields(value: str, cron: str) -> None:
    by_macro, by_fields = window(value), window(f"{cron} 1h")
    assert (by_macro.minutes, by_macro.hours, by_macro.days) == (
        by_fields.minutes,
        by_fields.hours,
        by_fields.days,
    )
    assert (by_macro.months, by_macro.weekdays) == (by_fields.months, by_fields.weekdays)
    assert (by_macro.dom_restricted, by_macro.dow_restricted) == (
        by_fields.dom_restricted,
        by_fields.dow_restricted,
    )


def test_a_macro_takes_a_timezone_after_its_duration() -> None:
    assert window("@daily 30m Europe/Berlin").tz == "Europe/Berlin"


@pytest.mark.parametrize(
    ("value", "mentions"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("0 2 * * *", "<duration>"),
        ("0 2 * * 1h", "got 5 part"),
        ("@daily", "<duration>"),
        ("0 2 * * * 1h UTC extra", "'extra'"),
        ("60 * * * * 1h", "minute field '60'"),
        ("* 24 * * * 1h", "hour field '24'"),
        ("* * 0 * * 1h", "day-of-month field '0'"),
        ("* * 32 * * 1h", "day-of-month field '32'"),
        ("* * * 13 * 1h", "month field '13'"),
        ("* * * 0 * 1h", "month field '0'"),
        ("* * * foo * 1h", "'foo' is not a number or a name"),
        ("* * * * 8 1h", "day-of-week field '8'"),
        ("* * * * funday 1h", "'funday'"),
        ("*/0 * * * * 1h", "step '0'"),
        ("*/-1 * * * * 1h", "step '-1'"),
        ("*/60 * * * * 1h", "step '60'"),
        ("*/ * * * * 1h", "step ''"),
        ("1/2/3 * * * * 1h", "step '2/3'"),
        ("5-1 * * * * 1h", "range '5-1' is reversed"),
        ("* * * * mon-sun 1h", "range 'mon-sun' is reversed"),
        ("1,,2 * * * * 1h", "minute field '1,,2': empty list item"),
        ("1, * * * * 1h", "empty list item"),
        (", * * * * 1h", "empty list item"),
        ("-5 * * * * 1h", "minute field '-5': a number is missing"),
        ("5- * * * * 1h", "minute field '5-'"),
        ("1-2-3 * * * * 1h", "'2-3'"),
        ("*-5 * * * * 1h", "'*'"),
        ("? * * * * 1h", "minute field '?'"),
        ("L * * * * 1h", "minute field 'L'"),
        ("\u0663 * * * * 1h", "minute field '\u0663'"),
        ("0x1 * * * * 1h", "'0x1'"),
        ("1.5 * * * * 1h", "'1.5'"),
        ("0 2 * * * 1d", "unit 'd'"),
        ("0 2 * * * 1w", "unit 'w'"),
        ("0 2 * * * 300ms", "unit 'ms'"),
        ("0 2 * * * 1H", "unit 'H'"),
        ("0 2 * * * 1h-30m", "unit 'h-'"),
        ("0 2 * * * 90", "'90' needs a unit"),
        ("0 2 * * * -1h", "'-1h'"),
        ("0 2 * * * h", "'h'"),
        ("0 2 * * * 0s", "'0s' must be more than zero"),
        ("0 2 * * * 0h0m", "more than zero"),
        ("0 2 * * * 169h", "'169h' is longer than 168h"),
        ("0 2 * * * 168h1s", "'168h1s'"),
        ("0 2 * * * \u0661h", "'\u0661h'"),
        ("0 2 * * * 1h Mars/Olympus_Mons", "unknown timezone 'Mars/Olympus_Mons'"),
        ("0 2 * * * 1h europe/berlin", "'europe/berlin'"),
        ("0 2 * * * 1h Europe", "unknown timezone 'Europe'"),
        ("0 2 * * * 1h ../../../etc/passwd", "'../../../etc/passwd'"),
        ("0 2 * * * 1h Europe/../Europe/Berlin", "'Europe/../Europe/Berlin'"),
        ("0 2 * * * 1h /usr/share/zoneinfo/UTC", "'/usr/share/zoneinfo/UTC'"),
        ("0 2 * * * 1h zone1970.tab", "'zone1970.tab'"),
        ("0 2 * * * 1h Europe/Berlin\x00", "'Europe/Berlin\\x00'"),
        ("0 2 * * * 1h Éurope/Berlin", "'Éurope/Berlin'"),
        ("0 2 * * * 1h " + "A" * 65, "not an IANA name"),
        ("@reboot 1h", "unknown cron macro '@reboot'"),
        ("@every 1h 1h", "'@every'"),
        ("@ 1h", "'@'"),
    ],
)
def test_invalid_values_are_refused_with_one_line_naming_the_offending_part(
    value: str, mentions: str
) -> None:
    parsed, error = parse_window(value)
    assert parsed is None
    assert error is not None
    assert mentions in error
    assert "\n" not in error


def test_a_value_longer_than_the_limit_is_refused_with_its_length() -> None:
    value = "0 2 * * * 1h " + "x" * MAX_LENGTH
    assert parse_window(value) == (
        None,
        f"reload-window is {len(value)} characters long, the limit is {MAX_LENGTH}",
    )


def test_a_megabyte_of_text_is_refused_by_its_length() -> None:
    parsed, error = parse_window("*" * (1 << 20))
    assert parsed is None
    assert error is not None
    assert "characters long" in error


CRONISH = st.text(alphabet="0123456789*/-,@ .hmsjanfebmonsunSAT\t\n\x00Éé٣²", max_size=80)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), CRONISH, st.text(min_size=250, max_size=300)))
def test_parsing_any_text_gives_a_window_or_a_one_line_error(text: str) -> None:
    parsed, error = parse_window(text)
    assert (parsed is None) != (error is None)
    if error is not None:
        assert error
        assert "\n" not in error
    else:
        assert parsed is not None
        assert parsed.source == text.strip()
        assert 0 < parsed.duration <= 7 * 86400


# ---------------------------------------------------------------- evaluation


@dataclass(frozen=True)
class Case:
    value: str
    now: float
    open_until: float | None
    next_open: float | None


def check(case: Case) -> None:
    w = window(case.value)
    assert w.open_until(case.now) == case.open_until
    assert w.is_open(case.now) is (case.open_until is not None)
    assert w.next_open(case.now) == case.next_open
    if case.open_until is not None:
        assert case.next_open == case.now


UTC_CASES = {
    "a window that opened an hour ago for two hours is open": Case(
        "0 2 * * * 2h", utc(2026, 6, 10, 3), utc(2026, 6, 10, 4), utc(2026, 6, 10, 3)
    ),
    "a window is open at its start instant": Case(
        "0 2 * * * 2h", utc(2026, 6, 10, 2), utc(2026, 6, 10, 4), utc(2026, 6, 10, 2)
    ),
    "a window is closed at start plus duration and opens again the next day": Case(
        "0 2 * * * 2h", utc(2026, 6, 10, 4), None, utc(2026, 6, 11, 2)
    ),
    "a second before the start the window is closed and opens in a second": Case(
        "0 2 * * * 2h", utc(2026, 6, 10, 1, 59, 59), None, utc(2026, 6, 10, 2)
    ),
    "overlapping windows close at the latest close among those covering now": Case(
        "0,30 * * * * 1h", utc(2026, 6, 10, 10, 45), utc(2026, 6, 10, 11, 30), utc(2026, 6, 10, 10, 45)
    ),
    "a window crosses midnight": Case(
        "0 23 * * * 3h", utc(2026, 6, 11, 1), utc(2026, 6, 11, 2), utc(2026, 6, 11, 1)
    ),
    "a friday night window of 48h is still open on sunday evening": Case(
        "0 22 * * fri 48h", utc(2026, 6, 14, 21), utc(2026, 6, 14, 22), utc(2026, 6, 14, 21)
    ),
    "a friday night window of 48h is closed on sunday night until next friday": Case(
        "0 22 * * fri 48h", utc(2026, 6, 14, 22), None, utc(2026, 6, 19, 22)
    ),
    "a weekly window of 168h is always open and closes when the next one opens": Case(
        "0 0 * * mon 168h", utc(2026, 6, 1), utc(2026, 6, 8), utc(2026, 6, 1)
    ),
    "a weekly window of 168h is open a second before it reopens": Case(
        "0 0 * * mon 168h", utc(2026, 6, 7, 23, 59, 59), utc(2026, 6, 8), utc(2026, 6, 7, 23, 59, 59)
    ),
    "a weekday business-hours window on saturday opens on monday morning": Case(
        "*/15 9-17 * * mon-fri 10m", utc(2026, 6, 13, 12), None, utc(2026, 6, 15, 9)
    ),
    "a window between two quarter hours opens at the next quarter": Case(
        "*/15 9-17 * * mon-fri 10m", utc(2026, 6, 12, 9, 10), None, utc(2026, 6, 12, 9, 15)
    ),
    "the last window of the day is followed by the first of the next weekday": Case(
        "*/15 9-17 * * mon-fri 10m", utc(2026, 6, 11, 17, 55), None, utc(2026, 6, 12, 9)
    ),
    "a new year's eve minute is found half a year ahead": Case(
        "59 23 31 12 * 1m", utc(2026, 6, 1), None, utc(2026, 12, 31, 23, 59)
    ),
    "an every-minute window of 30s is closed in the second half of a minute": Case(
        "* * * * * 30s", utc(2026, 6, 10, 12, 0, 45), None, utc(2026, 6, 10, 12, 1)
    ),
    "an every-minute window of 30s is open in the first half of a minute": Case(
        "* * * * * 30s", utc(2026, 6, 10, 12, 0, 15), utc(2026, 6, 10, 12, 0, 30), utc(2026, 6, 10, 12, 0, 15)
    ),
    "fractions of a second count": Case(
        "0 12 * * * 1h30m", utc(2026, 6, 10, 13, 29, 59) + 0.5, utc(2026, 6, 10, 13, 30), utc(2026, 6, 10, 13, 29, 59) + 0.5
    ),
    "february the 29th is found in the next leap year": Case(
        "0 0 29 2 * 1h", utc(2026, 3, 1), None, utc(2028, 2, 29)
    ),
    "february the 31st never comes": Case("0 0 31 2 * 1h", utc(2026, 3, 1), None, None),
    "the 31st of a month skips the months that have 30 days": Case(
        "0 0 31 * * 1h", utc(2026, 4, 1), None, utc(2026, 5, 31)
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", UTC_CASES.values(), ids=UTC_CASES.keys())
def test_utc_windows_open_close_and_reopen_as_the_table_says(case: Case) -> None:
    check(case)


BERLIN_CASES = {
    "before the spring change 02:30 is 01:30 utc": Case(
        "30 2 * * * 1h Europe/Berlin", utc(2026, 3, 28), None, utc(2026, 3, 28, 1, 30)
    ),
    "02:30 skipped by the spring change fires at 03:30 of the new offset": Case(
        "30 2 * * * 1h Europe/Berlin", utc(2026, 3, 29), None, utc(2026, 3, 29, 1, 30)
    ),
    "the skipped-wall-time window stays open for its elapsed duration": Case(
        "30 2 * * * 1h Europe/Berlin", utc(2026, 3, 29, 2), utc(2026, 3, 29, 2, 30), utc(2026, 3, 29, 2)
    ),
    "after the spring change 02:30 is 00:30 utc": Case(
        "30 2 * * * 1h Europe/Berlin", utc(2026, 3, 29, 2, 30), None, utc(2026, 3, 30, 0, 30)
    ),
    "a skipped 02:30 and a real 03:30 are one instant and fire once": Case(
        "30 2,3 * * * 1m Europe/Berlin", utc(2026, 3, 29, 1, 31), None, utc(2026, 3, 30, 0, 30)
    ),
    "the hour that does not exist fires at the start of the next one": Case(
        "0 * * * * 1m Europe/Berlin", utc(2026, 3, 29, 0, 30), None, utc(2026, 3, 29, 1)
    ),
    "hourly windows go on in the new offset after the spring change": Case(
        "0 * * * * 1m Europe/Berlin", utc(2026, 3, 29, 1, 1, 30), None, utc(2026, 3, 29, 2)
    ),
    "a window over the spring change lasts its elapsed duration": Case(
        "0 0 * * * 6h Europe/Berlin", utc(2026, 3, 29, 4, 30), utc(2026, 3, 29, 5), utc(2026, 3, 29, 4, 30)
    ),
    "noon moves an hour earlier in utc on the day of the spring change": Case(
        "0 12 * * * 1h Europe/Berlin", utc(2026, 3, 29), None, utc(2026, 3, 29, 10)
    ),
    "noon is 11:00 utc the day before the spring change": Case(
        "0 12 * * * 1h Europe/Berlin", utc(2026, 3, 28), None, utc(2026, 3, 28, 11)
    ),
    "02:30 repeated by the autumn change fires at its first occurrence": Case(
        "30 2 * * * 1h Europe/Berlin", utc(2026, 10, 25), None, utc(2026, 10, 25, 0, 30)
    ),
    "the first 02:30 of the autumn change is open during the repeated hour": Case(
        "30 2 * * * 1h Europe/Berlin", utc(2026, 10, 25, 1), utc(2026, 10, 25, 1, 30), utc(2026, 10, 25, 1)
    ),
    "the second 02:30 of the autumn change does not fire again": Case(
        "30 2 * * * 1h Europe/Berlin", utc(2026, 10, 25, 1, 30), None, utc(2026, 10, 26, 1, 30)
    ),
    "half-hourly windows in the repeated hour fire once each": Case(
        "*/30 2 * * * 10m Europe/Berlin", utc(2026, 10, 25, 0, 45), None, utc(2026, 10, 26, 1)
    ),
    "a window over the autumn change lasts its elapsed duration": Case(
        "0 0 * * * 6h Europe/Berlin", utc(2026, 10, 25, 3), utc(2026, 10, 25, 4), utc(2026, 10, 25, 3)
    ),
    "noon moves an hour later in utc on the day of the autumn change": Case(
        "0 12 * * * 1h Europe/Berlin", utc(2026, 10, 25), None, utc(2026, 10, 25, 11)
    ),
    "a berlin midnight window in winter opens at 23:00 utc the day before": Case(
        "@daily 1h Europe/Berlin", utc(2026, 1, 1, 12), None, utc(2026, 1, 1, 23)
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", BERLIN_CASES.values(), ids=BERLIN_CASES.keys())
def test_berlin_windows_follow_the_wall_clock_across_dst_changes(case: Case) -> None:
    check(case)


# 2026-01-01 is a Thursday: Fridays are the 2nd, 9th, 16th; the 13th is a Tuesday.
VIXIE_CASES = {
    "day-of-month and day-of-week both restricted: a friday matches": Case(
        "0 0 13 * fri 1h", utc(2026, 1, 1, 1), None, utc(2026, 1, 2)
    ),
    "day-of-month and day-of-week both restricted: the 13th matches though not a friday": Case(
        "0 0 13 * fri 1h", utc(2026, 1, 10), None, utc(2026, 1, 13)
    ),
    "only day-of-month restricted: only the 13th matches": Case(
        "0 0 13 * * 1h", utc(2026, 1, 1, 1), None, utc(2026, 1, 13)
    ),
    "only day-of-week restricted: only fridays match": Case(
        "0 0 * * fri 1h", utc(2026, 1, 10), None, utc(2026, 1, 16)
    ),
    "a day-of-month beginning with a star is unrestricted so both must match": Case(
        "0 0 */2 * fri 1h", utc(2026, 1, 1, 1), None, utc(2026, 1, 9)
    ),
    "the first seven days or any monday": Case(
        "0 0 1-7 * mon 1h", utc(2026, 1, 8), None, utc(2026, 1, 12)
    ),
    "the first seven days only": Case("0 0 1-7 * * 1h", utc(2026, 1, 8), None, utc(2026, 2, 1)),
    "a star-step day-of-month with a weekday means every such weekday": Case(
        "0 0 */1 * mon 1h", utc(2026, 1, 8), None, utc(2026, 1, 12)
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", VIXIE_CASES.values(), ids=VIXIE_CASES.keys())
def test_day_of_month_and_day_of_week_combine_as_in_vixie_cron(case: Case) -> None:
    check(case)


MACRO_CASES = {
    "hourly": Case("@hourly 1m", utc(2026, 1, 1, 10, 30), None, utc(2026, 1, 1, 11)),
    "daily": Case("@daily 1m", utc(2026, 1, 1, 10, 30), None, utc(2026, 1, 2)),
    "midnight": Case("@midnight 1m", utc(2026, 1, 1, 10, 30), None, utc(2026, 1, 2)),
    "weekly on sunday": Case("@weekly 1m", utc(2026, 1, 1, 10, 30), None, utc(2026, 1, 4)),
    "monthly": Case("@monthly 1m", utc(2026, 1, 1, 10, 30), None, utc(2026, 2, 1)),
    "yearly": Case("@yearly 1m", utc(2026, 1, 1, 10, 30), None, utc(2027, 1, 1)),
    "annually": Case("@annually 1m", utc(2026, 1, 1, 10, 30), None, utc(2027, 1, 1)),
    "yearly open on new year's day": Case(
        "@yearly 24h", utc(2026, 1, 1, 10, 30), utc(2026, 1, 2), utc(2026, 1, 1, 10, 30)
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", MACRO_CASES.values(), ids=MACRO_CASES.keys())
def test_macros_fire_at_the_times_of_their_cron(case: Case) -> None:
    check(case)


@pytest.mark.parametrize("now", [float("nan"), float("inf"), float("-inf"), 1e300, -1e300])
def test_an_unusable_clock_reading_means_closed_with_no_next_opening(now: float) -> None:
    w = window("* * * * * 168h")
    assert (w.is_open(now), w.open_until(now), w.next_open(now)) == (False, None, None)


# ---------------------------------------------------------------- against a brute force


@dataclass(frozen=True)
class Reference:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    day_and_weekday_either: bool
    duration: int

    def fires(self, minute: int) -> bool:
        t = dt.datetime.fromtimestamp(minute, UTC)
        by_day, by_weekday = t.day in self.days, t.isoweekday() % 7 in self.weekdays
        day = (by_day or by_weekday) if self.day_and_weekday_either else (by_day and by_weekday)
        return t.minute in self.minutes and t.hour in self.hours and t.month in self.months and day

    def last_start(self, now: float) -> int | None:
        minute = int(now) - int(now) % 60
        while minute > now - self.duration:
            if self.fires(minute):
                return minute
            minute -= 60
        return None

    def next_start(self, now: float, horizon: float) -> int | None:
        minute = int(now) - int(now) % 60 + 60
        while minute <= horizon:
            if self.fires(minute):
                return minute
            minute += 60
        return None


@st.composite
def field(draw: st.DrawFn, lo: int, hi: int) -> tuple[str, frozenset[int]]:
    """A cron field's text and the values it means, computed here independently."""
    kind = draw(st.sampled_from(["star", "step", "list"]))
    if kind == "star":
        return "*", frozenset(range(lo, hi + 1))
    if kind == "step":
        step = draw(st.integers(1, hi))
        return f"*/{step}", frozenset(range(lo, hi + 1, step))
    items, values = [], set()
    for _ in range(draw(st.integers(1, 3))):
        a = draw(st.integers(lo, hi))
        b = draw(st.integers(a, min(hi, a + 3)))
        step = draw(st.integers(1, 3))
        form = draw(st.sampled_from(["one", "range", "range-step"]))
        if form == "one":
            items.append(str(a))
            values.add(a)
        else:
            items.append(f"{a}-{b}" if form == "range" else f"{a}-{b}/{step}")
            values.update(range(a, b + 1, 1 if form == "range" else step))
    return ",".join(items), frozenset(values)


@st.composite
def windows(draw: st.DrawFn) -> tuple[str, Reference]:
    minute, minutes = draw(field(0, 59))
    hour, hours = draw(field(0, 23))
    day, days = draw(field(1, 31))
    month, months = draw(st.one_of(st.just(("*", ALL_MONTHS)), field(1, 12)))
    weekday, weekdays = draw(field(0, 7))
    duration = draw(st.integers(1, 2 * 86400))
    text = f"{minute} {hour} {day} {month} {weekday} {duration}s"
    either = not day.startswith("*") and not weekday.startswith("*")
    weekdays = frozenset(v % 7 for v in weekdays)
    return text, Reference(minutes, hours, days, months, weekdays, either, duration)


NOWS = st.integers(int(utc(2026, 1, 1)), int(utc(2027, 1, 1)))


@settings(max_examples=200, deadline=None)
@given(windows(), st.one_of(NOWS, NOWS.map(lambda t: t - t % 60), NOWS.map(lambda t: t + 0.25)))
def test_evaluation_agrees_with_a_minute_by_minute_brute_force(
    spec: tuple[str, Reference], now: float
) -> None:
    text, reference = spec
    w = window(text)
    last = reference.last_start(now)
    expected_until = None if last is None else last + reference.duration
    assert w.open_until(now) == expected_until
    assert w.is_open(now) is (last is not None)
    horizon = now + 8 * 86400
    if last is not None:
        assert w.next_open(now) == now
        return
    expected_next = reference.next_start(now, horizon)
    got = w.next_open(now)
    if expected_next is not None:
        assert got == expected_next
    else:
        assert got is None or got > horizon
