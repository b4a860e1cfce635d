"""Go behaviours the ported notes share: strconv, the int64 conversion of a float64,
fmt's %v, encoding/json, unicode case mapping and TrimSpace, as Orkestra's Go notes
get them from the standard library.

Pure. No I/O.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from orksync.render.coercion import go_atoi, go_parse_float, scan_int
from orksync.render.gotemplate.gotypes import GoInt, from_go_bytes, to_go_bytes
from orksync.render.govalues import format_value
from orksync.render.notes._common import NoteError, go_json

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007" \
           "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"


def sprint_v(value: Any) -> str:
    """fmt.Sprintf("%v", value) (a nil is `<nil>`)."""
    return format_value(value, top=False)


def parse_float(text: str) -> float | None:
    """strconv.ParseFloat(text, 64): None on a syntax or range error."""
    value = go_parse_float(text)
    if value is None:
        return None
    if math.isinf(value) and "inf" not in text.lower():
        return None  # out of range: Go returns ±Inf with ErrRange
    return value


def atoi(text: str) -> int | None:
    """strconv.Atoi on a 64-bit platform."""
    return go_atoi(text)


def sscan_int(text: str) -> int:
    """fmt.Sscanf(text, "%d", &n) with n starting at 0."""
    value = scan_int(text)
    return 0 if value is None else value


def int64_of(f: float) -> int:
    """Go's int64(f) on amd64: truncation; NaN and values out of range give MinInt64."""
    if math.isnan(f) or not INT64_MIN <= f < 2.0**63:
        return INT64_MIN
    return int(f)


def wrap_int64(i: int) -> int:
    return (i - INT64_MIN) % 2**64 + INT64_MIN


def native_number(f: float) -> int | float:
    """Orkestra's nativeNumber: a float64 that equals float64(int64(f)) becomes int64."""
    if math.isfinite(f) and float(int64_of(f)) == f:
        return int64_of(f)
    return f


def any_to_float(value: Any) -> float | None:
    """Orkestra's anyToFloat; None where it returns an error."""
    if value is True:
        return 1.0
    if value is False:
        return 0.0
    if isinstance(value, int):
        return float(value)
    if isinstance(value, float):
        return value
    if isinstance(value, str):
        return parse_float(value)
    return None


def to_int64(value: Any) -> int:
    """Orkestra's toInt64 (kubernetes.go): int64, int, float64, a string through Sscanf."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return int64_of(value)
    if isinstance(value, str):
        return sscan_int(value)
    return 0


def json_marshal(value: Any) -> str | None:
    """encoding/json.Marshal; None where it fails (NaN, ±Inf)."""
    try:
        return go_json(value)
    except NoteError:
        return None


def go_int_result(value: int) -> GoInt:
    return GoInt(wrap_int64(value))


def trim_space(s: str) -> str:
    return s.strip(GO_SPACE)


def _case(s: str, upper: bool) -> str:
    out = []
    for ch in s:
        if ch.isascii():
            out.append(ch.upper() if upper else ch.lower())
            continue
        if "\udc80" <= ch <= "\udcff":  # invalid UTF-8: strings.Map writes U+FFFD
            out.append("\ufffd")
            continue
        mapped = ch.upper() if upper else ch.lower()
        if len(mapped) != 1:  # Go maps rune by rune (simple case mapping)
            mapped = ch.title() if upper else ("i" if ch == "\u0130" else ch)
            mapped = mapped if len(mapped) == 1 else ch
        out.append(mapped)
    return "".join(out)


def to_upper(s: str) -> str:
    return s.upper() if s.isascii() else _case(s, True)


def to_lower(s: str) -> str:
    return s.lower() if s.isascii() else _case(s, False)


def byte_len(s: str) -> int:
    return len(s) if s.isascii() else len(to_go_bytes(s))


def byte_slice(s: str, start: int, end: int | None = None) -> str:
    """s[start:end] of a Go string (bytes; a cut rune leaves invalid UTF-8)."""
    if s.isascii():
        return s[start:end]
    return from_go_bytes(to_go_bytes(s)[start:end])


def json_valid(text: str) -> bool:
    """encoding/json.Valid."""
    if max(text, default="a") >= "\udc80" and any("\udc80" <= c <= "\udcff" for c in text):
        return False

    def refuse(_: str) -> Any:
        raise ValueError("not JSON")

    try:
        json.loads(text, parse_constant=refuse)
    except (ValueError, RecursionError):
        return False
    return True


def json_decode(text: str) -> Any:
    """encoding/json.Unmarshal into interface{} (numbers as float64); raises ValueError."""
    def refuse(_: str) -> Any:
        raise ValueError("not JSON")

    def floats(value: Any) -> Any:
        if isinstance(value, bool) or value is None:
            return value
        if isinstance(value, int):
            return float(value)
        if isinstance(value, list):
            return [floats(v) for v in value]
        if isinstance(value, dict):
            return {k: floats(v) for k, v in value.items()}
        return value

    return floats(json.loads(text, parse_constant=refuse, parse_float=float))


def is_go_map(value: Any) -> bool:
    return isinstance(value, Mapping)


def check_int(value: Any, note: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise NoteError(f"{note}: not an integer")
    return value


def atoi_or_none(text: Any) -> int | None:
    return atoi(text) if isinstance(text, str) else None


def api_server_numbers(value: Any) -> Any:
    """A custom resource's values as the API server delivers them to Orkestra: it decodes
    JSON numbers as int64 when they are integers that fit, float64 otherwise, and writes
    them back with encoding/json before the informer decodes them again; so a whole float
    below 1e21 that fits int64 (`1000000.0`, `2.0`, `-0.0`) arrives as an int64 and an
    integer beyond int64 as a float64. The input is not changed: a map or list holding a
    number to change is copied, anything else is returned as it is (shared)."""
    kind = type(value)
    if kind is dict:
        out = None
        for k, v in value.items():
            vk = type(v)
            if vk is str or vk is bool or v is None:
                continue
            if vk is int and INT64_MIN <= v <= INT64_MAX:
                continue
            new = api_server_numbers(v)
            if new is not v:
                if out is None:
                    out = dict(value)
                out[k] = new
        return value if out is None else out
    if kind is list:
        items = None
        for i, v in enumerate(value):
            vk = type(v)
            if vk is str or vk is bool or v is None:
                continue
            new = api_server_numbers(v)
            if new is not v:
                if items is None:
                    items = list(value)
                items[i] = new
        return value if items is None else items
    if kind is float:
        if value.is_integer() and abs(value) < 1e21 and INT64_MIN <= value < 2.0**63:
            return int(value)
        return value
    if kind is int and not INT64_MIN <= value <= INT64_MAX:
        return float(value)
    return value


