"""Plain manifests: every document of another group with apiVersion and kind, checked
(names, namespace against the kind's scope) and applied as written; a document of a
group the repository defines that no entry handles is an error, not a manifest."""

from __future__ import annotations

import difflib
from typing import Any

from orksync.katalog.loader.state import LoadState, text_problem, type_name
from orksync.katalog.model import (
    KATALOG_API_VERSIONS,
    CrdEntry,
    CrdManifest,
    PlainManifest,
)
from orksync.model import ObjRef
from orksync.names import (
    kind_problem,
    label_problem,
    subdomain_problem,
)
from orksync.yamls.doc import Document, document_identity

IGNORED_ORKESTRA_KINDS = ("E2E", "Simulate")


ORKESTRA_GROUPS = frozenset(v.partition("/")[0] for v in KATALOG_API_VERSIONS)


def unhandled(st: LoadState, doc: Document, groups: set[str],
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
    elif st.failed:  # most likely the entry that failed: a consequence, not a cause
        st.warnings.append(
            f"{st.rel(doc.file)}: {document_identity(doc.content)}: not loaded: no "
            f"Katalog entry handles {kind} ({api}), and {st.failed} Katalog(s) or "
            "entries failed to load, reported above")
        return False
    else:
        message = (f"no Katalog entry handles {kind} ({api})" +
                   (f"; entries of that group: {', '.join(known)}" if known
                    else "; a CustomResourceDefinition defines the group, no Katalog "
                    "entry uses it"))
    st.errors.append(st.error(doc, message, ["kind"], obj=document_identity(doc.content)))
    return False


def plain_manifest(st: LoadState, doc: Document, crds: list[CrdManifest]) -> None:
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
            st.errors.append(st.error(doc, f"not a Kubernetes {field}: {problem}",
                                      [field], obj))
            return
    meta = body.get("metadata")
    if not isinstance(meta, dict):
        st.errors.append(st.error(doc, f"metadata must be a map, not {type_name(meta)}",
                                  ["metadata"] if "metadata" in body else [], obj))
        return
    name, namespace = meta.get("name"), meta.get("namespace")
    problem = text_problem(name, subdomain_problem) if name is not None else \
        "name is missing (orksync applies a manifest under its name; generateName " \
        "is not supported)"
    if problem:
        st.errors.append(st.error(doc, problem, ["metadata", "name"], obj))
        return
    if namespace is not None:
        problem = text_problem(namespace, label_problem)
        if problem:
            st.errors.append(st.error(doc, problem, ["metadata", "namespace"], obj))
            return
    scope = _BUILTIN_SCOPE.get((api, kind))
    if scope is None:
        scope = next((m.namespaced for m in crds if m.kind == kind
                      and api.startswith(f"{m.group}/")), None)
    if scope is True and not namespace:
        st.errors.append(st.error(
            doc, f"namespace is not set and a {kind} is namespaced: write its "
            "namespace (orksync applies a manifest as it is and does not guess one)",
            ["metadata"], obj))
        return
    if scope is False and namespace:
        st.errors.append(st.error(
            doc, f"a {kind} is cluster-scoped: it has no namespace",
            ["metadata", "namespace"], obj))
        return
    for key in ("labels", "annotations"):
        if meta.get(key) is not None and not isinstance(meta[key], dict):
            st.errors.append(st.error(doc, f"must be a map, not {type_name(meta[key])}",
                                      ["metadata", key], obj))
            return
    clean = {k: v for k, v in body.items() if k != "status"}
    clean["metadata"] = {k: v for k, v in meta.items() if k not in _SERVER_META}
    ref = ObjRef(api_version=api, kind=kind, namespace=str(namespace or ""),
                 name=str(name))
    prior = st.plain.get(ref)
    if prior is not None:
        st.errors.append(st.error(
            doc, f"duplicate of {prior.source} (the first one is used)", obj=str(ref)))
        return
    st.plain[ref] = PlainManifest(ref=ref, body=clean, source=st.source(doc))


# metadata a plain manifest copied from a live object carries: the API server's to set
_SERVER_META = frozenset({"uid", "resourceVersion", "generation", "creationTimestamp",
                          "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields",
                          "selfLink"})


# The scope of the built-in kinds a plain manifest most often holds, by (apiVersion,
# kind): True namespaced, False cluster-scoped. Other kinds: their CRD's in the
# repository, else the API server's, checked when applied (orksync.apply.write).
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


def half_manifest(content: dict[str, Any]) -> tuple[str, str, str] | None:
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


def type_key(content: dict[str, Any]) -> tuple[str, str] | None:
    """(apiVersion, kind) of a document, None when either is not a string."""
    api, kind = content.get("apiVersion"), content.get("kind")
    return (api, kind) if isinstance(api, str) and isinstance(kind, str) else None
