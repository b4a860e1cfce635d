"""Go fmt.Sprint, Sprintln and Sprintf for template values.

Pure. No I/O. A port of fmt/print.go and fmt/format.go restricted to the dynamic types
templates see (nil, bool, int/int64/uint8, float64, string, []interface{},
map[string]interface{}): flags `+ - # space 0`, width, precision, `*`, explicit argument
indexes `[n]`, every verb of those types, and Go's error strings (`%!d(string=x)`,
`%!v(MISSING)`, `%!(EXTRA int=1)`, `%!(BADWIDTH)`, ...). `%p` is not supported
(addresses are meaningless here): it prints like a bad verb.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import LimitError
from .gostrconv import MAX_RUNE, can_backquote, format_float, is_print, quote, quote_rune
from .gotypes import GoStrings, GoUint8, GoUint64, go_type_name, to_go_bytes

_LDIGITS, _UDIGITS = "0123456789abcdefx", "0123456789ABCDEFX"
_U64 = (1 << 64) - 1
TOO_LARGE = 1_000_000


def _sort_key(key: Any) -> tuple[int, Any]:
    if isinstance(key, bool):
        return (0, key)
    if isinstance(key, int | float):
        return (1, key)
    return (2, str(key))


class Printer:
    """Go's pp+fmt state for one Sprint/Sprintf call."""

    def __init__(self, limit: int = 1 << 62) -> None:
        self.buf: list[str] = []
        self.size = 0
        self.limit = limit
        self.clear_flags()

    def _grow(self, n: int) -> None:
        self.size += n
        if self.size > self.limit:
            raise LimitError("output too large")

    def clear_flags(self) -> None:
        self.wid = self.prec = 0
        self.wid_present = self.prec_present = False
        self.minus = self.plus = self.sharp = self.space = self.zero = False
        self.plus_v = self.sharp_v = False

    # -- fmt/format.go ----------------------------------------------------------------
    def write_padding(self, n: int) -> None:
        if n > 0:
            self._grow(n)
            self.buf.append(("0" if self.zero and not self.minus else " ") * n)

    def pad(self, s: str) -> None:
        self._grow(len(s))
        if not self.wid_present or self.wid == 0:
            self.buf.append(s)
            return
        width = self.wid - len(s)
        if self.minus:
            self.buf.append(s)
            self.write_padding(width)
        else:
            self.write_padding(width)
            self.buf.append(s)

    def _no_zero_pad(self, s: str) -> None:
        old, self.zero = self.zero, False
        self.pad(s)
        self.zero = old

    def fmt_unicode(self, u: int) -> None:
        prec = self.prec if self.prec_present and self.prec > 4 else 4
        text = "U+" + f"{u:X}".rjust(prec, "0")
        if self.sharp and u <= MAX_RUNE and is_print(u):
            text += " '" + chr(u) + "'"
        self._no_zero_pad(text)

    def fmt_integer(self, v: int, base: int, signed: bool, verb: str, digits: str) -> None:
        negative = signed and v < 0
        u = -v if negative else v
        if self.prec_present:
            prec = self.prec
            if prec == 0 and u == 0:
                old, self.zero = self.zero, False
                self.write_padding(self.wid)
                self.zero = old
                return
        elif self.zero and not self.minus and self.wid_present:
            prec = self.wid - (1 if negative or self.plus or self.space else 0)
        else:
            prec = 0
        text = _to_base(u, base, digits).rjust(prec, "0")
        if self.sharp:
            if base == 2:
                text = "0b" + text
            elif base == 8 and text[0] != "0":
                text = "0" + text
            elif base == 16:
                text = "0" + digits[16] + text
        if verb == "O":
            text = "0o" + text
        if negative:
            text = "-" + text
        elif self.plus:
            text = "+" + text
        elif self.space:
            text = " " + text
        self._no_zero_pad(text)

    def _truncate(self, s: str) -> str:
        return s[: self.prec] if self.prec_present else s

    def fmt_sbx(self, s: str, digits: str) -> None:
        data = to_go_bytes(s)
        length = min(len(data), self.prec) if self.prec_present else len(data)
        width = 2 * length
        if width <= 0:
            if self.wid_present:
                self.write_padding(self.wid)
            return
        if self.space:
            width = width * (2 if self.sharp else 1) + length - 1
        elif self.sharp:
            width += 2
        if self.wid_present and self.wid > width and not self.minus:
            self.write_padding(self.wid - width)
        out = ["0" + digits[16]] if self.sharp else []
        for i, c in enumerate(data[:length]):
            if self.space and i > 0:
                out.append(" " + ("0" + digits[16] if self.sharp else ""))
            out.append(digits[c >> 4] + digits[c & 15])
        self.buf.append("".join(out))
        if self.wid_present and self.wid > width and self.minus:
            self.write_padding(self.wid - width)

    def fmt_q(self, s: str) -> None:
        s = self._truncate(s)
        if self.sharp and can_backquote(s):
            self.pad("`" + s + "`")
        else:
            self.pad(quote(s, ascii_only=self.plus))

    def fmt_c(self, c: int) -> None:
        self.pad(chr(c) if c <= MAX_RUNE and not 0xD800 <= c <= 0xDFFF else "\ufffd")

    def fmt_float(self, v: float, verb: str, prec: int) -> None:
        if self.prec_present:
            prec = self.prec
        num = format_float(v, verb, prec)
        num = num if num[0] in "+-" else "+" + num
        if self.space and num[0] == "+" and not self.plus:
            num = " " + num[1:]
        if num[1] in "IN":
            if num[1] == "N" and not self.space and not self.plus:
                num = num[1:]
            self._no_zero_pad(num)
            return
        if self.sharp and verb != "b":
            num = _sharp_float(num, verb, prec)
        if self.plus or num[0] != "+":
            if self.zero and not self.minus and self.wid_present and self.wid > len(num):
                self.buf.append(num[0])
                self.write_padding(self.wid - len(num))
                self.buf.append(num[1:])
                return
            self.pad(num)
            return
        self.pad(num[1:])

    # -- fmt/print.go -----------------------------------------------------------------
    def bad_verb(self, verb: str, value: Any, nil: bool = False) -> None:
        self.buf.append("%!" + verb + "(")
        if nil:
            self.buf.append("<nil>")
        else:
            self.buf.append(go_type_name(value) + "=")
            self.print_value(value, "v", 0)
        self.buf.append(")")

    def fmt_bool(self, v: bool, verb: str) -> None:
        if verb in "tv":
            self.pad("true" if v else "false")
        else:
            self.bad_verb(verb, v)

    def fmt_int(self, v: int, verb: str) -> None:
        signed = not isinstance(v, GoUint8 | GoUint64)
        if verb == "v" and self.sharp_v and not signed:
            sharp, self.sharp = self.sharp, True
            self.fmt_integer(v, 16, False, "v", _LDIGITS)
            self.sharp = sharp
        elif verb in "vd":
            self.fmt_integer(v, 10, signed, verb, _LDIGITS)
        elif verb in "bo" or verb in "OxX":
            base = {"b": 2, "o": 8, "O": 8, "x": 16, "X": 16}[verb]
            self.fmt_integer(v, base, signed, verb, _UDIGITS if verb == "X" else _LDIGITS)
        elif verb == "c":
            self.fmt_c(v & _U64)
        elif verb == "q":
            self.pad(quote_rune(v & _U64, ascii_only=self.plus))
        elif verb == "U":
            self.fmt_unicode(v & _U64)
        else:
            self.bad_verb(verb, v)

    def fmt_float_verb(self, v: float, verb: str) -> None:
        if verb == "v":
            self.fmt_float(v, "g", -1)
        elif verb in "bgGxX":
            self.fmt_float(v, verb, -1)
        elif verb in "feE":
            self.fmt_float(v, verb, 6)
        elif verb == "F":
            self.fmt_float(v, "f", 6)
        else:
            self.bad_verb(verb, v)

    def fmt_string(self, v: str, verb: str) -> None:
        if verb == "v":
            self.fmt_q(v) if self.sharp_v else self.pad(self._truncate(v))
        elif verb == "s":
            self.pad(self._truncate(v))
        elif verb in "xX":
            self.fmt_sbx(v, _UDIGITS if verb == "X" else _LDIGITS)
        elif verb == "q":
            self.fmt_q(v)
        else:
            self.bad_verb(verb, v)

    def print_arg(self, arg: Any, verb: str) -> None:
        if arg is None:
            if verb in "Tv":
                self.pad("<nil>")
            else:
                self.bad_verb(verb, None, nil=True)
        elif verb == "T":
            self.pad(self._truncate(go_type_name(arg)))
        elif verb in "pw":  # %w only wraps errors (Errorf); %p addresses are unsupported
            self.bad_verb(verb, arg)
        else:
            self.print_value(arg, verb, 0)

    def print_value(self, value: Any, verb: str, depth: int) -> None:
        if value is None:
            if depth == 0:
                self.buf.append("<invalid reflect.Value>")
            elif self.sharp_v:
                self.buf.append("interface {}(nil)")
            else:
                self.buf.append("<nil>")
        elif value is True or value is False:
            self.fmt_bool(value, verb)
        elif isinstance(value, int):
            self.fmt_int(value, verb)
        elif isinstance(value, float):
            self.fmt_float_verb(value, verb)
        elif isinstance(value, str):
            self.fmt_string(value, verb)
        elif isinstance(value, Mapping):
            self._print_map(value, verb, depth)
        elif isinstance(value, list | tuple):
            self._print_list(value, verb, depth)
        else:
            self.fmt_string(str(value), verb)

    def _print_map(self, value: Mapping[Any, Any], verb: str, depth: int) -> None:
        self.buf.append("map[string]interface {}{" if self.sharp_v else "map[")
        for i, key in enumerate(sorted(value, key=_sort_key)):
            if i:
                self.buf.append(", " if self.sharp_v else " ")
            self.print_value(key, verb, depth + 1)
            self.buf.append(":")
            self.print_value(value[key], verb, depth + 1)
        self.buf.append("}" if self.sharp_v else "]")

    def _print_list(self, value: list[Any] | tuple[Any, ...], verb: str, depth: int) -> None:
        if self.sharp_v:
            self.buf.append("[]string{" if isinstance(value, GoStrings) else "[]interface {}{")
        else:
            self.buf.append("[")
        for i, item in enumerate(value):
            if i:
                self.buf.append(", " if self.sharp_v else " ")
            self.print_value(item, verb, depth + 1)
        self.buf.append("}" if self.sharp_v else "]")


def _to_base(u: int, base: int, digits: str) -> str:
    if base == 10:
        return str(u)
    out = []
    while True:
        out.append(digits[u % base])
        u //= base
        if not u:
            return "".join(reversed(out))


def _sharp_float(num: str, verb: str, prec: int) -> str:
    """fmt's '#' flag for floats: keep the decimal point and trailing zeros."""
    digits = (6 if prec == -1 else prec) if verb in "vgGx" else 0
    tail, body = "", num
    for i, ch in enumerate(num[1:], 1):
        if ch in "pP" or (ch in "eE" and verb not in "xX"):
            body, tail = num[:i], num[i:]
            break
    saw_nonzero, has_point = False, "." in body
    for ch in body[1:]:
        if ch == ".":
            continue
        saw_nonzero = saw_nonzero or ch != "0"
        if saw_nonzero:
            digits -= 1
    if not has_point:
        if len(body) == 2 and body[1] == "0":
            digits -= 1
        body += "."
    return body + "0" * max(digits, 0) + tail


def parse_num(fmt: str, i: int, end: int) -> tuple[int, bool, int]:
    num, isnum = 0, False
    while i < end and "0" <= fmt[i] <= "9":
        if num > TOO_LARGE:
            return 0, False, end
        num = num * 10 + ord(fmt[i]) - 48
        isnum, i = True, i + 1
    return num, isnum, i


def int_from_arg(args: list[Any], n: int) -> tuple[int, bool, int]:
    if n >= len(args):
        return 0, False, n
    a = args[n]
    ok = isinstance(a, int) and not isinstance(a, bool) and -TOO_LARGE <= a <= TOO_LARGE
    return (a, True, n + 1) if ok else (0, False, n + 1)
