"""Named lists are RE2 (Go's dialect, linear time), bounded, and total on hostile input."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kube_reloader.core import regexes
from kube_reloader.core.regexes import (
    MAX_ENTRIES,
    MAX_LIST_CHARS,
    MAX_PATTERN_LENGTH,
    compile_entry,
    compile_list,
)


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    ("entry", "name", "found"),
    [
        ("(a*){20}b", "a" * 40, False),
        ("(a?){30}a{30}", "a" * 30, True),
        ("(.*){12}b", "a" * 100, False),
        (".*.*.*.*.*.*.*.*b", "a" * 100, False),
        ("(a+)+", "a" * 240 + "!", False),
        ("(a|aa)+", "a" * 240 + "!", False),
        ("(x+x+)+y", "x" * 240, False),
    ],
)
def test_patterns_that_backtrack_exponentially_in_python_run_in_linear_time(
    entry: str, name: str, found: bool
) -> None:
    # each of these stalls Python's `re` for seconds to hours on this input
    compiled = compile_entry(entry)
    assert compiled.error is None
    assert compiled.search(name) is found


@pytest.mark.parametrize(
    ("entry", "name", "found"),
    [
        ("(?i)APP-.*", "app-config", True),
        ("app-[[:digit:]]+", "app-42", True),
        ("app-[[:digit:]]+", "app-x", False),
        (r"\pL+-cm", "é-cm", True),
        (r"cm\z", "cm", True),
        ("a|b", "alpha", True),
        ("a|b", "xb", True),
        ("a|b", "xa", False),
        ("my.cm", "myXcm", True),
        (r"\Qa.b\E", "a.b", True),
        (r"\Qa.b\E", "aXb", False),
        ("a{,3}", "a{,3}", True),  # Go: a literal, not Python's "up to three"
        ("a{,3}", "aaa", False),
    ],
)
def test_entries_follow_go_regexp_syntax_anchored_by_concatenation(
    entry: str, name: str, found: bool
) -> None:
    assert compile_entry(entry).error is None
    assert compile_entry(entry).search(name) is found


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("(?=x)", "invalid perl operator"),
        ("(?!x)", "invalid perl operator"),
        (r"(a)\1", "invalid escape sequence"),
        ("[", "missing ]"),
        ("a{1001}", "invalid repetition size"),
        (r"a\Cb", "not part of Go's regexp syntax"),
        ("x" * (MAX_PATTERN_LENGTH + 1), f"longer than {MAX_PATTERN_LENGTH} characters"),
    ],
)
def test_entries_go_rejects_are_refused_with_a_one_line_reason(entry: str, problem: str) -> None:
    compiled = compile_entry(entry)
    assert compiled.pattern is None
    assert compiled.error is not None
    assert problem in compiled.error
    assert "\n" not in compiled.error
    assert not compiled.search("x")


def test_an_escaped_backslash_before_c_is_plain_text_not_the_any_byte_escape() -> None:
    assert compile_entry(r"a\\Cb").search("a\\Cb")


def test_the_first_matching_entry_in_list_order_is_reported() -> None:
    compiled = compile_list("other, app-.*, app-config")
    assert compiled.first_match("app-config") == "app-.*"
    assert compiled.first_match("nothing") is None


def test_invalid_entries_are_reported_and_the_valid_ones_still_match() -> None:
    compiled = compile_list("[, (?=x), cm")
    assert compiled.first_match("cm") == "cm"
    assert len(compiled.problems) == 2
    assert compiled.refused is None


def test_a_quoted_entry_does_not_swallow_the_entries_after_it() -> None:
    compiled = compile_list(r"\Qa.b, cm")
    assert compiled.first_match("cm") == "cm"
    assert compiled.first_match("a.b, cm") is None


def test_a_list_with_more_entries_than_the_cap_is_refused_whole() -> None:
    value = ",".join(f"cm-{i}" for i in range(MAX_ENTRIES + 1))
    compiled = compile_list(value)
    assert compiled.refused is not None
    assert str(MAX_ENTRIES) in compiled.refused
    assert compiled.first_match("cm-1") is None


def test_a_list_longer_than_the_character_cap_is_refused_whole_and_not_cached() -> None:
    value = "x" * (MAX_LIST_CHARS + 1)
    compiled = compile_list(value)
    assert compiled.refused is not None
    assert f"more than the {MAX_LIST_CHARS:,}" in compiled.refused
    assert compile_list(value) is not compiled, "refusals of over-long values are not cached"


def test_the_list_cache_is_bounded_by_the_text_it_holds_not_by_a_count() -> None:
    before = regexes._LISTS.chars
    for i in range(2000):
        compile_list(f"{i:04d}-" + "y" * 2000)
    assert regexes._LISTS.chars <= regexes.CACHED_LIST_CHARS
    assert regexes._LISTS.chars >= min(before, regexes.CACHED_LIST_CHARS // 2)


def test_a_list_at_the_cap_is_used_and_matches_its_last_entry() -> None:
    value = ",".join(f"cm-{i}-[a-z]+" for i in range(MAX_ENTRIES))
    compiled = compile_list(value)
    assert compiled.refused is None
    assert compiled.first_match(f"cm-{MAX_ENTRIES - 1}-abc") == f"cm-{MAX_ENTRIES - 1}-[a-z]+"
    assert compiled.first_match("cm-x") is None


def test_a_list_compiles_once_per_distinct_value() -> None:
    value = "cached-a, cached-b"
    assert compile_list(value) is compile_list(value)


def test_a_name_with_a_lone_surrogate_matches_nothing_instead_of_raising() -> None:
    assert compile_entry(".*").search("\udc80") is False
    assert compile_list(".*, x").first_match("\udc80") is None


def test_an_entry_with_a_lone_surrogate_is_refused_not_raised() -> None:
    assert compile_entry("\udc80").error is not None


SIMPLE = st.text(alphabet="abc.*+?|()[]{}^$\\0123,-", max_size=12)


@settings(max_examples=300, deadline=None)
@given(st.lists(SIMPLE, min_size=1, max_size=6), st.text(alphabet="abc-0123.", max_size=12))
def test_the_combined_list_finds_exactly_what_the_entries_find_one_by_one(
    entries: list[str], name: str
) -> None:
    value = ",".join(e.replace(",", "") for e in entries)
    compiled = compile_list(value)
    one_by_one = next(
        (
            c.entry
            for c in map(compile_entry, (e.strip() for e in value.split(",")))
            if c.search(name)
        ),
        None,
    )
    assert compiled.first_match(name) == one_by_one


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300), st.text(max_size=300))
def test_any_text_compiles_to_a_pattern_or_a_one_line_error_and_never_raises(
    entry: str, name: str
) -> None:
    compiled = compile_entry(entry)
    assert (compiled.pattern is None) == (compiled.error is not None)
    if compiled.error is not None:
        assert "\n" not in compiled.error
    assert isinstance(compiled.search(name), bool)
    assert compile_list(entry).first_match(name) in (None, *[e.strip() for e in entry.split(",")])


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.from_regex(re.compile(r"[a-z][a-z0-9-]{0,20}", re.ASCII), fullmatch=True),
        min_size=1,
        max_size=20,
    )
)
def test_plain_names_as_entries_match_themselves_as_python_re_would(names: list[str]) -> None:
    compiled = compile_list(",".join(names))
    for n in names:
        expected = next(e for e in names if re.search("^" + e + "$", n))
        assert compiled.first_match(n) == expected


def test_a_megabyte_of_text_is_refused_cheaply() -> None:
    huge = "a" * (1 << 20)
    assert compile_entry(huge).error is not None
    assert compile_list(huge).first_match("a") is None
    assert regexes.compile_list(",".join(["x"] * 100_000)).refused is not None
    assert regexes.compile_list(",".join(["x"] * (MAX_ENTRIES + 1))).refused is not None
