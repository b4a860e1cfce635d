"""Errors of the Go template engine.

Pure. No I/O. `GoTemplateError` is the public error; the runtime and the compiler raise
the internal `GoExecError` / `GoParseError`, which the engine converts (adding the
template text and the position).
"""

from __future__ import annotations

_CONTEXT_CHARS = 120


class GoTemplateError(Exception):
    """A Go template failed to compile or to execute.

    `message` is the Go-like reason, `source` the template text and `position` the
    character offset of the offending construct (None when unknown).
    """

    def __init__(self, message: str, source: str = "", position: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.source = source
        self.position = position

    def __str__(self) -> str:
        text = self.source if len(self.source) <= _CONTEXT_CHARS else (
            self.source[: _CONTEXT_CHARS - 3] + "..."
        )
        where = ""
        if self.position is not None:
            line, col = line_col(self.source, self.position)
            where = f" at line {line} col {col}"
        return f"{self.message}{where} in template {text}"


def line_col(source: str, position: int) -> tuple[int, int]:
    """1-based line and column of a character offset."""
    position = max(0, min(position, len(source)))
    line = source.count("\n", 0, position) + 1
    col = position - (source.rfind("\n", 0, position) + 1) + 1
    return line, col


class GoParseError(Exception):
    """Raised by the lexer, the parser and the compiler (compile-time errors)."""

    def __init__(self, message: str, position: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.position = position


class GoExecError(Exception):
    """Raised by the runtime while executing a template (Go's ExecError)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class LimitError(GoExecError):
    """A resource limit (output size, steps) was exceeded."""
