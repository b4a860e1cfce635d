"""Time helpers of the `time:` / `dayOfWeek:` conditions and Go's time layouts
(`go_format`, used by Orkestra's `timeFormat` in `orkestra_time`).

Pure. No I/O, clock and randomness injected. Window helpers use UTC; a window whose
`after` is later than its `before` wraps midnight (`22:00`–`06:00`) for conditions
(docs/differences.md T8); Orkestra's `timeInWindow` note does not wrap.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
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
        return spec["weekday"] == (now.weekday() < 5)
    if isinstance(spec.get("weekend"), bool):
        return spec["weekend"] == (now.weekday() >= 5)
    if spec.get("in"):
        return any(day_matches(day, today) for day in day_names(spec["in"]))
    if spec.get("notIn"):
        return not any(day_matches(day, today) for day in day_names(spec["notIn"]))
    return False



# ── Go reference-time layouts ────────────────────────────────────────────────────

_STD = re.compile(
    r"January|Jan|Monday|Mon|MST|2006|__2|_2006|_2|002|0[1-6]|15|[1-5]|PM|pm"
    r"|[-Z](?:070000|07:00:00|0700|07:00|07)|[.,](?:0+|9+)(?![0-9])")


def _zone(moment: datetime, token: str) -> str:
    offset = moment.utcoffset() or timedelta(0)
    if token[0] == "Z" and offset == timedelta(0):
        return "Z"
    total = int(offset.total_seconds())
    sign = "-" if total < 0 else "+"
    hours, rest = divmod(abs(total), 3600)
    minutes, seconds = divmod(rest, 60)
    body = token[1:]
    if body == "07":
        return f"{sign}{hours:02d}"
    if body == "0700":
        return f"{sign}{hours:02d}{minutes:02d}"
    if body == "07:00":
        return f"{sign}{hours:02d}:{minutes:02d}"
    if body == "070000":
        return f"{sign}{hours:02d}{minutes:02d}{seconds:02d}"
    return f"{sign}{hours:02d}:{minutes:02d}:{seconds:02d}"


def go_format(moment: datetime, layout: str) -> str:
    """Format like Go's time.Format(layout) for the common layout elements."""
    hour12 = moment.hour % 12 or 12
    fixed = {
        "January": moment.strftime("%B"), "Jan": moment.strftime("%b"),
        "Monday": moment.strftime("%A"), "Mon": moment.strftime("%a"),
        "MST": moment.tzname() or "UTC", "2006": f"{moment.year:04d}",
        "_2006": f"_{moment.year:04d}", "06": f"{moment.year % 100:02d}",
        "01": f"{moment.month:02d}", "1": str(moment.month), "02": f"{moment.day:02d}",
        "2": str(moment.day), "_2": f"{moment.day:>2}",
        "002": f"{moment.timetuple().tm_yday:03d}",
        "__2": f"{moment.timetuple().tm_yday:>3}", "15": f"{moment.hour:02d}",
        "03": f"{hour12:02d}", "3": str(hour12), "04": f"{moment.minute:02d}",
        "4": str(moment.minute), "05": f"{moment.second:02d}", "5": str(moment.second),
        "PM": "PM" if moment.hour >= 12 else "AM", "pm": "pm" if moment.hour >= 12 else "am",
    }

    def chunk(match: re.Match[str]) -> str:
        token = match.group(0)
        if token in fixed:
            return fixed[token]
        if token[0] in "-Z":
            return _zone(moment, token)
        digits = f"{moment.microsecond:06d}000"[: len(token) - 1]
        if token[1] == "9":
            digits = digits.rstrip("0")
            return token[0] + digits if digits else ""
        return token[0] + digits

    return _STD.sub(chunk, layout)



__all__ = ["DAYS", "day_matches", "day_names", "day_of_week_matches", "go_format", "in_window",
           "parse_hhmm"]
