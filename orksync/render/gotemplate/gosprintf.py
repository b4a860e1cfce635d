"""Go fmt.Sprint, fmt.Sprintln and fmt.Sprintf (the doPrint/doPrintf loops).

Pure. No I/O. The per-value formatting lives in `gofmt.Printer`.
"""

from __future__ import annotations

from typing import Any

from .gofmt import Printer, int_from_arg, parse_num
from .gotypes import go_type_name


def sprint(args: list[Any] | tuple[Any, ...], limit: int = 1 << 62) -> str:
    """fmt.Sprint: spaces between operands when neither side is a string."""
    p = Printer(limit)
    prev_string = False
    for i, arg in enumerate(args):
        is_string = isinstance(arg, str)
        if i > 0 and not is_string and not prev_string:
            p.buf.append(" ")
        p.print_arg(arg, "v")
        prev_string = is_string
    return "".join(p.buf)


def sprintln(args: list[Any] | tuple[Any, ...], limit: int = 1 << 62) -> str:
    """fmt.Sprintln: operands separated by spaces, newline appended."""
    p = Printer(limit)
    for i, arg in enumerate(args):
        if i > 0:
            p.buf.append(" ")
        p.print_arg(arg, "v")
    p.buf.append("\n")
    return "".join(p.buf)


class _Sprintf:
    """State of one doPrintf run."""

    def __init__(self, fmt: str, args: list[Any], limit: int) -> None:
        self.p = Printer(limit)
        self.fmt = fmt
        self.args = args
        self.arg_num = 0
        self.reordered = False
        self.good_arg_num = True

    def arg_number(self, i: int) -> tuple[int, bool]:
        """Parse an explicit `[n]` argument index at i; return (new i, found)."""
        fmt = self.fmt
        if i >= len(fmt) or fmt[i] != "[":
            return i, False
        self.reordered = True
        close = fmt.find("]", i + 1)
        if len(fmt) - i < 3 or close < 0:
            self.good_arg_num = False
            return i + 1, False
        width, ok, newi = parse_num(fmt, i + 1, close)
        if not ok or newi != close:
            self.good_arg_num = False
            return close + 1, False
        if 0 <= width - 1 < len(self.args):
            self.arg_num = width - 1
            return close + 1, True
        self.good_arg_num = False
        return close + 1, True

    def flags(self, i: int) -> tuple[int, bool]:
        """Parse flags; return (new i, handled) where handled means a simple verb was
        printed directly (Go's fast path)."""
        p, fmt, end = self.p, self.fmt, len(self.fmt)
        while i < end:
            c = fmt[i]
            if c in "#0+- ":
                attr = {"#": "sharp", "0": "zero", "+": "plus", "-": "minus", " ": "space"}[c]
                setattr(p, attr, True)
                i += 1
                continue
            if "a" <= c <= "z" and self.arg_num < len(self.args):
                if c in "vw":
                    p.sharp_v, p.sharp, p.plus_v, p.plus = p.sharp, False, p.plus, False
                p.print_arg(self.args[self.arg_num], c)
                self.arg_num += 1
                return i + 1, True
            break
        return i, False

    def width_and_precision(self, i: int) -> tuple[int, bool]:
        p, fmt, end = self.p, self.fmt, len(self.fmt)
        i, after_index = self.arg_number(i)
        if i < end and fmt[i] == "*":
            p.wid, p.wid_present, self.arg_num = int_from_arg(self.args, self.arg_num)
            i += 1
            if not p.wid_present:
                p.buf.append("%!(BADWIDTH)")
            if p.wid < 0:
                p.wid, p.minus, p.zero = -p.wid, True, False
            after_index = False
        else:
            p.wid, p.wid_present, i = parse_num(fmt, i, end)
            if after_index and p.wid_present:
                self.good_arg_num = False
        if i + 1 < end and fmt[i] == ".":
            i += 1
            if after_index:
                self.good_arg_num = False
            i, after_index = self.arg_number(i)
            if i < end and fmt[i] == "*":
                p.prec, p.prec_present, self.arg_num = int_from_arg(self.args, self.arg_num)
                i += 1
                if p.prec < 0:
                    p.prec, p.prec_present = 0, False
                if not p.prec_present:
                    p.buf.append("%!(BADPREC)")
                after_index = False
            else:
                p.prec, p.prec_present, i = parse_num(fmt, i, end)
                if not p.prec_present:
                    p.prec, p.prec_present = 0, True
        return i, after_index

    def verb(self, verb: str) -> None:
        p = self.p
        if verb == "%":
            p.buf.append("%")
        elif not self.good_arg_num:
            p.buf.append(f"%!{verb}(BADINDEX)")
        elif self.arg_num >= len(self.args):
            p.buf.append(f"%!{verb}(MISSING)")
        else:
            if verb in "vw":
                p.sharp_v, p.sharp, p.plus_v, p.plus = p.sharp, False, p.plus, False
            p.print_arg(self.args[self.arg_num], verb)
            self.arg_num += 1

    def run(self) -> str:
        p, fmt, end = self.p, self.fmt, len(self.fmt)
        i = 0
        while i < end:
            self.good_arg_num = True
            j = fmt.find("%", i)
            if j < 0:
                p.buf.append(fmt[i:])
                break
            p.buf.append(fmt[i:j])
            p.clear_flags()
            i, handled = self.flags(j + 1)
            if handled:
                continue
            i, after_index = self.width_and_precision(i)
            if not after_index:
                i, _ = self.arg_number(i)
            if i >= end:
                p.buf.append("%!(NOVERB)")
                break
            self.verb(fmt[i])
            i += 1
        self.extra()
        return "".join(p.buf)

    def extra(self) -> None:
        p = self.p
        if self.reordered or self.arg_num >= len(self.args):
            return
        p.clear_flags()
        p.buf.append("%!(EXTRA ")
        for k, arg in enumerate(self.args[self.arg_num :]):
            if k:
                p.buf.append(", ")
            if arg is None:
                p.buf.append("<nil>")
            else:
                p.buf.append(go_type_name(arg) + "=")
                p.print_arg(arg, "v")
        p.buf.append(")")


def sprintf(fmt: str, args: list[Any] | tuple[Any, ...], limit: int = 1 << 62) -> str:
    """fmt.Sprintf; raises LimitError once the output exceeds `limit` characters."""
    return _Sprintf(fmt, list(args), limit).run()
