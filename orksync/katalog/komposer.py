"""A Komposer: the Katalogs it imports from the repository and its `spec.crds` overrides
merged into their entries as Orkestra's merger does. Pure over the file system
(docs/katalog-semantics.md#komposers)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

__all__ = ["MERGED_FIELDS", "file_problem", "import_refs", "merge_entry"]

Path_ = tuple[str, ...]  # a field path inside a flat-layout CRD entry

# What Orkestra's mergeCRDEntry takes from an override, in the flat layout (the grouped
# spellings are brought here by orksync.katalog.layout.flatten first). Every other key an
# override sets is not merged: the imported entry's own value stays (a warning says so).
_REPLACED: tuple[Path_, ...] = (
    ("crdFile",), ("namespace",), ("dependsOn",),
    ("operatorBox", "onCreate"), ("operatorBox", "onReconcile"), ("operatorBox", "onDelete"),
    ("operatorBox", "reconciler", "hooks"), ("operatorBox", "reconciler", "constructor"),
    ("operatorBox", "reconciler", "workers"), ("operatorBox", "reconciler", "resync"),
    ("operatorBox", "reconciler", "queue"),
    ("workers",), ("resync",), ("queue",),
    ("operatorBox", "status"), ("validation",), ("mutation",), ("conversion",),
    ("endpoints",),
)
_ADDED: tuple[Path_, ...] = (("allowedNamespaces",), ("restrictedNamespaces",),
                             ("operatorBox", "finalizers"))
# apiTypes replaces the entry's whole when it names a kind; enabled only when false;
# deletionProtection key by key
MERGED_FIELDS: tuple[str, ...] = (
    "apiTypes (when it names a kind, whole; a crdFile without it drops the imported "
    "entry's kind, group, version and plural: the CRD file wins)", "enabled (false only)",
    *(".".join(p) for p in _REPLACED), "deletionProtection (key by key)",
    *(".".join(p) + " (added to)" for p in _ADDED))


def merge_entry(base: Mapping[str, Any], override: Mapping[str, Any]
                ) -> tuple[dict[str, Any], list[Path_], list[Path_]]:
    """`base` (an imported entry, flat layout) with `override` (the Komposer's entry of the
    same name, flat layout) merged in as Orkestra merges it: (the merged entry, the paths
    whose value the override gave, the paths of the override's settings that Orkestra
    does not merge)."""
    out, override = _box_named(copy.deepcopy(dict(base))), _box_named(override)
    taken: set[Path_] = set()
    api = override.get("apiTypes")
    if isinstance(api, Mapping) and api.get("kind"):
        out["apiTypes"] = copy.deepcopy(dict(api))
        taken.add(("apiTypes",))
    own_api = out.get("apiTypes")
    if override.get("crdFile") and ("apiTypes",) not in taken and \
            isinstance(own_api, Mapping):
        # the override's CRD file wins: the kind, group, version and plural come from it
        kept = {k: v for k, v in own_api.items()
                if k not in ("group", "version", "kind", "plural")}
        if kept:
            out["apiTypes"] = kept
        else:
            out.pop("apiTypes")
    if override.get("enabled") is False:
        out["enabled"] = False
        taken.add(("enabled",))
    for path in _REPLACED:
        value = _get(override, path)
        if value is not None and value != {} and value != []:
            _set(out, path, copy.deepcopy(value))
            taken.add(path)
    for path in _ADDED:
        value = _get(override, path)
        if isinstance(value, list) and value:
            own = _get(out, path)
            merged = list(own) if isinstance(own, list) else []
            merged.extend(v for v in value if v not in merged)
            _set(out, path, merged)
            taken.add(path)
    protection = override.get("deletionProtection")
    if isinstance(protection, Mapping) and protection:
        own = out.get("deletionProtection")
        out["deletionProtection"] = {**(own if isinstance(own, Mapping) else {}),
                                     **copy.deepcopy(dict(protection))}
        taken.add(("deletionProtection",))
    return out, sorted(taken), [p for p in _unmerged(override, (), taken)
                                if p not in _NAME_ONLY]


def _box_named(entry: Mapping[str, Any]) -> dict[str, Any]:
    """`entry` with its operator box under `operatorBox` (the orksync.konductor.io/v1Alpha
    era names it `reconciler` at the entry level)."""
    out = dict(entry)
    if "operatorBox" not in out and isinstance(out.get("reconciler"), Mapping):
        out["operatorBox"] = out.pop("reconciler")
    return out


# an override's key that names it and nothing else (the early list form's `name:`)
_NAME_ONLY: frozenset[Path_] = frozenset({("name",)})


def add_guard(entry: dict[str, Any], guard: Mapping[str, Any]) -> None:
    """Add a Komposer's `security.namespaceProtection` lists to a composed entry (flat
    layout, in place): Orkestra merges them into every entry, additively."""
    for name in ("allowedNamespaces", "restrictedNamespaces"):
        extra = guard.get(name)
        if isinstance(extra, list) and extra:
            own = entry.get(name)
            merged = list(own) if isinstance(own, list) else []
            merged.extend(v for v in extra if v not in merged)
            entry[name] = merged


def import_refs(imports: Any) -> list[tuple[int, Any]]:
    """(index, what it names) of each `imports.files` item: a path string, or the `url`
    of `{url, auth}`."""
    files = imports.get("files") if isinstance(imports, Mapping) else None
    if not isinstance(files, list):
        return []
    return [(i, item.get("url") if isinstance(item, Mapping) else item)
            for i, item in enumerate(files)]


def file_problem(ref: Any) -> str:
    """Why an `imports.files` item cannot be read from the repository, or ""."""
    if not isinstance(ref, str) or not ref:
        return "must be a file path (a string, or {url: <path>})"
    if "://" in ref or ref.startswith(("http:", "https:")):
        return ("not supported by orksync: a remote Katalog needs a download while "
                "loading; a render reads the repository only (vendor the Katalog into it)")
    if "$" in ref:
        return ("not supported by orksync: a $VARIABLE reference reads the environment of "
                "Orkestra's process; a render from Git is the same everywhere (name the "
                "file)")
    return ""


def _unmerged(node: Mapping[str, Any], path: Path_, taken: set[Path_]) -> list[Path_]:
    """The paths of the keys of `node` (at `path`) that no taken path covers: a key on
    the way to a taken one is looked into, any other is named whole."""
    out: list[Path_] = []
    for key, value in node.items():
        here = (*path, str(key))
        if any(here[:len(t)] == t for t in taken):
            continue
        if isinstance(value, Mapping) and any(t[:len(here)] == here for t in taken):
            out.extend(_unmerged(value, here, taken))
        else:
            out.append(here)
    return out


def _get(node: Any, path: Path_) -> Any:
    for step in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(step)
    return node


def _set(node: dict[str, Any], path: Path_, value: Any) -> None:
    for step in path[:-1]:
        nxt = node.get(step)
        if not isinstance(nxt, dict):
            nxt = node[step] = dict(nxt) if isinstance(nxt, Mapping) else {}
        node = nxt
    node[path[-1]] = value
