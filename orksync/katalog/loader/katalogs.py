"""A Katalog document to a `Katalog`: its keys checked against the schema table
(orksync.katalog.keys; a CRD entry's findings fail that entry only), its profiles, its
entries (entries.py), their dependsOn, its notes, its imports, its template dialect."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orksync.errors import InputError
from orksync.katalog.keys import KATALOG, Finding, Key, check
from orksync.katalog.layout import read_include
from orksync.katalog.loader.crds import crd_of_file
from orksync.katalog.loader.entries import crd_entry
from orksync.katalog.loader.holds import hold_kind
from orksync.katalog.loader.state import LoadState, type_name
from orksync.katalog.model import (
    CrdEntry,
    CrdManifest,
    Katalog,
)
from orksync.katalog.motifs import katalog_notes
from orksync.katalog.profiles import parse_profiles
from orksync.yamls.doc import Document

# A Katalog opts into native Jinja2 templates with this annotation (Orkestra ignores it).
DIALECT_ANNOTATION = "orksync.io/template-dialect"


DIALECTS = ("go", "jinja2")


_NOTE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


_NOTE_FUNCTION_KEYS = ("name", "expression", "description", "shadow")


def katalog(st: LoadState, doc: Document, crds: dict[str, CrdManifest],
            checked: Mapping[str, Any] | None = None, schema: Key = KATALOG
            ) -> Katalog | None:
    """The Katalog of a document (a Katalog, or a Komposer's own new entries);
    `checked`: the document as written, checked against `schema` (a composed
    Katalog's content has its Komposer's overrides merged in: those were checked
    where they are written)."""
    c = doc.content
    meta = c.get("metadata")
    raw_name = meta.get("name") if isinstance(meta, dict) else None
    name = raw_name if isinstance(raw_name, str) and raw_name else Path(doc.file).stem
    obj = f"{'Komposer' if c.get('kind') == 'Komposer' else 'Katalog'}/{name}"
    for field, value in (("metadata", meta), ("spec", c.get("spec"))):
        if not isinstance(value, dict):
            st.errors.append(st.error(doc, f"Katalog {field} must be a map, not "
                                      f"{type_name(value)}", [field], obj))
            return None
    if raw_name is not None and not isinstance(raw_name, str):
        st.errors.append(st.error(doc, f"must be a string, not {type_name(raw_name)}",
                                  ["metadata", "name"], obj))
        return None
    spec = c["spec"]
    # the schema table: unknown and refused keys are errors (those of a CRD entry
    # fail that entry only), deliberately unimplemented ones one warning each
    by_entry: dict[str, list[Finding]] = {}
    katalog_errors = 0
    for finding in check(c if checked is None else checked, schema):
        if finding.level == "warning":
            st.warn(doc, obj, list(finding.path), finding.message, as_written=True)
        elif finding.path[:2] == ("spec", "crds") and len(finding.path) > 3:
            by_entry.setdefault(str(finding.path[2]), []).append(finding)
        else:
            st.errors.append(st.error(doc, finding.message, finding.path, obj,
                                      as_written=True))
            katalog_errors += 1
    if katalog_errors:
        return None  # Orkestra refuses the whole Katalog
    if c.get("crossAccess") is not None and not isinstance(c["crossAccess"], bool):
        st.errors.append(st.error(doc, "must be true or false, not "
                                  f"{type_name(c['crossAccess'])}", ["crossAccess"], obj))
        return None
    profiles, broken = parse_profiles(c.get("profiles"), doc.file, st.root)
    if broken:  # its entries would fail wherever they name a broken profile
        st.errors.extend(st.error(doc, message, path, obj) for path, message in broken)
        return None
    raw_crds = spec.get("crds")
    items: list[tuple[str, Any, list[str | int]]] = []
    if isinstance(raw_crds, dict):
        items = [(str(k), v, ["spec", "crds", str(k)]) for k, v in raw_crds.items()]
    elif isinstance(raw_crds, list):  # the very early list form: - name: x
        st.warn(doc, obj, ["spec", "crds"], "not portable to Orkestra: spec.crds as "
                "a list (the early form); Orkestra reads a map of entries by name")
        for i, v in enumerate(raw_crds):
            key = v.get("name") if isinstance(v, dict) else None
            items.append((str(key or i), v, ["spec", "crds", i]))
    else:
        st.errors.append(st.error(doc, "Katalog spec.crds must be a map of entries",
                                  ["spec", "crds"], obj=obj))
        return None
    entries = []
    for key, raw, fpath in items:
        try:
            if isinstance(raw, dict) and raw.get("enabled") is False:
                disable(st, doc, name, key, raw, crds)
                continue
            problems = by_entry.get(key, [])
            if problems:
                *rest, last = [st.error(doc, f.message, f.path, obj, as_written=True)
                               for f in problems]
                st.errors.extend(rest)
                raise last
            entries.append(crd_entry(st, doc, name, key, raw, fpath, crds, profiles))
        except InputError as err:
            st.errors.append(err)
            st.failed += 1
            hold_kind(st, doc, name, key, raw, err)
    entries = check_depends_on(st, doc, obj, entries)
    errors = len(st.errors)
    notes = own_notes(st, doc, obj)
    if len(st.errors) > errors:
        return None  # its templates would fail wherever they call a broken note
    if spec.get("imports"):
        imported = katalog_notes(spec["imports"], doc.file, st.root, local_notes=notes)
        st.errors.extend(st.error(doc, p, ["spec", "imports"], obj)
                         for p in imported.problems)
        st.warnings.extend(f"{st.rel(doc.file)}: {obj}: {w}"
                           for w in imported.warnings)
        notes = {**imported.notes, **notes}
    annotations = meta.get("annotations")
    dialect = annotations.get(DIALECT_ANNOTATION) if isinstance(annotations, dict) else None
    if dialect is None:
        dialect = "go"
    if dialect not in DIALECTS:
        st.errors.append(st.error(
            doc, f"{DIALECT_ANNOTATION} must be one of {', '.join(DIALECTS)}, not {dialect!r}",
            ["metadata", "annotations"], obj))
        return None
    return Katalog(name=name, api_version=str(c["apiVersion"]), source=st.source(doc),
                   crds=tuple(entries), notes=notes, dialect=str(dialect),
                   profiles=profiles)


def check_depends_on(st: LoadState, doc: Document, obj: str,
                     entries: list[CrdEntry]) -> list[CrdEntry]:
    """The entries whose dependsOn names entries of this Katalog that loaded, without
    a cycle; each other one is an error naming its field, and is not loaded (its
    custom resources would otherwise be applied without the wait it asks for)."""
    by_key = {e.key: e for e in entries}
    ok = []
    for entry in entries:
        cycle = _cycle(entry.key, by_key)
        if cycle:
            st.errors.append(st.error(
                doc, f"dependsOn makes a cycle: {' -> '.join(cycle)}",
                [*entry.path.split("."), *entry.written_at(["dependsOn"])], obj))
            st.held.setdefault((entry.group, entry.kind), (
                f"Katalog {entry.katalog} entry {entry.key} did not load "
                f"({st.errors[-1]})"))
        else:
            ok.append(entry)
    while True:  # an entry naming one that did not load does not load either
        keys = {e.key for e in ok}
        missing = [(e, name) for e in ok for name, _ in e.depends_on if name not in keys]
        if not missing:
            break
        first = {e.key: (e, name) for e, name in reversed(missing)}  # of each entry
        for entry, name in first.values():
            near = difflib.get_close_matches(name, sorted(keys), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            written = entry.raw.get("dependsOn")
            at: str | int = written.index(name) if isinstance(written, list) else name
            st.errors.append(st.error(
                doc, f"names {name!r}, which is not a CRD entry of this Katalog that "
                f"loaded{hint}",
                [*entry.path.split("."), *entry.written_at(["dependsOn", at])], obj))
            st.held.setdefault((entry.group, entry.kind), (
                f"Katalog {entry.katalog} entry {entry.key} did not load "
                f"({st.errors[-1]})"))
        dropped = set(first)
        ok = [e for e in ok if e.key not in dropped]
    st.failed += len(entries) - len(ok)
    return ok


def disable(st: LoadState, doc: Document, katalog: str, key: str, raw: dict[str, Any],
            crds: dict[str, CrdManifest]) -> None:
    """An entry with `enabled: false`: Orkestra skips it whole (no validation, no
    reconcile); its custom resources are left out, each named by `orksync validate`.
    Its kind is read from apiTypes, else from its crdFile's or the repository's CRD."""
    api = raw.get("apiTypes")
    api = api if isinstance(api, dict) else {}
    group, version, kind = api.get("group"), api.get("version"), api.get("kind")
    crd_file = raw.get("crdFile")
    if isinstance(crd_file, str) and crd_file and not (group and version and kind):
        found = crd_of_file(st, doc, crd_file)
        if found is not None:
            group = group or found.group
            kind = kind or found.kind
            version = version or found.storage_version
    if not version and group and kind:
        version = next((m.storage_version for m in crds.values()
                        if m.group == group and m.kind == kind), None)
    if isinstance(group, str) and isinstance(version, str) and isinstance(kind, str):
        st.disabled[(f"{group}/{version}" if group else version, kind)] = (
            f"Katalog {katalog} entry {key} has enabled: false "
            f"({st.rel(doc.file)})")


def own_notes(st: LoadState, doc: Document, obj: str) -> dict[str, str]:
    """The Katalog's own `notes`: name → expression (or Orkestra's {expression: ...});
    a note a template could not call, or whose expression is not text, is an error."""
    raw = doc.content.get("notes") or {}
    if not isinstance(raw, dict):
        form = "a list (an early form Orkestra no longer reads)" \
            if isinstance(raw, list) else type_name(raw)
        st.errors.append(st.error(
            doc, "notes must be Orkestra's map notes: {functions: [{name, expression}]} "
            f"(orksync also reads a map of name to expression), not {form}",
            ["notes"], obj))
        return {}
    if _registry_shape(raw):
        return note_functions(st, doc, obj, raw)
    if raw:
        st.warn(doc, obj, ["notes"], "not portable to Orkestra: notes as a map of "
                "name to expression; Orkestra reads notes: {functions: [{name, "
                "expression}]}")
    notes: dict[str, str] = {}
    for key, value in raw.items():
        expression = value.get("expression") if isinstance(value, dict) else value
        if not isinstance(key, str) or not _NOTE_NAME.match(key):
            st.errors.append(st.error(
                doc, f"note name {key!r} is not an identifier (letters, digits, '_')",
                ["notes"], obj))
        elif not isinstance(expression, str):
            st.errors.append(st.error(
                doc, f"must be a template expression (a string), not {type_name(expression)}",
                ["notes", key], obj))
        else:
            notes[key] = expression
    return notes


def note_functions(st: LoadState, doc: Document, obj: str, raw: dict[str, Any]) -> dict[str, str]:
    """Orkestra's notes: `{functions: [{name, expression, description, shadow}],
    include: <file>}`; the included file's `functions:` come first, and a function
    defined again later replaces the earlier one (the Katalog's own win)."""
    functions: list[tuple[list[str | int], Any]] = []
    for key in raw:
        if key not in ("functions", "include"):
            near = difflib.get_close_matches(str(key), ["functions", "include"], n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            st.errors.append(st.error(
                doc, f"unknown field {key!r}{hint}: notes in Orkestra's shape hold "
                "functions: and include: only", ["notes", str(key)], obj))
            return {}
    if raw.get("include") is not None:
        included, problem = read_include(raw["include"], doc.file, st.root,
                                         "functions")
        if problem:
            st.errors.append(st.error(doc, problem, ["notes", "include"], obj))
            return {}
        functions.extend((["notes", "include"], f) for f in included or [])
    own = raw.get("functions")
    if own is not None and not isinstance(own, list):
        st.errors.append(st.error(doc, f"must be a list, not {type_name(own)}",
                                  ["notes", "functions"], obj))
        return {}
    functions.extend((["notes", "functions", i], f) for i, f in enumerate(own or []))
    notes: dict[str, str] = {}
    for path, item in functions:
        if not isinstance(item, dict):
            st.errors.append(st.error(doc, "must be a map with name and expression",
                                      path, obj))
            continue
        unknown = [k for k in item if k not in _NOTE_FUNCTION_KEYS]
        name, expression = item.get("name"), item.get("expression")
        if unknown:
            st.errors.append(st.error(doc, f"unknown field {unknown[0]!r} of a note "
                                      f"function (name, expression, description, "
                                      "shadow)", [*path, str(unknown[0])], obj))
        elif not isinstance(name, str) or not _NOTE_NAME.match(name):
            st.errors.append(st.error(
                doc, f"note name {name!r} is not an identifier (letters, digits, '_')",
                [*path, "name"], obj))
        elif not isinstance(expression, str):
            st.errors.append(st.error(
                doc, f"must be a template expression (a string), not {type_name(expression)}",
                [*path, "expression"], obj))
        else:
            notes[name] = expression
    return notes


def _registry_shape(notes: dict[Any, Any]) -> bool:
    """Orkestra's NoteRegistry (`functions:` list, `include:` file) rather than orksync's
    map of name to expression (where a note named `functions` holds text)."""
    return isinstance(notes.get("functions"), list) or (
        "include" in notes and set(notes) <= {"include", "functions"}
        and not isinstance(notes.get("functions"), str))


def _cycle(start: str, entries: dict[str, CrdEntry]) -> list[str]:
    """The dependsOn path from `start` back to itself (empty when there is none)."""
    def walk(key: str, path: list[str]) -> list[str]:
        entry = entries.get(key)
        for name, _ in entry.depends_on if entry else ():
            if name == start:
                return [*path, name]
            if name not in path:
                found = walk(name, [*path, name])
                if found:
                    return found
        return []
    return walk(start, [start])
