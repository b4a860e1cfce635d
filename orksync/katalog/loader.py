"""Load a repository into a Catalog: Katalogs (both apiVersion eras), CRDs and custom
resources found anywhere by apiVersion/kind.

Pure over the file system: reads files under the repository root, never writes, never
talks to a cluster. A bad document is recorded as an error naming its file (and line) and
loading goes on with the rest.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from orksync.errors import InputError, LoadError
from orksync.katalog.model import (
    KATALOG_API_VERSIONS,
    Catalog,
    CrdEntry,
    CrdManifest,
    CustomResource,
    Katalog,
    Source,
)
from orksync.katalog.motifs import expand_entry, katalog_notes
from orksync.katalog.tenancy import tenancy_of
from orksync.model import ObjRef
from orksync.names import subdomain_problem
from orksync.yamlio import Document, dotted, iter_yaml_files, load_documents, locate

log = logging.getLogger(__name__)

# A Katalog opts into native Jinja2 templates with this annotation (Orkestra ignores it).
DIALECT_ANNOTATION = "orksync.io/template-dialect"
DIALECTS = ("go", "jinja2")

IGNORED_ORKESTRA_KINDS = ("E2E", "Simulate", "Komposer")


def load_repository(root: Path) -> Catalog:
    """Load every YAML file under `root` (hidden directories skipped)."""
    root = root.resolve()
    loader = _Loader(root)
    for path in iter_yaml_files(root):
        loader.add_file(path)
    return loader.finish()


class _Loader:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.errors: list[Exception] = []
        self.warnings: list[str] = []
        self.documents: list[Document] = []
        self.seen: set[Path] = set()

    def rel(self, path: Path) -> str:
        try:
            return str(path.resolve().relative_to(self.root))
        except ValueError:
            return str(path)

    def add_file(self, path: Path) -> None:
        resolved = path.resolve()
        if resolved in self.seen:
            return
        self.seen.add(resolved)
        try:
            self.documents.extend(load_documents(resolved, display=self.rel(resolved)))
        except LoadError as err:
            self.errors.append(err)

    def source(self, doc: Document) -> Source:
        return Source(file=self.rel(doc.file), path=doc.file, index=doc.index)

    def error(self, doc: Document, message: str, field: Iterable[str | int] = (),
              obj: str = "") -> InputError:
        fields = list(field)
        line = locate(doc.file, doc.index, fields)
        return InputError(message, file=self.rel(doc.file), line=line,
                          path=dotted(fields), obj=obj)

    def finish(self) -> Catalog:
        katalog_docs, crd_docs, other = [], [], []
        for doc in self.documents:
            c = doc.content
            if not isinstance(c, dict):
                self.errors.append(self.error(doc, "document is not a mapping"))
                continue
            api, kind = c.get("apiVersion"), c.get("kind")
            if api in KATALOG_API_VERSIONS and kind == "Katalog":
                katalog_docs.append(doc)
            elif api in KATALOG_API_VERSIONS and kind in (*IGNORED_ORKESTRA_KINDS, "Motif"):
                continue
            elif api == "apiextensions.k8s.io/v1" and kind == "CustomResourceDefinition":
                crd_docs.append(doc)
            else:
                other.append(doc)
        crds = [m for m in (self.crd_manifest(d) for d in crd_docs) if m is not None]
        by_name = {m.name: m for m in crds}
        katalogs = [k for k in (self.katalog(d, by_name) for d in katalog_docs) if k]
        # Files named by crdFile / crFiles outside the walked tree are loaded too.
        crs = self.custom_resources(other, katalogs)
        return Catalog(root=self.root, katalogs=tuple(katalogs), crds=tuple(crds),
                       crs=tuple(crs), errors=tuple(self.errors),
                       warnings=tuple(self.warnings))

    # --- CRDs ---------------------------------------------------------------------------

    def crd_manifest(self, doc: Document) -> CrdManifest | None:
        c = doc.content
        name = (c.get("metadata") or {}).get("name")
        spec = c.get("spec")
        if not isinstance(spec, dict) or not name:
            self.errors.append(self.error(doc, "CustomResourceDefinition needs metadata.name "
                                          "and spec", ["spec"]))
            return None
        names = spec.get("names") or {}
        versions = spec.get("versions") or []
        storage = [v.get("name") for v in versions if isinstance(v, dict) and v.get("storage")]
        problems = []
        if not spec.get("group"):
            problems.append("spec.group")
        if not names.get("kind") or not names.get("plural"):
            problems.append("spec.names.kind/plural")
        if len(storage) != 1:
            problems.append("exactly one spec.versions[] entry with storage: true")
        if problems:
            self.errors.append(self.error(doc, "CustomResourceDefinition is missing "
                                          + ", ".join(problems), ["spec"],
                                          obj=f"CustomResourceDefinition/{name}"))
            return None
        return CrdManifest(name=str(name), body=c, source=self.source(doc),
                           group=str(spec["group"]), kind=str(names["kind"]),
                           plural=str(names["plural"]),
                           namespaced=spec.get("scope", "Namespaced") != "Cluster",
                           storage_version=str(storage[0]))

    # --- Katalogs -----------------------------------------------------------------------

    def katalog(self, doc: Document, crds: dict[str, CrdManifest]) -> Katalog | None:
        c = doc.content
        meta = c.get("metadata") or {}
        name = str(meta.get("name") or Path(doc.file).stem)
        spec = c.get("spec")
        if not isinstance(spec, dict):
            self.errors.append(self.error(doc, "Katalog has no spec", ["spec"],
                                          obj=f"Katalog/{name}"))
            return None
        raw_crds = spec.get("crds")
        items: list[tuple[str, Any, list[str | int]]] = []
        if isinstance(raw_crds, dict):
            items = [(str(k), v, ["spec", "crds", str(k)]) for k, v in raw_crds.items()]
        elif isinstance(raw_crds, list):  # the very early list form: - name: x
            for i, v in enumerate(raw_crds):
                key = v.get("name") if isinstance(v, dict) else None
                items.append((str(key or i), v, ["spec", "crds", i]))
        else:
            self.errors.append(self.error(doc, "Katalog spec.crds must be a map of entries",
                                          ["spec", "crds"], obj=f"Katalog/{name}"))
            return None
        entries = []
        for key, raw, fpath in items:
            try:
                entries.append(self.crd_entry(doc, name, key, raw, fpath, crds))
            except InputError as err:
                self.errors.append(err)
        notes = c.get("notes") or {}
        if not isinstance(notes, dict):
            self.errors.append(self.error(doc, "notes must be a map of name to expression",
                                          ["notes"], obj=f"Katalog/{name}"))
            notes = {}
        if spec.get("imports"):
            imported = katalog_notes(spec["imports"], doc.file, self.root, local_notes=notes)
            self.errors.extend(self.error(doc, p, ["spec", "imports"], f"Katalog/{name}")
                               for p in imported.problems)
            self.warnings.extend(f"{self.rel(doc.file)}: Katalog/{name}: {w}"
                                 for w in imported.warnings)
            notes = {**imported.notes, **notes}
        dialect = str(((meta.get("annotations") or {}).get(DIALECT_ANNOTATION)) or "go")
        if dialect not in DIALECTS:
            self.errors.append(self.error(
                doc, f"{DIALECT_ANNOTATION} must be one of {', '.join(DIALECTS)}, not {dialect!r}",
                ["metadata", "annotations"], f"Katalog/{name}"))
            return None
        return Katalog(name=name, api_version=str(c["apiVersion"]), source=self.source(doc),
                       crds=tuple(entries), notes={str(k): str(v) for k, v in notes.items()},
                       dialect=dialect)

    def crd_entry(self, doc: Document, katalog: str, key: str, raw: Any,
                  fpath: list[str | int], crds: dict[str, CrdManifest]) -> CrdEntry:
        obj = f"Katalog/{katalog}"
        if not isinstance(raw, dict):
            raise self.error(doc, "CRD entry must be a map", fpath, obj)
        manifest = None
        if raw.get("crdFile"):
            manifest = self.crd_file(doc, str(raw["crdFile"]), [*fpath, "crdFile"], obj)
            crds.setdefault(manifest.name, manifest)
        for cr_file in raw.get("crFiles") or []:
            self.linked_file(doc, str(cr_file), [*fpath, "crFiles"], obj, required=False)
        api = raw.get("apiTypes") or {}
        if not isinstance(api, dict):
            raise self.error(doc, "apiTypes must be a map", [*fpath, "apiTypes"], obj)
        if manifest is None:
            manifest = next((m for m in crds.values() if m.group == api.get("group")
                             and m.kind == api.get("kind")), None)
        group = str(api.get("group") or (manifest.group if manifest else ""))
        kind = str(api.get("kind") or (manifest.kind if manifest else ""))
        version = str(api.get("version") or (manifest.storage_version if manifest else ""))
        plural = str(api.get("plural") or (manifest.plural if manifest else ""))
        missing = [n for n, v in (("group", group), ("version", version), ("kind", kind),
                                  ("plural", plural)) if not v]
        if missing:
            raise self.error(doc, f"apiTypes.{', apiTypes.'.join(missing)} not set and no "
                             "crdFile (or CustomResourceDefinition in the repository) gives "
                             "them", [*fpath, "apiTypes"], obj)
        namespaced = bool(raw.get("namespaced", True))
        if manifest is not None and not manifest.namespaced:
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
        tenancy, problems = tenancy_of(doc.content, raw, fpath)
        if problems:  # a guard that does not read as written must not render anything
            *rest, last = [self.error(doc, message, path, obj) for path, message in problems]
            self.errors.extend(rest)
            raise last
        return CrdEntry(key=key, katalog=katalog, source=self.source(doc), group=group,
                        version=version, kind=kind, plural=plural, namespaced=namespaced,
                        operator_box=box, raw=raw,
                        crd_name=manifest.name if manifest else f"{plural}.{group}",
                        tenancy=tenancy)

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
        for d in self.documents:
            if d.file == target and isinstance(d.content, dict) and \
                    d.content.get("kind") == "CustomResourceDefinition":
                manifest = self.crd_manifest(d)
                if manifest is not None:
                    return manifest
        raise self.error(doc, f"{rel!r} holds no valid CustomResourceDefinition", fpath, obj)

    # --- custom resources ---------------------------------------------------------------

    def custom_resources(self, docs: list[Document],
                         katalogs: list[Katalog]) -> list[CustomResource]:
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
        crs: dict[ObjRef, CustomResource] = {}
        # documents loaded late (crFiles outside the walk) are in self.documents too
        seen = {id(d) for d in docs}
        extra = [d for d in self.documents if id(d) not in seen
                 and isinstance(d.content, dict)
                 and (d.content.get("apiVersion"), d.content.get("kind")) in by_type]
        for doc in [*docs, *extra]:
            c = doc.content
            entry = by_type.get((c.get("apiVersion"), c.get("kind")))
            if entry is None:
                continue
            cr = self.custom_resource(doc, entry)
            if cr is None:
                continue
            if cr.ref in crs:
                self.errors.append(self.error(
                    doc, f"duplicate of {crs[cr.ref].source} (the first one is used)",
                    obj=str(cr.ref)))
                continue
            crs[cr.ref] = cr
        return sorted(crs.values(), key=lambda r: r.ref)

    def custom_resource(self, doc: Document, entry: CrdEntry) -> CustomResource | None:
        body = doc.content
        meta = body.get("metadata")
        obj = f"{entry.kind}/?"
        if not isinstance(meta, dict):
            self.errors.append(self.error(doc, "custom resource has no metadata",
                                          ["metadata"], obj))
            return None
        name = meta.get("name")
        obj = f"{entry.kind}/{name}"
        problem = subdomain_problem(str(name)) if isinstance(name, str) else "name is missing"
        if problem:
            self.errors.append(self.error(doc, problem, ["metadata", "name"], obj))
            return None
        namespace = meta.get("namespace")
        if entry.namespaced:
            namespace = str(namespace or "default")
            problem = subdomain_problem(namespace)
            if problem:
                self.errors.append(self.error(doc, f"namespace: {problem}",
                                              ["metadata", "namespace"], obj))
                return None
        else:
            namespace = ""
        spec = body.get("spec")
        if spec is not None and not isinstance(spec, dict):
            self.errors.append(self.error(doc, "spec must be a map", ["spec"], obj))
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
