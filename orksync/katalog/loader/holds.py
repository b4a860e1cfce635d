"""The custom resources a load keeps out of the render: held while their Katalog entry does
not load (never taken for plain manifests, never pruned), or left out because Orkestra
would not reconcile them; one warning each."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from orksync.katalog.layout import flatten, get_in
from orksync.katalog.loader.crds import crd_of_file
from orksync.katalog.loader.state import LoadState
from orksync.model import ObjRef
from orksync.yamls.doc import Document, document_identity
from orksync.yamls.io import locate


def hold_katalog(st: LoadState, doc: Document, err: Exception | None) -> None:
    """`hold_kind` for every entry of a Katalog (or Komposer) that did not load."""
    meta = doc.content.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    name = name if isinstance(name, str) and name else Path(doc.file).stem
    entries = get_in(doc.content, ("spec", "crds"))
    items = entries.items() if isinstance(entries, dict) else enumerate(
        entries if isinstance(entries, list) else [])
    for key, raw in items:
        hold_kind(st, doc, name, str(key), raw, err)


def hold_kind(st: LoadState, doc: Document, katalog: str, key: str, raw: Any,
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
        manifest = crd_of_file(st, doc, crd_file)
        if manifest is not None:
            group, kind = group or manifest.group, kind or manifest.kind
    where = f" ({err})" if err is not None else f" ({st.rel(doc.file)})"
    reason = f"Katalog {katalog} entry {key} did not load{where}"
    if isinstance(group, str) and group and isinstance(kind, str | None):
        st.held.setdefault((group, kind or ""), reason)
        return
    if isinstance(kind, str) and kind:
        names = {kind.lower()}
    else:
        names = {key.lower(), *(re.split(r"[._-]", Path(crd_file).stem.lower())
                                if isinstance(crd_file, str) else ())}
    for name in names - {""}:
        st.held_names.setdefault(name, reason)


def held_by(st: LoadState, key: tuple[str, str]) -> str | None:
    """Why a document of this (apiVersion, kind) is held: the Katalog entry of its kind
    did not load (None: no entry known to handle it failed)."""
    api, kind = key
    group = api.rpartition("/")[0]
    if not group:
        return None
    found = st.held.get((group, kind)) or st.held.get((group, ""))
    if found is None and "." in group and not group.endswith("k8s.io"):
        # a group of no Kubernetes API: a kind named like an entry that did not load
        name = kind.lower()
        found = st.held_names.get(name) or st.held_names.get(f"{name}s") or \
            st.held_names.get(f"{name}es")
    return found


def hold(st: LoadState, doc: Document, reason: str) -> None:
    """A custom resource whose Katalog entry did not load: left out of the render
    (`left_out`), so that it is neither applied (as a plain manifest, without its
    finalizer) nor pruned, nor its children; a warning names the entry (a consequence
    of the entry's error, reported above as such)."""
    st.left_out.append((loose_ref(doc.content), f"held: {reason}"))
    line = first_line(doc.file) if doc.index == 0 else locate(doc.file, doc.index, [])
    where = f"{st.rel(doc.file)}:{line}" if line else st.rel(doc.file)
    st.warnings.append(
        f"{where}: {document_identity(doc.content)}: not loaded: {reason}, reported "
        "above: held, neither applied nor pruned (its finalizer and its children are "
        "kept) until its Katalog entry loads")


def leave_out(st: LoadState, doc: Document, ref: ObjRef, reason: str) -> None:
    """A custom resource Orkestra would not reconcile: not rendered, not pruned, one
    warning line (`orksync validate` shows it)."""
    st.left_out.append((ref, f"left out: {reason}"))
    line = first_line(doc.file) if doc.index == 0 else locate(doc.file, doc.index, [])
    where = f"{st.rel(doc.file)}:{line}" if line else st.rel(doc.file)
    st.warnings.append(f"{where}: {ref}: left out (not rendered, not pruned): {reason}")


def first_line(path: Path) -> int | None:
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


def loose_ref(content: dict[str, Any]) -> ObjRef:
    """The identity of a custom resource whose entry is disabled (its scope unknown: the
    namespace as written)."""
    meta = content.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    return ObjRef(api_version=str(content.get("apiVersion")), kind=str(content.get("kind")),
                  namespace=str(meta.get("namespace") or ""), name=str(meta.get("name")))
