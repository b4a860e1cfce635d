"""The 5-field cron schedule used by `cron:` conditions and Orkestra's `nextCron` note.

Pure. No I/O, clock and randomness injected.

The grammar is the one Kubernetes CronJobs use (robfig/cron's standard parser): five
fields `minute hour day-of-month month day-of-week`, each `*`, `?` (day fields), a
number, a range `a-b`, a step `*/n`, `a-b/n` or `a/n` (= a-max/n), or a comma list of
those; month names `JAN`-`DEC` and day names `SUN`-`SAT` (any case); day-of-week 0-6
(0 = Sunday); the macros `@yearly @annually @monthly @weekly @daily @midnight @hourly`
and `@every <Go duration>`. When both day fields are restricted a day matching either
fires (cron's OR rule); when either starts with `*`/`?` both must match. The cron notes
themselves are Orkestra's (`orkestra_time`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from orksync.render.coercion import go_atoi
from orksync.render.notes._common import (
    NoteError,
    to_int,
    to_str,
)

MACROS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
          "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
          "@hourly": "0 * * * *"}
MAP_KEYS = ("minute", "hour", "dayOfMonth", "month", "dayOfWeek")
_MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
_DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]
_DAY_NAMES = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
_MONTH_NAMES = ["January", "February", "March", "April", "May", "June", "July", "August",
                "September", "October", "November", "December"]
_BOUNDS: tuple[tuple[int, int, dict[str, int]], ...] = (
    (0, 59, {}), (0, 23, {}), (1, 31, {}),
    (1, 12, {n: i + 1 for i, n in enumerate(_MONTHS)}),
    (0, 6, {n: i for i, n in enumerate(_DAYS)}))
_FIELD_NAMES = ("minute", "hour", "day-of-month", "month", "day-of-week")
_HORIZON_DAYS = 5 * 366


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """A parsed schedule. `every` is set for `@every`; otherwise the five value sets."""

    minutes: frozenset[int] = frozenset()
    hours: frozenset[int] = frozenset()
    doms: frozenset[int] = frozenset()
    months: frozenset[int] = frozenset()
    dows: frozenset[int] = frozenset()
    day_star: bool = False
    every: timedelta | None = None

    def day_matches(self, moment: datetime) -> bool:
        dom = moment.day in self.doms
        dow = (moment.isoweekday() % 7) in self.dows
        return dom and dow if self.day_star else dom or dow

    def next_after(self, moment: datetime) -> datetime | None:
        """The first fire strictly after `moment` (minute-aligned, same tzinfo), or None
        when there is none within five years."""
        if self.every is not None:
            return moment.replace(microsecond=0) + self.every
        t = moment.replace(second=0, microsecond=0) + timedelta(minutes=1)
        limit = moment + timedelta(days=_HORIZON_DAYS)
        while t <= limit:
            if t.month not in self.months:
                t = (t.replace(day=1, hour=0, minute=0) + timedelta(days=32)).replace(day=1)
            elif not self.day_matches(t):
                t = t.replace(hour=0, minute=0) + timedelta(days=1)
            elif t.hour not in self.hours:
                t = t.replace(minute=0) + timedelta(hours=1)
            elif t.minute not in self.minutes:
                t += timedelta(minutes=1)
            else:
                return t
        return None


def window_open(schedule: CronSchedule, now: datetime, duration: timedelta | None) -> bool:
    """Orkestra's cron window: open when a fire happened in the last `duration`
    (default: one period of the schedule, the gap between its next two fires)."""
    if not duration:
        first = schedule.next_after(now)
        second = schedule.next_after(first) if first is not None else None
        if first is None or second is None:
            return False
        duration = second - first
    fire = schedule.next_after(now - duration)
    return fire is not None and fire <= now


def expand(expr: str) -> str:
    """Trim, collapse blanks and expand the fixed macros (`@daily` → `0 0 * * *`)."""
    text = " ".join(expr.split())
    return MACROS.get(text.lower(), text)


def _parse_field(text: str, index: int, *, robfig: bool = False
                 ) -> tuple[frozenset[int], bool]:
    low, high, names = _BOUNDS[index]
    name = _FIELD_NAMES[index]
    values: set[int] = set()
    star = False

    def number(part: str) -> int:
        value = names.get(part.upper()) if names else None
        if value is None:
            digits = part[1:] if robfig and part[:1] == "+" else part  # strconv.Atoi
            value = go_atoi(digits) if digits.isdigit() else None
        if value is None:
            raise ValueError(f"invalid {name} value {part!r}")
        return value

    for item in text.split(","):
        range_part, slash, step_part = item.partition("/")
        step = 1
        if slash:
            step_value = go_atoi(step_part) if step_part.isdigit() else None
            if not step_value:
                raise ValueError(f"invalid step {step_part!r} in {name} field {text!r}")
            step = step_value
        if range_part in ("*", "?"):
            start, end = low, high
            star = star or not (robfig and step > 1)
        elif "-" in range_part:
            a, _, b = range_part.partition("-")
            start, end = number(a), number(b)
        else:
            start = number(range_part)
            end = high if slash else start
        if not (low <= start <= high and low <= end <= high):
            raise ValueError(f"{name} value out of range {low}-{high} in {text!r}")
        if start > end:
            raise ValueError(f"{name} range {range_part!r} starts after it ends")
        values.update(range(start, end + 1, step))
    return frozenset(values), star


def parse_cron(expr: Any) -> CronSchedule:
    """Parse a schedule (see the module docstring); raises ValueError naming the text."""
    text = expand(to_str(expr))
    if text.lower().startswith("@every "):
        from orksync.durations import parse_duration

        delay = parse_duration(text[7:].strip())
        if delay < timedelta(seconds=1):
            delay = timedelta(seconds=1)
        return CronSchedule(every=timedelta(seconds=int(delay.total_seconds())))
    fields = text.split(" ")
    if len(fields) != 5 or not text:
        raise ValueError(f"invalid cron expression {to_str(expr)!r}: expected 5 fields "
                         "(minute hour day-of-month month day-of-week) or a macro")
    try:
        parsed = [_parse_field(field, i) for i, field in enumerate(fields)]
    except ValueError as err:
        raise ValueError(f"invalid cron expression {to_str(expr)!r}: {err}") from None
    return CronSchedule(minutes=parsed[0][0], hours=parsed[1][0], doms=parsed[2][0],
                        months=parsed[3][0], dows=parsed[4][0],
                        day_star=parsed[2][1] or parsed[4][1])


_DESCRIPTORS = {**MACROS, "@every": ""}


def parse_standard(spec: str, go_duration: Callable[[str], int]
                   ) -> tuple[CronSchedule, str | None]:
    """robfig/cron's ParseStandard, as Orkestra's `nextCron` calls it: an optional
    `CRON_TZ=<zone> ` or `TZ=<zone> ` prefix, then a descriptor (case-sensitive,
    `@every <Go duration>`) or five blank-separated fields. A `*`/`?` day field with a
    step above 1 does not count as unrestricted for cron's day rule. Returns the schedule
    and the zone name (None: UTC); ValueError when robfig/cron refuses the text.
    `go_duration` is time.ParseDuration (nanoseconds) for `@every`."""
    if spec == "":
        raise ValueError("empty spec string")
    zone: str | None = None
    if spec.startswith(("TZ=", "CRON_TZ=")):
        space, eq = spec.find(" "), spec.find("=")
        if space < 0:
            raise ValueError("runtime error: slice bounds out of range [:-1]")
        zone = spec[eq + 1:space] or None  # time.LoadLocation("") is UTC
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError
        try:
            ZoneInfo(zone or "UTC")
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"provided bad location {zone}") from None
        spec = spec[space:].strip(" \t\n\v\f\r")
    if spec.startswith("@"):
        if spec in MACROS:
            return parse_cron(MACROS[spec]), zone
        if spec.startswith("@every "):
            seconds = max(go_duration(spec[7:]) // 1_000_000_000, 1)
            return CronSchedule(every=timedelta(seconds=seconds)), zone
        raise ValueError(f"unrecognized descriptor: {spec}")
    fields = spec.split()
    if len(fields) != 5:
        raise ValueError(f"expected exactly 5 fields, found {len(fields)}: {spec}")
    parsed = [_parse_field(field, i, robfig=True)
              for i, field in enumerate(fields)]
    return CronSchedule(minutes=parsed[0][0], hours=parsed[1][0], doms=parsed[2][0],
                        months=parsed[3][0], dows=parsed[4][0],
                        day_star=parsed[2][1] or parsed[4][1]), zone


def cron_valid(expr: Any) -> bool:
    try:
        parse_cron(expr)
    except ValueError:
        return False
    return True


def normalize(expr: Any) -> str:
    text = expand(to_str(expr))
    return text if len(text.split(" ")) == 5 and text else "* * * * *"


def _field(expr: Any, index: Any) -> str:
    i = to_int(index, "cronField")
    if not 0 <= i <= 4:
        raise NoteError(f"cronField: index {i} out of range 0-4")
    text = expand(to_str(expr))
    if not text:
        return "*"
    fields = text.split(" ")
    if len(fields) != 5:
        raise NoteError(f"cron expression {to_str(expr)!r} does not have 5 fields")
    return fields[i]


def _list(values: list[str]) -> str:
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " and " + values[-1]


def describe(expr: Any) -> str:
    """A short English description; `invalid cron expression` when it does not parse."""
    try:
        schedule = parse_cron(expr)
    except ValueError:
        return "invalid cron expression"
    if schedule.every is not None:
        from orksync.durations import format_duration

        return f"every {format_duration(schedule.every)}"
    minute, hour, dom, month, dow = expand(to_str(expr)).split(" ")
    single = minute.isdigit() and hour.isdigit()
    if single:
        when = f"at {int(hour):02d}:{int(minute):02d}"
    elif minute == "*" and hour == "*":
        when = "every minute"
    elif minute.startswith("*/") and hour == "*":
        when = f"every {minute[2:]} minutes"
    elif minute.isdigit() and hour == "*":
        when = f"at minute {int(minute)} of every hour"
    elif minute.isdigit() and hour.startswith("*/"):
        when = f"at minute {int(minute)} every {hour[2:]} hours"
    else:
        when = f"at minute {minute} past hour {hour}"
    months = _list([_MONTH_NAMES[m - 1] for m in sorted(schedule.months)])
    days: list[str] = []
    if dom not in ("*", "?"):
        if month != "*" and dom.isdigit():
            days.append(f"on {months} {int(dom)}")
        else:
            days.append(f"on day {dom} of the month" + (f" in {months}" if month != "*" else ""))
    elif month != "*":
        days.append(f"in {months}")
    if dow not in ("*", "?"):
        weekdays = "on " + _list([_DAY_NAMES[d] for d in sorted(schedule.dows)])
        days.append(("or " + weekdays) if dom not in ("*", "?") else weekdays)
    if not days and single:
        days.append("every day")
    return " ".join([when, *days])


