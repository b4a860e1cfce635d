"""Orkestra's condition language (`when:` / `or:`): evaluation and the load-time check.
Pure: templates through the caller's `render`, the clock injected
(docs/katalog-semantics.md#conditions)."""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from datetime import time as dtime
from typing import Any

from orksync.durations import parse_duration
from orksync.render.coercion import scan_float
from orksync.render.govalues import NO_VALUE, format_value
from orksync.render.notes.cron import CronSchedule, cron_valid, parse_cron, window_open
from orksync.render.notes.time import (
    DAYS,
    day_matches,
    day_names,
    day_of_week_matches,
    in_window,
    parse_hhmm,
)
from orksync.render.notes.types import type_of

__all__ = ["CONDITION_KEYS", "OPERATORS", "SHORTHAND_ORDER", "compile_regex", "cron_window",
           "evaluate_condition", "evaluate_conditions", "resolve_operator", "time_bounds",
           "validate_condition", "wall_clock_key"]

Render = Callable[[str, Mapping[str, Any]], str]
Clock = Callable[[], datetime]
UniqueChecker = Callable[[str, Any], bool]

SHORTHAND_ORDER: tuple[tuple[str, str], ...] = (
    ("equals", "equals"), ("notEquals", "notEquals"), ("prefix", "prefix"),
    ("notPrefix", "notPrefix"), ("suffix", "suffix"), ("notSuffix", "notSuffix"),
    ("contains", "contains"), ("notContains", "notContains"), ("regex", "regex"),
    ("greaterThan", "gt"), ("lessThan", "lt"), ("greaterThanOrEqual", "gte"),
    ("lessThanOrEqual", "lte"), ("min", "gte"), ("max", "lte"), ("between", "between"),
    ("notBetween", "notBetween"), ("in", "in"), ("notIn", "notIn"))
TYPE_OPERATORS = {"typeMap": "map", "typeList": "slice", "typeString": "string",
                  "typeNumber": "number", "typeBool": "bool", "typeNull": "null"}
TYPE_NAMES = frozenset({"string", "number", "bool", "map", "slice", "null", "unknown"})
OPERATORS = frozenset({
    "equals", "notEquals", "contains", "notContains", "prefix", "notPrefix", "suffix",
    "notSuffix", "exists", "notExists", "gt", "lt", "gte", "lte", "in", "notIn", "regex",
    "between", "notBetween", "unique", "typeOf", *TYPE_OPERATORS})
VALUELESS = frozenset({"exists", "notExists", "unique", *TYPE_OPERATORS})
NUMERIC = frozenset({"gt", "lt", "gte", "lte"})
CONDITION_KEYS = frozenset({
    "field", "operator", "value", "exists", "notExists", "negate", "time", "dayOfWeek",
    "cron", "duration", "source", "notify", *(key for key, _ in SHORTHAND_ORDER)})


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else format_value(value)


def resolve_operator(cond: Mapping[str, Any]) -> tuple[str, str]:
    """The effective (operator, expected value) per the resolution order."""
    if cond.get("exists") is True:
        return "exists", ""
    if cond.get("notExists") is True:
        return "notExists", ""
    for key, operator in SHORTHAND_ORDER:
        expected = _text(cond.get(key))
        if expected != "":
            return operator, expected
    operator = _text(cond.get("operator"))
    if operator:
        return operator, _text(cond.get("value"))
    expected = _text(cond.get("value"))
    return ("equals", expected) if expected else ("exists", "")


# ── regular expressions ──────────────────────────────────────────────────────────

_NOT_RE2 = re.compile(r"\(\?(?:[=!>(]|<[=!]|P=)|\\[1-9]|(?:[*+?}])\+")
_NESTED = re.compile(r"\((?:[^()\\]|\\.)*[*+}](?:[^()\\]|\\.)*\)[*+{]")


@functools.lru_cache(maxsize=256)
def _compile(pattern: str) -> re.Pattern[str] | str:
    if _NOT_RE2.search(pattern):
        return "not RE2 syntax (lookaround, backreference, atomic or possessive form)"
    if _NESTED.search(pattern):
        return "nested quantifiers (catastrophic backtracking risk)"
    translated = re.sub(r"\(\?<(?=[A-Za-z_])", "(?P<", pattern)
    translated = re.sub(r"(?<!\\)((?:\\\\)*)\\z", r"\1\\Z", translated)
    try:
        return re.compile(translated)
    except re.error as err:
        return str(err)


def compile_regex(pattern: str) -> tuple[re.Pattern[str] | None, str]:
    """(compiled pattern, "") or (None, reason) for a condition regex."""
    result = _compile(pattern)
    return (result, "") if isinstance(result, re.Pattern) else (None, result)


# ── evaluation ───────────────────────────────────────────────────────────────────

def _navigate(data: Any, path: str) -> Any:
    """Orkestra's NavigateRawPath: maps only; None when any segment is missing."""
    if path == "":
        return None
    current = data
    for part in path.split("."):
        if not isinstance(current, Mapping) or part not in current:
            return None
        current = current[part]
    return current


def wall_clock_key(cond: Mapping[str, Any]) -> str | None:
    """Which wall-clock condition `cond` is ("time", "dayOfWeek", "cron"), in the order
    `evaluate_condition` checks them; None for a field comparison."""
    if cond.get("time") is not None:
        return "time"
    if cond.get("dayOfWeek") is not None:
        return "dayOfWeek"
    if _text(cond.get("cron")):
        return "cron"
    return None


def time_bounds(spec: Any) -> tuple[dtime | None, dtime | None] | None:
    """A `time:` block's (after, before), either None when not set; None when the block
    is not a map or a bound does not read as HH:MM (the condition never passes)."""
    if not isinstance(spec, Mapping):
        return None
    bounds = []
    for key in ("after", "before"):
        text = _text(spec.get(key))
        bound = parse_hhmm(text) if text else None
        if text and bound is None:
            return None
        bounds.append(bound)
    return bounds[0], bounds[1]


def cron_window(cond: Mapping[str, Any]) -> tuple[CronSchedule, timedelta | None] | None:
    """A `cron` condition's schedule and `duration` (None: one period); None when either
    does not parse (the condition never passes)."""
    try:
        schedule = parse_cron(_text(cond.get("cron")))
        duration = parse_duration(_text(cond["duration"])) if cond.get("duration") else None
    except ValueError:
        return None
    return schedule, duration


def _time_window(spec: Any, now: datetime) -> bool:
    bounds = time_bounds(spec)
    return bounds is not None and in_window(now.time(), *bounds, before_inclusive=True)


def _cron_window(cond: Mapping[str, Any], data: Mapping[str, Any], now: datetime) -> bool:
    expr = _text(cond.get("cron"))
    windows = data.get("_cronWindows")
    if isinstance(windows, Mapping) and expr in windows:
        return _text(windows[expr]) == "true"
    window = cron_window(cond)
    return window is not None and window_open(window[0], now, window[1])


def _numbers(field: str, expected: str) -> tuple[float, float] | None:
    wanted = 0.0 if expected == "" else scan_float(expected)
    if wanted is None:
        return None
    value = 0.0 if field == "" else scan_float(field)
    return (0.0 if value is None else value), wanted


def _between(expected: str) -> tuple[float, float] | None:
    parts = expected.split(",")
    if len(parts) != 2:
        return None
    bounds = []
    for part in parts:
        text = part.strip(" \t")
        number = 0.0 if text == "" else scan_float(text)
        if number is None:
            return None
        bounds.append(number)
    return bounds[0], bounds[1]


def _apply(op: str, value: str, raw: Any, expected: str, field: str,
           unique_checker: UniqueChecker | None) -> bool:
    if op == "exists":
        return value not in ("", NO_VALUE)
    if op == "notExists":
        return value in ("", NO_VALUE)
    string_ops: dict[str, Callable[[], bool]] = {
        "equals": lambda: value == expected,
        "notEquals": lambda: value != expected,
        "contains": lambda: expected in value,
        "notContains": lambda: expected not in value,
        "prefix": lambda: value.startswith(expected),
        "notPrefix": lambda: not value.startswith(expected),
        "suffix": lambda: value.endswith(expected),
        "notSuffix": lambda: not value.endswith(expected),
        "in": lambda: any(item.strip(" \t") == value for item in expected.split(",")),
        "notIn": lambda: all(item.strip(" \t") != value for item in expected.split(",")),
    }
    if op in string_ops:
        return string_ops[op]()
    if op == "regex":
        pattern, _ = compile_regex(expected)
        return pattern is not None and pattern.search(value) is not None
    if op in NUMERIC:
        pair = _numbers(value, expected)
        if pair is None:
            return False
        a, b = pair
        return {"gt": a > b, "lt": a < b, "gte": a >= b, "lte": a <= b}[op]
    if op in ("between", "notBetween"):
        bounds = _between(expected)
        number = 0.0 if value == "" else scan_float(value)
        if bounds is None or number is None:
            return False
        inside = bounds[0] <= number <= bounds[1]
        return inside if op == "between" else not inside
    if op == "unique":
        return True if unique_checker is None else bool(unique_checker(field, value))
    if op == "typeOf":
        return type_of(raw) == expected
    if op in TYPE_OPERATORS:
        return type_of(raw) == TYPE_OPERATORS[op]
    return False


def evaluate_condition(cond: Mapping[str, Any], data: Mapping[str, Any], render: Render, *,
                       clock: Clock, unique_checker: UniqueChecker | None = None) -> bool:
    """Evaluate one condition (see the module docstring), `negate` applied."""
    result = _evaluate(cond, data, render, clock, unique_checker)
    return not result if cond.get("negate") is True else result


def _evaluate(cond: Mapping[str, Any], data: Mapping[str, Any], render: Render, clock: Clock,
              unique_checker: UniqueChecker | None) -> bool:
    wall_clock = wall_clock_key(cond)
    if wall_clock == "time":
        return _time_window(cond["time"], clock())
    if wall_clock == "dayOfWeek":
        return day_of_week_matches(cond["dayOfWeek"], clock())
    if wall_clock == "cron":
        return _cron_window(cond, data, clock())
    op, expected = resolve_operator(cond)
    if "{{" in expected:
        # an expected value that fails to render is used literally, as in Orkestra
        with contextlib.suppress(Exception):
            expected = render(expected, data)
    field = _text(cond.get("field"))
    if "{{" in field:
        try:
            value = render(field, data)
        except Exception:
            return False
        raw: Any = value
    else:
        raw = _navigate(data, field)
        value = _text(raw)
    return _apply(op, value, raw, expected, field, unique_checker)


def evaluate_conditions(data: Mapping[str, Any], when: Sequence[Mapping[str, Any]] | None,
                        or_: Sequence[Mapping[str, Any]] | None, render: Render, *,
                        clock: Clock, unique_checker: UniqueChecker | None = None) -> bool:
    """AND of `when`; at least one of `or_` when it is non-empty; both must pass."""
    for cond in when or ():
        if not evaluate_condition(cond, data, render, clock=clock,
                                  unique_checker=unique_checker):
            return False
    if or_:
        return any(evaluate_condition(cond, data, render, clock=clock,
                                      unique_checker=unique_checker) for cond in or_)
    return True


# ── load-time validation ─────────────────────────────────────────────────────────

def validate_condition(cond: Any) -> list[str]:
    """Problems of one condition, for Katalog load time; [] when it is valid.

    Rejected: unknown keys and operators, a missing `field`, a leading-dot field, an
    operator that needs a value without one (or a value given to one that ignores it),
    several comparison keys at once (only the first would be used), `exists: false`
    (has no effect), non-bool `exists`/`notExists`/`negate`, non-numeric `gt`-style
    values, bad `between` syntax, invalid regexes, bad `typeOf` names, bad `time`,
    `dayOfWeek` or `cron`/`duration` blocks. Templated values are not checked."""
    if not isinstance(cond, Mapping):
        return [f"a condition must be a map, got {format_value(cond)!r}"]
    problems = [f"unknown condition key {key!r}" + (
        " (`anyOf`/`or` go next to `when`, not inside a condition)"
        if key in ("anyOf", "or", "when") else "")
        for key in cond if key not in CONDITION_KEYS]
    for key in ("exists", "notExists", "negate"):
        if key in cond and not isinstance(cond[key], bool):
            problems.append(f"{key} must be true or false, got {format_value(cond[key])!r}")
    for key in ("exists", "notExists"):
        if cond.get(key) is False:
            problems.append(f"{key}: false has no effect (use "
                            f"{'notExists' if key == 'exists' else 'exists'}: true)")
    wall_clock = [k for k in ("time", "dayOfWeek", "cron") if cond.get(k) is not None]
    if wall_clock:
        problems += _validate_wall_clock(cond, wall_clock)
        return problems
    if cond.get("duration") is not None:
        problems.append("duration is only used together with cron")
    field = cond.get("field")
    if not isinstance(field, str) or not field.strip():
        problems.append(f"condition needs a field (a dot path such as spec.tier or a "
                        f"template), got {format_value(field)!r}")
    elif field.startswith(".") and "{{" not in field:
        problems.append(f"field {field!r} must not start with a dot (write "
                        f"{field.lstrip('.')!r})")
    for key, _ in SHORTHAND_ORDER:
        if isinstance(cond.get(key), Mapping | list):
            problems.append(f"{key} must be a text, got {format_value(cond[key])!r}")
    chosen = [k for k in ("exists", "notExists") if cond.get(k) is True]
    chosen += [k for k, _ in SHORTHAND_ORDER if _text(cond.get(k)) != ""]
    chosen += ["operator"] if _text(cond.get("operator")) else []
    if len(chosen) > 1:
        problems.append(f"several comparisons ({', '.join(chosen)}): only {chosen[0]!r} "
                        "would be used")
    op, expected = resolve_operator(cond)
    key = chosen[0] if chosen else "value"
    if key == "operator":
        key = "value"
        if op not in OPERATORS:
            problems.append(f"unknown operator {op!r}; known: {', '.join(sorted(OPERATORS))}")
            return problems
        if op not in VALUELESS and expected == "":
            problems.append(f"operator {op!r} needs a value")
        if op in VALUELESS and _text(cond.get("value")) != "":
            problems.append(f"operator {op!r} takes no value, got "
                            f"{_text(cond.get('value'))!r}")
    if "{{" not in expected:
        problems += _validate_expected(op, key, expected)
    return problems


def _validate_expected(op: str, key: str, expected: str) -> list[str]:
    if op in NUMERIC and expected != "" and scan_float(expected) is None:
        return [f"{key} {expected!r} is not a number"]
    if op in ("between", "notBetween"):
        parts = expected.split(",")
        bounds = [scan_float(p.strip()) if p.strip() else None for p in parts]
        if len(parts) != 2 or None in bounds:
            return [f"{key} {expected!r} must be 'min,max' (two numbers)"]
        if bounds[0] is not None and bounds[1] is not None and bounds[0] > bounds[1]:
            return [f"{key} {expected!r}: min is greater than max"]
    if op == "regex":
        pattern, reason = compile_regex(expected)
        if pattern is None:
            return [f"{key} {expected!r} is not a valid regular expression: {reason}"]
    if op == "typeOf" and expected not in TYPE_NAMES:
        return [f"{key} {expected!r} is not a type name ({', '.join(sorted(TYPE_NAMES))})"]
    return []


def _validate_wall_clock(cond: Mapping[str, Any], keys: list[str]) -> list[str]:
    problems: list[str] = []
    if len(keys) > 1:
        problems.append(f"several wall-clock conditions ({', '.join(keys)}): only "
                        f"{keys[0]!r} would be used")
    ignored = [k for k in cond if k in ("field", "operator", "value")
               or k in dict(SHORTHAND_ORDER)]
    if ignored:
        problems.append(f"{keys[0]} conditions ignore {', '.join(ignored)}")
    spec = cond.get(keys[0])
    if keys[0] == "time":
        if not isinstance(spec, Mapping) or not (spec.get("after") or spec.get("before")):
            return [*problems, "time needs after and/or before (HH:MM)"]
        problems += [f"unknown time key {k!r}" for k in spec if k not in ("after", "before")]
        problems += [f"time.{k} {format_value(spec[k])!r} is not HH:MM"
                     for k in ("after", "before")
                     if spec.get(k) and parse_hhmm(_text(spec[k])) is None]
    elif keys[0] == "dayOfWeek":
        if not isinstance(spec, Mapping) or not spec:
            return [*problems, "dayOfWeek needs in, notIn, weekday or weekend"]
        for k, v in spec.items():
            if k in ("weekday", "weekend"):
                if not isinstance(v, bool):
                    problems.append(f"dayOfWeek.{k} must be true or false")
            elif k in ("in", "notIn"):
                days = day_names(v)
                bad = [d for d in days if not any(day_matches(d, day) for day in DAYS)]
                if not days or bad:
                    problems.append(f"dayOfWeek.{k} has invalid day names "
                                    f"{format_value(v)!r}")
            else:
                problems.append(f"unknown dayOfWeek key {k!r}")
    else:
        if not cron_valid(_text(spec)):
            problems.append(f"cron {_text(spec)!r} is not a valid cron expression")
        if cond.get("duration"):
            try:
                if parse_duration(_text(cond["duration"])) <= timedelta(0):
                    problems.append("duration must be positive")
            except ValueError as err:
                problems.append(str(err))
    return problems
