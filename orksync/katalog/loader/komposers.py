"""Komposers (orksync.katalog.komposer): the Katalogs each imports, loaded through it with
its overrides merged into their entries, and its own new entries; none of them when the
Komposer fails."""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orksync.katalog.keys import KATALOG, KOMPOSER, Finding, Key, check
from orksync.katalog.komposer import (
    MERGED_FIELDS,
    add_guard,
    file_problem,
    import_refs,
    merge_entry,
)
from orksync.katalog.layout import flatten, get_in, resolve_includes
from orksync.katalog.loader.holds import hold_katalog
from orksync.katalog.loader.state import LoadState, type_name
from orksync.katalog.model import (
    KATALOG_API_VERSIONS,
)
from orksync.yamls.doc import Document

# A document loaded as a Katalog: (the document, the content its keys are checked in, or
# None for its own, the schema they are checked against)
Load = tuple[Document, Mapping[str, Any] | None, Key]


def compose(st: LoadState, komposers: list[Document], katalogs: list[Document]) -> list[Load]:
    """What is loaded as a Katalog: each Katalog document on its own, except those a
    Komposer imports, which are loaded through it (its overrides merged into their
    entries), and each Komposer's own new entries."""
    composed_by: dict[int, str] = {}  # id() of an imported Katalog -> its Komposer
    loads: list[Load] = []
    for doc in komposers:
        loads.extend(komposer(st, doc, composed_by))
    return [(d, None, KATALOG) for d in katalogs if id(d) not in composed_by] + loads


def komposer(st: LoadState, doc: Document, composed_by: dict[int, str]) -> list[Load]:
    """The loads of one Komposer (orksync.katalog.komposer): each imported Katalog with
    the overrides merged, then the Komposer's own new entries; none when the Komposer
    fails. The Katalogs it imports are marked in `composed_by` either way."""
    c = doc.content
    meta = c.get("metadata")
    raw_name = meta.get("name") if isinstance(meta, dict) else None
    name = raw_name if isinstance(raw_name, str) and raw_name else Path(doc.file).stem
    obj = f"Komposer/{name}"
    before = len(st.errors)
    findings = [f for f in check(c, KOMPOSER) if f.level == "error"]
    entry_findings: dict[str, list[Finding]] = {}
    for f in findings:
        if f.path[:2] == ("spec", "crds") and len(f.path) > 3:
            entry_findings.setdefault(str(f.path[2]), []).append(f)
        else:
            st.errors.append(st.error(doc, f.message, f.path, obj))
    sources = komposer_sources(st, doc, obj, composed_by)
    owner: dict[str, Document] = {}
    for i, src in sources:
        entries = get_in(src.content, ("spec", "crds"))
        for key in entries if isinstance(entries, dict) else ():
            first = owner.setdefault(str(key), src)
            if first is not src:
                st.errors.append(st.error(
                    doc, f"duplicate CRD {str(key)!r}: defined in {st.rel(first.file)} "
                    f"and {st.rel(src.file)}: names must be unique across all imports",
                    ["imports", "files", i], obj))
    own = get_in(c, ("spec", "crds"))
    if own is not None and not isinstance(own, dict):
        st.errors.append(st.error(doc, "Komposer spec.crds must be a map of entries",
                                  ["spec", "crds"], obj))
    if len(st.errors) > before:  # Orkestra loads nothing of a broken Komposer
        st.errors.extend(st.error(doc, f.message, f.path, obj)
                         for fs in entry_findings.values() for f in fs)
        st.failed += 1 + len(sources)
        for held in (doc, *(src for _, src in sources)):
            hold_katalog(st, held, st.errors[before])
        return []
    own = own or {}
    for key in ("notes", "profiles"):
        if c.get(key) and sources:
            st.warn(doc, obj, [key], "applies to the Komposer's own new entries only: "
                    "orksync keeps each imported Katalog's notes and profiles (Orkestra "
                    "merges them all into one registry)")
    loads: list[Load] = []
    for _, src in sources:
        content = composed(st, doc, obj, src, {str(k): v for k, v in own.items()
                                               if str(k) in owner}, entry_findings)
        loads.append((Document(file=src.file, index=src.index, content=content),
                      src.content, KATALOG))
    new = {}
    for key, raw in own.items():
        if str(key) in owner:
            continue
        if owner and isinstance(raw, dict) and not raw.get("crdFile") and not (
                isinstance(raw.get("apiTypes"), dict) and raw["apiTypes"].get("kind")):
            near = difflib.get_close_matches(str(key), sorted(owner), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            st.errors.append(st.error(
                doc, f"names no entry of the imported Katalogs{hint}; as a new entry it "
                "needs apiTypes (with a kind) or crdFile", ["spec", "crds", str(key)], obj))
            st.failed += 1
            continue
        new[key] = raw
    mine = {k: v for k, v in c.items() if k != "imports"}
    mine["spec"] = {**(c.get("spec") or {}), "crds": new}
    loads.append((Document(file=doc.file, index=doc.index, content=mine), c, KOMPOSER))
    return loads


def komposer_sources(st: LoadState, doc: Document, obj: str, composed_by: dict[int, str]
                     ) -> list[tuple[int, Document]]:
    """(index in imports.files, the Katalog document) of each file a Komposer imports,
    each marked in `composed_by` as this Komposer's; each problem is an error naming
    its item."""
    imports = doc.content.get("imports")
    if imports is not None and not isinstance(imports, dict):
        st.errors.append(st.error(doc, "imports must be a map (files, helm, "
                                  "registry)", ["imports"], obj))
        return []
    files = get_in(imports, ("files",))
    if files is not None and not isinstance(files, list):
        st.errors.append(st.error(doc, f"must be a list, not {type_name(files)}",
                                  ["imports", "files"], obj))
        return []
    sources: list[tuple[int, Document]] = []
    here = f"{obj} ({st.rel(doc.file)})"
    for i, ref in import_refs(imports):
        problem = file_problem(ref)
        found: list[Document] = []
        if not problem:
            target = (doc.file.parent / ref).resolve()
            if not target.is_relative_to(st.root):
                problem = f"{ref!r} points outside the repository"
            elif not target.is_file():
                problem = f"file {ref!r} does not exist"
            else:
                st.add_file(target)
                found = [d for d in st.documents if d.file == target
                         and isinstance(d.content, dict)
                         and d.content.get("apiVersion") in KATALOG_API_VERSIONS
                         and d.content.get("kind") in ("Katalog", "Komposer")]
                if any(d.content["kind"] == "Komposer" for d in found):
                    problem = ("a Komposer cannot import another Komposer (only Katalog "
                               "files are valid imports)"
                               + (": it imports itself" if target == doc.file else ""))
                elif len(found) != 1:
                    problem = (f"{ref!r} holds {len(found)} Katalogs" if found
                               else f"{ref!r} holds no Katalog") + (
                                   ": a Komposer imports files of one Katalog each")
                elif composed_by.get(id(found[0]), here) != here:
                    problem = (f"{ref!r} is composed by {composed_by[id(found[0])]} "
                               "already: a Katalog is composed by one Komposer (its "
                               "entries would be loaded twice)")
        if problem:
            st.errors.append(st.error(doc, problem, ["imports", "files", i], obj))
        elif not any(d is found[0] for _, d in sources):  # a file named twice: once
            sources.append((i, found[0]))
            composed_by[id(found[0])] = here
    return sources


def composed(st: LoadState, doc: Document, obj: str, src: Document, overrides: dict[str, Any],
             entry_findings: dict[str, list[Finding]]) -> dict[str, Any]:
    """The content of an imported Katalog as the Komposer composes it: its entries with
    the overrides merged, the Komposer's namespace guard added to each, and the
    Komposer's deletion protection when it declares one. An entry whose override is
    broken is left out (an error names the override)."""
    content = dict(src.content)
    entries = get_in(content, ("spec", "crds"))
    if not isinstance(entries, dict):
        return content  # its own load reports it
    guard = get_in(doc.content, ("security", "namespaceProtection"))
    merged: dict[str, Any] = {}
    for key, entry in entries.items():
        override = overrides.get(str(key))
        if override is not None:
            where = ["spec", "crds", str(key)]
            problems = [st.error(doc, f.message, f.path, obj)
                        for f in entry_findings.get(str(key), [])]
            flat = flatten(override) if isinstance(override, dict) else None
            if flat is None:
                problems.append(st.error(doc, "CRD entry must be a map", where, obj))
            else:
                if not flat.problems:
                    resolve_includes(flat, doc.file, st.root)
                problems.extend(st.error(doc, message, [*where, *path], obj)
                                for path, message in flat.problems)
            if problems:
                st.errors.extend(problems)
                st.failed += 1
                continue
            assert flat is not None
            base = flatten(entry) if isinstance(entry, dict) else None
            if base is not None and not base.problems:
                # Orkestra resolves an override's crdFile from the Komposer's
                # directory; the merged entry is read from the Katalog's
                crd_file = flat.raw.get("crdFile")
                if isinstance(crd_file, str) and crd_file:
                    flat.raw["crdFile"] = os.path.relpath(
                        doc.file.parent / crd_file, src.file.parent)
                entry, taken, unmerged = merge_entry(base.raw, flat.raw)
                st.overrides[(src.file, src.index, str(key))] = (
                    doc, obj, [(t, [*where, *flat.written_at(list(t))]) for t in taken])
                for path in unmerged:
                    st.warn(doc, obj, [*where, *flat.written_at(list(path))],
                            "not merged: Orkestra's Komposer merge does not take "
                            "this key from an override (it takes "
                            f"{', '.join(MERGED_FIELDS)}); the value of "
                            f"{st.rel(src.file)} stays")
        if isinstance(guard, dict) and isinstance(entry, dict):
            base = flatten(entry)
            if not base.problems:
                entry = base.raw
                add_guard(entry, guard)
        merged[key] = entry
    content["spec"] = {**content["spec"], "crds": merged}
    protection = get_in(doc.content, ("security", "deletionProtection"))
    if protection is not None:
        security = content.get("security")
        content["security"] = {**(security if isinstance(security, dict) else {}),
                               "deletionProtection": protection}
    return content
