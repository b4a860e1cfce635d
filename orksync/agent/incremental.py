"""Which custom resources a new revision changes: the agent renders and applies only those
(a scoped sync, orksync.sync.Scope) instead of the whole repository. Pure.

A custom resource's inputs from Git are its body, its Katalog entry (motifs and profiles
expanded into it by the loader), its Katalog's notes, profiles and dialect, and the
bodies of the custom resources its entry cross-reads (`.cross`: their `metadata` and
`spec` come from Git). A custom resource is rendered again when any of these changed.
Everything else a revision can change reaches beyond single custom resources, so the
revision gets a full reconcile (None): a custom resource added or removed (prune,
teardown), a CRD or plain manifest changed, a Katalog added, removed or renamed, an
entry's `dependsOn` (it orders custom resources of other entries), load errors or
warnings (reported, and a render with errors prunes nothing), or custom resources left
out by their Katalog's selection.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orksync.katalog.model import Catalog, CrdEntry, Katalog, Source
from orksync.model import ObjRef

__all__ = ["changed_custom_resources", "cross_readers"]

_NOWHERE = Source(file="", path=Path())


def changed_custom_resources(old: Catalog, new: Catalog) -> frozenset[ObjRef] | None:
    """The custom resources of `new` whose inputs differ from `old`'s (module doc), or
    None when the revision needs a full reconcile."""
    if new.errors or old.errors or new.warnings != old.warnings or \
            new.left_out or old.left_out:
        return None
    if [m.body for m in old.crds] != [m.body for m in new.crds] or \
            [(m.ref, m.body) for m in old.plain] != [(m.ref, m.body) for m in new.plain]:
        return None
    if [k.name for k in old.katalogs] != [k.name for k in new.katalogs]:
        return None
    before = {cr.ref: cr for cr in old.crs}
    if before.keys() != {cr.ref for cr in new.crs} or \
            [cr.ref for cr in old.crs] != [cr.ref for cr in new.crs]:
        return None  # added, removed or reordered (the first to render an object owns it)
    old_katalogs = {k.name: _katalog_inputs(k) for k in old.katalogs}
    new_katalogs = {k.name: _katalog_inputs(k) for k in new.katalogs}
    old_entries = {(e.katalog, e.key): e for e in old.entries()}
    changed_entries: set[tuple[str, str]] = set()
    for entry in new.entries():
        was = old_entries.get((entry.katalog, entry.key))
        if was is None or was.depends_on != entry.depends_on:
            return None
        if _entry_inputs(was) != _entry_inputs(entry) or \
                new_katalogs[entry.katalog] != old_katalogs[entry.katalog]:
            changed_entries.add((entry.katalog, entry.key))
    changed: set[ObjRef] = set()
    for cr in new.crs:
        prior = before[cr.ref]
        if cr.body != prior.body or cr.source.file != prior.source.file or \
                (cr.entry.katalog, cr.entry.key) in changed_entries:
            changed.add(cr.ref)
    readers = cross_readers(new)
    for cr in new.crs:
        if cr.ref in changed:
            changed.update(readers.get((cr.entry.katalog, cr.entry.key), ()))
    return frozenset(changed)


def cross_readers(catalog: Catalog) -> Mapping[tuple[str, str], frozenset[ObjRef]]:
    """By (Katalog, entry key): the custom resources whose entry cross-reads that entry's
    custom resources (`.cross`), which a change of one of them renders again."""
    reading: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for entry in catalog.entries():
        items = entry.operator_box.get("cross")
        for item in items if isinstance(items, list) else []:
            target = item.get("crd") if isinstance(item, Mapping) else None
            if isinstance(target, str) and target:
                reading.setdefault((entry.katalog, target), set()).add(
                    (entry.katalog, entry.key))
    out: dict[tuple[str, str], set[ObjRef]] = {}
    for cr in catalog.crs:
        for target, readers in reading.items():
            if (cr.entry.katalog, cr.entry.key) in readers:
                out.setdefault(target, set()).add(cr.ref)
    return {k: frozenset(v) for k, v in out.items()}


def _entry_inputs(entry: CrdEntry) -> CrdEntry:
    """The entry without where it was read (its file and line do not change a render)."""
    return dataclasses.replace(entry, source=_NOWHERE)


def _katalog_inputs(katalog: Katalog) -> tuple[Any, ...]:
    return (katalog.api_version, katalog.notes, katalog.dialect, katalog.profiles)

