"""Kubernetes resource quantities: exact parsing, canonical formatting and the quantity
notes.

Pure. No I/O, clock and randomness injected.

`parse_quantity(text) -> Decimal` follows k8s.io/apimachinery's ParseQuantity grammar
`^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$` with the suffixes: binary `Ki Mi Gi Ti Pi
Ei` (powers of 1024), decimal `n u m "" k M G T P E` (powers of 1000), or a decimal
exponent `e`/`E` with an optional sign (`1e3`, `12E6`, `1.5e-3`). The value is exact
(no rounding, no int64 overflow). Differences from apimachinery, on purpose: a text
without digits (`Gi`, which Go reads as 0) is rejected, and values beyond int64 are kept
exact instead of overflowing, up to 10^±100 (`1e999999` is refused: turning it into an
integer would take the render's time and memory).

orksync's quantity extensions (`extensions.py`): `quantityToBytes` rounds up to a whole
number like Quantity.Value() (`100m` → 1); `quantityToMillis` rounds up like MilliValue()
(`0.5m` → 1). Results of `quantityAdd`/`subtractQuantity` are written in Kubernetes'
canonical form, in the format
of the first operand (binary, decimal or exponent): `1Gi + 512Mi` = `1536Mi`,
`500m + 500m` = `1`, `1.5Gi` = `1536Mi`, `1.5Ki` = `1536`.

"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal, localcontext
from typing import Any, Literal

from orksync.render.notes._common import Note, NoteError, to_str

__all__ = ["format_quantity", "notes", "parse_quantity", "parse_quantity_format"]

Format = Literal["BinarySI", "DecimalSI", "DecimalExponent"]

_GRAMMAR = re.compile(r"([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)", re.ASCII)
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)", re.ASCII)
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15,
            "E": 18}
_DECIMAL_SUFFIX = {v: k for k, v in _DECIMAL.items()}
_BINARY_SUFFIX = {v: k for k, v in _BINARY.items()}
_EXPONENT = re.compile(r"[eE][+-]?[0-9]{1,6}", re.ASCII)
MAX_MAGNITUDE = 100  # decimal digits either side of the point


def parse_quantity_format(text: Any) -> tuple[Decimal, Format]:
    """Parse a quantity into its exact value and its format; raises ValueError."""
    raw = to_str(text)
    match = _GRAMMAR.fullmatch(raw)
    if match is None or not _NUMBER.fullmatch(match.group(1)):
        raise ValueError(f"invalid quantity {_short(raw)}: expected a number with an optional "
                         "suffix (Ki Mi Gi Ti Pi Ei, n u m k M G T P E, or e<exponent>)")
    number, suffix = Decimal(match.group(1)), match.group(2)
    fmt: Format
    with localcontext() as ctx:
        ctx.prec = 200
        if suffix in _BINARY:
            value, fmt = number * (Decimal(2) ** _BINARY[suffix]), "BinarySI"
        elif suffix in _DECIMAL:
            value, fmt = number.scaleb(_DECIMAL[suffix]), "DecimalSI"
        elif _EXPONENT.fullmatch(suffix):
            value, fmt = number.scaleb(int(suffix[1:])), "DecimalExponent"
        else:
            raise ValueError(f"invalid quantity {_short(raw)}: unknown suffix {_short(suffix)}")
    if value and abs(value.adjusted()) > MAX_MAGNITUDE:
        raise ValueError(f"quantity {_short(raw)} is out of range (10^-{MAX_MAGNITUDE} to "
                         f"10^{MAX_MAGNITUDE})")
    return value, fmt


def _short(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")


def parse_quantity(text: Any) -> Decimal:
    """The exact value of a Kubernetes quantity (`1Gi` → 1073741824, `100m` → 0.1)."""
    return parse_quantity_format(text)[0]


# The most digits a quantity's value may have (Go's big decimals have no bound; a
# render's output is bounded anyway).
MAX_DIGITS = 10_000


def precision_for(*values: Decimal) -> int:
    """A decimal precision that holds every value exactly down to nano units, and their
    sum."""
    return max([200] + [v.adjusted() + 40 for v in values if v])


def _decimal_parts(value: Decimal) -> tuple[int, int]:
    """value = mantissa × 10^exponent with exponent a multiple of 3 (≥ -9, so below
    nano the value is rounded up) and as large as possible with an integral mantissa."""
    with localcontext() as ctx:
        ctx.prec = precision_for(value)
        exponent = -9
        mantissa = int((value.scaleb(9)).to_integral_value(rounding=ROUND_CEILING))
        while mantissa != 0 and mantissa % 1000 == 0:
            mantissa //= 1000
            exponent += 3
    return mantissa, exponent


def format_quantity(value: Decimal, fmt: Format = "DecimalSI") -> str:
    """Kubernetes' canonical text for a value in a format."""
    if value == 0:
        return "0"
    if fmt == "BinarySI" and value == value.to_integral_value() and abs(value) >= 1024:
        number, shift = int(value), 0
        while shift < 60 and number % 1024 == 0:
            number //= 1024
            shift += 10
        return f"{number}{_BINARY_SUFFIX.get(shift, '')}"
    mantissa, exponent = _decimal_parts(value)
    if fmt == "DecimalExponent":
        return f"{mantissa}e{exponent}" if exponent else str(mantissa)
    while exponent > 18:
        mantissa, exponent = mantissa * 1000, exponent - 3
    return f"{mantissa}{_DECIMAL_SUFFIX[exponent]}"


def _parse(note: str, text: Any) -> tuple[Decimal, Format]:
    try:
        return parse_quantity_format(text)
    except ValueError as err:
        raise NoteError(f"{note}: {err}") from None


def _combine(note: str, a: Any, b: Any, sign: int) -> str:
    left, fmt = _parse(note, a)
    right, right_fmt = _parse(note, b)
    with localcontext() as ctx:
        ctx.prec = 200
        total = left + sign * right
    return format_quantity(total, right_fmt if left == 0 else fmt)


def _compare(a: Any, b: Any) -> int:
    left, right = _parse("quantityCompare", a)[0], _parse("quantityCompare", b)[0]
    return (left > right) - (left < right)


def _ceil(value: Decimal) -> int:
    return int(value.to_integral_value(rounding=ROUND_CEILING))


def notes() -> dict[str, Note]:
    """orksync's quantity extensions (Orkestra's own quantity notes are in
    `orkestra_time`)."""
    return {
        "quantityToBytes": lambda q: _ceil(_parse("quantityToBytes", q)[0]),
        "quantityToMillis": lambda q: _ceil(_parse("quantityToMillis", q)[0] * 1000),
        "quantityAdd": lambda a, b: _combine("quantityAdd", a, b, 1),
        "subtractQuantity": lambda a, b: _combine("subtractQuantity", a, b, -1),
        "quantityCompare": _compare,
    }
