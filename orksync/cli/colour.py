"""Colour on a terminal: unified diffs and health words, as ANSI escapes.

Colour is used only when the stream is a terminal, `TERM` is not `dumb` and `NO_COLOR`
is unset or empty (https://no-color.org); a file, a pipe or a CI log gets plain text.
"""

from __future__ import annotations

import os
from typing import TextIO

__all__ = ["colour_diff", "paint", "wanted"]

RED, GREEN, YELLOW, CYAN, BOLD = "31", "32", "33", "36", "1"
_RESET = "\x1b[0m"


def wanted(stream: TextIO) -> bool:
    """Whether text written to `stream` may carry colour."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a stream without isatty, or closed
        return False


def paint(text: str, code: str) -> str:
    return f"\x1b[{code}m{text}{_RESET}" if text else text


def colour_diff(text: str) -> str:
    """`text`, unified diffs, with headers bold, removed lines red, added lines green,
    hunk headers cyan and `# ` notes yellow."""
    out = []
    for line in text.splitlines(keepends=True):
        body, end = (line[:-1], "\n") if line.endswith("\n") else (line, "")
        if line.startswith(("--- ", "+++ ")):
            code = BOLD
        elif line.startswith("@@"):
            code = CYAN
        elif line.startswith("-"):
            code = RED
        elif line.startswith("+"):
            code = GREEN
        elif line.startswith("#"):
            code = YELLOW
        else:
            out.append(line)
            continue
        out.append(paint(body, code) + end)
    return "".join(out)


def colour_column(table: str, column: str, codes: dict[str, str]) -> str:
    """`table` (a header line, then rows padded to columns) with the word of each row
    under the header `column` coloured by `codes` (word -> colour); padding untouched."""
    lines = table.split("\n")
    start = lines[0].find(column) if lines else -1
    if start < 0:
        return table
    out = [lines[0]]
    for line in lines[1:]:
        word = line[start:].split(" ", 1)[0]
        code = codes.get(word)
        out.append(line[:start] + paint(word, code) + line[start + len(word):]
                   if code else line)
    return "\n".join(out)
