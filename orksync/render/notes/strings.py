"""String notes. Argument order is Go's `strings` package order — the subject string
first — which is how Orkestra's notes and Katalogs use them
(`{{ hasPrefix .spec.image "gcr.io/" }}`, `{{ replace .spec.domain "." "-" }}`,
`{{ join .spec.hosts ", " }}`). This is the reverse of sprig, where the subject comes
last for pipelining; `{{ .spec.image | hasPrefix "gcr.io/" }}` therefore tests whether
"gcr.io/" starts with the image.

Pure. No I/O, clock and randomness injected. Arguments are lenient: a non-string is
converted with Go's %v (nil → ""). Lengths count characters (Go counts bytes: they differ
only for non-ASCII text).

| Function | Signature | Meaning |
|---|---|---|
| `toLower` | `toLower s` | s in lower case |
| `toUpper` | `toUpper s` | s in upper case |
| `trimSpace` | `trimSpace s` | s without leading/trailing white space |
| `trim` | `trim s cutset` | s without leading/trailing characters that appear in cutset |
| `trimPrefix` | `trimPrefix s prefix` | s without prefix, when it starts with it |
| `trimSuffix` | `trimSuffix s suffix` | s without suffix, when it ends with it |
| `hasPrefix` | `hasPrefix s prefix` | whether s starts with prefix |
| `hasSuffix` | `hasSuffix s suffix` | whether s ends with suffix |
| `contains` | `contains s substr` | whether substr occurs in s |
| `replace` | `replace s old new` | s with every old replaced by new (strings.ReplaceAll) |
| `split` | `split s sep` | parts of s around sep (strings.Split) |
| `join` | `join list sep` | the elements (%v, nil → "") joined with sep |
| `concat` | `concat s...` | all arguments joined with no separator |
| `repeat` | `repeat s n` | s repeated n times (n < 0 is an error) |
| `camelToKebab` | `camelToKebab s` | `HTTPServer` → `http-server` |
| `truncate` | `truncate s n` | s when at most n characters, else its first n characters + `...` |
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from orksync.render.notes._common import Note, NoteError, to_int, to_str


def _trim_space(s: Any) -> str:
    return to_str(s).strip()


def _trim(s: Any, cutset: Any) -> str:
    return to_str(s).strip(to_str(cutset)) if to_str(cutset) else to_str(s)


def _trim_prefix(s: Any, prefix: Any) -> str:
    return to_str(s).removeprefix(to_str(prefix))


def _trim_suffix(s: Any, suffix: Any) -> str:
    return to_str(s).removesuffix(to_str(suffix))


def _split(s: Any, sep: Any) -> list[str]:
    text, separator = to_str(s), to_str(sep)
    if separator == "":
        return list(text)
    return text.split(separator)


def _join(items: Any, sep: Any) -> str:
    if items is None:
        return ""
    if isinstance(items, str):
        return items
    if isinstance(items, Mapping) or not isinstance(items, Sequence):
        raise NoteError(f"join: expected a list, got {type(items).__name__}")
    return to_str(sep).join(to_str(item) for item in items)


def _concat(*parts: Any) -> str:
    return "".join(to_str(p) for p in parts)


def _repeat(s: Any, n: Any) -> str:
    count = to_int(n, "repeat")
    if count < 0:
        raise NoteError(f"repeat: negative count {count}")
    if count * len(to_str(s)) > 1 << 20:
        raise NoteError("repeat: result longer than 1 MiB")
    return to_str(s) * count


_KEBAB_1 = re.compile(r"([A-Z]+)([A-Z][a-z])")
_KEBAB_2 = re.compile(r"([a-z0-9])([A-Z])")


def _camel_to_kebab(s: Any) -> str:
    text = _KEBAB_1.sub(r"\1-\2", to_str(s))
    text = _KEBAB_2.sub(r"\1-\2", text)
    return re.sub(r"[\s_]+", "-", text).lower()


def _truncate(s: Any, n: Any) -> str:
    text, limit = to_str(s), to_int(n, "truncate")
    if limit < 0:
        raise NoteError(f"truncate: negative length {limit}")
    return text if len(text) <= limit else text[:limit] + "..."


def notes() -> dict[str, Note]:
    return {
        "toLower": lambda s: to_str(s).lower(),
        "toUpper": lambda s: to_str(s).upper(),
        "trimSpace": _trim_space,
        "trim": _trim,
        "trimPrefix": _trim_prefix,
        "trimSuffix": _trim_suffix,
        "hasPrefix": lambda s, prefix: to_str(s).startswith(to_str(prefix)),
        "hasSuffix": lambda s, suffix: to_str(s).endswith(to_str(suffix)),
        "contains": lambda s, substr: to_str(substr) in to_str(s),
        "replace": lambda s, old, new: to_str(s).replace(to_str(old), to_str(new)),
        "split": _split,
        "join": _join,
        "concat": _concat,
        "repeat": _repeat,
        "camelToKebab": _camel_to_kebab,
        "truncate": _truncate,
    }
