"""Extended durations: parsing, formatting, Go's Duration.String."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orksync.durations import format_duration, format_go_duration, parse_duration

DAY = timedelta(days=1)


@pytest.mark.parametrize(("text", "expected"), [
    ("90d", 90 * DAY),
    ("1y", 365 * DAY),
    ("2w", 14 * DAY),
    ("6mo", 180 * DAY),
    ("1.5h", timedelta(hours=1, minutes=30)),
    ("30m", timedelta(minutes=30)),
    ("45s", timedelta(seconds=45)),
    ("250ms", timedelta(milliseconds=250)),
    ("7us", timedelta(microseconds=7)),
    ("7µs", timedelta(microseconds=7)),
    ("7μs", timedelta(microseconds=7)),
    ("1500ns", timedelta(microseconds=2)),
    ("0.5d", timedelta(hours=12)),
])
def test_each_unit_of_the_extended_grammar_is_understood(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    # verified with Go 1.26 time.ParseDuration
    ("1h30m", timedelta(hours=1, minutes=30)),
    ("1.5h", timedelta(hours=1, minutes=30)),
    ("90m", timedelta(hours=1, minutes=30)),
    ("1h1h", timedelta(hours=2)),
    ("300ms", timedelta(milliseconds=300)),
    ("1us", timedelta(microseconds=1)),
    ("2h45m30.5s", timedelta(hours=2, minutes=45, seconds=30.5)),
    (".5s", timedelta(milliseconds=500)),
    ("1.s", timedelta(seconds=1)),
    ("+5s", timedelta(seconds=5)),
    ("0", timedelta(0)),
])
def test_every_go_duration_reads_as_go_reads_it(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("1d12h", timedelta(days=1, hours=12)),
    ("1w2d", timedelta(days=9)),
    ("1y6mo", timedelta(days=545)),
    ("2mo1m", timedelta(days=60, minutes=1)),
    ("1m1ms", timedelta(minutes=1, milliseconds=1)),
])
def test_compound_forms_mixing_extended_units_are_summed(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


def test_never_means_no_rotation_as_a_zero_duration() -> None:
    assert parse_duration("never") == timedelta(0)
    assert parse_duration("  90d  ") == 90 * DAY


@pytest.mark.parametrize("text", ["", "d", "1", "90", "1x", "1h 30m", "-1h", "1.2.3h", "h1",
                                  "nevermore", "1dd", "1 d", "ten days", "300y", "1M"])
def test_malformed_durations_raise_a_value_error_naming_the_text(text: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_duration(text)
    assert repr(text.strip()) in str(err.value) or repr(text) in str(err.value)


def test_a_non_string_is_rejected_with_a_value_error() -> None:
    with pytest.raises(ValueError, match="expected a string"):
        parse_duration(90)  # type: ignore[arg-type]


def test_go_range_of_about_292_years_is_the_limit() -> None:
    assert parse_duration("292y") == 292 * 365 * DAY
    with pytest.raises(ValueError, match="out of range"):
        parse_duration("293y")


@pytest.mark.parametrize(("td", "text"), [
    (90 * DAY, "90d"),
    (timedelta(hours=1, minutes=30), "1h30m"),
    (timedelta(days=1, hours=12), "1d12h"),
    (timedelta(seconds=1.5), "1s500ms"),
    (timedelta(microseconds=3), "3us"),
    (timedelta(0), "0s"),
    (-timedelta(minutes=5), "-5m"),
    (365 * DAY, "365d"),
])
def test_durations_are_formatted_short(td: timedelta, text: str) -> None:
    assert format_duration(td) == text


@given(st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=100_000)))
def test_formatting_then_parsing_gives_back_the_same_duration(td: timedelta) -> None:
    assert parse_duration(format_duration(td)) == td


@given(st.integers(min_value=0, max_value=10**6),
       st.sampled_from(["s", "m", "h", "d", "w", "mo", "y"]))
def test_a_whole_number_of_a_unit_parses_to_that_multiple(n: int, unit: str) -> None:
    sizes = {"s": timedelta(seconds=1), "m": timedelta(minutes=1), "h": timedelta(hours=1),
             "d": DAY, "w": 7 * DAY, "mo": 30 * DAY, "y": 365 * DAY}
    if n * sizes[unit] > timedelta(days=292 * 365):
        return
    assert parse_duration(f"{n}{unit}") == n * sizes[unit]


@pytest.mark.parametrize(("td", "text"), [
    # verified with Go 1.26 time.Duration.String
    (timedelta(minutes=90), "1h30m0s"),
    (90 * DAY, "2160h0m0s"),
    (timedelta(0), "0s"),
    (timedelta(milliseconds=1500), "1.5s"),
    (timedelta(microseconds=1), "1µs"),
    (timedelta(hours=36, seconds=1), "36h0m1s"),
    (timedelta(milliseconds=250), "250ms"),
    (timedelta(minutes=5, seconds=30), "5m30s"),
    (-timedelta(seconds=2), "-2s"),
])
def test_go_duration_text_matches_go(td: timedelta, text: str) -> None:
    assert format_go_duration(td) == text
