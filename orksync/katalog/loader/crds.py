"""CustomResourceDefinitions: each checked once (named `<plural>.<group>`, valid names, one
storage version), and the one a Katalog entry's `crdFile` names."""

from __future__ import annotations

from orksync.errors import LoadError
from orksync.katalog.loader.files import linked_file
from orksync.katalog.loader.state import LoadState, text_problem
from orksync.katalog.model import (
    CrdManifest,
)
from orksync.names import (
    kind_problem,
    label_problem,
    subdomain_problem,
)
from orksync.yamls.doc import Document


def crd_manifest(st: LoadState, doc: Document) -> CrdManifest | None:
    """The CRD of a document, checked (and its problem reported) once."""
    if id(doc) not in st.manifests:
        st.manifests[id(doc)] = check_crd(st, doc)
    return st.manifests[id(doc)]


def check_crd(st: LoadState, doc: Document) -> CrdManifest | None:
    c = doc.content
    meta = c.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    obj = f"CustomResourceDefinition/{name if isinstance(name, str) else '?'}"
    spec = c.get("spec")
    if not isinstance(name, str) or not name:
        st.errors.append(st.error(doc, "CustomResourceDefinition needs metadata.name",
                                  ["metadata", "name"], obj=obj))
        return None
    if not isinstance(spec, dict):
        st.errors.append(st.error(doc, "CustomResourceDefinition needs a spec map",
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
        st.errors.append(st.error(doc, "CustomResourceDefinition is missing "
                                  + ", ".join(problems), ["spec"], obj=obj))
        return None
    checks = ((["metadata", "name"], subdomain_problem(name)),
              (["spec", "group"], text_problem(group, subdomain_problem)),
              (["spec", "names", "kind"], text_problem(kind, kind_problem)),
              (["spec", "names", "plural"], text_problem(plural, label_problem)),
              (["spec", "versions"], text_problem(storage[0], label_problem)))
    for field, problem in checks:
        if problem:
            st.errors.append(st.error(doc, problem, field, obj=obj))
            return None
    if name != f"{plural}.{group}":
        st.errors.append(st.error(doc, f"must be named <plural>.<group> "
                                  f"({plural}.{group}), not {name!r}",
                                  ["metadata", "name"], obj=obj))
        return None
    return CrdManifest(name=name, body=c, source=st.source(doc), group=str(group),
                       kind=str(kind), plural=str(plural),
                       namespaced=spec.get("scope", "Namespaced") != "Cluster",
                       storage_version=str(storage[0]))


def crd_of_file(st: LoadState, doc: Document, crd_file: str) -> CrdManifest | None:
    """The valid CustomResourceDefinition a Katalog's crdFile names, if it has one."""
    target = (doc.file.parent / crd_file).resolve()
    if not target.is_relative_to(st.root) or not target.is_file():
        return None
    st.add_file(target)
    return next((m for d in st.documents if d.file == target
                 and isinstance(d.content, dict)
                 and d.content.get("kind") == "CustomResourceDefinition"
                 and (m := crd_manifest(st, d)) is not None), None)


def crd_file(st: LoadState, doc: Document, rel: str, fpath: list[str | int],
             obj: str) -> CrdManifest:
    target = linked_file(st, doc, rel, fpath, obj, required=True)
    assert target is not None
    invalid = False
    for d in st.documents:
        if d.file == target and isinstance(d.content, dict) and \
                d.content.get("kind") == "CustomResourceDefinition":
            manifest = crd_manifest(st, d)
            if manifest is not None:
                return manifest
            invalid = True
    if invalid or any(isinstance(e, LoadError) and e.file == st.rel(target)
                      for e in st.errors):
        raise st.error(doc, f"{rel!r} holds no valid CustomResourceDefinition (its "
                       "problem is reported above)", fpath, obj)
    raise st.error(doc, f"{rel!r} holds no CustomResourceDefinition", fpath, obj)
