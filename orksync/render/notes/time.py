"""Time helpers of the `time:` / `dayOfWeek:` conditions and Go's time layouts
(`go_format`, used by Orkestra's `timeFormat` in `orkestra_time`).

Pure. No I/O, clock and randomness injected. Window helpers use UTC; a window whose
`after` is later than its `before` wraps midnight (`22:00`–`06:00`) for conditions
(docs/differences.md T8); Orkestra's `timeInWindow` note does not wrap.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from datetime import time as dtime
from typing import Any

from orksync.render.notes._common import (
    to_str,
)

_HHMM = re.compile(r"(\d{1,2}):(\d{2})", re.ASCII)


def parse_hhmm(text: Any) -> dtime | None:
    """Go's time.Parse("15:04", s): hour 1-2 digits (0-23), minute 2 digits (0-59)."""
    match = _HHMM.fullmatch(to_str(text).strip())
    if not match:
        return None
    hour, minute = int(match.group(1)), int(match.group(2))
    return dtime(hour, minute) if hour < 24 and minute < 60 else None


def in_window(now: dtime, after: dtime | None, before: dtime | None, *,
              before_inclusive: bool) -> bool:
    """Whether a time of day is inside [after, before] (or [after, before)); either bound
    may be missing; after > before wraps midnight."""
    def below(t: dtime) -> bool:
        return now <= t if before_inclusive else now < t

    if after is not None and before is not None and after > before:
        return now >= after or below(before)
    return (after is None or now >= after) and (before is None or below(before))


DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


def day_names(value: Any) -> list[str]:
    """Day names from a list or a comma-separated text, trimmed and lower-cased."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, Sequence) or isinstance(items, str):
        return []
    return [to_str(item).strip().lower() for item in items]


def day_matches(name: str, today: str) -> bool:
    """Whether a lower-case day name (full, or three letters) names `today`."""
    return name == today or (len(name) == 3 and today.startswith(name))


def day_of_week_matches(spec: Any, now: datetime) -> bool:
    """A `dayOfWeek` condition block: the first of weekday, weekend, in, notIn decides."""
    if not isinstance(spec, Mapping):
        return False
    today = DAYS[now.weekday()]
    if isinstance(spec.get("weekday"), bool):
        return bool(spec["weekday"] == (now.weekday() < 5))
    if isinstance(spec.get("weekend"), bool):
        return bool(spec["weekend"] == (now.weekday() >= 5))
    if spec.get("in"):
        return any(day_matches(day, today) for day in day_names(spec["in"]))
    if spec.get("notIn"):
        return not any(day_matches(day, today) for day in day_names(spec["notIn"]))
    return False



# ── Go reference-time layouts ────────────────────────────────────────────────────

_STD = re.compile(
    r"January|Jan|Monday|Mon|MST|2006|__2|_2006|_2|002|0[1-6]|15|[1-5]|PM|pm"
    r"|[-Z](?:070000|07:00:00|0700|07:00|07)|[.,](?:0+|9+)(?![0-9])")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")
_WEEKDAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")


def days_from_civil(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 to a date of the proleptic Gregorian calendar (any year,
    year 0 included, as Go's time package counts)."""
    year -= month <= 2
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def civil_from_days(days: int) -> tuple[int, int, int]:
    """The (year, month, day) `days` after 1970-01-01."""
    days += 719468
    era = days // 146097
    doe = days - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


def days_in_month(year: int, month: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def go_format(unix: int, nanos: int, layout: str) -> str:
    """Go's time.Format(layout) of the UTC instant `unix` seconds + `nanos` after the
    epoch (any year Go represents, nanosecond precision)."""
    days, secs = divmod(unix, 86400)
    year, month, day = civil_from_days(days)
    hour, minute, second = secs // 3600, secs // 60 % 60, secs % 60
    yday = days - days_from_civil(year, 1, 1) + 1
    weekday = _WEEKDAYS[(days + 4) % 7]
    hour12 = hour % 12 or 12
    fixed = {
        "January": _MONTHS[month - 1], "Jan": _MONTHS[month - 1][:3],
        "Monday": weekday, "Mon": weekday[:3],
        "MST": "UTC", "2006": f"{year:04d}",
        "_2006": f"_{year:04d}", "06": f"{year % 100:02d}",
        "01": f"{month:02d}", "1": str(month), "02": f"{day:02d}",
        "2": str(day), "_2": f"{day:>2}",
        "002": f"{yday:03d}",
        "__2": f"{yday:>3}", "15": f"{hour:02d}",
        "03": f"{hour12:02d}", "3": str(hour12), "04": f"{minute:02d}",
        "4": str(minute), "05": f"{second:02d}", "5": str(second),
        "PM": "PM" if hour >= 12 else "AM", "pm": "pm" if hour >= 12 else "am",
    }

    def chunk(match: re.Match[str]) -> str:
        token = match.group(0)
        if token in fixed:
            return fixed[token]
        if token[0] in "-Z":
            return "Z" if token[0] == "Z" else _ZERO_OFFSET[token[1:]]
        digits = f"{nanos:09d}"[: len(token) - 1]
        if token[1] == "9":
            digits = digits.rstrip("0")
            return token[0] + digits if digits else ""
        return token[0] + digits

    return _STD.sub(chunk, layout)


_ZERO_OFFSET = {"07": "+00", "0700": "+0000", "07:00": "+00:00", "070000": "+000000",
                "07:00:00": "+00:00:00"}



__all__ = [
    "DAYS",
    "civil_from_days",
    "day_matches",
    "day_names",
    "day_of_week_matches",
    "days_from_civil",
    "days_in_month",
    "go_format",
    "in_window",
    "parse_hhmm",
]
