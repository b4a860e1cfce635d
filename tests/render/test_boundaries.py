"""When wall-clock conditions next change (orksync.render.boundaries), checked against the
condition evaluator itself: at the boundary a condition's value differs from its value
at `after`, and at no instant between them does any condition's value differ."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orksync.katalog.loader import load_repository
from orksync.render.boundaries import (
    condition_boundary,
    condition_lists,
    entry_boundary,
    next_boundary,
)
from orksync.render.conditions import evaluate_conditions, validate_condition
from tests.helpers import CRD, widget, write_repo

MONDAY_0800 = datetime(2026, 4, 6, 8, 0, 0, tzinfo=UTC)
TICK = timedelta(microseconds=1)
DATA: dict[str, Any] = {"metadata": {"name": "a"}, "spec": {"tier": "gold", "start": "09:00"},
                        "status": {}}


def render(template: str, data: Mapping[str, Any]) -> str:
    return {"{{ .spec.tier }}": "gold", "{{ .spec.start }}": "09:00"}[template]


def value(cond: Mapping[str, Any], at: datetime) -> bool:
    return evaluate_conditions(DATA, [cond], None, render, clock=lambda: at)


def values(conds: Sequence[Mapping[str, Any]], at: datetime) -> list[bool]:
    return [value(cond, at) for cond in conds]


def assert_exact(conds: Sequence[Mapping[str, Any]], after: datetime,
                 boundary: datetime | None, *, span: timedelta = timedelta(days=8)) -> None:
    """`boundary` is the first instant after `after` at which a condition's value changes:
    sampled instants strictly between hold the values at `after`, the boundary does not.
    None: no change over `span` (sampled)."""
    start = values(conds, after)
    end = after + span if boundary is None else boundary
    assert end > after
    rng = random.Random(f"{after.isoformat()} {end.isoformat()}")
    width = (end - after) // TICK
    samples = [after + TICK * rng.randrange(1, width) for _ in range(200)] if width > 1 else []
    samples += [end - TICK, end - timedelta(seconds=1)]
    for at in samples:
        if after < at < end:
            assert values(conds, at) == start, f"changes at {at}, before {boundary}"
    if boundary is None:
        assert values(conds, end) == start, f"changes by {end}"
        return
    assert values(conds, boundary) != start, f"nothing changes at {boundary}"
    later = boundary + timedelta(seconds=1)
    following = next_boundary([conds], boundary)
    if following is None or following > later:
        assert values(conds, later) == values(conds, boundary)


# ── time: ─────────────────────────────────────────────────────────────────────────────

@pytest.mark.parametrize(("window", "after", "expected"), [
    ({"after": "09:00"}, (8, 0, 0, 0), (0, 9, 0, 0, 0)),
    ({"after": "09:00"}, (9, 0, 0, 0), (1, 0, 0, 0, 0)),  # true until midnight
    ({"after": "00:00"}, (8, 0, 0, 0), None),  # always true
    ({"before": "09:00"}, (8, 0, 0, 0), (0, 9, 0, 0, 1)),  # 09:00:00 still passes
    ({"before": "09:00"}, (9, 0, 0, 0), (0, 9, 0, 0, 1)),
    ({"before": "09:00"}, (9, 0, 0, 1), (1, 0, 0, 0, 0)),
    ({"after": "09:00", "before": "17:30"}, (12, 0, 0, 0), (0, 17, 30, 0, 1)),
    ({"after": "09:00", "before": "17:30"}, (17, 30, 0, 1), (1, 9, 0, 0, 0)),
    ({"after": "22:00", "before": "06:00"}, (23, 0, 0, 0), (1, 6, 0, 0, 1)),  # wraps midnight
    ({"after": "22:00", "before": "06:00"}, (6, 0, 0, 0), (0, 6, 0, 0, 1)),
    ({"after": "22:00", "before": "06:00"}, (12, 0, 0, 0), (0, 22, 0, 0, 0)),
    ({"after": "09:00", "before": "09:00"}, (9, 0, 0, 0), (0, 9, 0, 0, 1)),  # one instant
    ({}, (8, 0, 0, 0), None),
    ({"after": "9am"}, (8, 0, 0, 0), None),  # never passes
    ({"after": "{{ .spec.start }}"}, (8, 0, 0, 0), None),  # not rendered: never passes
])
def test_time_windows(window: dict[str, str], after: tuple[int, int, int, int],
                      expected: tuple[int, int, int, int, int] | None) -> None:
    start = MONDAY_0800.replace(hour=after[0], minute=after[1], second=after[2],
                                microsecond=after[3])
    boundary = condition_boundary({"time": window}, start)
    if expected is None:
        assert boundary is None
    else:
        days, hour, minute, second, micro = expected
        assert boundary == (MONDAY_0800 + timedelta(days=days)).replace(
            hour=hour, minute=minute, second=second, microsecond=micro)
    assert_exact([{"time": window}], start, boundary)


_HHMM = st.builds(lambda h, m: f"{h:02d}:{m:02d}", st.integers(0, 23),
                  st.sampled_from([0, 1, 15, 30, 59]))
_WINDOWS = st.fixed_dictionaries({}, optional={"after": _HHMM, "before": _HHMM})


@st.composite
def instants(draw: st.DrawFn) -> datetime:
    """Instants in 2026-2027, often exactly on a minute or one microsecond off it, in UTC
    or a fixed offset (a condition reads the clock in its own time zone)."""
    zones = st.sampled_from([UTC, timezone(timedelta(hours=2)),
                             timezone(-timedelta(hours=5, minutes=30))])
    moment = draw(st.datetimes(min_value=datetime(2026, 1, 1), max_value=datetime(2027, 12, 31),
                               timezones=zones))
    offset = draw(st.sampled_from([None, 0, 1, -1]))
    if offset is None:
        return moment
    return moment.replace(second=0, microsecond=0) + TICK * offset


@settings(max_examples=300, deadline=None)
@given(_WINDOWS, instants())
def test_generated_time_windows(window: dict[str, str], after: datetime) -> None:
    assert_exact([{"time": window}], after, condition_boundary({"time": window}, after))


def test_windows_follow_the_time_zone_of_the_clock() -> None:
    paris = MONDAY_0800.astimezone(timezone(timedelta(hours=2)))  # 10:00 there
    boundary = condition_boundary({"time": {"after": "10:30"}}, paris)
    assert boundary == paris.replace(minute=30)
    assert_exact([{"time": {"after": "10:30"}}], paris, boundary)


# ── dayOfWeek ─────────────────────────────────────────────────────────────────────────

@pytest.mark.parametrize(("spec", "after", "expected"), [
    ({"weekday": True}, MONDAY_0800, datetime(2026, 4, 11, tzinfo=UTC)),  # Saturday
    ({"weekend": True}, MONDAY_0800, datetime(2026, 4, 11, tzinfo=UTC)),
    ({"weekend": True}, datetime(2026, 4, 11, 12, tzinfo=UTC), datetime(2026, 4, 13, tzinfo=UTC)),
    ({"in": ["wednesday"]}, MONDAY_0800, datetime(2026, 4, 8, tzinfo=UTC)),
    ({"in": "mon,tue"}, datetime(2026, 4, 5, 23, 59, 59, 999999, tzinfo=UTC),
     datetime(2026, 4, 6, tzinfo=UTC)),
    ({"notIn": ["sunday"]}, MONDAY_0800, datetime(2026, 4, 12, tzinfo=UTC)),
    ({"in": ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]},
     MONDAY_0800, None),
    ({}, MONDAY_0800, None),  # nothing set: never passes
])
def test_days_of_the_week_change_at_midnight(spec: dict[str, Any], after: datetime,
                                             expected: datetime | None) -> None:
    boundary = condition_boundary({"dayOfWeek": spec}, after)
    assert boundary == expected
    assert_exact([{"dayOfWeek": spec}], after, boundary)


_DAY_NAMES = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
              "mon", "sat"]
_DAY_SPECS = st.one_of(
    st.fixed_dictionaries({"weekday": st.booleans()}),
    st.fixed_dictionaries({"weekend": st.booleans()}),
    st.fixed_dictionaries({"in": st.lists(st.sampled_from(_DAY_NAMES), min_size=1)}),
    st.fixed_dictionaries({"notIn": st.lists(st.sampled_from(_DAY_NAMES), min_size=1)}))


@settings(max_examples=150, deadline=None)
@given(_DAY_SPECS, instants())
def test_generated_days_of_the_week(spec: dict[str, Any], after: datetime) -> None:
    assert_exact([{"dayOfWeek": spec}], after, condition_boundary({"dayOfWeek": spec}, after))


# ── cron ──────────────────────────────────────────────────────────────────────────────

@pytest.mark.parametrize(("cond", "after", "expected"), [
    ({"cron": "0 9 * * *", "duration": "1h"}, MONDAY_0800, MONDAY_0800.replace(hour=9)),
    ({"cron": "0 9 * * *", "duration": "1h"}, MONDAY_0800.replace(hour=9, minute=30),
     MONDAY_0800.replace(hour=10)),
    ({"cron": "0 9 * * *", "duration": "1h"}, MONDAY_0800.replace(hour=10),
     MONDAY_0800.replace(hour=9) + timedelta(days=1)),
    # windows that reach the next fire stay open
    ({"cron": "*/15 * * * *", "duration": "15m"}, MONDAY_0800, None),
    ({"cron": "*/15 9-10 * * *", "duration": "20m"}, MONDAY_0800.replace(hour=9, minute=5),
     MONDAY_0800.replace(hour=11, minute=5)),
    ({"cron": "* * * * 1-5", "duration": "1h"}, MONDAY_0800,
     datetime(2026, 4, 11, 0, 59, tzinfo=UTC)),
    # one period: evenly spaced fires are always open; uneven ones close when the time
    # since the last fire reaches the gap between the next two
    ({"cron": "0 9 * * *"}, MONDAY_0800, None),
    ({"cron": "* * * * *"}, MONDAY_0800, None),
    ({"cron": "0 9,17 * * *"}, MONDAY_0800.replace(hour=18),
     MONDAY_0800.replace(hour=1) + timedelta(days=1)),
    ({"cron": "0 9,17 * * *"}, MONDAY_0800, MONDAY_0800.replace(hour=9)),
    ({"cron": "0 9 * * 1,3"}, MONDAY_0800.replace(hour=10),  # Friday: 2 days after Wednesday
     MONDAY_0800.replace(hour=9) + timedelta(days=4)),
    ({"cron": "0 0 1 * *"}, datetime(2026, 1, 15, tzinfo=UTC),
     datetime(2026, 1, 29, tzinfo=UTC)),  # the February gap is 28 days
    ({"cron": "@every 5m"}, MONDAY_0800, None),  # measured back from the evaluation
    ({"cron": "@every 5m", "duration": "1m"}, MONDAY_0800, None),
    ({"cron": "61 * * * *"}, MONDAY_0800, None),  # never passes
])
def test_cron_windows(cond: dict[str, str], after: datetime, expected: datetime | None) -> None:
    boundary = condition_boundary(cond, after)
    assert boundary == expected
    assert_exact([cond], after, boundary)


_CRON = st.builds(
    lambda m, h, dow: f"{m} {h} * * {dow}",
    st.sampled_from(["*", "0", "*/15", "0,30", "5-10", "59", "*/7"]),
    st.sampled_from(["*", "9", "9-17", "*/6", "0,12", "23", "0"]),
    st.sampled_from(["*", "1-5", "0,6", "1", "MON-FRI", "3"]))
_DURATION = st.sampled_from([None, "1m", "10m", "1h", "90m", "7h", "1d", "2d", "3d"])


@settings(max_examples=150, deadline=None)
@given(_CRON, _DURATION, instants())
def test_generated_cron_windows(cron: str, duration: str | None, after: datetime) -> None:
    cond = {"cron": cron} if duration is None else {"cron": cron, "duration": duration}
    assert not validate_condition(cond)
    assert_exact([cond], after, condition_boundary(cond, after))


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["0 0 1 * *", "0 12 1,15 * *", "30 6 * 1-3 *", "0 0 29 2 *",
                        "0 8 10-12 * 1"]), _DURATION, instants())
def test_schedules_that_do_not_repeat_weekly(cron: str, duration: str | None,
                                            after: datetime) -> None:
    cond = {"cron": cron} if duration is None else {"cron": cron, "duration": duration}
    boundary = condition_boundary(cond, after)
    if boundary is not None and value(cond, boundary) == value(cond, after):
        # a point to look again (the walk stopped at its horizon): no change before it
        assert_exact([cond], after, None, span=boundary - after)
    else:
        assert_exact([cond], after, boundary)


def test_a_window_open_for_longer_than_the_walk_is_reported_where_to_look_again() -> None:
    cond = {"cron": "* * 1-28 * *"}  # every minute, then a gap at the end of the month
    boundary = condition_boundary(cond, MONDAY_0800)
    assert boundary is not None and value(cond, boundary) is True
    assert_exact([cond], MONDAY_0800, None, span=boundary - MONDAY_0800)
    late = datetime(2026, 4, 28, 23, 0, tzinfo=UTC)  # the gap is near: found exactly
    assert condition_boundary(cond, late) == datetime(2026, 4, 29, tzinfo=UTC)
    assert_exact([cond], late, datetime(2026, 4, 29, tzinfo=UTC))


# ── several lists ─────────────────────────────────────────────────────────────────────

_ANY = st.one_of(
    _WINDOWS.map(lambda w: {"time": w}),
    _DAY_SPECS.map(lambda d: {"dayOfWeek": d}),
    st.builds(lambda c, d: {"cron": c} if d is None else {"cron": c, "duration": d},
              _CRON, _DURATION),
    st.just({"field": "spec.tier", "equals": "gold"}),
    st.just({"field": "{{ .spec.tier }}", "equals": "gold", "negate": True}))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(_ANY, max_size=3), max_size=4), instants())
def test_the_earliest_change_of_several_lists_wins(lists: list[list[dict[str, Any]]],
                                                   after: datetime) -> None:
    boundary = next_boundary(lists, after)
    flat = [cond for conds in lists for cond in conds]
    assert boundary == min((b for c in flat if (b := condition_boundary(c, after))),
                           default=None)
    assert_exact(flat, after, boundary)


def test_lists_mix_conditions_and_skip_what_is_not_a_condition() -> None:
    lists: list[Any] = [None, [{"field": "spec.tier", "equals": "gold"}],
                        [{"time": {"after": "12:00"}}, "not a condition"],
                        {"dayOfWeek": {"weekday": True}}, "junk",
                        [{"time": {"before": "10:00"}, "negate": True}]]
    assert next_boundary(lists, MONDAY_0800) == MONDAY_0800.replace(hour=10, microsecond=1)


@pytest.mark.parametrize("cond", [
    {"field": "spec.tier", "equals": "gold"},
    {"field": "{{ .spec.tier }}", "equals": "gold"},
    {"field": "spec.start", "equals": "{{ .spec.start }}"},
    {"field": "spec.tier", "exists": True, "duration": "1h"},
])
def test_a_field_comparison_has_no_boundary(cond: dict[str, Any]) -> None:
    assert next_boundary([[cond]], MONDAY_0800) is None
    assert next_boundary([[cond, {"time": {"after": "09:00"}}]], MONDAY_0800) == \
        MONDAY_0800.replace(hour=9)


def test_the_first_wall_clock_key_decides_as_in_the_evaluator() -> None:
    cond = {"time": {"after": "09:00"}, "cron": "0 8 * * *", "duration": "1m"}
    assert condition_boundary(cond, MONDAY_0800) == MONDAY_0800.replace(hour=9)
    assert_exact([cond], MONDAY_0800, MONDAY_0800.replace(hour=9))


# ── a Katalog entry ───────────────────────────────────────────────────────────────────

WHEN = [{"time": {"after": "09:17"}}]
CM = {"name": "{{ .metadata.name }}-cm", "data": {"a": "b"}}
DEPLOYMENT = {"name": "{{ .metadata.name }}", "image": "nginx", "replicas": 1,
              "autoscale": {"max": 3, "scaleUp": {"conditions": {"when": WHEN}}}}
STATUS = {"fields": [{"path": "phase", "value": "open", "when": WHEN}]}
MUTATION = {"rules": [{"field": "spec.tier", "default": "gold", "when": WHEN}]}
VALIDATION = {"rules": [{"field": "metadata.name", "operator": "exists", "or": WHEN}]}

# (place found, entry-level settings, operatorBox settings), flat and grouped layouts
PLACES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("onCreate.when", {}, {"onCreate": {"when": WHEN, "configMaps": [CM]}}),
    ("onReconcile.or", {}, {"onReconcile": {"or": WHEN, "configMaps": [CM]}}),
    ("onReconcile.anyOf", {}, {"onReconcile": {"anyOf": WHEN, "configMaps": [CM]}}),
    ("onCreate.configMaps[1].when", {},
     {"onCreate": {"configMaps": [CM, {**CM, "name": "b", "when": WHEN}]}}),
    ("onReconcile.deployments[0].autoscale.scaleUp.conditions.when", {},
     {"onReconcile": {"deployments": [DEPLOYMENT]}}),
    ("onReconcile.external[0].when", {"allowedExternalHosts": ["example.com"]},
     {"onReconcile": {"external": [{"name": "x", "url": "https://example.com/",
                                    "when": WHEN}], "configMaps": [CM]}}),
    ("preReconcile.enqueueGate.when", {}, {"preReconcile": {"enqueueGate": {"when": WHEN}}}),
    ("preReconcile.reconcileGate.or", {}, {"preReconcile": {"reconcileGate": {"or": WHEN}}}),
    ("runtime.cleanup.or", {}, {"runtime": {"cleanup": {"or": WHEN}}}),
    ("status.fields[0].when", {}, {"status": STATUS}),
    ("status.fields[0].when", {}, {"emit": {"status": STATUS}}),
    ("mutation.rules[0].when", {"mutation": MUTATION}, {}),
    ("mutation.rules[0].when", {"admission": {"mutation": MUTATION}}, {}),
    ("mutation.rules[0].when", {}, {"mutation": MUTATION}),
    ("validation.rules[0].or", {"validation": VALIDATION}, {}),
    ("validation.rules[0].or", {"admission": {"validation": VALIDATION}}, {}),
]


def load_entry(tmp_path: Path, entry_level: dict[str, Any], box_level: dict[str, Any]) -> Any:
    box = {"onCreate": {"configMaps": [CM]}, **box_level}
    katalog = {"apiVersion": "orkestra.orkspace.io/v1", "kind": "Katalog",
               "metadata": {"name": "widgets"},
               "spec": {"crds": {"widget": {"crdFile": "./crd.yaml", **entry_level,
                                            "operatorBox": box}}}}
    write_repo(tmp_path, {"op/katalog.yaml": json.dumps(katalog), "op/crd.yaml": CRD,
                          "apps/a.yaml": widget("a")})
    catalog = load_repository(tmp_path)
    assert not catalog.errors, [str(e) for e in catalog.errors]
    (entry,) = catalog.entries()
    return entry


@pytest.mark.parametrize(("place", "entry_level", "box_level"), PLACES,
                         ids=[f"{p[0]}-{'-'.join([*p[1], *p[2]])}" for p in PLACES])
def test_every_place_of_an_entry_is_found(tmp_path: Path, place: str,
                                          entry_level: dict[str, Any],
                                          box_level: dict[str, Any]) -> None:
    entry = load_entry(tmp_path, entry_level, box_level)
    assert [p for p, _ in condition_lists(entry)] == [place]
    assert entry_boundary(entry, MONDAY_0800) == MONDAY_0800.replace(minute=17, hour=9)


@pytest.mark.parametrize(("entry_level", "box_level"), [
    ({}, {}),
    ({}, {"onDelete": {"when": WHEN}}),  # teardown evaluates it once
    ({"mutation": {"rules": [{**MUTATION["rules"][0], "fires": {"reconcile": False}}]}}, {}),
    ({"ignoreStatusPatch": True}, {"status": STATUS}),  # the fields are never written
    ({}, {"onCreate": {"when": [{"field": "spec.tier", "equals": "gold"}],
                       "configMaps": [CM]}}),
], ids=["nothing", "onDelete", "admission-only rule", "ignoreStatusPatch", "field only"])
def test_what_is_not_evaluated_on_a_schedule_gives_no_boundary(
        tmp_path: Path, entry_level: dict[str, Any], box_level: dict[str, Any]) -> None:
    assert entry_boundary(load_entry(tmp_path, entry_level, box_level), MONDAY_0800) is None


def test_the_earliest_place_of_an_entry_wins(tmp_path: Path) -> None:
    entry = load_entry(tmp_path, {"admission": {"mutation": MUTATION}}, {
        "onCreate": {"configMaps": [{**CM, "when": [{"dayOfWeek": {"weekend": True}}]}]},
        "emit": {"status": {"fields": [{"path": "phase", "value": "x",
                                        "or": [{"time": {"before": "08:30"}}]}]}},
        "preReconcile": {"reconcileGate": {"when": [{"cron": "0 9 * * *",
                                                     "duration": "1h"}]}}})
    assert entry_boundary(entry, MONDAY_0800) == MONDAY_0800.replace(minute=30, microsecond=1)
    assert entry_boundary(entry, MONDAY_0800.replace(hour=8, minute=45)) == \
        MONDAY_0800.replace(hour=9)
    assert entry_boundary(entry, MONDAY_0800.replace(hour=9, minute=17)) == \
        MONDAY_0800.replace(hour=10)
