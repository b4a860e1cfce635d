"""Conditional notes.

Pure. No I/O, clock and randomness injected.

"Empty" (for `default`, `coalesce`, `empty`, `notEmpty`, `getOr`) means nil, `""`,
`"<no value>"`, `0`, `false`, an empty list or an empty map.

`default` takes (value, fallback) — the REVERSE of sprig's `default fallback value`,
as in Orkestra. Beware pipelines: `{{ .x | default "d" }}` passes `.x` as the LAST
argument, i.e. calls `default "d" .x`, which returns "d" whenever "d" is non-empty.
Write `{{ default .x "d" }}`.

| Function | Signature | Meaning |
|---|---|---|
| `ternary` | `ternary cond a b` | a when cond is truthy (Go rules), else b |
| `boolTernary` | `boolTernary cond a b` | a when cond (a bool or "true"/"false") is true, else b |
| `boolDefault` | `boolDefault v fallback` | v when it is a bool, else fallback |
| `eqTernary` | `eqTernary v target a b` | a when v and target print the same (%v), else b |
| `coalesce` | `coalesce v...` | the first non-empty argument (nil when all are empty) |
| `empty` | `empty v` | whether v is empty |
| `notEmpty` | `notEmpty v` | whether v is not empty |
| `default` | `default value fallback` | value when non-empty, else fallback |
"""

from __future__ import annotations

from typing import Any

from orksync.render.govalues import truthy
from orksync.render.notes._common import Note, NoteError, is_empty, to_str


def _bool_ternary(cond: Any, a: Any, b: Any) -> Any:
    if isinstance(cond, bool):
        return a if cond else b
    if cond in ("true", "false"):
        return a if cond == "true" else b
    raise NoteError(f"boolTernary: condition must be a bool, got {to_str(cond)!r}")


def _coalesce(*values: Any) -> Any:
    for value in values:
        if not is_empty(value):
            return value
    return None


def notes() -> dict[str, Note]:
    return {
        "ternary": lambda cond, a, b: a if truthy(cond) else b,
        "boolTernary": _bool_ternary,
        "boolDefault": lambda v, fallback: v if isinstance(v, bool) else fallback,
        "eqTernary": lambda v, target, a, b: a if to_str(v) == to_str(target) else b,
        "coalesce": _coalesce,
        "empty": is_empty,
        "notEmpty": lambda v: not is_empty(v),
        "default": lambda value, fallback: fallback if is_empty(value) else value,
    }
