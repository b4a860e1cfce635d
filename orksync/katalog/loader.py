"""Load a repository into a Catalog: Katalogs (both apiVersion eras), CRDs and custom
resources found anywhere by apiVersion/kind.

Pure over the file system: reads files under the repository root, never writes, never
talks to a cluster. A bad document is recorded as an error naming its file (and line), the
object and the field, and loading goes on with the rest.

Decisions (the Orkestra spec is silent on them):

* A document whose apiVersion group is one the repository defines (a Katalog entry, a
  CRD, or Orkestra's own group) but that no Katalog entry handles is an error: a typo in
  kind or version must not go unnoticed. A document of any other group with apiVersion
  and kind is a plain manifest (`Catalog.plain`: a Namespace, RBAC, a source Secret),
  applied as it is; YAML without apiVersion and kind is not a manifest and is ignored
  (`.orksyncignore` keeps other tools' manifests out), but a document with `metadata` and
  only one of them usable (the other missing, empty or misspelled) is an error: skipped,
  the object it applied before would be pruned. A plain manifest needs a valid
  metadata.name; its metadata.namespace is taken as written (a built-in kind whose scope
  is known is refused without one, or with one it cannot have: orksync does not guess a
  namespace); `status` and the fields the API server sets are dropped.
* Types are checked where a wrong one would be misread: apiVersion, kind, metadata.name
  and namespace are strings (namespaces DNS-1123 labels); `namespaced` a boolean;
  `crFiles`, `allowedNamespaces` and `restrictedNamespaces` lists of strings (a lone
  string would be read letter by letter, and a `*` among the letters opens the guard);
  apiTypes values strings; group, version, kind and plural valid Kubernetes names, since
  they name files of the rendered directory. A CRD must be named `<plural>.<group>`.
* A Katalog whose own `notes` or `profiles` are broken is not loaded (its templates call
  them, its entries name them).
* Every key is checked against the schema table (orksync.katalog.keys): an unknown or
  refused key fails its CRD entry (or, outside `spec.crds`, the Katalog); a key orksync
  deliberately does not act on warns once. An entry in Orkestra's grouped layout is
  brought to the flat one and its includes resolved (orksync.katalog.layout) before
  anything reads it.
* Custom resources Orkestra would not reconcile (a disabled entry, `namespace`,
  `labelSelector`, `fieldSelector`) are left out: `Catalog.left_out`, one warning each;
  the render neither renders nor prunes them (the preReconcile gates are the render's,
  orksync.render.engine.gate_refusal).
* A Komposer's imported Katalogs are loaded through it, its spec.crds overrides merged
  into their entries (orksync.katalog.komposer); a Katalog it imports is not loaded again
  on its own. A Komposer that fails (a refused import, a duplicate entry, a broken key
  outside spec.crds) loads none of the Katalogs it imports; a broken override fails the
  imported entry it overrides.
* A custom resource left out because of another error says "reported above": a warning
  when its Katalog entry did not load, an error when the entry loaded but is broken
  (orksync.render.engine), so that its status can say why. One of an entry that did not
  load whose kind the repository tells (its apiTypes, its crdFile's CRD, or else a name
  the Katalog gives it: `hold_kind`) is held: left out, never taken for a plain manifest
  (orksync.sync.hold_reclassified holds the ones only the inventory knows).
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from orksync.durations import parse_duration
from orksync.errors import InputError, LoadError, printable
from orksync.forked import fork_chunks_into
from orksync.gcpause import gc_paused
from orksync.ignore import IGNORE_FILE, IgnoreRules
from orksync.katalog.builtin_kinds import BUILTIN_KINDS, CLUSTER_SCOPED
from orksync.katalog.keys import KATALOG, KOMPOSER, Finding, Key, check
from orksync.katalog.komposer import (
    MERGED_FIELDS,
    add_guard,
    file_problem,
    import_refs,
    merge_entry,
)
from orksync.katalog.layout import flatten, get_in, read_include, resolve_includes
from orksync.katalog.model import (
    KATALOG_API_VERSIONS,
    Catalog,
    CrdEntry,
    CrdManifest,
    CustomResource,
    Katalog,
    PlainManifest,
    Selection,
    Source,
)
from orksync.katalog.motifs import expand_entry, katalog_notes
from orksync.katalog.profiles import Profiles, parse_profiles
from orksync.katalog.tenancy import ALLOWED_HOSTS_FIELD, allowed_hosts_problem, tenancy_of
from orksync.model import ObjRef
from orksync.names import (
    kind_problem,
    label_key_problem,
    label_problem,
    subdomain_problem,
)
from orksync.yamldoc import Document, document_identity, dotted
from orksync.yamlio import iter_yaml_files, load_documents, locate

log = logging.getLogger(__name__)

# A Katalog opts into native Jinja2 templates with this annotation (Orkestra ignores it).
DIALECT_ANNOTATION = "orksync.io/template-dialect"
DIALECTS = ("go", "jinja2")

IGNORED_ORKESTRA_KINDS = ("E2E", "Simulate")
ORKESTRA_GROUPS = frozenset(v.partition("/")[0] for v in KATALOG_API_VERSIONS)
# Entry fields that must be lists of namespace patterns: a lone string would be read
# character by character, and a `*` among them would open the guard to every namespace.
NAMESPACE_LISTS = ("allowedNamespaces", "restrictedNamespaces")
_NOTE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@gc_paused
def load_repository(root: Path, *, jobs: int = 1) -> Catalog:
    """Load every YAML file under `root` (hidden directories skipped, and what the
    repository's `.orksyncignore` lists: orksync.ignore). `jobs`: processes that parse
    the files (orksync.forked); the same Catalog whatever their number. Raises LoadError
    when the ignore file cannot be read: loading what it would have left out could apply
    it."""
    root = root.resolve()
    loader = _Loader(root)
    rules = _ignore_rules(root)
    files = list(iter_yaml_files(
        root, resolve_links=True,
        skip=(lambda rel, is_dir: rules.ignored(rel, is_dir=is_dir)) if rules else None))
    jobs = min(jobs, len(files) // MIN_FILES_PER_JOB) or 1
    if jobs > 1:
        walked = iter(files)

        def take(parsed: list[Parsed]) -> None:  # the next files, in the walk's order
            for docs in parsed:
                loader.add_file(next(walked), parsed=docs)

        fork_chunks_into(loader.parse_all, files, jobs, chunk=FILES_CHUNK, take=take)
        if next(walked, None) is not None:
            raise AssertionError("the load lost files")  # pragma: no cover
    else:
        for resolved in files:
            loader.add_file(resolved)
    return loader.finish()


def _ignore_rules(root: Path) -> IgnoreRules:
    path = root / IGNORE_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return IgnoreRules()
    except OSError as err:
        raise LoadError(f"cannot be read: {err.strerror or err}", file=IGNORE_FILE) from err
    try:
        return IgnoreRules(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise LoadError(f"not UTF-8 text (byte {err.start})", file=IGNORE_FILE) from err


# Fewer files than this per job are parsed in one process: below it a second process does
# not pay for its fork and the trip back of the documents (the load of bench/render.py's
# repositories gained nothing from a second process at this size).
MIN_FILES_PER_JOB = 256
FILES_CHUNK = 64  # files a process takes at a time (orksync.forked.fork_chunks)

# A document loaded as a Katalog: (the document, the content its keys are checked in, or
# None for its own, the schema they are checked against)
Load = tuple[Document, Mapping[str, Any] | None, Key]

# A file's documents, as (index, content), parsed ahead (load_repository's jobs), or the
# error that stopped them
Parsed = list[tuple[int, Any]] | LoadError


class _Loader:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.errors: list[Exception] = []
        self.warnings: list[str] = []
        self.documents: list[Document] = []
        self.seen: set[Path] = set()
        self.failed = 0  # Katalogs and Katalog entries that did not load
        # (group, kind) of the Katalog entries that did not load, as far as it is known
        # ("" kind: the group only) -> why: their custom resources are held (`hold_kind`)
        self.held: dict[tuple[str, str], str] = {}
        # the same, by a name of the kind (lower case), when the repository does not tell
        # the kind of such an entry but its Katalog's text names it (`hold_kind`)
        self.held_names: dict[str, str] = {}
        self.manifests: dict[int, CrdManifest | None] = {}  # by id(document): checked once
        # (apiVersion, kind) of the entries with `enabled: false` -> why their custom
        # resources are left out
        self.disabled: dict[tuple[str, str], str] = {}
        self.left_out: list[tuple[ObjRef, str]] = []
        self.rels: dict[Path, str] = {}
        self.plain: dict[ObjRef, PlainManifest] = {}
        self.setup_files: set[Path | None] = set()  # named by an entry's setup.apply
        self.classified: set[int] = set()  # id() of the documents the walk loaded
        self.prefix = os.path.join(str(root), "")  # the root with its trailing separator
        # (imported Katalog's file, document index, entry key) -> (its Komposer's document,
        # the Komposer's name, [(flat path in the entry a Komposer override gave, where
        # the override writes it)]): a problem of such a value names the Komposer
        self.overrides: dict[tuple[Path, int, str],
                             tuple[Document, str, list[tuple[tuple[str, ...],
                                                             list[str | int]]]]] = {}

    def rel(self, path: Path) -> str:
        """`path` (resolved) as shown in messages and origins: relative to the root. Asked
        several times per file."""
        shown = self.rels.get(path)
        if shown is None:
            text = str(path)
            shown = text[len(self.prefix):] if text.startswith(self.prefix) else text
            self.rels[path] = shown
        return shown

    def add_file(self, resolved: Path, parsed: Parsed | None = None) -> None:
        """Load a file (`resolved`: its resolved path), unless loaded already; `parsed`:
        its documents, parsed ahead by `parse_all`."""
        if resolved in self.seen:
            return
        self.seen.add(resolved)
        display = self.rel(resolved)
        if printable(display) != display:
            self.errors.append(LoadError("file name is not printable UTF-8 text: refused",
                                         file=display))
            return
        try:
            if parsed is None:
                self.documents.extend(load_documents(resolved, display=display))
            elif isinstance(parsed, LoadError):
                raise parsed
            else:
                self.documents.extend(Document(file=resolved, index=i, content=content)
                                      for i, content in parsed)
        except LoadError as err:
            self.errors.append(err)

    def parse_all(self, files: Sequence[Path]) -> list[Parsed]:
        """The documents of each file (resolved paths), parsed as `add_file` would: the
        part of loading that may run in parallel (only what it returns counts; in a
        forked process, nothing it changes here is seen)."""
        out: list[Parsed] = []
        for resolved in files:
            try:
                out.append([(d.index, d.content) for d in
                            load_documents(resolved, display=self.rel(resolved))])
            except LoadError as err:
                out.append(err)
        return out

    def source(self, doc: Document) -> Source:
        return Source(file=self.rel(doc.file), path=doc.file, index=doc.index)

    def error(self, doc: Document, message: str, field: Iterable[str | int] = (),
              obj: str = "", *, as_written: bool = False) -> InputError:
        """An error about a field of `doc`; `as_written`: the field path is one of the
        document as written (a schema finding), never one a Komposer override gave."""
        fields = list(field)
        if not as_written:
            doc, fields, obj = self.written(doc, fields, obj)
        line = locate(doc.file, doc.index, fields)
        return InputError(message, file=self.rel(doc.file), line=line,
                          path=dotted(fields), obj=obj)

    def finish(self) -> Catalog:
        katalog_docs, komposer_docs, crd_docs, other = [], [], [], []
        self.classified = {id(d) for d in self.documents}  # the rest is loaded late
        for doc in self.documents:
            c = doc.content
            if not isinstance(c, dict):
                self.errors.append(self.error(doc, "document is not a mapping"))
                continue
            api, kind = c.get("apiVersion"), c.get("kind")
            wrong = [f for f, v in (("apiVersion", api), ("kind", kind))
                     if v is not None and not isinstance(v, str)]
            if wrong:
                self.errors.append(self.error(
                    doc, f"{wrong[0]} must be a string, not {_type(c[wrong[0]])}", wrong[:1],
                    document_identity(c)))
                continue
            missing = _half_manifest(c)
            if missing:
                field, anchor, message = missing
                self.errors.append(InputError(
                    message, file=self.rel(doc.file),
                    line=locate(doc.file, doc.index, [anchor]), path=field,
                    obj=document_identity(c)))
                continue
            if api in KATALOG_API_VERSIONS and kind == "Katalog":
                katalog_docs.append(doc)
            elif api in KATALOG_API_VERSIONS and kind == "Komposer":
                komposer_docs.append(doc)
            elif api in KATALOG_API_VERSIONS and kind in (*IGNORED_ORKESTRA_KINDS, "Motif"):
                continue
            elif api == "apiextensions.k8s.io/v1" and kind == "CustomResourceDefinition":
                crd_docs.append(doc)
            else:
                other.append(doc)
        crds = [m for m in (self.crd_manifest(d) for d in crd_docs) if m is not None]
        by_name = {m.name: m for m in crds}
        loads = self.compose(komposer_docs, katalog_docs)
        katalogs = []
        for d, checked, schema in loads:
            before = len(self.errors)
            loaded = self.katalog(d, by_name, checked, schema)
            if loaded is not None:
                katalogs.append(loaded)
            else:
                self.hold_katalog(d, self.errors[before] if len(self.errors) > before
                                  else None)
        self.failed += len(loads) - len(katalogs)
        # Files named by crdFile / crFiles outside the walked tree are loaded too.
        crs = self.custom_resources(other, katalogs, crds)
        protected = {e.crd_name for k in katalogs for e in k.crds if e.protect_crd}
        crds = [dataclasses.replace(m, deletion_protected=True) if m.name in protected
                else m for m in crds]
        return Catalog(root=self.root, katalogs=tuple(katalogs), crds=tuple(crds),
                       crs=tuple(crs), errors=tuple(self.errors),
                       warnings=tuple(self.warnings), left_out=tuple(self.left_out),
                       plain=tuple(self.plain[ref] for ref in sorted(self.plain)))

    # --- Komposers ------------------------------------------------------------------------

    def compose(self, komposers: list[Document], katalogs: list[Document]) -> list[Load]:
        """What is loaded as a Katalog: each Katalog document on its own, except those a
        Komposer imports, which are loaded through it (its overrides merged into their
        entries), and each Komposer's own new entries."""
        composed_by: dict[int, str] = {}  # id() of an imported Katalog -> its Komposer
        loads: list[Load] = []
        for doc in komposers:
            loads.extend(self.komposer(doc, composed_by))
        return [(d, None, KATALOG) for d in katalogs if id(d) not in composed_by] + loads

    def komposer(self, doc: Document, composed_by: dict[int, str]) -> list[Load]:
        """The loads of one Komposer (orksync.katalog.komposer): each imported Katalog with
        the overrides merged, then the Komposer's own new entries; none when the Komposer
        fails. The Katalogs it imports are marked in `composed_by` either way."""
        c = doc.content
        meta = c.get("metadata")
        raw_name = meta.get("name") if isinstance(meta, dict) else None
        name = raw_name if isinstance(raw_name, str) and raw_name else Path(doc.file).stem
        obj = f"Komposer/{name}"
        before = len(self.errors)
        findings = [f for f in check(c, KOMPOSER) if f.level == "error"]
        entry_findings: dict[str, list[Finding]] = {}
        for f in findings:
            if f.path[:2] == ("spec", "crds") and len(f.path) > 3:
                entry_findings.setdefault(str(f.path[2]), []).append(f)
            else:
                self.errors.append(self.error(doc, f.message, f.path, obj))
        sources = self.komposer_sources(doc, obj, composed_by)
        owner: dict[str, Document] = {}
        for i, src in sources:
            entries = get_in(src.content, ("spec", "crds"))
            for key in entries if isinstance(entries, dict) else ():
                first = owner.setdefault(str(key), src)
                if first is not src:
                    self.errors.append(self.error(
                        doc, f"duplicate CRD {str(key)!r}: defined in {self.rel(first.file)} "
                        f"and {self.rel(src.file)}: names must be unique across all imports",
                        ["imports", "files", i], obj))
        own = get_in(c, ("spec", "crds"))
        if own is not None and not isinstance(own, dict):
            self.errors.append(self.error(doc, "Komposer spec.crds must be a map of entries",
                                          ["spec", "crds"], obj))
        if len(self.errors) > before:  # Orkestra loads nothing of a broken Komposer
            self.errors.extend(self.error(doc, f.message, f.path, obj)
                               for fs in entry_findings.values() for f in fs)
            self.failed += 1 + len(sources)
            for held in (doc, *(src for _, src in sources)):
                self.hold_katalog(held, self.errors[before])
            return []
        own = own or {}
        for key in ("notes", "profiles"):
            if c.get(key) and sources:
                self.warn(doc, obj, [key], "applies to the Komposer's own new entries only: "
                          "orksync keeps each imported Katalog's notes and profiles (Orkestra "
                          "merges them all into one registry)")
        loads: list[Load] = []
        for _, src in sources:
            content = self.composed(doc, obj, src, {str(k): v for k, v in own.items()
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
                self.errors.append(self.error(
                    doc, f"names no entry of the imported Katalogs{hint}; as a new entry it "
                    "needs apiTypes (with a kind) or crdFile", ["spec", "crds", str(key)], obj))
                self.failed += 1
                continue
            new[key] = raw
        mine = {k: v for k, v in c.items() if k != "imports"}
        mine["spec"] = {**(c.get("spec") or {}), "crds": new}
        loads.append((Document(file=doc.file, index=doc.index, content=mine), c, KOMPOSER))
        return loads

    def komposer_sources(self, doc: Document, obj: str, composed_by: dict[int, str]
                         ) -> list[tuple[int, Document]]:
        """(index in imports.files, the Katalog document) of each file a Komposer imports,
        each marked in `composed_by` as this Komposer's; each problem is an error naming
        its item."""
        imports = doc.content.get("imports")
        if imports is not None and not isinstance(imports, dict):
            self.errors.append(self.error(doc, "imports must be a map (files, helm, "
                                          "registry)", ["imports"], obj))
            return []
        files = get_in(imports, ("files",))
        if files is not None and not isinstance(files, list):
            self.errors.append(self.error(doc, f"must be a list, not {_type(files)}",
                                          ["imports", "files"], obj))
            return []
        sources: list[tuple[int, Document]] = []
        here = f"{obj} ({self.rel(doc.file)})"
        for i, ref in import_refs(imports):
            problem = file_problem(ref)
            found: list[Document] = []
            if not problem:
                target = (doc.file.parent / ref).resolve()
                if not target.is_relative_to(self.root):
                    problem = f"{ref!r} points outside the repository"
                elif not target.is_file():
                    problem = f"file {ref!r} does not exist"
                else:
                    self.add_file(target)
                    found = [d for d in self.documents if d.file == target
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
                self.errors.append(self.error(doc, problem, ["imports", "files", i], obj))
            elif not any(d is found[0] for _, d in sources):  # a file named twice: once
                sources.append((i, found[0]))
                composed_by[id(found[0])] = here
        return sources

    def composed(self, doc: Document, obj: str, src: Document, overrides: dict[str, Any],
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
                problems = [self.error(doc, f.message, f.path, obj)
                            for f in entry_findings.get(str(key), [])]
                flat = flatten(override) if isinstance(override, dict) else None
                if flat is None:
                    problems.append(self.error(doc, "CRD entry must be a map", where, obj))
                else:
                    if not flat.problems:
                        resolve_includes(flat, doc.file, self.root)
                    problems.extend(self.error(doc, message, [*where, *path], obj)
                                    for path, message in flat.problems)
                if problems:
                    self.errors.extend(problems)
                    self.failed += 1
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
                    self.overrides[(src.file, src.index, str(key))] = (
                        doc, obj, [(t, [*where, *flat.written_at(list(t))]) for t in taken])
                    for path in unmerged:
                        self.warn(doc, obj, [*where, *flat.written_at(list(path))],
                                  "not merged: Orkestra's Komposer merge does not take "
                                  "this key from an override (it takes "
                                  f"{', '.join(MERGED_FIELDS)}); the value of "
                                  f"{self.rel(src.file)} stays")
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

    # --- CRDs ---------------------------------------------------------------------------

    def crd_manifest(self, doc: Document) -> CrdManifest | None:
        """The CRD of a document, checked (and its problem reported) once."""
        if id(doc) not in self.manifests:
            self.manifests[id(doc)] = self.check_crd(doc)
        return self.manifests[id(doc)]

    def check_crd(self, doc: Document) -> CrdManifest | None:
        c = doc.content
        meta = c.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        obj = f"CustomResourceDefinition/{name if isinstance(name, str) else '?'}"
        spec = c.get("spec")
        if not isinstance(name, str) or not name:
            self.errors.append(self.error(doc, "CustomResourceDefinition needs metadata.name",
                                          ["metadata", "name"], obj=obj))
            return None
        if not isinstance(spec, dict):
            self.errors.append(self.error(doc, "CustomResourceDefinition needs a spec map",
                                          ["spec"], obj=obj))
            return None
        names = spec.get("names")
        names = names if isinstance(names, dict) else {}
        versions = spec.get("versions")
        versions = versions if isinstance(versions, list) else []
        storage = [v.get("name") for v in versions if isinstance(v, dict) and v.get("storage")]
        group, kind, plural = spec.get("group"), names.get("kind"), names.get("plural")
        problems = []
        if not group:
            problems.append("spec.group")
        if not kind or not plural:
            problems.append("spec.names.kind/plural")
        if len(storage) != 1:
            problems.append("exactly one spec.versions[] entry with storage: true")
        if problems:
            self.errors.append(self.error(doc, "CustomResourceDefinition is missing "
                                          + ", ".join(problems), ["spec"], obj=obj))
            return None
        checks = ((["metadata", "name"], subdomain_problem(name)),
                  (["spec", "group"], _text_problem(group, subdomain_problem)),
                  (["spec", "names", "kind"], _text_problem(kind, kind_problem)),
                  (["spec", "names", "plural"], _text_problem(plural, label_problem)),
                  (["spec", "versions"], _text_problem(storage[0], label_problem)))
        for field, problem in checks:
            if problem:
                self.errors.append(self.error(doc, problem, field, obj=obj))
                return None
        if name != f"{plural}.{group}":
            self.errors.append(self.error(doc, f"must be named <plural>.<group> "
                                          f"({plural}.{group}), not {name!r}",
                                          ["metadata", "name"], obj=obj))
            return None
        return CrdManifest(name=name, body=c, source=self.source(doc), group=str(group),
                           kind=str(kind), plural=str(plural),
                           namespaced=spec.get("scope", "Namespaced") != "Cluster",
                           storage_version=str(storage[0]))

    # --- Katalogs -----------------------------------------------------------------------

    def katalog(self, doc: Document, crds: dict[str, CrdManifest],
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
                self.errors.append(self.error(doc, f"Katalog {field} must be a map, not "
                                              f"{_type(value)}", [field], obj))
                return None
        if raw_name is not None and not isinstance(raw_name, str):
            self.errors.append(self.error(doc, f"must be a string, not {_type(raw_name)}",
                                          ["metadata", "name"], obj))
            return None
        spec = c["spec"]
        # the schema table: unknown and refused keys are errors (those of a CRD entry
        # fail that entry only), deliberately unimplemented ones one warning each
        by_entry: dict[str, list[Finding]] = {}
        katalog_errors = 0
        for finding in check(c if checked is None else checked, schema):
            if finding.level == "warning":
                self.warn(doc, obj, list(finding.path), finding.message, as_written=True)
            elif finding.path[:2] == ("spec", "crds") and len(finding.path) > 3:
                by_entry.setdefault(str(finding.path[2]), []).append(finding)
            else:
                self.errors.append(self.error(doc, finding.message, finding.path, obj,
                                              as_written=True))
                katalog_errors += 1
        if katalog_errors:
            return None  # Orkestra refuses the whole Katalog
        if c.get("crossAccess") is not None and not isinstance(c["crossAccess"], bool):
            self.errors.append(self.error(doc, "must be true or false, not "
                                          f"{_type(c['crossAccess'])}", ["crossAccess"], obj))
            return None
        profiles, broken = parse_profiles(c.get("profiles"), doc.file, self.root)
        if broken:  # its entries would fail wherever they name a broken profile
            self.errors.extend(self.error(doc, message, path, obj) for path, message in broken)
            return None
        raw_crds = spec.get("crds")
        items: list[tuple[str, Any, list[str | int]]] = []
        if isinstance(raw_crds, dict):
            items = [(str(k), v, ["spec", "crds", str(k)]) for k, v in raw_crds.items()]
        elif isinstance(raw_crds, list):  # the very early list form: - name: x
            self.warn(doc, obj, ["spec", "crds"], "not portable to Orkestra: spec.crds as "
                      "a list (the early form); Orkestra reads a map of entries by name")
            for i, v in enumerate(raw_crds):
                key = v.get("name") if isinstance(v, dict) else None
                items.append((str(key or i), v, ["spec", "crds", i]))
        else:
            self.errors.append(self.error(doc, "Katalog spec.crds must be a map of entries",
                                          ["spec", "crds"], obj=obj))
            return None
        entries = []
        for key, raw, fpath in items:
            try:
                if isinstance(raw, dict) and raw.get("enabled") is False:
                    self.disable(doc, name, key, raw, crds)
                    continue
                problems = by_entry.get(key, [])
                if problems:
                    *rest, last = [self.error(doc, f.message, f.path, obj, as_written=True)
                                   for f in problems]
                    self.errors.extend(rest)
                    raise last
                entries.append(self.crd_entry(doc, name, key, raw, fpath, crds, profiles))
            except InputError as err:
                self.errors.append(err)
                self.failed += 1
                self.hold_kind(doc, name, key, raw, err)
        entries = self.check_depends_on(doc, obj, entries)
        errors = len(self.errors)
        notes = self.notes(doc, obj)
        if len(self.errors) > errors:
            return None  # its templates would fail wherever they call a broken note
        if spec.get("imports"):
            imported = katalog_notes(spec["imports"], doc.file, self.root, local_notes=notes)
            self.errors.extend(self.error(doc, p, ["spec", "imports"], obj)
                               for p in imported.problems)
            self.warnings.extend(f"{self.rel(doc.file)}: {obj}: {w}"
                                 for w in imported.warnings)
            notes = {**imported.notes, **notes}
        annotations = meta.get("annotations")
        dialect = annotations.get(DIALECT_ANNOTATION) if isinstance(annotations, dict) else None
        if dialect is None:
            dialect = "go"
        if dialect not in DIALECTS:
            self.errors.append(self.error(
                doc, f"{DIALECT_ANNOTATION} must be one of {', '.join(DIALECTS)}, not {dialect!r}",
                ["metadata", "annotations"], obj))
            return None
        return Katalog(name=name, api_version=str(c["apiVersion"]), source=self.source(doc),
                       crds=tuple(entries), notes=notes, dialect=str(dialect),
                       profiles=profiles)

    def check_depends_on(self, doc: Document, obj: str,
                         entries: list[CrdEntry]) -> list[CrdEntry]:
        """The entries whose dependsOn names entries of this Katalog that loaded, without
        a cycle; each other one is an error naming its field, and is not loaded (its
        custom resources would otherwise be applied without the wait it asks for)."""
        by_key = {e.key: e for e in entries}
        ok = []
        for entry in entries:
            cycle = _cycle(entry.key, by_key)
            if cycle:
                self.errors.append(self.error(
                    doc, f"dependsOn makes a cycle: {' -> '.join(cycle)}",
                    [*entry.path.split("."), *entry.written_at(["dependsOn"])], obj))
                self.held.setdefault((entry.group, entry.kind), (
                    f"Katalog {entry.katalog} entry {entry.key} did not load "
                    f"({self.errors[-1]})"))
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
                self.errors.append(self.error(
                    doc, f"names {name!r}, which is not a CRD entry of this Katalog that "
                    f"loaded{hint}",
                    [*entry.path.split("."), *entry.written_at(["dependsOn", at])], obj))
                self.held.setdefault((entry.group, entry.kind), (
                    f"Katalog {entry.katalog} entry {entry.key} did not load "
                    f"({self.errors[-1]})"))
            dropped = set(first)
            ok = [e for e in ok if e.key not in dropped]
        self.failed += len(entries) - len(ok)
        return ok

    def written(self, doc: Document, fields: list[str | int], obj: str
                ) -> tuple[Document, list[str | int], str]:
        """Where a field of a loaded entry is written: in its Komposer when an override
        gave its value (doc, field path, object name), else where it is."""
        if len(fields) > 3 and fields[:2] == ["spec", "crds"]:
            found = self.overrides.get((doc.file, doc.index, str(fields[2])))
            for given, where in found[2] if found else ():
                if tuple(fields[3:3 + len(given)]) == given:
                    assert found is not None
                    return found[0], [*where, *fields[3 + len(given):]], found[1]
        return doc, fields, obj

    def warn(self, doc: Document, obj: str, path: Sequence[str | int], message: str, *,
             as_written: bool = False) -> None:
        """A warning about a Katalog field: `file:line: Katalog/x: field.path: message`
        (`as_written`: as for `error`)."""
        if not as_written:
            doc, path, obj = self.written(doc, list(path), obj)
        line = locate(doc.file, doc.index, list(path))
        where = f"{self.rel(doc.file)}:{line}" if line else self.rel(doc.file)
        self.warnings.append(f"{where}: {obj}: {dotted(path)}: {message}")

    def disable(self, doc: Document, katalog: str, key: str, raw: dict[str, Any],
                crds: dict[str, CrdManifest]) -> None:
        """An entry with `enabled: false`: Orkestra skips it whole (no validation, no
        reconcile); its custom resources are left out, each named by `orksync validate`.
        Its kind is read from apiTypes, else from its crdFile's or the repository's CRD."""
        api = raw.get("apiTypes")
        api = api if isinstance(api, dict) else {}
        group, version, kind = api.get("group"), api.get("version"), api.get("kind")
        crd_file = raw.get("crdFile")
        if isinstance(crd_file, str) and crd_file and not (group and version and kind):
            found = self.crd_of_file(doc, crd_file)
            if found is not None:
                group = group or found.group
                kind = kind or found.kind
                version = version or found.storage_version
        if not version and group and kind:
            version = next((m.storage_version for m in crds.values()
                            if m.group == group and m.kind == kind), None)
        if isinstance(group, str) and isinstance(version, str) and isinstance(kind, str):
            self.disabled[(f"{group}/{version}" if group else version, kind)] = (
                f"Katalog {katalog} entry {key} has enabled: false "
                f"({self.rel(doc.file)})")

    def hold_katalog(self, doc: Document, err: Exception | None) -> None:
        """`hold_kind` for every entry of a Katalog (or Komposer) that did not load."""
        meta = doc.content.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        name = name if isinstance(name, str) and name else Path(doc.file).stem
        entries = get_in(doc.content, ("spec", "crds"))
        items = entries.items() if isinstance(entries, dict) else enumerate(
            entries if isinstance(entries, list) else [])
        for key, raw in items:
            self.hold_kind(doc, name, str(key), raw, err)

    def hold_kind(self, doc: Document, katalog: str, key: str, raw: Any,
                  err: Exception | None) -> None:
        """The kind of a Katalog entry that did not load, as far as the repository tells
        it (the entry's apiTypes, else its crdFile's CustomResourceDefinition when that
        loads; without either, the names the Katalog's text gives it: the entry's key and
        the parts of its crdFile's name, `webapp`, `platform.example.com_webapps.yaml`): a
        document of that kind is its custom resource, held while the entry does not load
        (`custom_resources`), never taken for a plain manifest."""
        if not isinstance(raw, dict):
            return
        flat = flatten(raw)
        if not flat.problems:
            raw = flat.raw
        api = raw.get("apiTypes")
        api = api if isinstance(api, dict) else {}
        group, kind = api.get("group"), api.get("kind")
        crd_file = raw.get("crdFile")
        if not (group and kind) and isinstance(crd_file, str) and crd_file:
            manifest = self.crd_of_file(doc, crd_file)
            if manifest is not None:
                group, kind = group or manifest.group, kind or manifest.kind
        where = f" ({err})" if err is not None else f" ({self.rel(doc.file)})"
        reason = f"Katalog {katalog} entry {key} did not load{where}"
        if isinstance(group, str) and group and isinstance(kind, str | None):
            self.held.setdefault((group, kind or ""), reason)
            return
        if isinstance(kind, str) and kind:
            names = {kind.lower()}
        else:
            names = {key.lower(), *(re.split(r"[._-]", Path(crd_file).stem.lower())
                                    if isinstance(crd_file, str) else ())}
        for name in names - {""}:
            self.held_names.setdefault(name, reason)

    def crd_of_file(self, doc: Document, crd_file: str) -> CrdManifest | None:
        """The valid CustomResourceDefinition a Katalog's crdFile names, if it has one."""
        target = (doc.file.parent / crd_file).resolve()
        if not target.is_relative_to(self.root) or not target.is_file():
            return None
        self.add_file(target)
        return next((m for d in self.documents if d.file == target
                     and isinstance(d.content, dict)
                     and d.content.get("kind") == "CustomResourceDefinition"
                     and (m := self.crd_manifest(d)) is not None), None)

    def notes(self, doc: Document, obj: str) -> dict[str, str]:
        """The Katalog's own `notes`: name → expression (or Orkestra's {expression: ...});
        a note a template could not call, or whose expression is not text, is an error."""
        raw = doc.content.get("notes") or {}
        if not isinstance(raw, dict):
            form = "a list (an early form Orkestra no longer reads)" \
                if isinstance(raw, list) else _type(raw)
            self.errors.append(self.error(
                doc, "notes must be Orkestra's map notes: {functions: [{name, expression}]} "
                f"(orksync also reads a map of name to expression), not {form}",
                ["notes"], obj))
            return {}
        if _registry_shape(raw):
            return self.note_functions(doc, obj, raw)
        if raw:
            self.warn(doc, obj, ["notes"], "not portable to Orkestra: notes as a map of "
                      "name to expression; Orkestra reads notes: {functions: [{name, "
                      "expression}]}")
        notes: dict[str, str] = {}
        for key, value in raw.items():
            expression = value.get("expression") if isinstance(value, dict) else value
            if not isinstance(key, str) or not _NOTE_NAME.match(key):
                self.errors.append(self.error(
                    doc, f"note name {key!r} is not an identifier (letters, digits, '_')",
                    ["notes"], obj))
            elif not isinstance(expression, str):
                self.errors.append(self.error(
                    doc, f"must be a template expression (a string), not {_type(expression)}",
                    ["notes", key], obj))
            else:
                notes[key] = expression
        return notes

    def note_functions(self, doc: Document, obj: str, raw: dict[str, Any]) -> dict[str, str]:
        """Orkestra's notes: `{functions: [{name, expression, description, shadow}],
        include: <file>}`; the included file's `functions:` come first, and a function
        defined again later replaces the earlier one (the Katalog's own win)."""
        functions: list[tuple[list[str | int], Any]] = []
        for key in raw:
            if key not in ("functions", "include"):
                near = difflib.get_close_matches(str(key), ["functions", "include"], n=1)
                hint = f" (did you mean {near[0]!r}?)" if near else ""
                self.errors.append(self.error(
                    doc, f"unknown field {key!r}{hint}: notes in Orkestra's shape hold "
                    "functions: and include: only", ["notes", str(key)], obj))
                return {}
        if raw.get("include") is not None:
            included, problem = read_include(raw["include"], doc.file, self.root,
                                             "functions")
            if problem:
                self.errors.append(self.error(doc, problem, ["notes", "include"], obj))
                return {}
            functions.extend((["notes", "include"], f) for f in included or [])
        own = raw.get("functions")
        if own is not None and not isinstance(own, list):
            self.errors.append(self.error(doc, f"must be a list, not {_type(own)}",
                                          ["notes", "functions"], obj))
            return {}
        functions.extend((["notes", "functions", i], f) for i, f in enumerate(own or []))
        notes: dict[str, str] = {}
        for path, item in functions:
            if not isinstance(item, dict):
                self.errors.append(self.error(doc, "must be a map with name and expression",
                                              path, obj))
                continue
            unknown = [k for k in item if k not in _NOTE_FUNCTION_KEYS]
            name, expression = item.get("name"), item.get("expression")
            if unknown:
                self.errors.append(self.error(doc, f"unknown field {unknown[0]!r} of a note "
                                              f"function (name, expression, description, "
                                              "shadow)", [*path, str(unknown[0])], obj))
            elif not isinstance(name, str) or not _NOTE_NAME.match(name):
                self.errors.append(self.error(
                    doc, f"note name {name!r} is not an identifier (letters, digits, '_')",
                    [*path, "name"], obj))
            elif not isinstance(expression, str):
                self.errors.append(self.error(
                    doc, f"must be a template expression (a string), not {_type(expression)}",
                    [*path, "expression"], obj))
            else:
                notes[name] = expression
        return notes

    def crd_entry(self, doc: Document, katalog: str, key: str, raw: Any,
                  fpath: list[str | int], crds: dict[str, CrdManifest],
                  profiles: Profiles | None = None) -> CrdEntry:
        obj = f"Katalog/{katalog}"
        if not isinstance(raw, dict):
            raise self.error(doc, "CRD entry must be a map", fpath, obj)
        flat = flatten(raw)
        if not flat.problems:
            resolve_includes(flat, doc.file, self.root)
        if flat.problems:
            *rest, last = [self.error(doc, message, [*fpath, *path], obj)
                           for path, message in flat.problems]
            self.errors.extend(rest)
            raise last
        raw = flat.raw
        wrong = _entry_type_problem(raw)
        if wrong:
            raise self.error(doc, wrong[1], [*fpath, *flat.written_at(wrong[0])], obj)
        if get_in(raw, ("operatorBox", "reconciler", "default")) is False:
            raise self.error(doc, "default: false runs a custom reconciler (Go code "
                             "compiled into an Orkestra operator); orksync renders the "
                             "declarative templates only: not supported",
                             [*fpath, *flat.written_at(["operatorBox", "reconciler",
                                                        "default"])], obj)
        go_code = _crd_level_go_code(raw)
        if go_code:
            raise self.error(doc, "needs Go code compiled into an Orkestra operator (a "
                             "constructor or hooks of a custom reconciler); orksync renders "
                             "the declarative templates only: not supported",
                             [*fpath, *go_code], obj)
        remote = _remote_cross(raw)
        if remote:
            raise self.error(doc, "reads another Orkestra instance over HTTP while "
                             "reconciling; a render is offline and repeatable and reads "
                             "the custom resources of its repository (and the live status "
                             "of its cluster) only: not supported",
                             [*fpath, *flat.written_at(remote)], obj)
        for path in _any_of(raw, []):
            self.warn(doc, obj, [*fpath, *flat.written_at(path)], "not portable to Orkestra: "
                      "anyOf was renamed or in v0.7.16, and Orkestra refuses the old name")
        selection = _selection(raw)
        if isinstance(selection, tuple):
            raise self.error(doc, selection[1], [*fpath, *selection[0]], obj)
        manifest = None
        if raw.get("crdFile"):
            manifest = self.crd_file(doc, raw["crdFile"], [*fpath, "crdFile"], obj)
            crds.setdefault(manifest.name, manifest)
        for i, cr_file in enumerate(raw.get("crFiles") or []):
            self.linked_file(doc, cr_file, [*fpath, "crFiles", i], obj, required=False)
        setup = raw.get("setup")
        for i, setup_file in enumerate(setup.get("apply") or []
                                       if isinstance(setup, dict) else []):
            where = [*fpath, *flat.written_at(["setup", "apply", i])]
            if not isinstance(setup_file, str) or not setup_file:
                raise self.error(doc, f"must be a file path (a string), not "
                                 f"{_type(setup_file)}", where, obj)
            target = self.linked_file(doc, setup_file, where, obj, required=True)
            self.setup_files.add(target)  # loaded even when the walk left it out
        api = raw.get("apiTypes") or {}
        if manifest is None:
            manifest = next((m for m in crds.values() if m.group == api.get("group")
                             and m.kind == api.get("kind")), None)
        builtin = BUILTIN_KINDS.get(str(api.get("kind"))) if manifest is None else None
        if builtin is not None:  # Orkestra fills a built-in kind's from its table
            group_, version_, plural_ = builtin
            api = {"group": group_, "version": version_, "plural": plural_, **api}
        group = str(api.get("group") or (manifest.group if manifest else ""))
        kind = str(api.get("kind") or (manifest.kind if manifest else ""))
        version = str(api.get("version") or (manifest.storage_version if manifest else ""))
        plural = str(api.get("plural") or (manifest.plural if manifest else ""))
        missing = [n for n, v in (("group", group), ("version", version), ("kind", kind),
                                  ("plural", plural))
                   if not v and not (n == "group" and builtin is not None)]
        if missing:
            raise self.error(doc, f"apiTypes.{', apiTypes.'.join(missing)} not set and no "
                             "crdFile (or CustomResourceDefinition in the repository) gives "
                             "them", [*fpath, "apiTypes"], obj)
        for field, problem in (("group", subdomain_problem(group)
                                 if group or builtin is None else None),
                               ("version", label_problem(version)),
                               ("kind", kind_problem(kind)), ("plural", label_problem(plural))):
            if problem:
                where = ["apiTypes", field] if api.get(field) else ["crdFile"]
                raise self.error(doc, problem, [*fpath, *where], obj)
        namespaced = raw.get("namespaced", True) is not False
        if manifest is not None and not manifest.namespaced:
            namespaced = False
        if builtin is not None and kind in CLUSTER_SCOPED:
            namespaced = False
        box = raw.get("operatorBox") or raw.get("reconciler") or {}
        if raw.get("imports") or (isinstance(box, dict) and box.get("imports")):
            expansion = expand_entry(raw, doc.file, self.root)
            self.warnings.extend(f"{self.rel(doc.file)}: {obj}: {w}" for w in expansion.warnings)
            if expansion.problems:
                *rest, last = [self.error(doc, p, [*fpath, "imports"], obj)
                               for p in expansion.problems]
                self.errors.extend(rest)
                raise last
            raw = expansion.raw
            box = raw.get("operatorBox") or raw.get("reconciler") or {}
        if not isinstance(box, dict):
            raise self.error(doc, "operatorBox must be a map", [*fpath, "operatorBox"], obj)
        tenancy, problems = tenancy_of(doc.content, raw, fpath, namespaced=namespaced)
        if problems:  # a guard that does not read as written must not render anything
            *rest, last = [self.error(doc, message, _written(path, fpath, flat.written_at),
                                      obj) for path, message in problems]
            self.errors.extend(rest)
            raise last
        wrong_cleanup = _cleanup_problem(box, raw.get("ignoreStatusPatch") is True)
        if wrong_cleanup:
            raise self.error(doc, wrong_cleanup[1], [*fpath, "operatorBox", "runtime",
                                                     "cleanup", *wrong_cleanup[0]], obj)
        timeout = raw.get("healthTimeout")  # orksync.lifecycle.health; docs/operations.md
        if timeout is not None:
            try:
                parse_duration(str(timeout))
            except ValueError as err:
                raise self.error(doc, f"not a duration: {err}", [*fpath, "healthTimeout"],
                                 obj) from err
        hosts = raw.get(ALLOWED_HOSTS_FIELD)
        problem = allowed_hosts_problem(hosts)
        if problem:
            raise self.error(doc, problem, [*fpath, *flat.written_at([ALLOWED_HOSTS_FIELD])],
                             obj)
        depends_on, refusal = _depends_on(raw.get("dependsOn"))
        if refusal is not None:
            raise self.error(doc, refusal[1],
                             [*fpath, *flat.written_at(["dependsOn", *refusal[0]])], obj)
        return CrdEntry(key=key, katalog=katalog, source=self.source(doc), group=group,
                        version=version, kind=kind, plural=plural, namespaced=namespaced,
                        operator_box=box, raw=raw,
                        crd_name=manifest.name if manifest else f"{plural}.{group}",
                        tenancy=tenancy, selection=selection,
                        protect_crd=_protects_crd(doc.content, raw),
                        depends_on=depends_on, external_hosts=tuple(hosts or ()),
                        moved=tuple(flat.moved.items()), profiles=profiles or {},
                        cross_access=_cross_access(doc.content, raw))

    def linked_file(self, doc: Document, rel: str, fpath: list[str | int], obj: str, *,
                    required: bool) -> Path | None:
        target = (doc.file.parent / rel).resolve()
        if not target.is_relative_to(self.root):
            raise self.error(doc, f"{rel!r} points outside the repository", fpath, obj)
        if not target.is_file():
            if required:
                raise self.error(doc, f"file {rel!r} does not exist", fpath, obj)
            self.warnings.append(f"{self.rel(doc.file)}: {obj}: {dotted(fpath)}: "
                                 f"file {rel!r} does not exist (ignored)")
            return None
        self.add_file(target)
        return target

    def crd_file(self, doc: Document, rel: str, fpath: list[str | int],
                 obj: str) -> CrdManifest:
        target = self.linked_file(doc, rel, fpath, obj, required=True)
        assert target is not None
        invalid = False
        for d in self.documents:
            if d.file == target and isinstance(d.content, dict) and \
                    d.content.get("kind") == "CustomResourceDefinition":
                manifest = self.crd_manifest(d)
                if manifest is not None:
                    return manifest
                invalid = True
        if invalid or any(isinstance(e, LoadError) and e.file == self.rel(target)
                          for e in self.errors):
            raise self.error(doc, f"{rel!r} holds no valid CustomResourceDefinition (its "
                             "problem is reported above)", fpath, obj)
        raise self.error(doc, f"{rel!r} holds no CustomResourceDefinition", fpath, obj)

    # --- custom resources ---------------------------------------------------------------

    def custom_resources(self, docs: list[Document], katalogs: list[Katalog],
                         crds: list[CrdManifest]) -> list[CustomResource]:
        by_type: dict[tuple[str, str], CrdEntry] = {}
        for k in katalogs:
            for e in k.crds:
                prior = by_type.get((e.api_version, e.kind))
                if prior is not None:
                    self.errors.append(InputError(
                        f"{e.kind} ({e.api_version}) is already handled by Katalog "
                        f"{prior.katalog} entry {prior.key} in {prior.source.file}",
                        file=e.source.file, path=e.path, obj=f"Katalog/{k.name}"))
                    continue
                by_type[(e.api_version, e.kind)] = e
        # A group some Katalog entry or CRD of the repository defines: a document of that
        # group that no entry handles is a mistake (a typo in kind or version), not a
        # manifest of some other tool.
        groups = {e.group for e in by_type.values()} | {m.group for m in crds} | ORKESTRA_GROUPS
        crs: dict[ObjRef, CustomResource] = {}
        # documents loaded late (crFiles and setup.apply files outside the walk) are in
        # self.documents too
        extra = [d for d in self.documents if id(d) not in self.classified
                 and isinstance(d.content, dict)
                 and (_type_key(d.content) in by_type or d.file in self.setup_files)]
        for doc in [*docs, *extra]:
            c = doc.content
            key = _type_key(c)
            if id(doc) not in self.classified and key is not None and key not in by_type \
                    and (key[0] in KATALOG_API_VERSIONS or key[1] == "CustomResourceDefinition"):
                self.errors.append(self.error(
                    doc, f"a {key[1]} in a setup.apply file outside the repository's walk "
                    "(.orksyncignore lists it) is not read: setup.apply loads plain "
                    "manifests only", ["kind"], obj=document_identity(c)))
                continue
            entry = by_type.get(key) if key is not None else None
            if entry is None:
                if key is not None and key in self.disabled:
                    self.leave_out(doc, _loose_ref(c), self.disabled[key])
                    continue
                held = self.held_by(key) if key is not None else None
                if held is not None:
                    self.hold(doc, held)
                    continue
                if self.unhandled(doc, groups, by_type):
                    self.plain_manifest(doc, crds)
                continue
            cr = self.custom_resource(doc, entry)
            if cr is None:
                continue
            reason = _not_selected(cr, entry.selection)
            if reason:
                self.leave_out(doc, cr.ref, f"Katalog {entry.katalog} entry {entry.key}: "
                               f"{reason}")
                continue
            if cr.ref in crs:
                self.errors.append(self.error(
                    doc, f"duplicate of {crs[cr.ref].source} (the first one is used)",
                    obj=str(cr.ref)))
                continue
            crs[cr.ref] = cr
        # ObjRef's order, compared as plain tuples (its generated __lt__ builds two tuples
        # per comparison)
        return sorted(crs.values(), key=lambda r: (r.ref.api_version, r.ref.kind,
                                                   r.ref.namespace, r.ref.name))

    def held_by(self, key: tuple[str, str]) -> str | None:
        """Why a document of this (apiVersion, kind) is held: the Katalog entry of its kind
        did not load (None: no entry known to handle it failed)."""
        api, kind = key
        group = api.rpartition("/")[0]
        if not group:
            return None
        found = self.held.get((group, kind)) or self.held.get((group, ""))
        if found is None and "." in group and not group.endswith("k8s.io"):
            # a group of no Kubernetes API: a kind named like an entry that did not load
            name = kind.lower()
            found = self.held_names.get(name) or self.held_names.get(f"{name}s") or \
                self.held_names.get(f"{name}es")
        return found

    def hold(self, doc: Document, reason: str) -> None:
        """A custom resource whose Katalog entry did not load: left out of the render
        (`left_out`), so that it is neither applied (as a plain manifest, without its
        finalizer) nor pruned, nor its children; a warning names the entry (a consequence
        of the entry's error, reported above as such)."""
        self.left_out.append((_loose_ref(doc.content), f"held: {reason}"))
        line = _first_line(doc.file) if doc.index == 0 else locate(doc.file, doc.index, [])
        where = f"{self.rel(doc.file)}:{line}" if line else self.rel(doc.file)
        self.warnings.append(
            f"{where}: {document_identity(doc.content)}: not loaded: {reason}, reported "
            "above: held, neither applied nor pruned (its finalizer and its children are "
            "kept) until its Katalog entry loads")

    def leave_out(self, doc: Document, ref: ObjRef, reason: str) -> None:
        """A custom resource Orkestra would not reconcile: not rendered, not pruned, one
        warning line (`orksync validate` shows it)."""
        self.left_out.append((ref, f"left out: {reason}"))
        line = _first_line(doc.file) if doc.index == 0 else locate(doc.file, doc.index, [])
        where = f"{self.rel(doc.file)}:{line}" if line else self.rel(doc.file)
        self.warnings.append(f"{where}: {ref}: left out (not rendered, not pruned): {reason}")

    def unhandled(self, doc: Document, groups: set[str],
                  by_type: dict[tuple[str, str], CrdEntry]) -> bool:
        """A document no Katalog entry handles: an error when its group is one the
        repository defines; True when it is a plain manifest (apiVersion and kind of
        another group); else ignored (YAML that is not a manifest)."""
        api, kind = doc.content.get("apiVersion"), doc.content.get("kind")
        if not isinstance(api, str) or not isinstance(kind, str):
            return False
        if api.partition("/")[0] not in groups or "/" not in api:
            return True
        known = sorted(f"{k} ({a})" for a, k in by_type if a.partition("/")[0]
                       == api.partition("/")[0])
        if api.partition("/")[0] in ORKESTRA_GROUPS:
            message = (f"unknown Orkestra kind {kind!r} in {api} (orksync reads Katalog and "
                       "Motif and Komposer; E2E and Simulate are ignored)")
        elif self.failed:  # most likely the entry that failed: a consequence, not a cause
            self.warnings.append(
                f"{self.rel(doc.file)}: {document_identity(doc.content)}: not loaded: no "
                f"Katalog entry handles {kind} ({api}), and {self.failed} Katalog(s) or "
                "entries failed to load, reported above")
            return False
        else:
            message = (f"no Katalog entry handles {kind} ({api})" +
                       (f"; entries of that group: {', '.join(known)}" if known
                        else "; a CustomResourceDefinition defines the group, no Katalog "
                        "entry uses it"))
        self.errors.append(self.error(doc, message, ["kind"], obj=document_identity(doc.content)))
        return False

    def plain_manifest(self, doc: Document, crds: list[CrdManifest]) -> None:
        """A plain manifest, checked: an error names its file, line and field, and the
        document is not applied (the render then has an error: nothing is pruned)."""
        body = doc.content
        api, kind = str(body["apiVersion"]), str(body["kind"])
        obj = document_identity(body)
        group, _, version = api.rpartition("/")
        for field, problem in (
                ("apiVersion", (group and subdomain_problem(group))
                 or label_problem(version)),
                ("kind", kind_problem(kind))):
            if problem:
                self.errors.append(self.error(doc, f"not a Kubernetes {field}: {problem}",
                                              [field], obj))
                return
        meta = body.get("metadata")
        if not isinstance(meta, dict):
            self.errors.append(self.error(doc, f"metadata must be a map, not {_type(meta)}",
                                          ["metadata"] if "metadata" in body else [], obj))
            return
        name, namespace = meta.get("name"), meta.get("namespace")
        problem = _text_problem(name, subdomain_problem) if name is not None else \
            "name is missing (orksync applies a manifest under its name; generateName " \
            "is not supported)"
        if problem:
            self.errors.append(self.error(doc, problem, ["metadata", "name"], obj))
            return
        if namespace is not None:
            problem = _text_problem(namespace, label_problem)
            if problem:
                self.errors.append(self.error(doc, problem, ["metadata", "namespace"], obj))
                return
        scope = _BUILTIN_SCOPE.get((api, kind))
        if scope is None:
            scope = next((m.namespaced for m in crds if m.kind == kind
                          and api.startswith(f"{m.group}/")), None)
        if scope is True and not namespace:
            self.errors.append(self.error(
                doc, f"namespace is not set and a {kind} is namespaced: write its "
                "namespace (orksync applies a manifest as it is and does not guess one)",
                ["metadata"], obj))
            return
        if scope is False and namespace:
            self.errors.append(self.error(
                doc, f"a {kind} is cluster-scoped: it has no namespace",
                ["metadata", "namespace"], obj))
            return
        for key in ("labels", "annotations"):
            if meta.get(key) is not None and not isinstance(meta[key], dict):
                self.errors.append(self.error(doc, f"must be a map, not {_type(meta[key])}",
                                              ["metadata", key], obj))
                return
        clean = {k: v for k, v in body.items() if k != "status"}
        clean["metadata"] = {k: v for k, v in meta.items() if k not in _SERVER_META}
        ref = ObjRef(api_version=api, kind=kind, namespace=str(namespace or ""),
                     name=str(name))
        prior = self.plain.get(ref)
        if prior is not None:
            self.errors.append(self.error(
                doc, f"duplicate of {prior.source} (the first one is used)", obj=str(ref)))
            return
        self.plain[ref] = PlainManifest(ref=ref, body=clean, source=self.source(doc))

    def custom_resource(self, doc: Document, entry: CrdEntry) -> CustomResource | None:
        body = doc.content
        meta = body.get("metadata")

        def obj() -> str:  # for a message: worked out only for one
            return document_identity(body, entry.kind)
        if not isinstance(meta, dict):
            self.errors.append(self.error(doc, f"custom resource metadata must be a map, not "
                                          f"{_type(meta)}", ["metadata"], obj()))
            return None
        name = meta.get("name")
        problem = _text_problem(name, subdomain_problem) if name is not None \
            else "name is missing"
        if problem:
            self.errors.append(self.error(doc, problem, ["metadata", "name"], obj()))
            return None
        namespace = meta.get("namespace")
        if entry.namespaced:
            namespace = namespace if namespace is not None else "default"
            problem = _text_problem(namespace, label_problem)
            if problem:
                self.errors.append(self.error(doc, problem,
                                              ["metadata", "namespace"], obj()))
                return None
        else:
            namespace = ""
        spec = body.get("spec")
        if spec is not None and not isinstance(spec, dict):
            self.errors.append(self.error(doc, f"spec must be a map, not {_type(spec)}",
                                          ["spec"], obj()))
            return None
        for key in ("labels", "annotations"):
            if meta.get(key) is not None and not isinstance(meta[key], dict):
                self.errors.append(self.error(doc, f"must be a map, not {_type(meta[key])}",
                                              ["metadata", key], obj()))
                return None
        clean = {k: v for k, v in body.items() if k != "status"}
        clean["metadata"] = {k: v for k, v in meta.items() if k in _CR_META_KEPT}
        if namespace:
            clean["metadata"]["namespace"] = namespace
        else:
            clean["metadata"].pop("namespace", None)
        ref = ObjRef(api_version=entry.api_version, kind=entry.kind, namespace=namespace,
                     name=str(name))
        return CustomResource(ref=ref, body=clean, source=self.source(doc), entry=entry)


_CR_META_KEPT = ("name", "namespace", "labels", "annotations")
# metadata a plain manifest copied from a live object carries: the API server's to set
_SERVER_META = frozenset({"uid", "resourceVersion", "generation", "creationTimestamp",
                          "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields",
                          "selfLink"})
# The scope of the built-in kinds a plain manifest most often holds, by (apiVersion,
# kind): True namespaced, False cluster-scoped. Other kinds: their CRD's in the
# repository, else the API server's, checked when applied (orksync.apply.engine).
_BUILTIN_SCOPE: dict[tuple[str, str], bool] = {
    **dict.fromkeys([("v1", "Namespace"), ("v1", "PersistentVolume"), ("v1", "Node"),
                     ("rbac.authorization.k8s.io/v1", "ClusterRole"),
                     ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
                     ("storage.k8s.io/v1", "StorageClass"),
                     ("scheduling.k8s.io/v1", "PriorityClass"),
                     ("networking.k8s.io/v1", "IngressClass"),
                     ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"),
                     ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration")],
                    False),
    **dict.fromkeys([("v1", "ConfigMap"), ("v1", "Secret"), ("v1", "Service"),
                     ("v1", "ServiceAccount"), ("v1", "PersistentVolumeClaim"),
                     ("v1", "Pod"), ("v1", "ResourceQuota"), ("v1", "LimitRange"),
                     ("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"),
                     ("apps/v1", "DaemonSet"), ("apps/v1", "ReplicaSet"),
                     ("batch/v1", "Job"), ("batch/v1", "CronJob"),
                     ("rbac.authorization.k8s.io/v1", "Role"),
                     ("rbac.authorization.k8s.io/v1", "RoleBinding"),
                     ("networking.k8s.io/v1", "NetworkPolicy"),
                     ("networking.k8s.io/v1", "Ingress"),
                     ("policy/v1", "PodDisruptionBudget"),
                     ("autoscaling/v2", "HorizontalPodAutoscaler")], True),
}


def _type(value: Any) -> str:
    """The YAML name of a value's type, for messages."""
    names = {dict: "a map", list: "a list", str: "a string", bool: "a boolean",
             int: "an integer", float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _text_problem(value: Any, rule: Callable[[str], str | None]) -> str | None:
    """`rule`'s problem with `value`, which must be a string first."""
    if not isinstance(value, str):
        return f"must be a string, not {_type(value)}"
    return rule(value)


def _entry_type_problem(raw: dict[str, Any]) -> tuple[list[str | int], str] | None:
    """The first field of a CRD entry whose type is wrong: (field path, message)."""
    for key in ("crdFile",):
        if raw.get(key) is not None and not isinstance(raw[key], str):
            return [key], f"must be a file path (a string), not {_type(raw[key])}"
    for key in ("namespaced", "enabled", "crossAccess"):
        if raw.get(key) is not None and not isinstance(raw[key], bool):
            return [key], f"must be true or false, not {_type(raw[key])}"
    for key in ("crFiles", *NAMESPACE_LISTS):
        value = raw.get(key)
        if value is None:
            continue
        if not isinstance(value, list):
            return [key], f"must be a list of strings, not {_type(value)}"
        for i, item in enumerate(value):
            if not isinstance(item, str):
                return [key, i], f"must be text, not {_type(item)}"
    setup = raw.get("setup")
    if setup is not None and not isinstance(setup, dict):
        return ["setup"], f"must be a map (apply, wait), not {_type(setup)}"
    files = (setup or {}).get("apply")
    if files is not None and not isinstance(files, list):
        return ["setup", "apply"], f"must be a list of file paths, not {_type(files)}"
    box_key = "operatorBox" if "operatorBox" in raw else "reconciler"
    conditions = get_in(raw, (box_key, "status", "conditions"))
    if conditions is not None and not isinstance(conditions, bool):
        return [box_key, "status", "conditions"], \
            f"must be true or false, not {_type(conditions)}"
    api = raw.get("apiTypes")
    if api is not None and not isinstance(api, dict):
        return ["apiTypes"], f"must be a map, not {_type(api)}"
    for key, value in (api or {}).items():
        if value is not None and not isinstance(value, str):
            return ["apiTypes", str(key)], f"must be a string, not {_type(value)}"
    return _labels_problem(raw.get("labels"))


def _labels_problem(labels: Any) -> tuple[list[str | int], str] | None:
    """Orkestra's check of an entry's `labels` (labels added to each custom resource):
    static, valid label keys; values are templates (text), rendered per custom
    resource."""
    if labels is None:
        return None
    if not isinstance(labels, dict):
        return ["labels"], f"must be a map of label key to value, not {_type(labels)}"
    for key, value in labels.items():
        if not isinstance(key, str) or "{{" in key:
            return ["labels", str(key)], (f"key {key!r} must be a static label key, not a "
                                          "template")
        problem = label_key_problem(key)
        if problem:
            return ["labels", key], problem
        if not isinstance(value, str):
            return ["labels", key], (f"must be a label value or a template (a string), not "
                                     f"{_type(value)}")
    return None


def _cross_access(katalog: dict[str, Any], entry: dict[str, Any]) -> bool:
    """Orkestra's crossAccess of an entry: its own, else the Katalog's (the default of
    every entry that sets none), else true."""
    own = entry.get("crossAccess")
    if isinstance(own, bool):
        return own
    return katalog.get("crossAccess") is not False


def _cleanup_problem(box: dict[str, Any], no_status: bool
                     ) -> tuple[list[str | int], str] | None:
    """The first wrong field of runtime.cleanup (orksync.render.cleanup): (path below it,
    message). `no_status`: the entry has ignoreStatusPatch, so deleteAfter could never
    count (its start is noted in the status)."""
    runtime = box.get("runtime")
    block = runtime.get("cleanup") if isinstance(runtime, dict) else None
    if block is None:
        return None
    if not isinstance(block, dict):
        return [], f"must be a map (when, or, deleteAfter), not {_type(block)}"
    for key in ("when", "or"):
        value = block.get(key)
        if value is not None and (not isinstance(value, list)
                                  or not all(isinstance(c, dict) for c in value)):
            return [key], "must be a list of conditions"
    wait = block.get("deleteAfter")
    if wait is not None:
        try:
            parse_duration(str(wait))
        except ValueError as err:
            return ["deleteAfter"], f"not a duration: {err}"
        if no_status:
            return ["deleteAfter"], ("counts from status.orksync.cleanupConditionsMetAt, "
                                     "which ignoreStatusPatch keeps orksync from writing: "
                                     "remove one of the two")
    return None


_NOTE_FUNCTION_KEYS = ("name", "expression", "description", "shadow")


# dependsOn states: what orksync waits for (Orkestra's `ready` is read as `healthy`); the
# others gate on a controller's life cycle, which a sync does not have
DEPENDS_ON_STATES = {"started": "started", "healthy": "healthy", "ready": "healthy"}
DEPENDS_ON_REFUSED = ("pending", "degraded", "deleted")


def _depends_on(value: Any) -> tuple[tuple[tuple[str, str], ...],
                                     tuple[list[str | int], str] | None]:
    """An entry's dependsOn as (entry key, state) pairs: a list of names (each
    `started`) or a map of name to state (`db: healthy`, or Orkestra's
    `db: {condition: healthy}`); or the problem (path under dependsOn, message)."""
    if value is None:
        return (), None
    if isinstance(value, list):
        for i, item in enumerate(value):
            if not isinstance(item, str) or not item:
                return (), ([i], f"must be a CRD entry name, not {_type(item)}")
        return tuple((item, "started") for item in value), None
    if not isinstance(value, dict):
        return (), ([], f"must be a list of CRD entry names or a map of name to state, "
                        f"not {_type(value)}")
    pairs = []
    for name, state in value.items():
        if isinstance(state, dict):  # Orkestra's map form: {db: {condition: healthy}}
            extra = sorted(str(k) for k in state if k != "condition")
            if extra:
                return (), ([str(name), extra[0]], "unknown key: a dependency is "
                            "{condition: <state>} (or the state alone)")
            state = state.get("condition")
        if state in DEPENDS_ON_REFUSED:
            return (), ([str(name)], f"state {state!r} is not supported: a sync waits for "
                        "a dependency's custom resources to be healthy (healthy, ready) "
                        "or for nothing (started); it has no controller whose life cycle "
                        "could be pending, degraded or deleted")
        if not isinstance(state, str) or state not in DEPENDS_ON_STATES:
            return (), ([str(name)], f"must be one of started, healthy, ready (or "
                        f"Orkestra's {', '.join(DEPENDS_ON_REFUSED)}), not {state!r}")
        pairs.append((str(name), DEPENDS_ON_STATES[state]))
    return tuple(pairs), None


def _crd_level_go_code(raw: Mapping[str, Any]) -> list[str | int]:
    """The path of a CRD-level `reconciler: {constructor: ...}` or `{hooks: ...}` (a
    custom reconciler's Go code), [] when there is none. Read whether `reconciler` is the
    entry's reconciler settings (beside an operatorBox) or the v1Alpha name of the box."""
    reconciler = raw.get("reconciler")
    if not isinstance(reconciler, Mapping):
        return []
    return next((["reconciler", key] for key in ("constructor", "hooks")
                 if reconciler.get(key) not in (None, "", {}, [])), [])


def _remote_cross(raw: Mapping[str, Any]) -> list[str | int]:
    """The path of a `cross[].source` (a cross read from another Orkestra instance over
    HTTP), [] when there is none."""
    box = raw.get("operatorBox") or raw.get("reconciler")
    cross = box.get("cross") if isinstance(box, Mapping) else None
    for i, item in enumerate(cross if isinstance(cross, list) else []):
        if isinstance(item, Mapping) and item.get("source") not in (None, "", {}):
            return ["operatorBox", "cross", i, "source"]
    return []


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


def _protects_crd(katalog: dict[str, Any], entry: dict[str, Any]) -> bool:
    """Orkestra's deletion protection of the entry's CRD: the Katalog's
    security.deletionProtection is declared and not `enabled: false`, and the entry's
    deletionProtection (flat, or runtime.deletionProtection) does not say protectCRD:
    false."""
    block = get_in(katalog, ("security", "deletionProtection"))
    if not isinstance(block, dict) or block.get("enabled") is False:
        return False
    override = entry.get("deletionProtection")
    return not (isinstance(override, dict) and override.get("protectCRD") is False)


def _first_line(path: Path) -> int | None:
    """The line where a file's first document starts (past comments, directives and
    `---`): the line of a custom resource alone in its file, found without the
    round-trip parse of the whole file that `locate` needs."""
    try:
        with path.open(encoding="utf-8") as f:
            for number, text in enumerate(f, 1):
                stripped = text.strip()
                if stripped and not stripped.startswith(("#", "%", "---")):
                    return number
    except (OSError, UnicodeDecodeError):
        pass
    return None


def _any_of(node: Any, path: list[str | int]) -> Iterator[list[str | int]]:
    """The paths of the `anyOf` condition lists of an entry (the preReconcile gates'
    are the schema table's)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "anyOf" and isinstance(value, list):
                yield [*path, key]
            elif path != ["operatorBox"] or key != "preReconcile":
                yield from _any_of(value, [*path, str(key)])
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _any_of(value, [*path, i])


def _registry_shape(notes: dict[Any, Any]) -> bool:
    """Orkestra's NoteRegistry (`functions:` list, `include:` file) rather than orksync's
    map of name to expression (where a note named `functions` holds text)."""
    return isinstance(notes.get("functions"), list) or (
        "include" in notes and set(notes) <= {"include", "functions"}
        and not isinstance(notes.get("functions"), str))


def _written(path: list[str | int], fpath: list[str | int],
             written_at: Callable[[list[str | int]], list[str | int]]) -> list[str | int]:
    """A problem's document path as written: its grouped spelling when the setting was
    moved from the grouped layout."""
    if path[:len(fpath)] == fpath:
        return [*fpath, *written_at(path[len(fpath):])]
    return path


def _selection(raw: dict[str, Any]) -> Selection | tuple[list[str | int], str]:
    """The entry's Selection, or (field path, problem)."""
    namespace = raw.get("namespace")
    if namespace is not None:
        problem = _text_problem(namespace, label_problem)
        if problem:
            return ["namespace"], problem
    pairs: dict[str, tuple[tuple[str, str], ...]] = {}
    for key in ("labelSelector", "fieldSelector"):
        value = raw.get(key)
        if value is None:
            pairs[key] = ()
            continue
        if not isinstance(value, dict):
            return [key], f"must be a map of key to value, not {_type(value)}"
        for k, v in value.items():
            if not isinstance(v, (str, int, float, bool)):
                return [key, str(k)], f"must be a value (text), not {_type(v)}"
        pairs[key] = tuple((str(k), _scalar(v)) for k, v in value.items())
    return Selection(namespace=str(namespace or ""), labels=pairs["labelSelector"],
                     fields=pairs["fieldSelector"])


def _scalar(value: Any) -> str:
    """A selector value as the API server compares it (YAML true is "true")."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _not_selected(cr: CustomResource, selection: Selection) -> str:
    """Why Orkestra's informer would not see `cr` ("" when it would)."""
    if selection.namespace and cr.entry.namespaced and cr.ref.namespace != selection.namespace:
        return (f"namespace: {selection.namespace} (the entry watches that namespace only; "
                f"this one is in {cr.ref.namespace or 'no namespace'})")
    labels = cr.body["metadata"].get("labels") or {}
    for key, value in selection.labels:
        if key not in labels or _scalar(labels[key]) != value:
            have = f"has {key}={_scalar(labels[key])}" if key in labels else f"has no {key}"
            return f"labelSelector {key}={value} does not match (the custom resource {have})"
    for path, value in selection.fields:
        found: Any = cr.body
        for step in path.split("."):
            found = found.get(step) if isinstance(found, dict) else None
        if found is None or _scalar(found) != value:
            return (f"fieldSelector {path}={value} does not match (the custom resource has "
                    f"{'no ' + path if found is None else path + '=' + _scalar(found)})")
    return ""


def _loose_ref(content: dict[str, Any]) -> ObjRef:
    """The identity of a custom resource whose entry is disabled (its scope unknown: the
    namespace as written)."""
    meta = content.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    return ObjRef(api_version=str(content.get("apiVersion")), kind=str(content.get("kind")),
                  namespace=str(meta.get("namespace") or ""), name=str(meta.get("name")))


def _half_manifest(content: dict[str, Any]) -> tuple[str, str, str] | None:
    """A document that looks like a manifest (a `metadata` map and apiVersion or kind, or
    a key that is a misspelling of one) but lacks a usable apiVersion or kind: (the field,
    the key whose line locates it, the message). None for a whole manifest and for YAML
    that is no manifest at all. Such a document is an error, never skipped: skipped, the
    object it applied before would leave the render and be pruned."""
    if not isinstance(content.get("metadata"), dict):
        return None
    fields = ("apiVersion", "kind")
    missing = [f for f in fields if not content.get(f)]
    if not missing:
        return None
    # with neither field written, only the same name spelt otherwise (`Kind`,
    # `api_version`) makes it a manifest; with one of them, any close misspelling
    loose = len(missing) == 1
    near = {f: next((k for k in content if isinstance(k, str) and k != f and (
        _squashed(k) == _squashed(f) or (loose and difflib.get_close_matches(
            k, [f], n=1, cutoff=0.75)))), None) for f in missing}
    if not loose and not any(near.values()):
        return None
    field = missing[0]
    other = next((f for f in fields if f not in missing), "metadata")
    if near[field]:
        return (field, str(near[field]), f"missing; the document has {near[field]!r} (did "
                f"you mean {field}?): a manifest needs apiVersion and kind, this one is not "
                "applied")
    return (field, field if field in content else other,
            f"{'empty' if field in content else 'missing'}: a manifest needs apiVersion and "
            "kind, this one is not applied")


def _squashed(key: str) -> str:
    """A key without case, `_` and `-`: `api_version` and `APIVersion` are `apiversion`."""
    return key.lower().replace("_", "").replace("-", "")


def _type_key(content: dict[str, Any]) -> tuple[str, str] | None:
    """(apiVersion, kind) of a document, None when either is not a string."""
    api, kind = content.get("apiVersion"), content.get("kind")
    return (api, kind) if isinstance(api, str) and isinstance(kind, str) else None
