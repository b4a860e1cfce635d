"""A CRD entry in the grouped layout of Orkestra v0.7.18 (`operatorBox.observe`,
`preReconcile`, `runtime`, `reconcile`, `emit`; the entry's `admission`) brought to the
flat layout the rest of orksync reads, and the `include:` of its blocks resolved. Pure
over the file system: reads the included files under the repository root.

Where each grouped key goes is the table's (`orksync.katalog.keys`, `moves_to`), so the
two layouts load the same entry. A setting written in both (`runtime.allowedNamespaces`
and `allowedNamespaces`) is an error naming both places. A grouped key with no flat
spelling (`runtime.cleanup`, `reconcile.remote`, `emit.events`) stays where it is: the
table warned about it or refused it already.

`include:` (Orkestra's pkg/types/includes.go): a block's `include: <file>` names a file,
relative to the file holding the include, inside the repository; its `<key>:` list is put
before the block's own (status `fields`, validation and mutation `rules`), or, for the
reconciler, its `reconciler:` map fills what the block does not set. An included file may
include again (relative to itself); a cycle is refused with its chain. The included file
holds only that key (and `include`): anything else is an unknown field, as in Orkestra's
strict parse.
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from orksync.errors import LoadError
from orksync.katalog.keys import ADMISSION, OPERATOR_BOX, Key
from orksync.yamls.io import load_documents

__all__ = ["Flattened", "flatten", "read_include", "resolve_includes"]

Problem = tuple[list[str | int], str]  # (field path from the entry, message)


class Flattened:
    """The flat entry, its problems, and where each moved setting was written."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw
        self.problems: list[Problem] = []
        self.moved: dict[tuple[str, ...], tuple[str, ...]] = {}  # flat path -> grouped

    def written_at(self, path: list[str | int]) -> list[str | int]:
        """`path` (entry-relative, flat) as written in the file: its grouped spelling
        when it was moved there."""
        for flat, grouped in self.moved.items():
            if tuple(path[:len(flat)]) == flat:
                return [*grouped, *path[len(flat):]]
        return path


def _groups() -> list[tuple[tuple[str, ...], Key]]:
    """(grouped path from the entry, the group's Key) for every group of the table."""
    groups: list[tuple[tuple[str, ...], Key]] = [(("admission",), ADMISSION)]
    for name, key in (OPERATOR_BOX.children or {}).items():
        if key.children and any(c.moves_to for c in key.children.values()):
            groups.append((("operatorBox", name), key))
    return groups


_GROUPS = _groups()


def flatten(entry: Mapping[str, Any]) -> Flattened:
    """The entry in the flat layout (a copy when anything moved; `entry` is not
    changed)."""
    present = [(path, key) for path, key in _GROUPS if isinstance(get_in(entry, path), Mapping)]
    if not present:
        return Flattened(dict(entry))
    out = Flattened(copy.deepcopy(dict(entry)))
    for path, key in present:
        group = get_in(out.raw, path)
        assert isinstance(group, dict)
        for name in list(group):
            child = (key.children or {}).get(str(name))
            if child is None or not child.moves_to:
                continue  # unknown (reported by the table) or grouped-only
            target = child.moves_to
            if get_in(out.raw, target) is not None:
                out.problems.append(([*path, str(name)], (
                    f"set twice: here and at {'.'.join(target)} (the flat layout); "
                    "write it once")))
                continue
            try:
                _put(out.raw, target, group.pop(name))
            except TypeError as err:
                out.problems.append(([*target[:target.index(str(err)) + 1]],
                                     "must be a map"))
                continue
            out.moved[target] = (*path, str(name))
        if not group:
            _pop(out.raw, path)
    return out


# (flat place of a block, the key its included file holds, how the two merge)
INCLUDES: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (("validation",), "rules", "prepend"),
    (("mutation",), "rules", "prepend"),
    (("operatorBox", "validation"), "rules", "prepend"),
    (("operatorBox", "mutation"), "rules", "prepend"),
    (("operatorBox", "status"), "fields", "prepend"),
    (("operatorBox", "reconciler"), "reconciler", "fill"),
)


def resolve_includes(flat: Flattened, file: Path, root: Path) -> None:
    """Resolve the `include:` of every block of INCLUDES in `flat.raw` (in place; the
    entry was copied by `flatten` when needed, else copied here per block)."""
    for place, content_key, how in INCLUDES:
        block = get_in(flat.raw, place)
        if not isinstance(block, Mapping) or "include" not in block:
            continue
        where = flat.written_at([*place, "include"])
        merged = dict(block)
        ref = merged.pop("include")
        included, problem = read_include(ref, file, root, content_key)
        if problem:
            flat.problems.append((where, problem))
            continue
        if how == "prepend":
            own = merged.get(content_key)
            if own is not None and not isinstance(own, list):
                continue  # a wrong type is reported where the block is read
            merged[content_key] = [*(included or []), *(own or [])]
        else:
            for key, value in (included or {}).items():
                merged.setdefault(key, value)
        _put(flat.raw, place, merged, replace=True)


# included files whose key holds a map (the reconciler's settings, a Katalog's profiles by
# class); every other one holds a list
_MAP_INCLUDES = ("reconciler", "profiles")


def read_include(ref: Any, file: Path, root: Path, content_key: str,
                 chain: Sequence[Path] = ()) -> tuple[Any, str]:
    """The `content_key` value of the file `ref` names (relative to `file`), its own
    include resolved: (the content, "") or (None, the problem)."""
    if not isinstance(ref, str) or not ref:
        return None, "include must be a file path (a string)"
    target = (file.parent / ref).resolve()
    shown = [*chain, file]
    if not target.is_relative_to(root):
        return None, f"include {ref!r} points outside the repository"
    if target in shown:
        names = " -> ".join(_rel(p, root) for p in [*shown, target])
        return None, f"include cycle: {names}"
    if not target.is_file():
        return None, f"include {ref!r}: file does not exist"
    try:
        docs = load_documents(target, display=_rel(target, root))
    except LoadError as err:
        return None, f"include {ref!r}: {err}"
    if len(docs) != 1 or not isinstance(docs[0].content, Mapping):
        return None, f"include {ref!r} must hold one map with {content_key}:"
    content = docs[0].content
    for key in content:
        if key not in (content_key, "include"):
            near = difflib.get_close_matches(str(key), [content_key, "include"], n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            return None, (f"include {ref!r}: unknown field {key!r}{hint}: the file holds "
                          f"{content_key}: (and optionally include:)")
    value = content.get(content_key)
    if "include" in content:
        inner, problem = read_include(content["include"], target, root, content_key, shown)
        if problem:
            return None, f"in {_rel(target, root)}: {problem}"
        if isinstance(value, list) or value is None:
            value = [*(inner or []), *(value or [])]
        elif isinstance(value, Mapping) and isinstance(inner, Mapping):
            value = {**inner, **value}
    if content_key in _MAP_INCLUDES:
        if value is not None and not isinstance(value, Mapping):
            return None, f"include {ref!r}: {content_key} must be a map"
    elif value is not None and not isinstance(value, list):
        return None, f"include {ref!r}: {content_key} must be a list"
    return value, ""


def _rel(path: Path, root: Path) -> str:
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def get_in(node: Any, path: tuple[str, ...]) -> Any:
    """The value at `path` inside nested maps, None where a step is missing or not a map
    (a Katalog as parsed: nothing is assumed about its shape)."""
    for step in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(step)
    return node


def _put(node: dict[str, Any], path: tuple[str, ...], value: Any, *,
         replace: bool = False) -> None:
    for step in path[:-1]:
        nxt = node.get(step)
        if nxt is not None and not isinstance(nxt, Mapping):
            raise TypeError(step)
        if not isinstance(nxt, dict):
            nxt = node[step] = dict(nxt or {})
        elif replace:
            nxt = node[step] = dict(nxt)
        node = nxt
    node[path[-1]] = value


def _pop(node: dict[str, Any], path: tuple[str, ...]) -> None:
    parent = get_in(node, path[:-1]) if len(path) > 1 else node
    if isinstance(parent, dict):
        parent.pop(path[-1], None)
