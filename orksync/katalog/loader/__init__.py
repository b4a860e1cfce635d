"""Load a repository into a Catalog: Katalogs (both apiVersion eras), Komposers, CRDs,
custom resources and plain manifests, found anywhere by apiVersion/kind. Pure over the
file system. A bad document is one error naming its file, line, object and field, and
loading goes on with the rest (docs/katalog-schema.md#how-a-repository-loads).

`load_repository` runs the stages in order: the files, the CRDs, the Komposers and
Katalogs (with their entries), then every other document."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

from orksync.errors import InputError
from orksync.katalog.loader.crds import crd_manifest
from orksync.katalog.loader.files import FILES_CHUNK, MIN_FILES_PER_JOB, ignore_rules, parse_all
from orksync.katalog.loader.holds import hold_katalog
from orksync.katalog.loader.katalogs import katalog
from orksync.katalog.loader.komposers import compose
from orksync.katalog.loader.manifests import IGNORED_ORKESTRA_KINDS, half_manifest
from orksync.katalog.loader.resources import custom_resources
from orksync.katalog.loader.state import LoadState, Parsed, type_name
from orksync.katalog.model import KATALOG_API_VERSIONS, Catalog
from orksync.runtime.forked import fork_chunks_into
from orksync.runtime.gcpause import gc_paused
from orksync.yamls.doc import Document, document_identity
from orksync.yamls.io import iter_yaml_files, locate

__all__ = ["load_repository"]


@gc_paused
def load_repository(root: Path, *, jobs: int = 1) -> Catalog:
    """Load every YAML file under `root` (hidden directories skipped, and what the
    repository's `.orksyncignore` lists: orksync.katalog.loader.ignore). `jobs`: processes
    that parse the files (orksync.runtime.forked); the same Catalog whatever their number.
    Raises LoadError when the ignore file cannot be read: loading what it would have left
    out could apply it."""
    st = LoadState(root.resolve())
    _read_files(st, jobs)
    katalog_docs, komposer_docs, crd_docs, other = _sort_documents(st)
    crds = [m for m in (crd_manifest(st, d) for d in crd_docs) if m is not None]
    by_name = {m.name: m for m in crds}
    loads = compose(st, komposer_docs, katalog_docs)
    katalogs = []
    for d, checked, schema in loads:
        before = len(st.errors)
        loaded = katalog(st, d, by_name, checked, schema)
        if loaded is not None:
            katalogs.append(loaded)
        else:
            hold_katalog(st, d, st.errors[before] if len(st.errors) > before else None)
    st.failed += len(loads) - len(katalogs)
    # Files named by crdFile / crFiles outside the walked tree are loaded too.
    crs = custom_resources(st, other, katalogs, crds)
    protected = {e.crd_name for k in katalogs for e in k.crds if e.protect_crd}
    crds = [dataclasses.replace(m, deletion_protected=True) if m.name in protected
            else m for m in crds]
    return Catalog(root=st.root, katalogs=tuple(katalogs), crds=tuple(crds),
                   crs=tuple(crs), errors=tuple(st.errors),
                   warnings=tuple(st.warnings), left_out=tuple(st.left_out),
                   plain=tuple(st.plain[ref] for ref in sorted(st.plain)))


def _read_files(st: LoadState, jobs: int) -> None:
    """Every file of the walk into `st.documents`, in the walk's order, parsed in `jobs`
    processes when there are enough files to pay for them."""
    rules = ignore_rules(st.root)
    files = list(iter_yaml_files(
        st.root, resolve_links=True,
        skip=(lambda rel, is_dir: rules.ignored(rel, is_dir=is_dir)) if rules else None))
    jobs = min(jobs, len(files) // MIN_FILES_PER_JOB) or 1
    if jobs > 1:
        walked = iter(files)

        def take(parsed: list[Parsed]) -> None:  # the next files, in the walk's order
            for docs in parsed:
                st.add_file(next(walked), parsed=docs)

        fork_chunks_into(functools.partial(parse_all, st), files, jobs, chunk=FILES_CHUNK,
                         take=take)
        if next(walked, None) is not None:
            raise AssertionError("the load lost files")  # pragma: no cover
    else:
        for resolved in files:
            st.add_file(resolved)


def _sort_documents(st: LoadState) -> tuple[list[Document], list[Document], list[Document],
                                            list[Document]]:
    """The walk's documents by what loads them: (Katalogs, Komposers, CRDs, the others);
    a document that is no mapping, or a manifest with a broken apiVersion or kind, is an
    error."""
    katalog_docs: list[Document] = []
    komposer_docs: list[Document] = []
    crd_docs: list[Document] = []
    other: list[Document] = []
    st.classified = {id(d) for d in st.documents}  # the rest is loaded late
    for doc in st.documents:
        c = doc.content
        if not isinstance(c, dict):
            st.errors.append(st.error(doc, "document is not a mapping"))
            continue
        api, kind = c.get("apiVersion"), c.get("kind")
        wrong = [f for f, v in (("apiVersion", api), ("kind", kind))
                 if v is not None and not isinstance(v, str)]
        if wrong:
            st.errors.append(st.error(
                doc, f"{wrong[0]} must be a string, not {type_name(c[wrong[0]])}", wrong[:1],
                document_identity(c)))
            continue
        missing = half_manifest(c)
        if missing:
            field, anchor, message = missing
            st.errors.append(InputError(
                message, file=st.rel(doc.file),
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
    return katalog_docs, komposer_docs, crd_docs, other
