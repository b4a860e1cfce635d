"""Collection notes (Orkestra's `listMap` and `as` families) and safe access (`getOr…`).

Pure. No I/O, clock and randomness injected.

Safe access comes in two shapes:

* Orkestra's value form, two arguments: `getOr value fallback` (= `default`),
  `getIntOr`, `getStringOr`, `getBoolOr` (typed: the value is used only when it already
  has the type).
* orksync's path form: `getOr obj "a.b" fallback` / `getOrDefault obj "a.b" fallback`
  return the value at the dot path, or the fallback when the path is missing or null
  (a present `0`, `false` or `""` is kept). `getString/getInt/getBool/getList/getMap obj
  "a.b" [fallback]` convert the value (`getInt` reads numeric text, `getBool` reads
  ParseBool words) and give the fallback (default "", 0, false, [], {}) when it is
  missing or not convertible. Paths walk maps and, as an extension over Orkestra, list
  indices (`spec.items.0.name`).

| Function | Signature | Meaning |
|---|---|---|
| `listHas` | `listHas list v` | whether the list contains v (numbers compare by value; "1" ≠ 1) |
| `listGet` | `listGet list i` | element i, nil when out of range or not a list |
| `listLen` | `listLen list` | number of elements, 0 for a non-list |
| `mapGet` | `mapGet map key` | the value at key, nil when absent or not a map |
| `mapKeys` | `mapKeys map` | the keys, sorted; [] for a non-map |
| `mapValues` | `mapValues map` | the values in sorted-key order; [] for a non-map |
| `asList` | `asList v` | a list as is, a JSON array text parsed, anything else [] |
| `asMap` | `asMap v` | a map as is, a JSON object text parsed, anything else {} |
| `asString` | `asString v` | a string as is; maps and lists as JSON; others %v; nil → "" |
| `getOr` | `getOr value fallback` / `getOr obj path fallback` | see above |
| `getOrDefault` | `getOrDefault obj path fallback` | path form of getOr |
| `getIntOr` | `getIntOr value fallback` | value when a number (as int), else fallback |
| `getStringOr` | `getStringOr value fallback` | value when a non-empty string, else fallback |
| `getBoolOr` | `getBoolOr value fallback` | value when it is a bool, else fallback |
| `getString` | `getString obj path [fallback]` | the scalar at path printed with %v |
| `getInt` | `getInt obj path [fallback]` | the number (or numeric text) at path as an int |
| `getBool` | `getBool obj path [fallback]` | the bool (or ParseBool word) at path |
| `getList` | `getList obj path [fallback]` | the list at path |
| `getMap` | `getMap obj path [fallback]` | the map at path |
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from orksync.render.coercion import PARSE_BOOL_FALSE, PARSE_BOOL_TRUE, go_atoi
from orksync.render.notes._common import (
    Note,
    NoteError,
    go_equal,
    go_json,
    is_empty,
    split_path,
    to_int,
    to_number,
    to_str,
    walk,
)


def _list_has(items: Any, value: Any) -> bool:
    return isinstance(items, list) and any(go_equal(item, value) for item in items)


def _list_get(items: Any, index: Any) -> Any:
    if not isinstance(items, list):
        return None
    i = to_int(index, "listGet")
    return items[i] if 0 <= i < len(items) else None


def _map_get(m: Any, key: Any) -> Any:
    return m.get(to_str(key)) if isinstance(m, Mapping) else None


def _parse_json(value: Any) -> Any:
    if not isinstance(value, str):
        return None
    try:
        return json.loads(value)
    except ValueError:
        return None


def _as_list(value: Any) -> list[Any]:
    if isinstance(value, list):
        return value
    parsed = _parse_json(value)
    return parsed if isinstance(parsed, list) else []


def _as_map(value: Any) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return dict(value)
    parsed = _parse_json(value)
    return parsed if isinstance(parsed, dict) else {}


def _as_string(value: Any) -> str:
    if isinstance(value, Mapping | list):
        return go_json(value)
    return to_str(value)


def _lookup(note: str, obj: Any, path: Any) -> tuple[bool, Any]:
    found, value = walk(obj, split_path(path))
    return found and value is not None, value


def _get_or(*args: Any) -> Any:
    if len(args) == 2:
        value, fallback = args
        return fallback if is_empty(value) else value
    if len(args) == 3:
        obj, path, fallback = args
        found, value = _lookup("getOr", obj, path)
        return value if found else fallback
    raise NoteError(f"getOr: expects (value fallback) or (obj path fallback), got "
                    f"{len(args)} arguments")


def _get_or_default(obj: Any, path: Any, fallback: Any) -> Any:
    found, value = _lookup("getOrDefault", obj, path)
    return value if found else fallback


def _get_int_or(value: Any, fallback: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return fallback
    if isinstance(value, float) and not math.isfinite(value):
        return fallback
    return int(value)


def _get_string(obj: Any, path: Any, fallback: Any = "") -> Any:
    found, value = _lookup("getString", obj, path)
    if not found or isinstance(value, Mapping | list):
        return fallback
    return to_str(value)


def _get_int(obj: Any, path: Any, fallback: Any = 0) -> Any:
    found, value = _lookup("getInt", obj, path)
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
    found, value = _lookup("getBool", obj, path)
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
        found, value = _lookup("get", obj, path)
        if found and isinstance(value, kind):
            return value
        return (list(default) if isinstance(default, list) else dict(default)) \
            if fallback is None else fallback

    return get


def notes() -> dict[str, Note]:
    return {
        "listHas": _list_has,
        "listGet": _list_get,
        "listLen": lambda items: len(items) if isinstance(items, list) else 0,
        "mapGet": _map_get,
        "mapKeys": lambda m: sorted(str(k) for k in m) if isinstance(m, Mapping) else [],
        "mapValues": lambda m: [m[k] for k in sorted(m, key=str)] if isinstance(m, Mapping)
        else [],
        "asList": _as_list,
        "asMap": _as_map,
        "asString": _as_string,
        "getOr": _get_or,
        "getOrDefault": _get_or_default,
        "getIntOr": _get_int_or,
        "getStringOr": lambda v, fallback: v if isinstance(v, str) and v else fallback,
        "getBoolOr": lambda v, fallback: v if isinstance(v, bool) else fallback,
        "getString": _get_string,
        "getInt": _get_int,
        "getBool": _get_bool,
        "getList": _get_typed(list, []),
        "getMap": _get_typed(Mapping, {}),
    }
