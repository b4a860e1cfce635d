"""`type_of`: the decoded type of a value named as Orkestra's `typeOf` names it
(`string`, `number`, `bool`, `map`, `slice`, `null`, `unknown`), for the `typeOf`
condition operator. The `typeOf` note itself is Orkestra's (`orkestra`).

Pure. No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

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


