"""orksync's own notes, which Orkestra does not have (`EXTENSIONS` in the package): reads
of a live object's fields with a fallback, JSON, Kubernetes quantities and the time.

Pure. No I/O: `now` reads the injected clock. A Katalog that calls one renders in orksync
but does not load in Orkestra, so `orksync validate` and `orksync render` warn where one
is used (docs/differences.md F6). Each function's signature and meaning:
docs/katalog-semantics.md, "orksync's own notes".
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from orksync.render.coercion import PARSE_BOOL_FALSE, PARSE_BOOL_TRUE, go_atoi
from orksync.render.notes import quantity
from orksync.render.notes._common import (
    Clock,
    Note,
    NoteError,
    format_rfc3339,
    now_utc,
    split_path,
    to_number,
    to_str,
    walk,
)

# name, signature, meaning: what orksync.render.notes.catalog() lists of each extension
CATALOG: tuple[tuple[str, str, str], ...] = (
    ("concat", "concat s...",
     "all arguments joined with no separator"),
    ("fromJSON", "fromJSON s",
     "the value encoded by JSON text s (error when invalid)"),
    ("conditionStatus", "conditionStatus obj type",
     "that condition's status, \"\" when absent"),
    ("getOrDefault", "getOrDefault obj path fallback",
     "the value at path, else fallback"),
    ("getString", "getString obj path [fallback]",
     "the scalar at path printed with %v"),
    ("getInt", "getInt obj path [fallback]",
     "the number (or numeric text) at path as an int"),
    ("getBool", "getBool obj path [fallback]",
     "the bool (or ParseBool word) at path"),
    ("getList", "getList obj path [fallback]",
     "the list at path"),
    ("getMap", "getMap obj path [fallback]",
     "the map at path"),
    ("now", "now",
     "the current time, RFC 3339 in UTC, whole seconds"),
    ("quantityToBytes", "quantityToBytes q",
     "q as an integer, rounded up (`1Gi` → 1073741824)"),
    ("quantityToMillis", "quantityToMillis q",
     "q × 1000 as an integer, rounded up (`250m` → 250)"),
    ("quantityAdd", "quantityAdd a b",
     "a + b in canonical form"),
    ("subtractQuantity", "subtractQuantity a b",
     "a − b in canonical form"),
    ("quantityCompare", "quantityCompare a b",
     "-1, 0 or 1 comparing a with b"),
)


def _lookup(obj: Any, path: Any) -> tuple[bool, Any]:
    found, value = walk(obj, split_path(path))
    return found and value is not None, value


def _concat(*parts: Any) -> str:
    return "".join(to_str(p) for p in parts)


def _from_json(value: Any) -> Any:
    try:
        return json.loads(to_str(value))
    except ValueError as err:
        raise NoteError(f"fromJSON: invalid JSON ({err})") from None


def _condition_status(obj: Any, kind: Any) -> str:
    found, conditions = walk(obj, ("status", "conditions"))
    if not found or not isinstance(conditions, list):
        return ""
    wanted = to_str(kind)
    for condition in conditions:
        if isinstance(condition, Mapping) and to_str(condition.get("type")) == wanted:
            return to_str(condition.get("status"))
    return ""


def _get_or_default(obj: Any, path: Any, fallback: Any) -> Any:
    found, value = _lookup(obj, path)
    return value if found else fallback


def _get_string(obj: Any, path: Any, fallback: Any = "") -> Any:
    found, value = _lookup(obj, path)
    if not found or isinstance(value, Mapping | list):
        return fallback
    return to_str(value)


def _get_int(obj: Any, path: Any, fallback: Any = 0) -> Any:
    found, value = _lookup(obj, path)
    if not found or isinstance(value, bool):
        return fallback
    if isinstance(value, str):
        parsed = go_atoi(value.strip())
        if parsed is not None:
            return parsed
    try:
        number = to_number(value, "getInt")
    except NoteError:
        return fallback
    return int(number) if math.isfinite(number) else fallback


def _get_bool(obj: Any, path: Any, fallback: Any = False) -> Any:
    found, value = _lookup(obj, path)
    if found and isinstance(value, bool):
        return value
    if found and isinstance(value, str):
        if value in PARSE_BOOL_TRUE:
            return True
        if value in PARSE_BOOL_FALSE:
            return False
    return fallback


def _get_typed(kind: type, default: Any) -> Note:
    def get(obj: Any, path: Any, fallback: Any = None) -> Any:
        found, value = _lookup(obj, path)
        if found and isinstance(value, kind):
            return value
        return (list(default) if isinstance(default, list) else dict(default)) \
            if fallback is None else fallback

    return get


def notes(clock: Clock) -> dict[str, Note]:
    return {
        "concat": _concat,
        "fromJSON": _from_json,
        "conditionStatus": _condition_status,
        "getOrDefault": _get_or_default,
        "getString": _get_string,
        "getInt": _get_int,
        "getBool": _get_bool,
        "getList": _get_typed(list, []),
        "getMap": _get_typed(Mapping, {}),
        "now": lambda: format_rfc3339(now_utc(clock)),
        **quantity.notes(),
    }
