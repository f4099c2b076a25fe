"""Every parser of tenant-written text is total: a value or a one-line error, whatever the input
(arbitrary text, huge numbers, deep nesting, a megabyte)."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kube_reloader.core import pausing, strategies
from kube_reloader.core.annotations import RELOADED_HASHES, list_members, parse_bool, split_list
from kube_reloader.core.parsing import MAX_JSON_DEPTH, json_object, json_value, quote
from kube_reloader.core.references import PodTemplate
from kube_reloader.core.selectors import SelectorError, legacy_to_selector, validate

PERIOD = "deployment.reloader.stakater.com/pause-period"
AT = "deployment.reloader.stakater.com/paused-at"
NOW = dt.datetime(2026, 12, 1, 12, 0, 0, tzinfo=dt.UTC)
MEGABYTE = 1 << 20

HOSTILE = st.one_of(
    st.text(max_size=400),
    st.builds(lambda n: "9" * n, st.integers(1, 6000)),
    st.builds(lambda n: "[" * n + "]" * n, st.integers(1, 200_000)),
    st.builds(lambda n: '{"a":' * n + "1" + "}" * n, st.integers(1, 50_000)),
    st.just("x" * MEGABYTE),
    st.sampled_from(["9999-12-31T23:59:59Z", "0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00",
                     "99999999999999999999h", "1e308h", "NaN", "\udc80", "\x00"]),
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(HOSTILE)
def test_json_annotations_decode_to_a_value_or_a_one_line_error(text: str) -> None:
    parsed = json_value(text)
    assert (parsed.error is None) or ("\n" not in parsed.error)
    assert json_object(text) is None or isinstance(json_object(text), dict)


def test_json_nested_deeper_than_the_limit_is_refused_before_decoding() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    assert json_value(deep).error == f"JSON nested deeper than {MAX_JSON_DEPTH} levels"


def test_brackets_inside_json_strings_do_not_count_as_nesting() -> None:
    assert json_object('{"k": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}') == {"k": "[" * 34}


def test_a_json_integer_of_thousands_of_digits_is_an_error_not_an_exception() -> None:
    assert json_value("9" * 6000).error is not None


@settings(max_examples=150, deadline=None)
@given(HOSTILE)
def test_recorded_hashes_of_any_annotation_value_is_a_dict(text: str) -> None:
    record = strategies.recorded_hashes(PodTemplate(annotations={RELOADED_HASHES: text}))
    assert isinstance(record, dict)


def test_the_reloaded_hashes_bomb_from_the_report_reads_as_no_record() -> None:
    bomb = "[" * 100_000 + "]" * 100_000
    assert strategies.recorded_hashes(PodTemplate(annotations={RELOADED_HASHES: bomb})) == {}


@settings(max_examples=150, deadline=None)
@given(HOSTILE)
def test_durations_parse_to_a_finite_number_or_a_duration_error(text: str) -> None:
    error = ""
    try:
        seconds = pausing.parse_duration(text)
    except pausing.DurationError as exc:
        error = str(exc)
    if error:
        assert "\n" not in error
        assert len(error) < 200
    else:
        assert abs(seconds) <= pausing.MAX_DURATION_SECONDS


@pytest.mark.parametrize("text", ["2562048h", "99999999999999999999h", "1e308h"])
def test_durations_longer_than_go_can_hold_are_invalid(text: str) -> None:
    with pytest.raises(pausing.DurationError):
        pausing.parse_duration(text)


@settings(max_examples=150, deadline=None)
@given(HOSTILE, HOSTILE, st.booleans())
def test_pause_decisions_never_raise_for_any_annotation_values(
    period: str, stamp: str, paused: bool
) -> None:
    annotations = {PERIOD: period, AT: stamp}
    plan = pausing.plan_pause(
        annotations=annotations, paused=paused, now=NOW, period_key=PERIOD, paused_at_key=AT
    )
    assert plan.message
    due, when = pausing.resume_due(
        annotations=annotations, paused=paused, now=NOW, period_key=PERIOD, paused_at_key=AT
    )
    assert isinstance(due, bool)
    if when is not None:
        pausing.format_time(when)


def test_a_paused_at_in_year_9999_resumes_at_once_instead_of_overflowing() -> None:
    annotations = {PERIOD: "1h", AT: "9999-12-31T23:59:59Z"}
    due, when = pausing.resume_due(
        annotations=annotations, paused=True, now=NOW, period_key=PERIOD, paused_at_key=AT
    )
    assert (due, when) == (True, NOW)
    plan = pausing.plan_pause(
        annotations=annotations, paused=True, now=NOW, period_key=PERIOD, paused_at_key=AT
    )
    assert plan.resume_at == NOW


def test_a_paused_at_with_an_offset_at_the_edge_of_time_is_not_a_pause_of_ours() -> None:
    assert pausing.parse_time("0001-01-01T00:00:00+05:00") is None
    assert pausing.parse_time("9999-12-31T23:59:59-05:00") is None


def test_times_are_formatted_even_at_the_edge_of_the_representable_range() -> None:
    edge = dt.datetime.max.replace(tzinfo=dt.UTC)
    assert pausing.format_time(pausing.shift(edge, 3600)) == "9999-12-31T23:59:59Z"


@settings(max_examples=150, deadline=None)
@given(HOSTILE)
def test_booleans_and_lists_parse_any_text(text: str) -> None:
    assert parse_bool(text) in (True, False, None)
    assert len(split_list(text)) == text.count(",") + 1
    assert isinstance(list_members(text), frozenset)


@settings(max_examples=150, deadline=None)
@given(st.lists(HOSTILE, max_size=3))
def test_selectors_validate_to_a_string_or_a_selector_error(elements: list[str]) -> None:
    selector = legacy_to_selector(elements)
    error = ""
    try:
        validate(selector)
    except SelectorError as exc:
        error = str(exc)
    assert error == "" or error.endswith("is not a valid label selector requirement")


@settings(max_examples=300, deadline=None)
@given(HOSTILE, st.integers(min_value=8, max_value=120))
def test_a_quoted_value_stays_within_its_limit_however_its_characters_escape(
    text: str, limit: int
) -> None:
    out = quote(text, limit)
    assert len(out) <= limit + 2
    assert "\n" not in out
    assert out == repr(text) or out.endswith(("...'", '..."'))


def test_a_value_of_wide_escapes_is_cut_before_its_repr_outgrows_the_message() -> None:
    text = "0" * 25 + "\x1f" * 8 + "\U0001019d" * 40  # 73 characters, a repr of over 450
    assert len(quote(text)) <= 82
    with pytest.raises(pausing.DurationError) as err:
        pausing.parse_duration(text)
    assert len(str(err.value)) < 200
