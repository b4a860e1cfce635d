"""The documents of the repository that are not Katalogs, Komposers or CRDs: custom
resources of a loaded entry (checked, selected as Orkestra's informer would), held or
left out ones, and plain manifests (manifests.py)."""

from __future__ import annotations

from typing import Any

from orksync.errors import InputError
from orksync.katalog.loader.entries import selector_value
from orksync.katalog.loader.holds import held_by, hold, leave_out, loose_ref
from orksync.katalog.loader.manifests import ORKESTRA_GROUPS, plain_manifest, type_key, unhandled
from orksync.katalog.loader.state import LoadState, text_problem, type_name
from orksync.katalog.model import (
    KATALOG_API_VERSIONS,
    CrdEntry,
    CrdManifest,
    CustomResource,
    Katalog,
    Selection,
)
from orksync.model import ObjRef
from orksync.names import (
    label_problem,
    subdomain_problem,
)
from orksync.yamls.doc import Document, document_identity


def custom_resources(st: LoadState, docs: list[Document], katalogs: list[Katalog],
                     crds: list[CrdManifest]) -> list[CustomResource]:
    by_type: dict[tuple[str, str], CrdEntry] = {}
    for k in katalogs:
        for e in k.crds:
            prior = by_type.get((e.api_version, e.kind))
            if prior is not None:
                st.errors.append(InputError(
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
    # st.documents too
    extra = [d for d in st.documents if id(d) not in st.classified
             and isinstance(d.content, dict)
             and (type_key(d.content) in by_type or d.file in st.setup_files)]
    for doc in [*docs, *extra]:
        c = doc.content
        key = type_key(c)
        if id(doc) not in st.classified and key is not None and key not in by_type \
                and (key[0] in KATALOG_API_VERSIONS or key[1] == "CustomResourceDefinition"):
            st.errors.append(st.error(
                doc, f"a {key[1]} in a setup.apply file outside the repository's walk "
                "(.orksyncignore lists it) is not read: setup.apply loads plain "
                "manifests only", ["kind"], obj=document_identity(c)))
            continue
        entry = by_type.get(key) if key is not None else None
        if entry is None:
            if key is not None and key in st.disabled:
                leave_out(st, doc, loose_ref(c), st.disabled[key])
                continue
            held = held_by(st, key) if key is not None else None
            if held is not None:
                hold(st, doc, held)
                continue
            if unhandled(st, doc, groups, by_type):
                plain_manifest(st, doc, crds)
            continue
        cr = custom_resource(st, doc, entry)
        if cr is None:
            continue
        reason = _not_selected(cr, entry.selection)
        if reason:
            leave_out(st, doc, cr.ref, f"Katalog {entry.katalog} entry {entry.key}: "
                      f"{reason}")
            continue
        if cr.ref in crs:
            st.errors.append(st.error(
                doc, f"duplicate of {crs[cr.ref].source} (the first one is used)",
                obj=str(cr.ref)))
            continue
        crs[cr.ref] = cr
    # ObjRef's order, compared as plain tuples (its generated __lt__ builds two tuples
    # per comparison)
    return sorted(crs.values(), key=lambda r: (r.ref.api_version, r.ref.kind,
                                               r.ref.namespace, r.ref.name))


def custom_resource(st: LoadState, doc: Document, entry: CrdEntry) -> CustomResource | None:
    body = doc.content
    meta = body.get("metadata")

    def obj() -> str:  # for a message: worked out only for one
        return document_identity(body, entry.kind)
    if not isinstance(meta, dict):
        st.errors.append(st.error(doc, f"custom resource metadata must be a map, not "
                                  f"{type_name(meta)}", ["metadata"], obj()))
        return None
    name = meta.get("name")
    problem = text_problem(name, subdomain_problem) if name is not None \
        else "name is missing"
    if problem:
        st.errors.append(st.error(doc, problem, ["metadata", "name"], obj()))
        return None
    namespace = meta.get("namespace")
    if entry.namespaced:
        namespace = namespace if namespace is not None else "default"
        problem = text_problem(namespace, label_problem)
        if problem:
            st.errors.append(st.error(doc, problem,
                                      ["metadata", "namespace"], obj()))
            return None
    else:
        namespace = ""
    spec = body.get("spec")
    if spec is not None and not isinstance(spec, dict):
        st.errors.append(st.error(doc, f"spec must be a map, not {type_name(spec)}",
                                  ["spec"], obj()))
        return None
    for key in ("labels", "annotations"):
        if meta.get(key) is not None and not isinstance(meta[key], dict):
            st.errors.append(st.error(doc, f"must be a map, not {type_name(meta[key])}",
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
    return CustomResource(ref=ref, body=clean, source=st.source(doc), entry=entry)


_CR_META_KEPT = ("name", "namespace", "labels", "annotations")


def _not_selected(cr: CustomResource, selection: Selection) -> str:
    """Why Orkestra's informer would not see `cr` ("" when it would)."""
    if selection.namespace and cr.entry.namespaced and cr.ref.namespace != selection.namespace:
        return (f"namespace: {selection.namespace} (the entry watches that namespace only; "
                f"this one is in {cr.ref.namespace or 'no namespace'})")
    labels = cr.body["metadata"].get("labels") or {}
    for key, value in selection.labels:
        if key not in labels or selector_value(labels[key]) != value:
            have = f"has {key}={selector_value(labels[key])}" if key in labels else f"has no {key}"
            return f"labelSelector {key}={value} does not match (the custom resource {have})"
    for path, value in selection.fields:
        found: Any = cr.body
        for step in path.split("."):
            found = found.get(step) if isinstance(found, dict) else None
        if found is None or selector_value(found) != value:
            return (f"fieldSelector {path}={value} does not match (the custom resource has "
                    f"{'no ' + path if found is None else path + '=' + selector_value(found)})")
    return ""
