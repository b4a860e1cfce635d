"""Go strconv formatting used by fmt: quoting and float formatting.

Pure. No I/O. Ports strconv.Quote/QuoteToASCII/QuoteRune/CanBackquote and
strconv.FormatFloat for the verbs e, E, f, g, G, b, x, X (prec -1 = shortest).
Strings are Go byte strings carried as Python str with surrogate-escaped invalid bytes.
"""

from __future__ import annotations

import math
import struct

from ..govalues import format_float as shortest_g

_ESCAPES = {7: "\\a", 8: "\\b", 12: "\\f", 10: "\\n", 13: "\\r", 9: "\\t", 11: "\\v"}
MAX_RUNE = 0x10FFFF


def is_print(r: int) -> bool:
    """unicode.IsPrint (letters, marks, numbers, punctuation, symbols, ASCII space)."""
    if r <= 0xFF:
        return 0x20 <= r <= 0x7E or (0xA1 <= r <= 0xFF and r != 0xAD)
    if 0xD800 <= r <= 0xDFFF or r > MAX_RUNE:
        return False
    return chr(r).isprintable()


def _escaped_rune(r: int, quote: str, ascii_only: bool) -> str:
    if r == ord(quote) or r == 0x5C:
        return "\\" + chr(r)
    if (r < 0x80 or not ascii_only) and is_print(r):
        return chr(r)
    if r in _ESCAPES:
        return _ESCAPES[r]
    if r < 0x20 or r == 0x7F:
        return f"\\x{r:02x}"
    if r > MAX_RUNE or 0xD800 <= r <= 0xDFFF:
        r = 0xFFFD
    return f"\\u{r:04x}" if r < 0x10000 else f"\\U{r:08x}"


def _bad_byte(ch: str) -> int | None:
    """The invalid byte a surrogate escape stands for, or None for a real character."""
    o = ord(ch)
    if 0xDC80 <= o <= 0xDCFF:
        return o - 0xDC00
    return 0xFF if 0xD800 <= o <= 0xDFFF else None


def quote(s: str, *, ascii_only: bool = False, quote_char: str = '"') -> str:
    """strconv.Quote / QuoteToASCII."""
    out = [quote_char]
    for ch in s:
        bad = _bad_byte(ch)
        if bad is not None:
            out.append(f"\\x{bad:02x}")
        else:
            out.append(_escaped_rune(ord(ch), quote_char, ascii_only))
    out.append(quote_char)
    return "".join(out)


def quote_rune(r: int, *, ascii_only: bool = False) -> str:
    """strconv.QuoteRune / QuoteRuneToASCII (invalid runes become U+FFFD)."""
    if r > MAX_RUNE or 0xD800 <= r <= 0xDFFF:
        r = 0xFFFD
    return "'" + _escaped_rune(r, "'", ascii_only) + "'"


def can_backquote(s: str) -> bool:
    """strconv.CanBackquote."""
    for ch in s:
        r = ord(ch)
        if _bad_byte(ch) is not None or r == 0xFEFF:
            return False
        if r < 0x80 and ((r < 0x20 and r != 9) or r in (0x60, 0x7F)):
            return False
    return True


def _special(v: float) -> str | None:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return None


def _fmt_b(v: float) -> str:
    bits = struct.unpack("<Q", struct.pack("<d", v))[0]
    neg = bits >> 63
    exp = (bits >> 52) & 0x7FF
    mant = bits & ((1 << 52) - 1)
    if exp == 0:
        exp += 1
    else:
        mant |= 1 << 52
    exp += -1023 - 52
    return f"{'-' if neg else ''}{mant}p{'+' if exp >= 0 else '-'}{abs(exp)}"


def _fmt_x(v: float, prec: int, upper: bool) -> str:
    neg = math.copysign(1.0, v) < 0
    mant, exp = 0, 0
    if v != 0:
        m, e = math.frexp(abs(v))
        mant, exp = int(m * (1 << 53)) << 8, e - 1  # leading 1 at bit 60
    if 0 <= prec < 15:
        shift = prec * 4
        extra = (mant << shift) & ((1 << 60) - 1)
        mant >>= 60 - shift
        if extra | (mant & 1) > 1 << 59:
            mant += 1
        mant <<= 60 - shift
        if mant & (1 << 61):
            mant >>= 1
            exp += 1
    digits = "0123456789ABCDEF" if upper else "0123456789abcdef"
    out = ["-" if neg else "", "0", "X" if upper else "x", str((mant >> 60) & 1)]
    mant = (mant << 4) & ((1 << 64) - 1)
    if (prec < 0 and mant) or prec > 0:
        out.append(".")
        count = 0
        while (prec < 0 and mant) or count < prec:
            out.append(digits[(mant >> 60) & 15])
            mant = (mant << 4) & ((1 << 64) - 1)
            count += 1
    out.append("P" if upper else "p")
    out.append("-" if exp < 0 else "+")
    out.append(f"{abs(exp):02d}")
    return "".join(out)


def format_float(v: float, verb: str, prec: int) -> str:
    """strconv.FormatFloat(v, verb, prec, 64)."""
    special = _special(v)
    if special is not None:
        return special
    if verb == "b":
        return _fmt_b(v)
    if verb in "xX":
        return _fmt_x(v, prec, verb == "X")
    if prec < 0:
        if verb in "gG":
            text = shortest_g(v)
            return text.upper() if verb == "G" else text
        return format(v, verb.replace("F", "f") + "")
    return format(v, f".{prec}{verb}")
