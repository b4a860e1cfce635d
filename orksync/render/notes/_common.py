"""Helpers shared by the note modules: lenient argument conversion, Go-compatible JSON,
emptiness, path walking and RFC 3339 timestamps.

Pure. No I/O, clock and randomness injected.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from orksync.render.coercion import go_atoi, go_parse_float
from orksync.render.govalues import format_value

Clock = Callable[[], datetime]
Note = Callable[..., Any]


class NoteError(ValueError):
    """A note called with arguments it cannot use; the message names the note."""


def to_str(value: Any) -> str:
    """Lenient string argument: Go's %v of the value, with nil as ""."""
    if value is None:
        return ""
    return value if isinstance(value, str) else format_value(value)


def to_number(value: Any, note: str) -> int | float:
    """Numeric argument: ints and floats as they are, bools as 1/0, nil and "" as 0,
    strings through strconv (Atoi, then ParseFloat). Anything else raises NoteError."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float):
        return value
    if value is None or value == "":
        return 0
    if isinstance(value, str):
        text = value.strip()
        i = go_atoi(text)
        if i is not None:
            return i
        f = go_parse_float(text)
        if f is not None:
            return f
    raise NoteError(f"{note}: {format_value(value)!r} is not a number")


def to_int(value: Any, note: str) -> int:
    """Integer argument (a count, an index): like `to_number`, floats truncated."""
    number = to_number(value, note)
    if isinstance(number, float):
        if not math.isfinite(number):
            raise NoteError(f"{note}: {format_value(value)!r} is not a finite number")
        return int(number)
    return number


def walk(obj: Any, keys: Sequence[Any]) -> tuple[bool, Any]:
    """Follow keys through maps (and, as an orksync extension, list indices given as ints
    or digit strings). Returns (found, value)."""
    current = obj
    for key in keys:
        if isinstance(current, Mapping):
            name = to_str(key)
            if name not in current:
                return False, None
            current = current[name]
        elif isinstance(current, list) and not isinstance(key, bool):
            index = key if isinstance(key, int) else go_atoi(to_str(key))
            if index is None or not 0 <= index < len(current):
                return False, None
            current = current[index]
        else:
            return False, None
    return True, current


def split_path(path: Any) -> list[str]:
    """`a.b.c` (a leading dot is ignored) → ["a", "b", "c"]."""
    text = to_str(path).strip().lstrip(".")
    return [p for p in text.split(".")] if text else []


# ── Go-compatible JSON (encoding/json.Marshal) ───────────────────────────────────

_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t",
                 "\b": "\\b", "\f": "\\f",
                 "<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                 "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _json_string(s: str) -> str:
    out = []
    for ch in s:
        if ch in _JSON_ESCAPES:
            out.append(_JSON_ESCAPES[ch])
        elif ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04x}")
        elif "\udc80" <= ch <= "\udcff":  # a byte of invalid UTF-8
            out.append("\\ufffd")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _json_float(f: float) -> str:
    if not math.isfinite(f):
        raise NoteError(f"json: unsupported value: {format_value(f)}")
    if f == 0:
        return "-0" if math.copysign(1.0, f) < 0 else "0"
    shortest = Decimal(repr(f)).normalize()
    if 1e-6 <= abs(f) < 1e21:
        text = format(shortest, "f")
        return text.rstrip("0").rstrip(".") if "." in text else text
    sign, digits, exponent = shortest.as_tuple()
    assert isinstance(exponent, int)
    chars = "".join(map(str, digits))
    exp = len(chars) - 1 + exponent
    mant = chars[0] + ("." + chars[1:] if len(chars) > 1 else "")
    exp_text = f"-{-exp}" if -10 < exp < 0 else f"{'-' if exp < 0 else '+'}{abs(exp):02d}"
    return ("-" if sign else "") + f"{mant}e{exp_text}"


def go_json(value: Any) -> str:
    """JSON text exactly as Go's json.Marshal writes decoded values: compact, map keys
    sorted, `<>&` escaped as \\u003c…, floats in Go's shortest form (`1`, `1e+21`)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _json_float(value)
    if isinstance(value, str):
        return _json_string(value)
    if isinstance(value, Mapping):
        items = sorted((to_str(k), v) for k, v in value.items())
        return "{" + ",".join(f"{_json_string(k)}:{go_json(v)}" for k, v in items) + "}"
    if isinstance(value, Sequence | set | frozenset):
        return "[" + ",".join(go_json(v) for v in value) + "]"
    raise NoteError(f"json: unsupported type {type(value).__name__}")


# ── RFC 3339 timestamps ──────────────────────────────────────────────────────────

_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:[Zz]|[+-]\d{2}:\d{2})", re.ASCII)


def parse_rfc3339(value: Any) -> datetime | None:
    """Parse an RFC 3339 timestamp (`2026-04-06T08:00:00Z`, fractions and offsets allowed;
    nanoseconds truncated to microseconds). None when the text is not one."""
    text = to_str(value).strip()
    if not _RFC3339.fullmatch(text):
        return None
    text = text.replace("t", "T").replace("z", "Z")
    main, dot, rest = text.partition(".")
    if dot:
        digits = re.match(r"\d+", rest)
        assert digits is not None
        frac = digits.group(0)
        text = f"{main}.{frac[:6].ljust(6, '0')}{rest[len(frac):]}"
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed


def now_utc(clock: Clock) -> datetime:
    """The injected clock's time as an aware datetime (a naive clock is taken as UTC)."""
    current = clock()
    return current.replace(tzinfo=UTC) if current.tzinfo is None else current


def format_rfc3339(moment: datetime) -> str:
    """`2026-04-06T08:00:00Z` (UTC, whole seconds), as Go's time.RFC3339 in UTC."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
