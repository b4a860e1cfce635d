"""A YAML document as loaded, and the bounds every YAML loader of orksync checks (the safe
loader in orksync.yamls.parse, the exact reader in orksync.yamls.io): size, depth, nodes once
aliases are expanded, alias bombs. Pure."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orksync.errors import LoadError

MAX_DEPTH = 64
MAX_NODES = 2_000_000  # per document, aliases expanded
MAX_FILE_NODES = 250_000  # per file, as written (parsing costs time and memory per node)
PRESCAN_CHARS = 128 * 1024  # smaller texts cannot hold MAX_FILE_NODES nodes
MAX_INT_CHARS = 100


@dataclass(frozen=True, slots=True, kw_only=True)
class Document:
    """One YAML document of a file: its decoded content and position in the file."""

    file: Path
    index: int  # 0-based position among the file's documents
    content: Any


def document_identity(content: Any, kind: str = "") -> str:
    """`Kind/ns/name` of a document for a message, `?` for what is missing or not text."""
    meta = content.get("metadata") if isinstance(content, Mapping) else None
    meta = meta if isinstance(meta, Mapping) else {}
    found = content.get("kind") if isinstance(content, Mapping) else None
    parts = [kind or found, meta.get("namespace"), meta.get("name")]
    text = [p if isinstance(p, str) and p else "?" for p in parts]
    return "/".join(text if text[1] != "?" else [text[0], text[2]])


def _refuse_alias_bombs(text: str, display: str) -> None:
    # Manifests and Katalogs have no need for anchors en masse; a document with many
    # aliases is either a mistake or an expansion bomb. Refuse before decoding.
    if text.count("*") > 64 and len(re.findall(r"(?:^|[\s\[,{:-])\*[^\s,\]}]+", text)) > 64:
        raise LoadError("more than 64 YAML aliases: refused (alias expansion bomb?)",
                        file=display)


# Block nesting grows by at least one indentation column, indicator (`- `, `? `, `: `) or
# node property (`&a `, `!t `) at the start of a line; flow nesting by a `[` or `{`.
_DEEP_LINE = re.compile(r"^(?:[ \t]|[-?:][ \t]|[&!][^\s]*[ \t]){500,}", re.MULTILINE)


def _could_be_deep(text: str) -> bool:
    """Cheap and conservative: False guarantees nesting well under the depth at which
    libyaml's recursive composer overflows the C stack (about 20,000 levels)."""
    return text.count("[") + text.count("{") > 2000 or _DEEP_LINE.search(text) is not None


def _check_size(value: Any, display: str, index: int) -> None:
    """Refuse a document nested deeper than MAX_DEPTH or larger than MAX_NODES once its
    aliases are expanded. Aliases share one Python object, so sizes and heights are
    memoized by identity: the walk is linear in the text even for an expansion bomb."""
    if not isinstance(value, dict | list):
        return
    where = f"document {index + 1}: " if index else ""
    size: dict[int, int] = {}
    height: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Any, int, bool]] = [(value, 0, False)]
    while stack:
        item, depth, done = stack.pop()
        key = id(item)
        children = [c for c in (item.values() if isinstance(item, dict) else item)
                    if isinstance(c, dict | list)]
        if done:
            on_path.discard(key)
            size[key] = 1 + len(item) + sum(size[id(c)] - 1 for c in children)
            height[key] = 1 + max((height[id(c)] for c in children), default=0)
            if size[key] > MAX_NODES:
                raise LoadError(f"{where}more than {MAX_NODES:,} nodes once its aliases are "
                                "expanded", file=display)
            continue
        if key in size:
            if depth + height[key] > MAX_DEPTH + 1:
                raise LoadError(f"{where}nested deeper than {MAX_DEPTH} levels", file=display)
            continue
        if key in on_path:
            raise LoadError(f"{where}an alias refers to a node that contains it (a cycle)",
                            file=display)
        if depth > MAX_DEPTH:
            raise LoadError(f"{where}nested deeper than {MAX_DEPTH} levels", file=display)
        on_path.add(key)
        stack.append((item, depth, True))
        stack.extend((c, depth + 1, False) for c in children)


def dotted(fields: Iterable[str | int]) -> str:
    """["spec", "crds", 0, "name"] -> `spec.crds[0].name` (the field path in messages)."""
    out = ""
    for f in fields:
        out += f"[{f}]" if isinstance(f, int) else (f".{f}" if out else str(f))
    return out
