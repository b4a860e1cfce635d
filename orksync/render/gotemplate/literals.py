"""Go literals: numbers, strings and rune constants, as text/template parses them.

Pure. No I/O. Ports strconv.ParseInt/ParseUint/ParseFloat (base 0, underscores),
strconv.Unquote/UnquoteChar and parse.newNumber/exec.idealConstant, so that a literal
means exactly what it means in Go. Go strings are byte strings: bytes that are not valid
UTF-8 (from `\\xff` escapes) are carried as surrogate escapes (U+DC80..U+DCFF).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .errors import GoParseError
from .gotypes import GoInt

_INT64_MAX = (1 << 63) - 1
_UINT64_MAX = (1 << 64) - 1
_SIMPLE_ESCAPES = {
    "a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92,
}


def underscore_ok(s: str) -> bool:
    """strconv.underscoreOK: underscores only between digits (or after a base prefix)."""
    saw, i = "^", 0
    if s[:1] in ("+", "-"):
        s = s[1:]
    hexa = False
    if len(s) >= 2 and s[0] == "0" and s[1].lower() in "box":
        i, saw, hexa = 2, "0", s[1].lower() == "x"
    for ch in s[i:]:
        if "0" <= ch <= "9" or (hexa and "a" <= ch.lower() <= "f"):
            saw = "0"
        elif ch == "_":
            if saw != "0":
                return False
            saw = "_"
        elif saw == "_":
            return False
        else:
            saw = "!"
    return saw != "_"


def parse_uint(s: str) -> int | None:
    """strconv.ParseUint(s, 0, 64); None on any error."""
    if not s:
        return None
    base, digits = 10, s
    if s[0] == "0":
        if len(s) >= 3 and s[1].lower() in "box":
            base, digits = {"b": 2, "o": 8, "x": 16}[s[1].lower()], s[2:]
        else:
            base, digits = 8, s[1:]
    value, underscores = 0, False
    for ch in digits:
        if ch == "_":
            underscores = True
            continue
        d = int(ch, 36) if ch.isascii() and ch.isalnum() else 99
        if d >= base:
            return None
        value = value * base + d
    if underscores and not underscore_ok(s):
        return None
    return value if value <= _UINT64_MAX else None


def parse_int(s: str) -> int | None:
    """strconv.ParseInt(s, 0, 64); None on any error."""
    neg = s[:1] == "-"
    body = s[1:] if s[:1] in ("+", "-") else s
    u = parse_uint(body)
    if u is None:
        return None
    if neg:
        return -u if u <= _INT64_MAX + 1 else None
    return u if u <= _INT64_MAX else None


def _float_syntax_ok(s: str) -> bool:
    """strconv.readFloat's syntax check for a decimal or hexadecimal float."""
    i = 1 if s[:1] in ("+", "-") else 0
    hexa = s[i : i + 2].lower() == "0x" and len(s) > i + 2
    if hexa:
        i += 2
    digit_ok = "0123456789abcdefABCDEF" if hexa else "0123456789"
    saw_digits = saw_dot = False
    while i < len(s):
        ch = s[i]
        if ch == "_":
            pass
        elif ch == ".":
            if saw_dot:
                break
            saw_dot = True
        elif ch in digit_ok:
            saw_digits = True
        else:
            break
        i += 1
    if not saw_digits:
        return False
    if i < len(s) and s[i].lower() == ("p" if hexa else "e"):
        i += 1
        if i < len(s) and s[i] in "+-":
            i += 1
        if i >= len(s) or not "0" <= s[i] <= "9":
            return False
        while i < len(s) and ("0" <= s[i] <= "9" or s[i] == "_"):
            i += 1
    elif hexa:
        return False
    return i == len(s) and ("_" not in s or underscore_ok(s))


def parse_float(s: str) -> float | None:
    """strconv.ParseFloat(s, 64) for the literals the lexer produces; None on error."""
    if not _float_syntax_ok(s):
        return None
    clean = s.replace("_", "")
    try:
        body = clean.lstrip("+-")
        value = float.fromhex(body) if body[:2].lower() == "0x" else float(body)
    except (ValueError, OverflowError):
        return None
    if math.isinf(value):
        return None
    return -value if clean.startswith("-") else value


@dataclass(frozen=True, slots=True)
class Number:
    """What parse.NumberNode records about a numeric literal."""

    text: str
    is_int: bool = False
    int64: int = 0
    is_uint: bool = False
    is_float: bool = False
    float64: float = 0.0

    def ideal(self) -> int | float:
        """exec.idealConstant: the value of the literal used where no type is known.

        Raises GoParseError-free `OverflowError` for uint-only constants (Go errors at
        execution time with "... overflows int")."""
        t = self.text
        is_hex_int = len(t) > 2 and t[0] == "0" and t[1] in "xX" and not any(c in t for c in "pP")
        is_rune = t[:1] == "'"
        if self.is_float and not is_hex_int and not is_rune and any(c in t for c in ".eEpP"):
            return self.float64
        if self.is_int:
            return GoInt(self.int64)
        raise OverflowError(f"{t} overflows int")


def parse_number(text: str, pos: int) -> Number:
    """parse.newNumber for a NUMBER token (complex constants are rejected by the caller)."""
    u = parse_uint(text)
    i = parse_int(text)
    if i is not None:
        return Number(text, True, i, True, True, float(i))
    if u is not None:
        return Number(text, False, 0, True, True, float(u))
    f = parse_float(text)
    if f is None:
        raise GoParseError(f"illegal number syntax: {text!r}", pos)
    if not any(c in text for c in ".eEpP"):
        raise GoParseError(f"integer overflow: {text!r}", pos)
    is_int = f.is_integer() and -(2**63) <= f < 2**63
    is_uint = f.is_integer() and 0 <= f < 2**64
    return Number(text, is_int, int(f) if is_int else 0, is_uint, True, f)


def _unhex(s: str) -> int | None:
    try:
        return int(s, 16) if s.isascii() and s.isalnum() else None
    except ValueError:
        return None


def unquote_char(s: str, i: int, quote: str) -> tuple[int, bool, int]:
    """strconv.UnquoteChar on s[i:]: (value, is_multibyte_rune, next index).

    Raises ValueError("invalid syntax") on malformed input."""
    if i >= len(s) or s[i] == quote:
        raise ValueError("invalid syntax")
    ch = s[i]
    if ch != "\\":
        return ord(ch), ord(ch) >= 0x80, i + 1
    if i + 1 >= len(s):
        raise ValueError("invalid syntax")
    c, i = s[i + 1], i + 2
    if c in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[c], False, i
    if c in "xuU":
        n = {"x": 2, "u": 4, "U": 8}[c]
        v = _unhex(s[i : i + n]) if len(s) - i >= n else None
        if v is None:
            raise ValueError("invalid syntax")
        if c != "x" and (v > 0x10FFFF or 0xD800 <= v <= 0xDFFF):
            raise ValueError("invalid syntax")
        return v, c != "x", i + n
    if "0" <= c <= "7":
        tail = s[i : i + 2]
        if len(tail) < 2 or not all("0" <= d <= "7" for d in tail):
            raise ValueError("invalid syntax")
        v = int(c + tail, 8)
        if v > 255:
            raise ValueError("invalid syntax")
        return v, False, i + 2
    if c in "'\"" and c == quote:
        return ord(c), False, i
    raise ValueError("invalid syntax")


def unquote_string(token: str, pos: int) -> str:
    """strconv.Unquote for a STRING or RAW_STRING token (quotes included)."""
    if token[0] == "`":
        return token[1:-1].replace("\r", "")
    buf = bytearray()
    i, end = 1, len(token) - 1
    try:
        while i < end:
            value, multibyte, i = unquote_char(token, i, '"')
            if value < 0x80 or not multibyte:
                buf.append(value)
            else:
                buf += chr(value).encode("utf-8", "surrogateescape")
    except ValueError:
        raise GoParseError("invalid syntax", pos) from None
    if i != end:
        raise GoParseError("invalid syntax", pos)
    return buf.decode("utf-8", "surrogateescape")


def parse_char(token: str, pos: int) -> Number:
    """parse.newNumber for a CHAR_CONST token like 'a' or '\\n'."""
    try:
        value, _, i = unquote_char(token, 1, "'")
    except ValueError:
        raise GoParseError("invalid syntax", pos) from None
    if token[i:] != "'":
        raise GoParseError(f"malformed character constant: {token}", pos)
    return Number(token, True, value, True, True, float(value))
