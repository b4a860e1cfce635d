"""Lexer for Go text/template source, a port of text/template/parse/lex.go.

Pure. No I/O. Produces the whole token list eagerly; a lexical error ends the list with
an ERROR token (as Go's lexer stops), which the parser reports when it reaches it.
Delimiters are fixed to `{{` `}}`; trim markers are `{{- ` and ` -}}` (the space is
required); comments `{{/* */}}` are dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, auto


class T(Enum):
    """Token types (Go's itemType)."""

    ERROR = auto()
    EOF = auto()
    TEXT = auto()
    LEFT_DELIM = auto()
    RIGHT_DELIM = auto()
    SPACE = auto()
    IDENT = auto()
    FIELD = auto()
    VARIABLE = auto()
    DOT = auto()
    NIL = auto()
    BOOL = auto()
    NUMBER = auto()
    COMPLEX = auto()
    CHAR_CONST = auto()
    STRING = auto()
    RAW_STRING = auto()
    PIPE = auto()
    LPAREN = auto()
    RPAREN = auto()
    ASSIGN = auto()
    DECLARE = auto()
    CHAR = auto()
    # keywords
    BLOCK = auto()
    BREAK = auto()
    CONTINUE = auto()
    DEFINE = auto()
    ELSE = auto()
    END = auto()
    IF = auto()
    RANGE = auto()
    TEMPLATE = auto()
    WITH = auto()


KEYWORDS = {
    "block": T.BLOCK,
    "break": T.BREAK,
    "continue": T.CONTINUE,
    "define": T.DEFINE,
    "else": T.ELSE,
    "end": T.END,
    "if": T.IF,
    "range": T.RANGE,
    "nil": T.NIL,
    "template": T.TEMPLATE,
    "with": T.WITH,
}

_KEYWORD_TYPES = frozenset(KEYWORDS.values()) | {T.DOT}
SPACE_CHARS = " \t\r\n"
_TERMINATORS = ".,|:()"
LEFT, RIGHT = "{{", "}}"


@dataclass(frozen=True, slots=True)
class Token:
    typ: T
    val: str
    pos: int

    def describe(self) -> str:
        """How Go's item.String() shows the token in error messages."""
        if self.typ is T.EOF:
            return "EOF"
        if self.typ is T.ERROR:
            return self.val
        if self.typ in _KEYWORD_TYPES:
            return f"<{self.val}>"
        return repr(self.val) if len(self.val) <= 10 else repr(self.val[:10]) + "..."


def is_alnum(ch: str) -> bool:
    return ch == "_" or ch.isalpha() or ch.isdecimal()


def _has_left_trim(s: str, i: int) -> bool:
    return i + 1 < len(s) and s[i] == "-" and s[i + 1] in SPACE_CHARS


def _has_right_trim(s: str, i: int) -> bool:
    return i + 1 < len(s) and s[i] in SPACE_CHARS and s[i + 1] == "-"


class Lexer:
    """Scans one template; `tokens()` returns the token list."""

    def __init__(self, source: str, *, break_ok: bool = True, continue_ok: bool = True) -> None:
        self.src = source
        self.pos = 0
        self.out: list[Token] = []
        self.paren_depth = 0
        self.break_ok = break_ok
        self.continue_ok = continue_ok

    def tokens(self) -> list[Token]:
        while self._lex_text():
            if self.out and self.out[-1].typ is T.LEFT_DELIM and not self._lex_action():
                break
        return self.out

    # -- text and delimiters -------------------------------------------------------
    def _emit(self, typ: T, start: int, end: int | None = None) -> None:
        self.out.append(Token(typ, self.src[start : self.pos if end is None else end], start))

    def _error(self, msg: str) -> bool:
        self.out.append(Token(T.ERROR, msg, self.pos))
        return False

    def _lex_text(self) -> bool:
        """Emit text up to the next action or comment; return False at EOF or on error."""
        src, start = self.src, self.pos
        x = src.find(LEFT, start)
        if x < 0:
            if len(src) > start:
                self.out.append(Token(T.TEXT, src[start:], start))
            self.out.append(Token(T.EOF, "", len(src)))
            return False
        end = x
        if _has_left_trim(src, x + 2):
            end = len(src[start:x].rstrip(SPACE_CHARS)) + start
        if end > start:
            self.out.append(Token(T.TEXT, src[start:end], start))
        return self._lex_left_delim(x)

    def _lex_left_delim(self, x: int) -> bool:
        src = self.src
        after = x + 2
        if _has_left_trim(src, after):
            after += 2
        if src.startswith("/*", after):
            return self._lex_comment(after)
        self.out.append(Token(T.LEFT_DELIM, LEFT, x))
        self.pos = after
        self.paren_depth = 0
        return True

    def _at_right_delim(self) -> tuple[bool, bool]:
        src, i = self.src, self.pos
        if _has_right_trim(src, i) and src.startswith(RIGHT, i + 2):
            return True, True
        return src.startswith(RIGHT, i), False

    def _skip_leading_space(self) -> None:
        src = self.src
        while self.pos < len(src) and src[self.pos] in SPACE_CHARS:
            self.pos += 1

    def _lex_comment(self, start: int) -> bool:
        self.pos = start
        end = self.src.find("*/", start + 2)
        if end < 0:
            return self._error("unclosed comment")
        self.pos = end + 2
        delim, trim = self._at_right_delim()
        if not delim:
            return self._error("comment ends before closing delimiter")
        self.pos += (2 if trim else 0) + 2
        if trim:
            self._skip_leading_space()
        return True

    def _lex_right_delim(self, trim: bool) -> None:
        if trim:
            self.pos += 2
        self.out.append(Token(T.RIGHT_DELIM, RIGHT, self.pos))
        self.pos += 2
        if trim:
            self._skip_leading_space()

    # -- inside an action -------------------------------------------------------------
    def _lex_action(self) -> bool:
        """Lex tokens up to and including the right delimiter."""
        while True:
            delim, trim = self._at_right_delim()
            if delim:
                if self.paren_depth:
                    return self._error("unclosed left paren")
                self._lex_right_delim(trim)
                return True
            if not self._lex_one():
                return False
            if self.out[-1].typ is T.RIGHT_DELIM:
                return True

    def _lex_one(self) -> bool:
        src, start = self.src, self.pos
        if start >= len(src):
            return self._error("unclosed action")
        ch = src[start]
        if ch in SPACE_CHARS:
            return self._lex_space()
        self.pos += 1
        simple = {"=": T.ASSIGN, "|": T.PIPE}
        if ch in simple:
            self._emit(simple[ch], start)
        elif ch == ":":
            if not src.startswith("=", self.pos):
                return self._error("expected :=")
            self.pos += 1
            self._emit(T.DECLARE, start)
        elif ch in "\"'`":
            return self._lex_quote(ch, start)
        elif ch == "$":
            return self._lex_field_or_var(T.VARIABLE, start)
        elif ch == "." and self.pos < len(src) and not "0" <= src[self.pos] <= "9":
            return self._lex_field_or_var(T.FIELD, start)
        elif ch in "+-." or "0" <= ch <= "9":
            self.pos = start
            return self._lex_number()
        elif is_alnum(ch):
            self.pos = start
            return self._lex_identifier()
        else:
            return self._lex_punct(ch, start)
        return True

    def _lex_punct(self, ch: str, start: int) -> bool:
        if ch == "(":
            self.paren_depth += 1
            self._emit(T.LPAREN, start)
        elif ch == ")":
            self.paren_depth -= 1
            if self.paren_depth < 0:
                return self._error("unexpected right paren")
            self._emit(T.RPAREN, start)
        elif ch <= "\x7f" and ch.isprintable():
            self._emit(T.CHAR, start)
        else:
            return self._error(f"unrecognized character in action: U+{ord(ch):04X}")
        return True

    def _lex_space(self) -> bool:
        src, start = self.src, self.pos
        while self.pos < len(src) and src[self.pos] in SPACE_CHARS:
            self.pos += 1
        n = self.pos - start
        if src.startswith("-" + RIGHT, self.pos):
            self.pos -= 1  # the last space belongs to the " -}}" trim marker
            if n == 1:
                return True
        self._emit(T.SPACE, start)
        return True

    def _at_terminator(self) -> bool:
        src, i = self.src, self.pos
        if i >= len(src):
            return True
        return src[i] in SPACE_CHARS or src[i] in _TERMINATORS or src.startswith(RIGHT, i)

    def _scan_alnum(self) -> None:
        src = self.src
        while self.pos < len(src) and is_alnum(src[self.pos]):
            self.pos += 1

    def _bad_char(self) -> bool:
        ch = self.src[self.pos] if self.pos < len(self.src) else ""
        return self._error(f"bad character U+{ord(ch):04X} {ch!r}" if ch else "bad character")

    def _lex_identifier(self) -> bool:
        start = self.pos
        self._scan_alnum()
        if not self._at_terminator():
            return self._bad_char()
        word = self.src[start : self.pos]
        typ = KEYWORDS.get(word)
        if (typ is T.BREAK and not self.break_ok) or (typ is T.CONTINUE and not self.continue_ok):
            typ = None
        if typ is None:
            typ = T.BOOL if word in ("true", "false") else T.IDENT
        self._emit(typ, start)
        return True

    def _lex_field_or_var(self, typ: T, start: int) -> bool:
        if self._at_terminator():
            self._emit(T.VARIABLE if typ is T.VARIABLE else T.DOT, start)
            return True
        self._scan_alnum()
        if not self._at_terminator():
            return self._bad_char()
        self._emit(typ, start)
        return True

    def _lex_quote(self, quote: str, start: int) -> bool:
        src = self.src
        kind = {"'": "character constant", '"': "quoted string", "`": "raw quoted string"}[quote]
        while True:
            if self.pos >= len(src):
                return self._error(f"unterminated {kind}")
            ch = src[self.pos]
            self.pos += 1
            if quote == "`":
                if ch == "`":
                    break
                continue
            if ch == "\\":
                if self.pos >= len(src) or src[self.pos] == "\n":
                    return self._error(f"unterminated {kind}")
                self.pos += 1
            elif ch == "\n":
                return self._error(f"unterminated {kind}")
            elif ch == quote:
                break
        typ = {"'": T.CHAR_CONST, '"': T.STRING, "`": T.RAW_STRING}[quote]
        self._emit(typ, start)
        return True

    def _lex_number(self) -> bool:
        start = self.pos
        if not self._scan_number():
            return self._error(f"bad number syntax: {self.src[start:self.pos]!r}")
        if self.pos < len(self.src) and self.src[self.pos] in "+-":
            if not self._scan_number() or self.src[self.pos - 1] != "i":
                return self._error(f"bad number syntax: {self.src[start:self.pos]!r}")
            self._emit(T.COMPLEX, start)
            return True
        self._emit(T.NUMBER, start)
        return True

    def _accept(self, valid: str) -> bool:
        if self.pos < len(self.src) and self.src[self.pos] in valid:
            self.pos += 1
            return True
        return False

    def _accept_run(self, valid: str) -> None:
        while self._accept(valid):
            pass

    def _scan_number(self) -> bool:
        self._accept("+-")
        digits = "0123456789_"
        if self._accept("0"):
            if self._accept("xX"):
                digits = "0123456789abcdefABCDEF_"
            elif self._accept("oO"):
                digits = "01234567_"
            elif self._accept("bB"):
                digits = "01_"
        self._accept_run(digits)
        if self._accept("."):
            self._accept_run(digits)
        if len(digits) == 11 and self._accept("eE"):
            self._accept("+-")
            self._accept_run("0123456789_")
        if len(digits) == 23 and self._accept("pP"):
            self._accept("+-")
            self._accept_run("0123456789_")
        self._accept("i")
        if self.pos < len(self.src) and is_alnum(self.src[self.pos]):
            self.pos += 1
            return False
        return True


def lex(source: str, *, break_ok: bool = True, continue_ok: bool = True) -> list[Token]:
    """Tokenize a template."""
    return Lexer(source, break_ok=break_ok, continue_ok=continue_ok).tokens()
