"""Go value semantics shared by the template engine, the function library and conditions.

Pure. Reproduces how Go's fmt prints a value with %v (what text/template writes for
`{{ .x }}`) and how text/template decides truthiness, for the value shapes that reach
templates: None, bool, int, float, str, list and dict (what JSON/YAML decoding yields).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

NO_VALUE = "<no value>"


def format_float(f: float) -> str:
    """Format a float64 as Go's fmt %v does: strconv 'g' with the shortest digits, in
    exponent form when the decimal exponent is < -4 or >= 6 (so 1000000.0 is `1e+06`)."""
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if f == 0:
        return "-0" if math.copysign(1.0, f) < 0 else "0"
    sign = "-" if f < 0 else ""
    # Python's repr is the shortest round-tripping decimal, as Go's shortest formatting.
    tup = Decimal(repr(abs(f))).normalize().as_tuple()
    digits = "".join(str(d) for d in tup.digits)
    assert isinstance(tup.exponent, int)
    dp = len(digits) + tup.exponent  # position of the decimal point after digit 0
    exp = dp - 1
    if exp < -4 or exp >= 6:
        mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mant}e{'+' if exp >= 0 else '-'}{abs(exp):02d}"
    if dp <= 0:
        return f"{sign}0.{'0' * -dp}{digits}"
    if dp >= len(digits):
        return sign + digits + "0" * (dp - len(digits))
    return f"{sign}{digits[:dp]}.{digits[dp:]}"


def format_value(value: Any, *, top: bool = True) -> str:
    """Format a value as Go's fmt %v does. At top level a nil prints `<no value>`
    (text/template), nested nils print `<nil>` (fmt)."""
    if value is None:
        return NO_VALUE if top else "<nil>"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return format_float(value)
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return "[" + " ".join(str(b) for b in value) + "]"
    if isinstance(value, Mapping):
        items = sorted(value.items(), key=lambda kv: _sort_key(kv[0]))
        inner = " ".join(
            f"{format_value(k, top=False)}:{format_value(v, top=False)}" for k, v in items
        )
        return f"map[{inner}]"
    if isinstance(value, Sequence):
        return "[" + " ".join(format_value(v, top=False) for v in value) + "]"
    return str(value)


def _sort_key(key: Any) -> tuple[int, Any]:
    if isinstance(key, bool):
        return (0, int(key))
    if isinstance(key, int | float):
        return (1, key)
    return (2, str(key))


def truthy(value: Any) -> bool:
    """text/template truthiness: false, 0, nil and empty strings/lists/maps are false."""
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return value != 0
    if isinstance(value, str | bytes | Mapping | Sequence):
        return len(value) > 0
    return True
