"""Orkestra's condition language: resolution order, operators, wall-clock conditions,
combination of blocks and load-time validation."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orksync.render.conditions import (
    OPERATORS,
    SHORTHAND_ORDER,
    compile_regex,
    evaluate_condition,
    evaluate_conditions,
    resolve_operator,
    validate_condition,
)

MONDAY_0800 = datetime(2026, 4, 6, 8, 0, 0, tzinfo=UTC)

DATA: dict[str, Any] = {
    "metadata": {"name": "demo", "labels": {"tier": "gold"}},
    "spec": {"tier": "pro", "replicas": 3, "ratio": 2.5, "big": 1e6, "monitoring": True,
             "empty": "", "none": None, "regions": ["eu", "us"], "schedule": {"m": "1"},
             "image": "gcr.io/team/app:v1", "items": [{"name": "a"}], "count": "7x"},
    "status": {},
    "children": {"job": {"status": {"succeeded": 1}}},
}

TEMPLATES = {
    "{{ .spec.tier }}": "pro",
    "{{ .spec.replicas }}": "3",
    "{{ readyReplicas .children.deployment }}": "0",
    "{{ .metadata.name }}-x": "demo-x",
    "{{ broken }}": None,
}


def render(template: str, data: Mapping[str, Any]) -> str:
    result = TEMPLATES.get(template, "")
    if result is None:
        raise RuntimeError(f"template error in {template}")
    return result


def ev(cond: Mapping[str, Any], data: Mapping[str, Any] = DATA, *,
       now: datetime = MONDAY_0800, **kwargs: Any) -> bool:
    return evaluate_condition(cond, data, render, clock=lambda: now, **kwargs)


# ── resolution order ─────────────────────────────────────────────────────────────

FULL_ORDER = ["exists", "notExists", *(key for key, _ in SHORTHAND_ORDER), "operator",
              "value", "(nothing)"]


def test_shorthand_keys_follow_orkestras_resolution_order() -> None:
    assert [key for key, _ in SHORTHAND_ORDER] == [
        "equals", "notEquals", "prefix", "notPrefix", "suffix", "notSuffix", "contains",
        "notContains", "regex", "greaterThan", "lessThan", "greaterThanOrEqual",
        "lessThanOrEqual", "min", "max", "between", "notBetween", "in", "notIn"]


@pytest.mark.parametrize("index", range(len(FULL_ORDER) - 1))
def test_each_key_wins_over_every_key_after_it(index: int) -> None:
    cond: dict[str, Any] = {"field": "spec.tier"}
    for key in FULL_ORDER[index:-1]:
        cond[key] = True if key in ("exists", "notExists") else ("gte" if key == "operator"
                                                                  else f"v-{key}")
    op, expected = resolve_operator(cond)
    key = FULL_ORDER[index]
    if key == "exists":
        assert (op, expected) == ("exists", "")
    elif key == "notExists":
        assert (op, expected) == ("notExists", "")
    elif key == "operator":
        assert (op, expected) == ("gte", "v-value")
    elif key == "value":
        assert (op, expected) == ("equals", "v-value")
    else:
        assert (op, expected) == (dict(SHORTHAND_ORDER)[key], f"v-{key}")


def test_nothing_set_means_exists() -> None:
    assert resolve_operator({"field": "spec.tier"}) == ("exists", "")


def test_empty_strings_and_false_flags_count_as_not_set() -> None:
    assert resolve_operator({"equals": "", "notEquals": "x"}) == ("notEquals", "x")
    assert resolve_operator({"exists": False, "equals": "x"}) == ("equals", "x")
    assert resolve_operator({"notExists": False}) == ("exists", "")


def test_yaml_numbers_and_bools_read_as_their_text() -> None:
    assert resolve_operator({"equals": 3}) == ("equals", "3")
    assert resolve_operator({"equals": True}) == ("equals", "true")
    assert resolve_operator({"greaterThan": 2.5}) == ("gt", "2.5")


def test_the_min_and_max_shorthands_are_gte_and_lte() -> None:
    assert resolve_operator({"min": "1"}) == ("gte", "1")
    assert resolve_operator({"max": "9"}) == ("lte", "9")


# ── fields ───────────────────────────────────────────────────────────────────────

@pytest.mark.parametrize(("cond", "expected"), [
    ({"field": "spec.tier", "equals": "pro"}, True),
    ({"field": "spec.replicas", "equals": "3"}, True),
    ({"field": "spec.monitoring", "equals": "true"}, True),
    ({"field": "spec.monitoring", "equals": "True"}, False),
    ({"field": "spec.big", "equals": "1e+06"}, True),
    ({"field": "spec.regions", "equals": "[eu us]"}, True),
    ({"field": "spec.schedule", "equals": "map[m:1]"}, True),
    ({"field": "spec.none", "equals": "<nil>"}, False),
    ({"field": "spec.missing.deeper", "notExists": True}, True),
    ({"field": ".spec.tier", "notExists": True}, True),
    ({"field": "spec.items.0.name", "notExists": True}, True),
    ({"field": "children.job.status.succeeded", "equals": "1"}, True),
    ({"field": "", "notExists": True}, True),
])
def test_fields_are_bare_map_paths_printed_with_go_formatting(cond: dict[str, Any],
                                                             expected: bool) -> None:
    assert ev(cond) is expected


def test_a_templated_field_is_rendered() -> None:
    assert ev({"field": "{{ .spec.tier }}", "equals": "pro"})
    assert ev({"field": "{{ readyReplicas .children.deployment }}", "operator": "gt",
               "value": "0"}) is False


def test_a_templated_field_that_fails_to_render_is_false_even_when_negated_is_true() -> None:
    assert ev({"field": "{{ broken }}", "notExists": True}) is False
    assert ev({"field": "{{ broken }}", "notExists": True, "negate": True}) is True


def test_a_templated_expected_value_is_rendered_and_used_literally_on_error() -> None:
    assert ev({"field": "metadata.name", "equals": "{{ .metadata.name }}-x"}) is False
    assert ev({"field": "spec.tier", "equals": "{{ .spec.tier }}"}) is True
    assert ev({"field": "spec.tier", "notEquals": "{{ broken }}"}) is True
    assert ev({"field": "spec.replicas", "operator": "gte", "value": "{{ .spec.replicas }}"})


# ── operators ────────────────────────────────────────────────────────────────────

@pytest.mark.parametrize(("cond", "expected"), [
    ({"field": "spec.tier", "operator": "equals", "value": "pro"}, True),
    ({"field": "spec.tier", "notEquals": "free"}, True),
    ({"field": "spec.tier", "notEquals": "pro"}, False),
    ({"field": "spec.image", "contains": "team"}, True),
    ({"field": "spec.image", "notContains": "team"}, False),
    ({"field": "spec.image", "prefix": "gcr.io/"}, True),
    ({"field": "spec.image", "notPrefix": "docker.io/"}, True),
    ({"field": "spec.image", "suffix": ":v1"}, True),
    ({"field": "spec.image", "notSuffix": ":v1"}, False),
    ({"field": "spec.image", "regex": r"^gcr\.io/[a-z]+/app:v\d+$"}, True),
    ({"field": "spec.image", "regex": "^docker"}, False),
    ({"field": "spec.image", "regex": "team"}, True),
    ({"field": "spec.image", "regex": "(unclosed"}, False),
    ({"field": "spec.image", "regex": "(?=gcr)gcr"}, False),
    ({"field": "spec.image", "regex": "(?<host>gcr)"}, True),
    ({"field": "spec.image", "regex": r"v1\z"}, True),
    ({"field": "spec.replicas", "greaterThan": "2"}, True),
    ({"field": "spec.replicas", "greaterThan": "3"}, False),
    ({"field": "spec.replicas", "lessThan": "3"}, False),
    ({"field": "spec.replicas", "lessThan": "3.5"}, True),
    ({"field": "spec.replicas", "greaterThanOrEqual": "3"}, True),
    ({"field": "spec.replicas", "lessThanOrEqual": "3"}, True),
    ({"field": "spec.replicas", "min": "4"}, False),
    ({"field": "spec.replicas", "max": "3"}, True),
    ({"field": "spec.ratio", "operator": "gt", "value": "2.25"}, True),
    ({"field": "spec.big", "operator": "gte", "value": "1000000"}, True),
    ({"field": "spec.count", "operator": "gt", "value": "6"}, True),
    ({"field": "spec.tier", "operator": "lt", "value": "1"}, True),
    ({"field": "status.readyReplicas", "operator": "lt", "value": "1"}, True),
    ({"field": "status.readyReplicas", "operator": "gte", "value": "0"}, True),
    ({"field": "spec.replicas", "operator": "gt", "value": "many"}, False),
    ({"field": "spec.replicas", "operator": "lt", "value": "4abc"}, True),
    ({"field": "spec.replicas", "operator": "gt"}, True),
    ({"field": "spec.replicas", "between": "1,10"}, True),
    ({"field": "spec.replicas", "between": "3, 3"}, True),
    ({"field": "spec.replicas", "between": "4,10"}, False),
    ({"field": "spec.replicas", "notBetween": "4,10"}, True),
    ({"field": "spec.replicas", "notBetween": "1,10"}, False),
    ({"field": "spec.replicas", "between": "1"}, False),
    ({"field": "spec.replicas", "between": "1,2,3"}, False),
    ({"field": "spec.replicas", "between": "a,b"}, False),
    ({"field": "spec.tier", "between": "1,10"}, False),
    ({"field": "spec.tier", "notBetween": "1,10"}, False),
    ({"field": "status.missing", "between": "0,1"}, True),
    ({"field": "spec.tier", "in": "free, pro ,enterprise"}, True),
    ({"field": "spec.tier", "in": "free,enterprise"}, False),
    ({"field": "spec.tier", "notIn": "free,enterprise"}, True),
    ({"field": "spec.tier", "notIn": "pro"}, False),
    ({"field": "status.phase", "in": "Pending,"}, True),
    ({"field": "status.phase", "in": ",Pending"}, True),
    ({"field": "status.phase", "in": "Pending"}, False),
    ({"field": "status.phase", "notIn": "Pending,"}, False),
    ({"field": "spec.tier", "exists": True}, True),
    ({"field": "spec.empty", "exists": True}, False),
    ({"field": "spec.none", "exists": True}, False),
    ({"field": "spec.empty", "notExists": True}, True),
    ({"field": "status.phase", "operator": "notExists"}, True),
    ({"field": "spec.tier"}, True),
    ({"field": "spec.missing"}, False),
    ({"field": "spec.tier", "value": "pro"}, True),
    ({"field": "spec.tier", "value": "free"}, False),
])
def test_operators(cond: dict[str, Any], expected: bool) -> None:
    assert ev(cond) is expected


@pytest.mark.parametrize(("field", "operator", "value", "expected"), [
    ("spec.schedule", "typeOf", "map", True),
    ("spec.regions", "typeOf", "slice", True),
    ("spec.replicas", "typeOf", "number", True),
    ("spec.tier", "typeOf", "number", False),
    ("spec.missing", "typeOf", "null", True),
    ("spec.schedule", "typeMap", "", True),
    ("spec.regions", "typeList", "", True),
    ("spec.tier", "typeString", "", True),
    ("spec.ratio", "typeNumber", "", True),
    ("spec.monitoring", "typeBool", "", True),
    ("spec.tier", "typeBool", "", False),
    ("spec.none", "typeNull", "", True),
    ("spec.missing", "typeNull", "", True),
    ("spec.tier", "typeNull", "", False),
    ("{{ .spec.replicas }}", "typeString", "", True),
])
def test_type_operators_look_at_the_raw_value(field: str, operator: str, value: str,
                                              expected: bool) -> None:
    assert ev({"field": field, "operator": operator, "value": value}) is expected


def test_unique_passes_without_a_checker_and_asks_it_otherwise() -> None:
    cond = {"field": "spec.tier", "operator": "unique"}
    assert ev(cond) is True
    calls: list[tuple[str, Any]] = []

    def taken(field: str, value: Any) -> bool:
        calls.append((field, value))
        return False

    assert ev(cond, unique_checker=taken) is False
    assert calls == [("spec.tier", "pro")]


def test_an_unknown_operator_fails_closed() -> None:
    assert ev({"field": "spec.tier", "operator": "startsWith", "value": "p"}) is False


@pytest.mark.parametrize("cond", [
    {"field": "spec.tier", "equals": "pro"},
    {"field": "spec.tier", "equals": "free"},
    {"time": {"after": "07:00"}},
    {"dayOfWeek": {"weekday": True}},
    {"field": "{{ broken }}", "exists": True},
])
def test_negate_inverts_any_condition(cond: dict[str, Any]) -> None:
    assert ev({**cond, "negate": True}) is (not ev(cond))


# ── in / notIn properties ────────────────────────────────────────────────────────

_items = st.lists(st.text(alphabet="abc ,", max_size=4), max_size=5)


@given(_items, st.text(alphabet="abc", max_size=3))
def test_in_matches_exactly_the_trimmed_items(items: list[str], value: str) -> None:
    expected_text = ",".join(items)
    data = {"spec": {"v": value}}
    members = {item.strip(" \t") for item in expected_text.split(",")}
    in_result = ev({"field": "spec.v", "operator": "in", "value": expected_text}, data)
    not_in = ev({"field": "spec.v", "operator": "notIn", "value": expected_text}, data)
    assert in_result is (value in members)
    assert not_in is (not in_result)


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e9, max_value=1e9),
       st.floats(allow_nan=False, allow_infinity=False, min_value=-1e9, max_value=1e9))
def test_numeric_operators_agree_with_float_comparison(a: float, b: float) -> None:
    data = {"spec": {"v": a}}
    expected = repr(b)
    assert ev({"field": "spec.v", "operator": "gt", "value": expected}, data) is (a > b)
    assert ev({"field": "spec.v", "operator": "lte", "value": expected}, data) is (a <= b)


# ── wall-clock conditions ────────────────────────────────────────────────────────

@pytest.mark.parametrize(("window", "hhmm", "expected"), [
    ({"after": "08:00", "before": "20:00"}, (8, 0), True),
    ({"after": "08:00", "before": "20:00"}, (7, 59), False),
    ({"after": "08:00", "before": "20:00"}, (20, 0), True),
    ({"after": "08:00", "before": "20:00"}, (20, 1), False),
    ({"after": "08:00"}, (23, 59), True),
    ({"before": "06:00"}, (5, 0), True),
    ({"before": "06:00"}, (7, 0), False),
    ({"after": "22:00", "before": "06:00"}, (23, 30), True),
    ({"after": "22:00", "before": "06:00"}, (3, 0), True),
    ({"after": "22:00", "before": "06:00"}, (12, 0), False),
    ({"after": "8:00", "before": "9:00"}, (8, 30), True),
    ({"after": "8:0"}, (8, 30), False),
    ({"after": "25:00"}, (8, 30), False),
    ({}, (8, 30), True),
])
def test_time_windows_use_the_injected_clock(window: dict[str, str], hhmm: tuple[int, int],
                                             expected: bool) -> None:
    now = MONDAY_0800.replace(hour=hhmm[0], minute=hhmm[1])
    assert ev({"time": window}, now=now) is expected


def test_the_before_bound_is_inclusive_only_at_the_exact_minute() -> None:
    at = MONDAY_0800.replace(hour=20, minute=0, second=30)
    assert ev({"time": {"before": "20:00"}}, now=at) is False


def test_time_windows_read_the_clock_in_its_own_time_zone() -> None:
    paris = MONDAY_0800.astimezone(timezone(timedelta(hours=2)))  # 10:00 local
    assert ev({"time": {"after": "09:30", "before": "10:30"}}, now=paris) is True


def test_time_conditions_ignore_the_field() -> None:
    assert ev({"time": {"after": "07:00"}, "field": "spec.tier", "equals": "free"}) is True


@pytest.mark.parametrize(("spec", "day", "expected"), [
    ({"weekday": True}, 6, True),
    ({"weekday": True}, 11, False),
    ({"weekday": False}, 11, True),
    ({"weekend": True}, 12, True),
    ({"weekend": True}, 7, False),
    ({"in": ["Monday", "Tuesday"]}, 6, True),
    ({"in": ["monday"]}, 7, False),
    ({"in": "Mon, Wed"}, 8, True),
    ({"in": ["Sat"]}, 11, True),
    ({"notIn": ["Saturday", "Sunday"]}, 6, True),
    ({"notIn": ["Saturday", "Sunday"]}, 12, False),
    ({}, 6, False),
    ({"weekday": True, "in": ["Sunday"]}, 6, True),
])
def test_day_of_week_conditions(spec: dict[str, Any], day: int, expected: bool) -> None:
    now = MONDAY_0800.replace(day=day)  # 6 April 2026 is a Monday
    assert ev({"dayOfWeek": spec}, now=now) is expected


@pytest.mark.parametrize(("cron", "duration", "hhmm", "expected"), [
    ("0 8 * * *", "1h", (8, 30), True),
    ("0 8 * * *", "1h", (9, 0), False),
    ("0 8 * * *", "1h", (7, 59), False),
    ("0 8 * * *", "", (7, 59), True),  # default window = one day
    ("0 8 * * 2", "", (8, 0), True),   # weekly schedule: last fire a week ago
    ("*/15 * * * *", "5m", (8, 4), True),
    ("*/15 * * * *", "5m", (8, 6), False),
    ("not a cron", "1h", (8, 30), False),
    ("0 8 * * *", "1x", (8, 30), False),
])
def test_cron_windows(cron: str, duration: str, hhmm: tuple[int, int], expected: bool) -> None:
    now = MONDAY_0800.replace(hour=hhmm[0], minute=hhmm[1])
    cond: dict[str, Any] = {"cron": cron}
    if duration:
        cond["duration"] = duration
    assert ev(cond, now=now) is expected


def test_injected_cron_window_state_wins() -> None:
    data = {"_cronWindows": {"0 8 * * *": "false"}}
    assert ev({"cron": "0 8 * * *", "duration": "1h"}, data,
              now=MONDAY_0800.replace(minute=30)) is False


# ── combination ──────────────────────────────────────────────────────────────────

YES = {"field": "spec.tier", "equals": "pro"}
NO = {"field": "spec.tier", "equals": "free"}


@pytest.mark.parametrize(("when", "or_", "expected"), [
    (None, None, True),
    ([], [], True),
    ([YES], None, True),
    ([YES, NO], None, False),
    (None, [NO, YES], True),
    (None, [NO, NO], False),
    ([YES], [NO, YES], True),
    ([YES], [NO], False),
    ([NO], [YES], False),
])
def test_when_is_and_or_needs_one_and_both_blocks_must_pass(when: Any, or_: Any,
                                                           expected: bool) -> None:
    assert evaluate_conditions(DATA, when, or_, render, clock=lambda: MONDAY_0800) is expected


def test_evaluation_stops_at_the_first_failing_when_item() -> None:
    rendered: list[str] = []

    def tracking(template: str, data: Mapping[str, Any]) -> str:
        rendered.append(template)
        return "x"

    evaluate_conditions(DATA, [NO, {"field": "{{ .spec.tier }}", "equals": "x"}], None,
                        tracking, clock=lambda: MONDAY_0800)
    assert rendered == []


# ── regex safety ─────────────────────────────────────────────────────────────────

@pytest.mark.parametrize("pattern", ["(a+)+$", "(a*)*", "(x+x+)+y", "(?=a)", "(?<!a)b",
                                     r"(a)\1", "a*+", "(?>a)"])
def test_patterns_re2_rejects_or_that_backtrack_catastrophically_never_compile(
        pattern: str) -> None:
    compiled, reason = compile_regex(pattern)
    assert compiled is None and reason


# ── load-time validation ─────────────────────────────────────────────────────────

@pytest.mark.parametrize("cond", [
    {"field": "spec.tier", "equals": "pro"},
    {"field": "spec.tier", "operator": "in", "value": "a,b"},
    {"field": "spec.tier"},
    {"field": "status.phase", "operator": "notExists"},
    {"field": "spec.n", "between": "1,10"},
    {"field": "spec.n", "greaterThan": "{{ .spec.min }}"},
    {"field": "spec.n", "regex": "^[a-z]+$"},
    {"field": "{{ .spec.tier }}", "equals": "pro", "negate": True},
    {"field": "spec.tier", "operator": "typeOf", "value": "map"},
    {"field": "spec.tier", "operator": "unique"},
    {"time": {"after": "08:00", "before": "20:00"}},
    {"dayOfWeek": {"in": ["Monday", "fri"]}},
    {"dayOfWeek": {"weekend": True}, "negate": True},
    {"cron": "0 2 * * *", "duration": "2h"},
    {"field": "spec.x", "exists": True, "notify": {"teams": ["ops"]}},
])
def test_valid_conditions_have_no_problems(cond: dict[str, Any]) -> None:
    assert validate_condition(cond) == []


@pytest.mark.parametrize(("cond", "fragment"), [
    ({"field": "spec.tier", "equal": "pro"}, "unknown condition key 'equal'"),
    ({"field": "spec.tier", "anyOf": []}, "next to `when`"),
    ({"field": "spec.tier", "operator": "startsWith", "value": "p"},
     "unknown operator 'startsWith'"),
    ({"field": "spec.tier", "operator": "gt"}, "operator 'gt' needs a value"),
    ({"field": "spec.tier", "operator": "exists", "value": "x"}, "takes no value"),
    ({"equals": "pro"}, "condition needs a field"),
    ({"field": ".spec.tier", "equals": "pro"}, "must not start with a dot"),
    ({"field": "spec.n", "between": "1"}, "'min,max'"),
    ({"field": "spec.n", "notBetween": "a,b"}, "'min,max'"),
    ({"field": "spec.n", "operator": "between", "value": "1,2,3"}, "'min,max'"),
    ({"field": "spec.n", "between": "10,1"}, "min is greater than max"),
    ({"field": "spec.n", "greaterThan": "many"}, "'many' is not a number"),
    ({"field": "spec.n", "regex": "(unclosed"}, "not a valid regular expression"),
    ({"field": "spec.n", "regex": "(a+)+"}, "nested quantifiers"),
    ({"field": "spec.n", "operator": "typeOf", "value": "list"}, "not a type name"),
    ({"field": "spec.n", "equals": "a", "in": "a,b"}, "several comparisons (equals, in)"),
    ({"field": "spec.n", "exists": "yes"}, "exists must be true or false"),
    ({"field": "spec.n", "exists": False}, "exists: false has no effect"),
    ({"field": "spec.n", "negate": "true"}, "negate must be true or false"),
    ({"field": "spec.n", "equals": ["a"]}, "equals must be a text"),
    ({"time": {"after": "8am"}}, "time.after '8am' is not HH:MM"),
    ({"time": {"after": "24:00"}}, "is not HH:MM"),
    ({"time": {}}, "time needs after and/or before"),
    ({"time": {"after": "08:00", "until": "09:00"}}, "unknown time key 'until'"),
    ({"time": {"after": "08:00"}, "field": "spec.x", "equals": "y"}, "ignore field, equals"),
    ({"dayOfWeek": {"in": ["Moonday"]}}, "invalid day names"),
    ({"dayOfWeek": {"weekday": "yes"}}, "weekday must be true or false"),
    ({"dayOfWeek": {"on": ["Monday"]}}, "unknown dayOfWeek key 'on'"),
    ({"dayOfWeek": {}}, "dayOfWeek needs"),
    ({"cron": "61 * * * *"}, "not a valid cron expression"),
    ({"cron": "0 * * * *", "duration": "1x"}, "invalid duration '1x'"),
    ({"field": "spec.x", "duration": "1h"}, "only used together with cron"),
    ({"time": {"after": "08:00"}, "dayOfWeek": {"weekend": True}}, "several wall-clock"),
])
def test_invalid_conditions_are_reported_with_the_offending_key_and_value(
        cond: dict[str, Any], fragment: str) -> None:
    problems = validate_condition(cond)
    assert any(fragment in problem for problem in problems), problems


def test_a_condition_that_is_not_a_map_is_a_problem() -> None:
    assert validate_condition("spec.tier") == ["a condition must be a map, got 'spec.tier'"]


def test_every_explicit_operator_is_known_to_validation() -> None:
    for op in OPERATORS:
        cond = {"field": "spec.x", "operator": op, "value": "1,2"}
        problems = validate_condition(cond)
        assert not any("unknown operator" in p for p in problems)
