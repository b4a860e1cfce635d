"""The repository's ignore file, `.orksyncignore`, in gitignore syntax. Pure.

What it lists is not loaded at all: neither Katalog, CRD, custom resource nor plain
manifest (a directory of Helm templates, test fixtures, a `kustomization.yaml`...). The
rules are git's (gitignore(5)), for the one file at the repository's root:

* blank lines and lines starting with `#` are skipped (`\\#` for a leading `#`); trailing
  blanks are dropped unless escaped with a backslash;
* `!pattern` re-includes what an earlier pattern excluded (`\\!` for a leading `!`); the
  last matching pattern decides. A file inside an excluded directory cannot be
  re-included (git does not look inside it either);
* a trailing `/` matches directories only;
* a pattern with a `/` at its start or in its middle is relative to the repository root;
  otherwise it matches a name at any depth;
* `*` matches anything but `/`, `?` one character but `/`, `[a-z]` / `[!a-z]` a class;
  `**/` at the start matches in every directory, `/**` at the end everything inside,
  `/**/` zero or more directories; a backslash makes the next character literal.

Paths are given relative to the repository root with `/` separators.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["IGNORE_FILE", "IgnoreRules"]

IGNORE_FILE = ".orksyncignore"


@dataclass(frozen=True, slots=True)
class _Rule:
    regex: re.Pattern[str]
    negated: bool
    dir_only: bool
    line: int
    text: str


def _class(pattern: str, start: int) -> tuple[str, int] | None:
    """The regex of the bracket expression at `start` and the index after it; None when
    it is not closed (the `[` is then literal, as git takes it)."""
    i = start + 1
    negate = i < len(pattern) and pattern[i] in "!^"
    if negate:
        i += 1
    body_start = i
    if i < len(pattern) and pattern[i] == "]":  # a leading ] is a member
        i += 1
    while i < len(pattern) and pattern[i] != "]":
        i += 1
    if i >= len(pattern):
        return None
    body = pattern[body_start:i].replace("\\", "\\\\").replace("^", "\\^")
    return f"[{'^' if negate else ''}{body}]", i + 1


def _translate(pattern: str) -> str:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        if pattern.startswith("**/", i) and (i == 0 or pattern[i - 1] == "/"):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("/**", i) and i + 3 == n:
            out.append("/.*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[":
            found = _class(pattern, i)
            if found is None:
                out.append(re.escape("["))
                i += 1
            else:
                out.append(found[0])
                i = found[1]
        elif pattern[i] == "\\" and i + 1 < n:
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return "".join(out)


def _strip_trailing_blanks(line: str) -> str:
    end = len(line)
    while end > 0 and line[end - 1] == " " and not (end > 1 and line[end - 2] == "\\"):
        end -= 1
    return line[:end]


class IgnoreRules:
    """The compiled patterns of one ignore file."""

    def __init__(self, text: str = "") -> None:
        self.rules: list[_Rule] = []
        for number, raw in enumerate(text.splitlines(), 1):
            line = _strip_trailing_blanks(raw.rstrip("\r"))
            if not line or line.startswith("#"):
                continue
            negated = line.startswith("!")
            if negated:
                line = line[1:]
            dir_only = line.endswith("/") and not line.endswith("\\/")
            if dir_only:
                line = line.rstrip("/")
            if not line:
                continue
            anchored = "/" in line
            body = _translate(line.lstrip("/") if anchored else line)
            regex = re.compile(("^" if anchored else "^(?:.*/)?") + body + "$", re.DOTALL)
            self.rules.append(_Rule(regex, negated, dir_only, number, raw.strip()))

    def __bool__(self) -> bool:
        return bool(self.rules)

    def _decide(self, path: str, is_dir: bool) -> bool:
        ignored = False
        for rule in self.rules:
            if rule.dir_only and not is_dir:
                continue
            if rule.regex.match(path):
                ignored = not rule.negated
        return ignored

    def ignored(self, path: str, *, is_dir: bool = False) -> bool:
        """Whether `path` (relative, `/`-separated) is left out: itself or a directory
        above it matches, last pattern deciding at each level."""
        parts = [p for p in path.split("/") if p]
        for depth in range(1, len(parts)):
            if self._decide("/".join(parts[:depth]), True):
                return True
        return self._decide("/".join(parts), is_dir)

    def filter(self, paths: Iterable[str]) -> list[str]:
        return [p for p in paths if not self.ignored(p)]
