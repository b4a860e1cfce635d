"""YAML in and out.

Loading: ruamel.yaml's safe loader (libyaml-backed when ruamel.yaml.clib is present; it
lives in orksync.yamls.parse, imported on first use, since the exact reader of orksync's own
output, `load_emitted`, needs no ruamel), with
duplicate keys refused and errors naming the file and line. Locating a field's line for an
error message re-reads the file with the round-trip loader, only when an error happens.
Only what JSON (and so the Kubernetes API) can hold is built: timestamps stay text, as
Kubernetes' own YAML reader keeps them; `!!binary`, `!!set`, `!!omap`, `!!pairs`, map keys
that are lists or maps, and integers longer than 100 digits are refused with their line.
Bounds: 4 MiB and 250,000 YAML nodes per file, 64 levels of nesting (checked on the
parser's events before libyaml's recursive composer runs), 2,000,000 nodes per document
counted as expanded (an alias counts as everything it stands for), alias cycles refused.

Dumping: a small deterministic emitter for the shapes manifests have (dict, list, str, int,
float, bool, None): block style, insertion order, strings quoted as JSON whenever a plain
scalar could be read back as something else. Same input, same bytes.
"""

from __future__ import annotations

import json
import json.decoder
import math
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from orksync.errors import LoadError
from orksync.yamls.doc import (
    MAX_DEPTH,
    MAX_INT_CHARS,
    PRESCAN_CHARS,
    Document,
)

MAX_FILE_BYTES = 4 * 1024 * 1024


def load_documents(path: Path, *, display: str | None = None) -> list[Document]:
    """Every non-empty document of a YAML file. Raises LoadError naming the file and line.

    A small file in the emitter's exact form (generated custom resources often are) is
    read by the exact reader, `load_emitted`, which gives what the safe loader would;
    any other file goes to the safe loader and its checks."""
    name = display or str(path)
    try:
        raw = read_file(path)
    except OSError as err:
        raise LoadError(f"cannot read: {err.strerror}", file=name) from err
    text = _text(raw, name)
    if len(text) <= PRESCAN_CHARS and not _LONG_INTEGER.search(text):
        # far below the safe loader's node bound (a key or scalar takes at least 2.5
        # characters of the emitter's form: at most about 52,000 nodes), no aliases (the
        # emitter writes none), no integer it would refuse, and deeper than MAX_DEPTH is
        # not taken: no check of the safe loader can fail on what the exact reader takes
        try:
            value = load_emitted(text)
        except NotEmitted:
            pass
        else:
            return [] if value is None else [Document(file=path, index=0, content=value)]
    return parse_documents(text, path=path, display=name)


def read_file(path: Path | str) -> bytes:
    """The whole file, in a few system calls: `Path.read_bytes` adds an fstat, an ioctl
    and an lseek, and an object or two, to each of the thousands of files a repository
    or a rendered directory holds."""
    fd = os.open(path, _READ)
    try:
        chunks = []
        while chunk := os.read(fd, _CHUNK):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


_READ = os.O_RDONLY | os.O_CLOEXEC
_CHUNK = 256 * 1024
_LONG_INTEGER = re.compile(f"[0-9]{{{MAX_INT_CHARS + 1}}}")


def load_document(raw: bytes, *, path: Path | str, display: str,
                  max_bytes: int = MAX_FILE_BYTES) -> Any:
    """The first document of a file already read. Files orksync wrote itself (the rendered
    directory) take the exact reader, `load_emitted`, which reads only the emitter's own
    form and so does much less work than the safe loader; anything else goes through the
    safe loader and its checks. `max_bytes`: a larger bound for a file orksync writes and
    that grows with the repository (the index of a rendered directory). `path` may be
    given as text: it is made a Path only for the safe loader (a rendered directory's
    thousand files need none)."""
    text = _text(raw, display, max_bytes)
    try:
        return load_emitted(text)
    except NotEmitted:
        pass
    docs = parse_documents(text, path=Path(path), display=display)
    if not docs:
        raise LoadError("no YAML document", file=display)
    return docs[0].content


def _text(raw: bytes, display: str, max_bytes: int = MAX_FILE_BYTES) -> str:
    if len(raw) > max_bytes:
        raise LoadError(f"file is {len(raw)} bytes, above the {max_bytes} limit",
                        file=display)
    if b"\x00" in raw:
        raise LoadError("binary file (contains NUL bytes), not YAML", file=display)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise LoadError(f"not UTF-8 text (byte {err.start})", file=display) from err


def parse_documents(text: str, *, path: Path, display: str) -> list[Document]:
    """Every non-empty document of `text` through the safe loader (orksync.yamls.parse,
    imported on first use: ruamel.yaml is not needed to read what orksync wrote)."""
    from orksync.yamls import parse as yamlparse

    return yamlparse.parse_documents(text, path=path, display=display)


def locate(path: Path, doc_index: int, field_path: Sequence[str | int]) -> int | None:
    """The 1-based line of a field inside a document, or of the nearest parent found
    (orksync.yamls.parse.locate). Only used to decorate error messages: never raises."""
    from orksync.yamls import parse as yamlparse

    return yamlparse.locate(path, doc_index, field_path)


def locator(path: Path, doc_index: int) -> Callable[[Sequence[str | int]], int | None]:
    """`locate` for many fields of one document, the file parsed once
    (orksync.yamls.parse.locator)."""
    from orksync.yamls import parse as yamlparse

    return yamlparse.locator(path, doc_index)


def split_path(path: str) -> list[str | int]:
    """`a.b[0].c` -> ["a", "b", 0, "c"] (for locating a field's line in its file)."""
    parts: list[str | int] = []
    for piece in path.split("."):
        name, *indexes = piece.split("[")
        if name:
            parts.append(name)
        parts.extend(int(i.rstrip("]")) for i in indexes if i.rstrip("]").isdigit())
    return parts


# --- dumping -------------------------------------------------------------------------------

# A plain (unquoted) scalar: starts with a letter, `_` or `/`; a colon only inside its first
# word and followed by a character of the word (`nginx:1.25`, `http://x`), never `: `
# and never at the end, where YAML would read a mapping; map keys never hold one (`_key`).
_PLAIN_SAFE = re.compile(
    r"[A-Za-z_/][A-Za-z0-9_./@+-]*(?::[A-Za-z0-9_./@+-]+)*(?: [A-Za-z0-9_./@+()-]+)*")
_RESERVED = re.compile(
    r"(?:y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF"
    r"|null|Null|NULL|~|\.inf|\.Inf|\.INF|\.nan|\.NaN|\.NAN|[-+]?\.(?:inf|Inf|INF))"
)


# Outside YAML's printable set (tab, LF, CR, x20-x7E, xA0-uD7FF, uE000-uFFFD,
# U00010000-U0010FFFF), or a line break to YAML 1.1 (NEL, LS, PS): escaped. Written as the
# complement's ranges: the negated class with the astral range is slow to compile, and
# it is compiled at the import of every command.
_NOT_PRINTABLE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufffe\uffff]")


def _quoted(text: str) -> str:
    """A YAML double-quoted scalar (JSON string syntax, which YAML reads the same)."""
    quoted = json.dumps(text, ensure_ascii=False)
    return _NOT_PRINTABLE.sub(_escape_char, quoted)


def _escape_char(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


# Short strings repeat across objects (keys, kinds, labels): their YAML form is cached.
# Bounded in entries and in length (long values rarely repeat); a race between threads at
# worst computes one twice.
_STR_CACHE: dict[str, str] = {}
_STR_CACHE_MAX = 65536
_STR_CACHE_LEN = 128


def _str_scalar(text: str) -> str:
    out = _STR_CACHE.get(text)
    if out is None:
        out = text if _PLAIN_SAFE.fullmatch(text) and not _RESERVED.fullmatch(text) else \
            _quoted(text)
        if len(text) <= _STR_CACHE_LEN:
            if len(_STR_CACHE) >= _STR_CACHE_MAX:
                _STR_CACHE.clear()
            _STR_CACHE[text] = out
    return out


def _scalar(value: Any) -> str:
    if type(value) is str:
        return _str_scalar(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        text = repr(value)
        return text if ("." in text or "e" in text or "n" in text) else text + ".0"
    return _str_scalar(str(value))


def _key(key: Any) -> str:
    """A map key: as a scalar, but quoted when it holds a colon (a reader finds a plain
    key's end at its first colon)."""
    out = _KEY_CACHE.get(key)
    if out is None:
        text = key if type(key) is str else str(key)
        out = _str_scalar(text)
        if ":" in out and out[0] != '"':
            out = _quoted(text)
        if type(key) is str and len(key) <= _STR_CACHE_LEN:
            if len(_KEY_CACHE) >= _STR_CACHE_MAX:
                _KEY_CACHE.clear()
            _KEY_CACHE[key] = out
    return out


_KEY_CACHE: dict[str, str] = {}  # keys repeat even more than values


# types that are never a Mapping: decided without `isinstance(value, Mapping)`, an ABC check
# that goes through a Python-level __instancecheck__ (most leaves of a manifest are these)
_NOT_MAPS = frozenset({str, list, int, bool, float, type(None)})


def _is_map(value: Any) -> bool:
    kind = type(value)
    return kind is dict or (kind not in _NOT_MAPS and isinstance(value, Mapping))


def _emit(value: Any, pad: str, out: list[str]) -> None:
    if _is_map(value):
        _emit_map(value, pad, pad, out)
    elif isinstance(value, list):
        _emit_list(value, pad, out)
    else:
        out.append(f"{pad}{_inline(value)}\n")


def _emit_map(value: Mapping[Any, Any], pad: str, lead: str, out: list[str]) -> None:
    """Block mapping at `pad`; its first line starts with `lead` instead (`- ` when the
    mapping is a list item)."""
    inner = pad + "  "
    for k, v in value.items():
        if type(v) is str:  # most values: straight to the line
            out.append(f"{lead}{_key(k)}: {_str_scalar(v)}\n")
        elif type(v) is list or isinstance(v, list):
            out.append(f"{lead}{_key(k)}:\n" if v else f"{lead}{_key(k)}: []\n")
            if v:
                _emit_list(v, pad, out)
        elif _is_map(v):
            out.append(f"{lead}{_key(k)}:\n" if v else f"{lead}{_key(k)}: {{}}\n")
            if v:
                _emit_map(v, inner, inner, out)
        else:
            out.append(f"{lead}{_key(k)}: {_scalar(v)}\n")
        lead = pad


def _emit_list(value: list[Any], pad: str, out: list[str]) -> None:
    inner = pad + "  "
    item_lead = pad + "- "
    for item in value:
        if type(item) is list or isinstance(item, list):
            if item:
                out.append(f"{pad}-\n")
                _emit_list(item, inner, out)
            else:
                out.append(f"{item_lead}[]\n")
        elif _is_map(item):
            if item:
                _emit_map(item, inner, item_lead, out)
            else:
                out.append(f"{item_lead}{{}}\n")
        else:
            out.append(f"{item_lead}{_scalar(item)}\n")


def _inline(value: Any) -> str:
    if _is_map(value):
        return "{}"
    if isinstance(value, list):
        return "[]"
    return _scalar(value)


def dump_yaml(value: Any, *, indent: str = "") -> str:
    """One YAML document (no leading `---`), deterministic for the same input. `indent`:
    every line starts with it (a mapping's lines as they are inside a larger document,
    for writers that assemble one from pieces)."""
    out: list[str] = []
    _emit(value, indent, out)
    return "".join(out)


def dump_scalar(value: Any) -> str:
    """A scalar as `dump_yaml` writes it (for writers that assemble a large document from
    pieces, such as the rendered directory's index)."""
    return _scalar(value)


def dump_all(values: Sequence[Any]) -> str:
    return "---\n".join(dump_yaml(v) for v in values)


# --- reading back what dump_yaml wrote --------------------------------------------------


class NotEmitted(ValueError):
    """The text is not exactly what `dump_yaml` writes for any value."""


_INT = re.compile(r"-?[0-9]+")
_scanstring: Any = json.decoder.scanstring  # type: ignore[attr-defined]  # C, no stub
_WORDS: dict[str, Any] = {"null": None, "true": True, "false": False, ".nan": math.nan,
                          ".inf": math.inf, "-.inf": -math.inf}


def load_emitted(text: str) -> Any:
    """The value `dump_yaml` wrote as `text`, or NotEmitted.

    A strict reader of the emitter's own form: the emitter's line shapes and indentation
    only, every key and scalar in the one spelling the emitter gives its value (checked
    token by token), no blank line, a final line break. So `text` is exactly
    `dump_yaml(value)` (tests/foundations/test_yamlio.py checks this on edited texts too), and since
    the safe loader reads `dump_yaml(v)` as `v` (the round-trip property tested there),
    the result is what the safe loader would return. Any other text (a hand edit, another
    emitter) raises NotEmitted, and goes to the safe loader."""
    if not text.endswith("\n"):
        raise NotEmitted("no final line break")
    if _BLANK_LINE.search(text, 0, len(text) - 1):
        raise NotEmitted("blank line")  # the emitter writes none
    lines = text.split("\n")
    lines.pop()
    try:
        return _Reader(lines).document()
    except IndexError:  # a line cut short where the emitter would have written more
        raise NotEmitted("truncated line") from None


_BLANK_LINE = re.compile(r"^ *$", re.MULTILINE)  # empty, or spaces only


class _Reader:
    """`lines`: none of them blank (load_emitted checks)."""

    __slots__ = ("indents", "lines", "pos")

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.indents = [len(line) - len(line.lstrip(" ")) for line in lines]
        self.pos = 0

    def document(self) -> Any:
        first = self.lines[0] if self.lines else ""
        if first.startswith("-"):
            value: Any = self.seq(0, 0)
        elif ": " in first or first.endswith(":"):
            value = self.map(0, 0)
        else:
            value = _token(first)
            self.pos = 1
        if self.pos != len(self.lines):
            raise NotEmitted(f"line {self.pos + 1}")
        return value

    def map(self, indent: int, depth: int) -> dict[str, Any]:
        if depth > MAX_DEPTH:
            raise NotEmitted("too deep")
        out: dict[str, Any] = {}
        lines, indents = self.lines, self.indents
        while self.pos < len(lines) and indents[self.pos] == indent:
            line = lines[self.pos]
            if line[indent] == '"':
                key, end = _scan(line, indent + 1)
            else:
                end = line.find(":", indent)
                key = line[indent:end]
            if end < 0 or line[end:end + 1] != ":" or key in out or \
                    _key(key) != line[indent:end]:
                raise NotEmitted(f"line {self.pos + 1}")
            rest = line[end + 1:]
            self.pos += 1
            if rest[:1] == " ":
                out[key] = _token(rest[1:])
            elif rest or self.pos >= len(lines):
                raise NotEmitted(f"line {self.pos}")
            elif indents[self.pos] == indent and lines[self.pos][indent] == "-":
                out[key] = self.seq(indent, depth + 1)
            elif indents[self.pos] == indent + 2:
                out[key] = self.map(indent + 2, depth + 1)
            else:
                raise NotEmitted(f"line {self.pos + 1}")
        return out

    def seq(self, indent: int, depth: int) -> list[Any]:
        if depth > MAX_DEPTH:
            raise NotEmitted("too deep")
        out: list[Any] = []
        lines, indents = self.lines, self.indents
        while self.pos < len(lines) and indents[self.pos] == indent and \
                lines[self.pos][indent] == "-":
            line = lines[self.pos]
            rest = line[indent + 1:]
            if not rest:  # `-` alone: a list inside the list, never an empty one
                self.pos += 1
                inner = self.seq(indent + 2, depth + 1)
                if not inner:
                    raise NotEmitted(f"line {self.pos}")
                out.append(inner)
                continue
            if rest[0] != " " or rest[1:2] in ("", " "):
                raise NotEmitted(f"line {self.pos + 1}")
            item = rest[1:]
            if _starts_key(item):  # `- key: ...`: a mapping whose first line is this one
                lines[self.pos] = " " * (indent + 2) + item
                indents[self.pos] = indent + 2
                out.append(self.map(indent + 2, depth + 1))
            else:
                out.append(_token(item))
                self.pos += 1
        return out


def _starts_key(text: str) -> bool:
    if text[0] == '"':
        _, end = _scan(text, 1)
        return text[end:end + 1] == ":"
    # a plain scalar holds no `: ` and does not end with a colon; a plain key ends at one
    return ": " in text or text.endswith(":")


def _scan(text: str, start: int) -> tuple[str, int]:
    """A double-quoted scalar (JSON string syntax) from after its opening quote."""
    try:
        value, end = _scanstring(text, start)
    except ValueError as err:
        raise NotEmitted(str(err)) from None
    if "\\u" in text and any("\ud800" <= ch <= "\udfff" for ch in value):
        raise NotEmitted("lone surrogate")  # left to the safe loader
    return value, end


def _token(text: str) -> Any:
    """One scalar (or `{}`, `[]`), accepted only in the spelling the emitter gives it."""
    first = text[:1]
    if first == '"':
        value, end = _scan(text, 1)
        if end != len(text) or _str_scalar(value) != text:
            raise NotEmitted(text)
        return value
    if text == "{}":
        return {}
    if text == "[]":
        return []
    if text in _WORDS:
        return _WORDS[text]
    if first and first in "-0123456789":
        number: int | float
        if _INT.fullmatch(text):
            number = int(text)
        else:
            try:
                number = float(text)
            except ValueError:
                raise NotEmitted(text) from None
        if _scalar(number) != text:
            raise NotEmitted(text)
        return number
    if _str_scalar(text) != text:
        raise NotEmitted(text)
    return text


def iter_yaml_files(root: Path, *, resolve_links: bool = False,
                    skip: Callable[[str, bool], bool] | None = None) -> Iterator[Path]:
    """Every *.yaml / *.yml file under root, sorted, skipping hidden files and directories
    (never entered: a checkout's .git holds thousands of files) and not entering symbolic
    links to directories. `resolve_links`: a file that is a symbolic link is given
    resolved (the listing says which are: no system call for the others). `skip(relative
    path, is a directory)`: True leaves the entry out (a directory is not entered), as the
    repository's ignore file says (orksync.katalog.loader.ignore); the path is `/`-separated."""
    found: list[str] = []
    links: set[str] = set()
    top = os.fspath(root)
    pending = [top]
    while pending:  # the directory entries' types come with the listing: no stat per file
        try:
            entries = list(os.scandir(pending.pop()))
        except OSError:  # unreadable: skipped, as os.walk does
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            is_dir = entry.is_dir(follow_symlinks=False)
            if skip is not None and skip(
                    os.path.relpath(entry.path, top).replace(os.sep, "/"), is_dir):
                continue
            if is_dir:
                pending.append(entry.path)
            elif entry.name.endswith((".yaml", ".yml")) and entry.is_file():
                found.append(entry.path)
                if resolve_links and entry.is_symlink():
                    links.add(entry.path)
    found.sort(key=lambda path: path.split(os.sep))  # the order of the Paths' parts
    for path in found:
        yield Path(path).resolve() if path in links else Path(path)
