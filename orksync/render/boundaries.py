"""When the wall-clock conditions of a Katalog entry next change their value, so the agent
renders again at that instant instead of at its next poll. Pure, bounded
(docs/katalog-semantics.md#when-a-wall-clock-condition-changes)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from datetime import date, datetime, timedelta
from datetime import time as dtime
from typing import Any

from orksync.katalog.model import CrdEntry
from orksync.render.conditions import cron_window, time_bounds, wall_clock_key
from orksync.render.engine import GATES
from orksync.render.entry import AUTOSCALED
from orksync.render.kinds import BY_KEY
from orksync.render.notes.cron import CronSchedule, window_open
from orksync.render.notes.time import day_of_week_matches, in_window
from orksync.render.resource import BLOCKS

__all__ = ["HORIZON", "MAX_FIRES", "condition_boundary", "condition_lists", "entry_boundary",
           "next_boundary"]

MAX_FIRES = 12_000  # more than a week of fires every minute (10,080)
HORIZON = timedelta(days=400)  # past a year: a yearly schedule's next gap is looked at
_TICK = timedelta(microseconds=1)  # the resolution of the clock's datetime


def next_boundary(condition_lists: Iterable[Any], after: datetime) -> datetime | None:
    """The earliest instant strictly after `after` at which a wall-clock condition of the
    lists changes its value (see the module docstring). Each item is a condition list (a
    `when` or `or` block; None and anything that is not a list are skipped) or a single
    condition map."""
    found = [b for conditions in condition_lists for cond in _conditions(conditions)
             if (b := condition_boundary(cond, after)) is not None]
    return min(found, default=None)


def entry_boundary(entry: CrdEntry, after: datetime) -> datetime | None:
    """`next_boundary` over every condition list of the entry (`condition_lists`)."""
    return next_boundary((conditions for _, conditions in condition_lists(entry)), after)


def condition_boundary(cond: Mapping[str, Any], after: datetime) -> datetime | None:
    """The earliest instant strictly after `after` at which one condition changes its
    value; None for a field comparison or a condition whose value never changes."""
    key = wall_clock_key(cond)
    if key == "time":
        return _time_boundary(cond["time"], after)
    if key == "dayOfWeek":
        return _day_boundary(cond["dayOfWeek"], after)
    if key == "cron":
        window = cron_window(cond)
        return None if window is None else _cron_boundary(*window, after)
    return None


def condition_lists(entry: CrdEntry) -> list[tuple[str, Any]]:
    """Every condition list evaluated for the entry's custom resources, with its place
    (the entry's flat layout: the loader moved grouped settings there, and
    `runtime.cleanup` stays grouped): onCreate and onReconcile (the block, each object
    template, each workload's autoscale directions, each external call), the
    preReconcile gates, runtime.cleanup, the status fields (unless ignoreStatusPatch), and
    the mutation and validation rules. onDelete is left out: teardown evaluates it once,
    when the custom resource goes."""
    box = entry.operator_box
    out: list[tuple[str, Any]] = []
    for name in BLOCKS:
        block = box.get(name)
        if not isinstance(block, Mapping):
            continue
        out += _when_or(block, name)
        for key, items in block.items():
            if key != "external" and key not in BY_KEY:
                continue
            for i, item in _maps(items):
                path = f"{name}.{key}[{i}]"
                out += _when_or(item, path)
                autoscale = item.get("autoscale") if key in AUTOSCALED else None
                for side in ("scaleUp", "scaleDown"):
                    direction = autoscale.get(side) if isinstance(autoscale, Mapping) else None
                    conditions = direction.get("conditions") \
                        if isinstance(direction, Mapping) else None
                    if isinstance(conditions, Mapping):
                        out += _when_or(conditions, f"{path}.autoscale.{side}.conditions")
    pre = box.get("preReconcile")
    for gate in GATES:
        if isinstance(pre, Mapping) and isinstance(pre.get(gate), Mapping):
            out += _when_or(pre[gate], f"preReconcile.{gate}")
    runtime = box.get("runtime")
    cleanup = runtime.get("cleanup") if isinstance(runtime, Mapping) else None
    if isinstance(cleanup, Mapping):  # `or` only: cleanup does not read `anyOf`
        out += [(f"runtime.cleanup.{k}", cleanup.get(k)) for k in ("when", "or")
                if cleanup.get(k) is not None]
    status = box.get("status")
    if isinstance(status, Mapping) and entry.raw.get("ignoreStatusPatch") is not True:
        for i, spec in _maps(status.get("fields")):
            out += _when_or(spec, f"status.fields[{i}]")
    raw_box = entry.raw.get("operatorBox")
    for name in ("mutation", "validation"):  # the entry's, else its operatorBox's (prepare)
        config = entry.raw.get(name)
        if config is None and isinstance(raw_box, Mapping):
            config = raw_box.get(name)
        for i, rule in _maps(config.get("rules") if isinstance(config, Mapping) else None):
            fires = rule.get("fires")
            if not (isinstance(fires, Mapping) and fires.get("reconcile") is False):
                out += _when_or(rule, f"{name}.rules[{i}]")
    return out


# ── where the condition lists are ───────────────────────────────────────────────────

def _when_or(node: Mapping[str, Any], path: str) -> list[tuple[str, Any]]:
    """A node's `when` and its `or` (the legacy `anyOf` when `or` is not set), as the
    render reads them."""
    or_key = "or" if node.get("or") is not None else "anyOf"
    return [(f"{path}.{key}", node[key]) for key in ("when", or_key)
            if node.get(key) is not None]


def _maps(items: Any) -> Iterator[tuple[int, Mapping[str, Any]]]:
    if isinstance(items, list):
        yield from ((i, item) for i, item in enumerate(items) if isinstance(item, Mapping))


def _conditions(conditions: Any) -> list[Mapping[str, Any]]:
    if isinstance(conditions, Mapping):
        return [conditions]
    if not isinstance(conditions, list):
        return []
    return [cond for cond in conditions if isinstance(cond, Mapping)]


# ── time: and dayOfWeek: ────────────────────────────────────────────────────────────

def _time_boundary(spec: Any, after: datetime) -> datetime | None:
    bounds = time_bounds(spec)
    if bounds is None:
        return None
    start, end = bounds

    def passes(moment: datetime) -> bool:
        return in_window(moment.time(), start, end, before_inclusive=True)

    day = datetime.combine(date(2000, 1, 3), dtime(0))  # any day: the edges are times of day
    edges = [day]
    edges += [datetime.combine(day, start)] if start is not None else []
    edges += [datetime.combine(day, end) + _TICK] if end is not None else []
    changes = {edge.time() for edge in edges if passes(edge) != passes(edge - _TICK)}
    return min((_next_time_of_day(after, edge) for edge in changes), default=None)


def _next_time_of_day(after: datetime, at: dtime) -> datetime:
    moment = after.replace(hour=at.hour, minute=at.minute, second=at.second,
                           microsecond=at.microsecond)
    return moment if moment > after else moment + timedelta(days=1)


def _day_boundary(spec: Any, after: datetime) -> datetime | None:
    midnight = after.replace(hour=0, minute=0, second=0, microsecond=0)
    for days in range(1, 8):
        moment = midnight + timedelta(days=days)
        if day_of_week_matches(spec, moment) != day_of_week_matches(spec, moment - _TICK):
            return moment
    return None


# ── cron ────────────────────────────────────────────────────────────────────────────

def _cron_boundary(schedule: CronSchedule, duration: timedelta | None,
                   after: datetime) -> datetime | None:
    if schedule.every is not None:
        return None
    if not window_open(schedule, after, duration):
        return schedule.next_after(after)  # nothing opens it before its next fire
    if _never_closes(schedule, duration):
        return None
    if duration:
        return _fixed_window_end(schedule, duration, after)
    return _period_window_end(schedule, after)


_WEEK = 7 * 24 * 60  # minutes


def _never_closes(schedule: CronSchedule, duration: timedelta | None) -> bool:
    """Whether an open window stays open for ever, decided for a schedule that repeats
    every week (every month and every day of the month): each gap between two fires is
    at most `duration`, or, without one, all gaps are equal. Other schedules: False (the
    walk looks)."""
    every_day = schedule.doms == frozenset(range(1, 32))
    if schedule.months != frozenset(range(1, 13)) or not (
            every_day or (not schedule.day_star and schedule.dows == frozenset(range(7)))):
        return False
    # with every day of the month, `day_star` leaves the choice to the day of the week;
    # otherwise (day of the month OR day of the week, every day of the week) all days fire
    week_days = [d for d in range(7) if not (every_day and schedule.day_star)
                 or d in schedule.dows]
    fires = sorted(day * 1440 + hour * 60 + minute for day in week_days
                   for hour in schedule.hours for minute in schedule.minutes)
    if not fires:
        return False
    gaps = [b - a for a, b in zip(fires, [*fires[1:], fires[0] + _WEEK], strict=True)]
    if duration:
        return timedelta(minutes=max(gaps)) <= duration
    return len(set(gaps)) == 1


def _fixed_window_end(schedule: CronSchedule, duration: timedelta,
                      after: datetime) -> datetime:
    """An open window of a fixed duration: open from each fire for `duration`; it closes
    at the end of the first fire's window that no later fire reaches into."""
    fire = schedule.next_after(after - duration)  # the first fire whose window holds `after`
    assert fire is not None  # the window is open
    for _ in range(MAX_FIRES):
        following = schedule.next_after(fire)
        if following is None or following > fire + duration:
            return fire + duration
        if following > after + HORIZON:
            break
        fire = following
    return fire + duration  # open until here at least: a point to look again


def _period_window_end(schedule: CronSchedule, after: datetime) -> datetime:
    """An open window of one period: between the fires `last` and `first` (then
    `second`), it is open while the time since `last` is shorter than `second - first`;
    at each fire it opens again."""
    first = schedule.next_after(after)
    second = schedule.next_after(first) if first is not None else None
    assert first is not None and second is not None  # the window is open
    last = schedule.next_after(after - (second - first))
    assert last is not None and last <= after
    for _ in range(MAX_FIRES):  # the last fire at or before `after`
        following = schedule.next_after(last)
        if following is None or following > after:
            break
        last = following
    else:
        return min(last + (second - first), first)  # open until here at least
    for _ in range(MAX_FIRES):
        end = last + (second - first)
        if end < first:
            return end
        following = schedule.next_after(second)
        if following is None or following > after + HORIZON:
            break
        last, first, second = first, second, following
    return first  # open until here at least: a point to look again
