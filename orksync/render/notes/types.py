"""Type notes: inspect and convert the decoded type of a value.

Pure. No I/O, clock and randomness injected.

`typeOf` names are Orkestra's, shared with the `typeOf` condition operator: `string`,
`number` (int or float), `bool`, `map`, `slice`, `null`, `unknown`.
`toInt`/`toFloat` are "safe": a value they cannot read gives 0. `toBool` accepts
`true True TRUE 1 yes YES on ON` / `false False FALSE 0 no NO off OFF ""` and raises for
any other text. `toString` is Go's %v except that nil gives "" (Go prints `<nil>`).

| Function | Signature | Meaning |
|---|---|---|
| `typeOf` | `typeOf v` | the type name of v |
| `typeMap` | `typeMap v` | whether v is a map |
| `typeList` | `typeList v` | whether v is a list |
| `typeString` | `typeString v` | whether v is a string |
| `typeNumber` | `typeNumber v` | whether v is a number |
| `typeBool` | `typeBool v` | whether v is a bool |
| `typeNull` | `typeNull v` | whether v is nil |
| `toInt` | `toInt v` | v as an int (floats truncated, true → 1, unreadable → 0) |
| `toFloat` | `toFloat v` | v as a float (unreadable → 0) |
| `toBool` | `toBool v` | v as a bool (see above; numbers: non-zero) |
| `toString` | `toString v` | v printed with %v (nil → "") |
| `toList` | `toList v` | comma-separated text as trimmed items |
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from orksync.render.notes._common import Note, NoteError, to_number, to_str

_TRUE = frozenset({"true", "True", "TRUE", "1", "yes", "YES", "on", "ON"})
_FALSE = frozenset({"false", "False", "FALSE", "0", "no", "NO", "off", "OFF", ""})


def type_of(value: Any) -> str:
    """Orkestra's TypeOf name for a decoded value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "map"
    if isinstance(value, Sequence):
        return "slice"
    return "unknown"


def _to_int(value: Any) -> int:
    try:
        number = to_number(value, "toInt")
    except NoteError:
        return 0
    if isinstance(number, float):
        return int(number) if math.isfinite(number) else 0
    return number


def _to_float(value: Any) -> float:
    try:
        number = float(to_number(value, "toFloat"))
    except NoteError:
        return 0.0
    return number


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if value is None:
        return False
    if isinstance(value, int | float):
        return value != 0
    text = to_str(value).strip()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise NoteError(f"toBool: cannot read {text!r} as a bool")


def _to_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, list):
        return value
    text = to_str(value)
    return [item.strip() for item in text.split(",")] if text.strip() else []


def notes() -> dict[str, Note]:
    return {
        "typeOf": type_of,
        "typeMap": lambda v: type_of(v) == "map",
        "typeList": lambda v: type_of(v) == "slice",
        "typeString": lambda v: type_of(v) == "string",
        "typeNumber": lambda v: type_of(v) == "number",
        "typeBool": lambda v: type_of(v) == "bool",
        "typeNull": lambda v: type_of(v) == "null",
        "toInt": _to_int,
        "toFloat": _to_float,
        "toBool": _to_bool,
        "toString": to_str,
        "toList": _to_list,
    }
