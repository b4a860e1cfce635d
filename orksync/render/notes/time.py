"""Time notes, evaluated against the INJECTED clock (never the wall clock).

Pure. No I/O, clock and randomness injected.

Timestamps are RFC 3339 (`2026-04-06T08:00:00Z`, fractions and offsets allowed).
Durations are Orkestra's extended durations (orksync.durations: `30d`, `1h30m`,
`never`). A timestamp that does not parse makes `timeSince` 0, `timeUntil` "0s",
`timeAgo`/`timeFormat` "" and `isExpired` false; an invalid duration given to `isExpired`
is an error (it is a Katalog literal: a typo must not silently mean "never"), and
`isExpired ts "never"` (or "0") is false. Window notes use UTC; a window whose `after`
is later than its `before` wraps midnight (`22:00`–`06:00`).

| Function | Signature | Meaning |
|---|---|---|
| `now` | `now` | the current time, RFC 3339 in UTC, whole seconds |
| `timeAgo` | `timeAgo ts` | elapsed time since ts, `5s ago` / `12m ago` / `3h ago` / `2d ago` |
| `timeSince` | `timeSince ts` | whole seconds elapsed since ts |
| `timeUntil` | `timeUntil ts` | Go duration text until ts (`719h43m12s`), `0s` when past |
| `isExpired` | `isExpired ts duration` | whether now ≥ ts + duration |
| `timeFormat` | `timeFormat ts layout` | ts in a Go layout (`Jan 2, 2006`) |
| `durationSeconds` | `durationSeconds d` | whole seconds of an extended duration, 0 when invalid |
| `durationValid` | `durationValid d` | whether d is a valid extended duration |
| `durationAdd` | `durationAdd a b` | a + b as Go duration text (`5m30s`), `0s` when invalid |
| `timeInWindow` | `timeInWindow after before` | whether UTC now is in [after, before) |
| `timeNotInWindow` | `timeNotInWindow after before` | the complement of timeInWindow |
| `weekday` | `weekday` | whether today (UTC) is Monday to Friday |
| `weekend` | `weekend` | whether today (UTC) is Saturday or Sunday |
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from datetime import time as dtime
from typing import Any

from orksync.durations import format_go_duration, parse_duration
from orksync.render.notes._common import (
    Clock,
    Note,
    NoteError,
    format_rfc3339,
    now_utc,
    parse_rfc3339,
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


def notes(clock: Clock) -> dict[str, Note]:
    def since(ts: Any) -> timedelta | None:
        moment = parse_rfc3339(ts)
        return None if moment is None else now_utc(clock) - moment

    def time_ago(ts: Any) -> str:
        elapsed = since(ts)
        if elapsed is None:
            return ""
        seconds = max(0, int(elapsed.total_seconds()))
        for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
            if seconds >= size:
                return f"{seconds // size}{unit} ago"
        return f"{seconds}s ago"

    def time_since(ts: Any) -> int:
        elapsed = since(ts)
        return 0 if elapsed is None else int(elapsed.total_seconds() // 1)

    def time_until(ts: Any) -> str:
        elapsed = since(ts)
        if elapsed is None or elapsed >= timedelta(0):
            return "0s"
        return format_go_duration(timedelta(seconds=int(-elapsed.total_seconds())))

    def is_expired(ts: Any, duration: Any) -> bool:
        try:
            ttl = parse_duration(to_str(duration))
        except ValueError as err:
            raise NoteError(f"isExpired: {err}") from None
        moment = parse_rfc3339(ts)
        if moment is None or ttl == timedelta(0):
            return False
        return now_utc(clock) >= moment + ttl

    def time_format(ts: Any, layout: Any) -> str:
        moment = parse_rfc3339(ts)
        return "" if moment is None else go_format(moment, to_str(layout))

    def seconds(d: Any) -> int:
        try:
            return int(parse_duration(to_str(d)).total_seconds())
        except ValueError:
            return 0

    def valid(d: Any) -> bool:
        try:
            parse_duration(to_str(d))
        except ValueError:
            return False
        return True

    def add(a: Any, b: Any) -> str:
        try:
            return format_go_duration(parse_duration(to_str(a)) + parse_duration(to_str(b)))
        except ValueError:
            return "0s"

    def window(after: Any, before: Any) -> bool | None:
        start, end = parse_hhmm(after), parse_hhmm(before)
        if start is None or end is None:
            return None
        now = now_utc(clock).astimezone(UTC).time()
        return in_window(now, start, end, before_inclusive=False)

    def utc_weekday() -> int:
        return now_utc(clock).astimezone(UTC).weekday()

    return {
        "now": lambda: format_rfc3339(now_utc(clock)),
        "timeAgo": time_ago,
        "timeSince": time_since,
        "timeUntil": time_until,
        "isExpired": is_expired,
        "timeFormat": time_format,
        "durationSeconds": seconds,
        "durationValid": valid,
        "durationAdd": add,
        "timeInWindow": lambda after, before: window(after, before) is True,
        "timeNotInWindow": lambda after, before: window(after, before) is False,
        "weekday": lambda: utc_weekday() < 5,
        "weekend": lambda: utc_weekday() >= 5,
    }


__all__ = ["DAYS", "day_matches", "day_names", "day_of_week_matches", "go_format", "in_window",
           "notes", "parse_hhmm"]
