"""Coercion of rendered template strings into typed values (semantics §4.5, §4.8).

Pure. No I/O, clock and randomness injected (none needed here).

Go parsing primitives are reproduced exactly (each verified against Go 1.26):

* `scan_int` = `fmt.Sscanf(s, "%d", &n)`: skips leading blanks (a newline is an error),
  optional sign, then the longest run of decimal digits; trailing text is ignored
  (`"3abc"` → 3, `"3.9"` → 3, `"0x10"` → 0, `"1_000"` → 1, `"1e3"` → 1); no digits, an
  empty text or an int64 overflow is an error (None).
* `scan_float` = `fmt.Sscanf(s, "%f", &f)`: same blank handling, then Go's float token
  (sign, `nan`, `inf`, digits with `_`, fraction, exponent; `0x…p…` hex floats); trailing
  text ignored (`"2.5x"` → 2.5, `"1,5"` → 1); `"abc"`, `"1e"`, `"0x10"` are errors.
* `go_atoi` = `strconv.Atoi`: the whole text must be an optional sign and decimal digits
  within int64 (`" 3"`, `"3.0"`, `"1_000"` are errors).
* `go_parse_float` = `strconv.ParseFloat(s, 64)`: the whole text, Go float syntax
  (underscores between digits allowed, `inf`/`infinity`/`nan` any case, no blanks).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Any

from orksync.render.govalues import format_value

__all__ = [
    "PARSE_BOOL_FALSE", "PARSE_BOOL_TRUE", "coerce_status", "go_atoi", "go_parse_float",
    "parse_bool", "parse_int", "parse_port", "parse_replicas", "scan_float", "scan_int",
    "to_namespaces", "try_coerce",
]

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_BLANKS = " \t\r\f\v\u00a0\u0085\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007" \
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
_DEC = r"\d(?:_?\d)*"
_GO_FLOAT = re.compile(
    rf"[+-]?(?:(?:{_DEC}(?:\.(?:{_DEC})?)?|\.{_DEC})(?:[eE][+-]?{_DEC})?"
    r"|inf|infinity|nan)", re.IGNORECASE | re.ASCII)
_GO_HEX_FLOAT = re.compile(
    r"[+-]?0[xX](?:[0-9a-fA-F](?:_?[0-9a-fA-F])*(?:\.(?:[0-9a-fA-F](?:_?[0-9a-fA-F])*)?)?"
    r"|\.[0-9a-fA-F](?:_?[0-9a-fA-F])*)[pP][+-]?\d(?:_?\d)*", re.ASCII)
_GO_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)

PARSE_BOOL_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
PARSE_BOOL_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
_LOOSE_TRUE = frozenset({"true", "True", "TRUE", "1", "yes", "YES"})
_PLAIN_PATH = re.compile(r"\{\{-?\s*((?:\.[A-Za-z_][A-Za-z0-9_]*)+)\s*-?\}\}")


def _skip_blanks(s: str) -> str | None:
    """Sscanf's leading-space skip; None when a newline comes first (Go errors)."""
    i = 0
    while i < len(s) and s[i] in _BLANKS + "\n":
        if s[i] == "\n":
            return None
        i += 1
    return s[i:]


def scan_int(s: str) -> int | None:
    """`fmt.Sscanf(s, "%d", &n)`; None where Go returns an error."""
    rest = _skip_blanks(s)
    if not rest:
        return None
    i = 1 if rest[0] in "+-" else 0
    j = i
    while j < len(rest) and "0" <= rest[j] <= "9":
        j += 1
    if j == i:
        return None
    value = int(rest[:j])
    return value if _INT64_MIN <= value <= _INT64_MAX else None


def _float_token(s: str) -> str:
    """Go fmt's greedy float token (no backtracking), as scanned by `%f`."""
    i = 0

    def accept(chars: str) -> bool:
        nonlocal i
        if i < len(s) and s[i] in chars:
            i += 1
            return True
        return False

    if accept("nN") and accept("aA") and accept("nN"):
        return s[:i]
    accept("+-")
    if accept("iI") and accept("nN") and accept("fF"):
        return s[:i]
    digits, exp = "0123456789_", "eE"
    if accept("0") and accept("xX"):
        digits, exp = "0123456789abcdefABCDEF_", "pP"
    while accept(digits):
        pass
    if accept("."):
        while accept(digits):
            pass
    if accept(exp):
        accept("+-")
        while accept("0123456789_"):
            pass
    return s[:i]


def scan_float(s: str) -> float | None:
    """`fmt.Sscanf(s, "%f", &f)`; None where Go returns an error."""
    rest = _skip_blanks(s)
    if not rest:
        return None
    return go_parse_float(_float_token(rest))


def go_parse_float(s: str) -> float | None:
    """`strconv.ParseFloat(s, 64)`; None on a syntax error (overflow gives ±inf here)."""
    if _GO_HEX_FLOAT.fullmatch(s):
        sign = -1.0 if s.startswith("-") else 1.0
        try:
            return sign * float.fromhex(s.lstrip("+-").replace("_", ""))
        except (ValueError, OverflowError):
            return sign * math.inf
    if not _GO_FLOAT.fullmatch(s):
        return None
    return float(s.replace("_", ""))


def go_atoi(s: str) -> int | None:
    """`strconv.Atoi(s)` on a 64-bit platform; None on error."""
    if not _GO_INT.fullmatch(s) or len(s.lstrip("+-").lstrip("0")) > 19:
        return None  # more than 19 significant digits cannot fit (and int() would refuse)
    value = int(s)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else format_value(value)


def parse_replicas(s: Any) -> int:
    """Replica count as Orkestra reads it: `Sscanf("%d")`; empty, unparsable or
    negative → 1; `"0"` kept; a leading integer prefix is used (`"3abc"` → 3)."""
    value = scan_int(_text(s))
    return 1 if value is None or value < 0 else value


def parse_port(s: Any, *, scanf: bool = False) -> int:
    """Port number: `strconv.Atoi` (or `Sscanf("%d")` with `scanf=True`, as Orkestra's
    Pod builder does); invalid → 0. orksync also maps negative and > 65535 to 0 (the API
    server rejects them anyway) so that 0 always means "no port"."""
    text = _text(s)
    value = scan_int(text) if scanf else go_atoi(text)
    return value if value is not None and 0 < value <= 65535 else 0


def parse_int(s: Any, default: int) -> int:
    """`strconv.Atoi` with a fallback for anything it rejects (including empty)."""
    value = go_atoi(_text(s))
    return default if value is None else value


def parse_bool(s: Any) -> bool:
    """Orkestra's field booleans: true only for `true True TRUE 1 yes YES`."""
    if isinstance(s, bool):
        return s
    return _text(s) in _LOOSE_TRUE


def _number(f: float) -> int | float:
    """Go keeps float64; its JSON prints integral values below 1e21 without a fraction,
    so orksync represents those as Python ints (YAML then prints `3`, not `3.0`)."""
    if f.is_integer() and abs(f) < 1e21:
        return int(Decimal(repr(f)))  # the shortest decimal, as Go prints it
    return f


def _reject_constant(name: str) -> Any:
    raise ValueError(f"JSON constant {name} is not valid JSON")


def try_coerce(s: Any) -> Any:
    """Orkestra's "try coerce" for `custom` spec leaves.

    In order: an integer (`strconv.ParseInt`) or float (`strconv.ParseFloat`) → number;
    a `strconv.ParseBool` word (`t T TRUE true True f F FALSE false False`; `1`/`0` were
    already numbers) → bool; text starting with `{` or `[` that parses as JSON → the
    object/array; anything else stays a string. Numbers go through float64 as in Go and
    come back as ints when integral (see `_number`); non-finite results (`NaN`, `Inf`)
    stay strings because Go's JSON encoder cannot write them. Non-strings pass through."""
    if not isinstance(s, str):
        return s
    f = go_parse_float(s)
    if f is not None and math.isfinite(f):
        return _number(f)
    if s in PARSE_BOOL_TRUE:
        return True
    if s in PARSE_BOOL_FALSE:
        return False
    stripped = s.strip()
    if stripped[:1] in ("{", "["):
        try:
            return json.loads(s, parse_constant=_reject_constant)
        except ValueError:
            return s
    return s


def coerce_status(value: Any, type: str) -> Any:
    """Convert a rendered status field value per its declared `type`.

    `string` (default, also for an empty type) keeps the text; `int` uses strconv.Atoi,
    then ParseFloat truncated; `float` ParseFloat; `bool` ParseBool's words; `auto` is
    `try_coerce`. An empty text becomes 0 / 0.0 / false for int/float/bool (Kubernetes
    omits zero counts, so a missing `readyReplicas` renders empty); a text that does not
    parse is kept as a string so that the API server's schema check names it. An unknown
    type raises ValueError."""
    text = _text(value)
    kind = (type or "string").strip()
    if kind == "string":
        return text
    if kind == "auto":
        return try_coerce(text)
    if kind not in ("int", "float", "bool"):
        raise ValueError(f"unknown status field type {type!r}: use string, int, float, bool "
                         "or auto")
    if text == "":
        return {"int": 0, "float": 0.0, "bool": False}[kind]
    if kind == "bool":
        if text in PARSE_BOOL_TRUE:
            return True
        return False if text in PARSE_BOOL_FALSE else text
    f = go_parse_float(text)
    if f is None or not math.isfinite(f):
        return text
    if kind == "int":
        i = go_atoi(text)
        return i if i is not None else int(f)
    return f


def lookup(data: Any, path: str) -> Any:
    """A bare dot path (`spec.regions`; a leading dot is tolerated) into nested maps;
    None when a segment is missing."""
    current = data
    for part in path.strip().lstrip(".").split("."):
        if not isinstance(current, Mapping) or part not in current:
            return None
        current = current[part]
    return current


def to_namespaces(entries: Iterable[Any], data: Mapping[str, Any],
                  render_value: Callable[[str, Mapping[str, Any]], str]) -> list[str]:
    """Expand a `toNamespaces` list (semantics §4.8).

    A literal is one namespace; a template that is exactly one plain field path
    (`{{ .spec.targetNamespaces }}`) resolving to a list yields every non-empty string
    element (non-strings are skipped, avoiding Go's `[a b]` formatting); any other template
    is rendered with `render_value(entry, data)` into one namespace. Results are stripped,
    empties dropped and duplicates removed keeping the first occurrence. Render errors
    propagate."""
    out: list[str] = []
    for entry in entries:
        if entry is None:
            continue
        text = entry if isinstance(entry, str) else format_value(entry)
        names: list[str]
        match = _PLAIN_PATH.fullmatch(text.strip())
        value = lookup(data, match.group(1)) if match else None
        if isinstance(value, list):
            names = [v for v in value if isinstance(v, str)]
        elif "{{" in text:
            names = [render_value(text, data)]
        else:
            names = [text]
        for name in names:
            name = name.strip()
            if name and name not in out:
                out.append(name)
    return out
