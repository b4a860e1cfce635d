"""What a custom resource may write (docs/multi-tenancy.md). Pure.

The namespace guard (`allowedNamespaces`, `restrictedNamespaces`; semantics §5.8):
patterns are an exact name, `prefix*`, `*suffix` or `*`; restricted wins; a non-empty
allow list must match. orksync applies it to the custom resource's own namespace, to the
target namespace of every namespaced child (each `toNamespaces` element included), to the
name of every Namespace a custom resource creates, to the source namespace of every copy
(`fromSecret` & co.) that a template chooses, and to the custom resources `cross` reads.

The cluster-scope policy: which cluster-scoped kinds (Namespace, ClusterRole, ...) a CRD
entry's custom resources may create (ClusterScopePolicy). Orkestra guards neither.

The scope of a kind is known at render time for the built-in kinds and the CRDs in the
repository (ClusterScope); for any other kind it is known only to the API server, so the
renderer leaves a directive (SCOPE_DIRECTIVE) that the applier honours once discovery says
the kind is cluster-scoped.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from orksync.katalog.model import CrdEntry, CrdManifest
from orksync.katalog.tenancy import CLUSTER_KINDS_FIELD
from orksync.model import SCOPE_DIRECTIVE, ObjRef
from orksync.names import label_problem, subdomain_problem
from orksync.render.kinds import KINDS
from orksync.runtime.memo import IdentityCache

__all__ = ["BUILTIN_CLUSTER_SCOPED", "SCOPE_DIRECTIVE", "ClusterScope", "ClusterScopePolicy",
           "NamespaceGuard", "identity_problem", "literal_cluster_kinds"]

HOOK_BLOCKS = ("onCreate", "onReconcile", "onDelete")

# Cluster-scoped kinds served by Kubernetes itself: (API group, kind).
BUILTIN_CLUSTER_SCOPED: frozenset[tuple[str, str]] = frozenset({
    ("", "Namespace"), ("", "Node"), ("", "PersistentVolume"), ("", "ComponentStatus"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("apiregistration.k8s.io", "APIService"),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicyBinding"),
    ("storage.k8s.io", "StorageClass"), ("storage.k8s.io", "CSIDriver"),
    ("storage.k8s.io", "CSINode"), ("storage.k8s.io", "VolumeAttachment"),
    ("storage.k8s.io", "VolumeAttributesClass"),
    ("scheduling.k8s.io", "PriorityClass"), ("node.k8s.io", "RuntimeClass"),
    ("networking.k8s.io", "IngressClass"), ("networking.k8s.io", "IPAddress"),
    ("networking.k8s.io", "ServiceCIDR"),
    ("certificates.k8s.io", "CertificateSigningRequest"),
    ("certificates.k8s.io", "ClusterTrustBundle"),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
    ("resource.k8s.io", "DeviceClass"), ("resource.k8s.io", "ResourceSlice"),
    ("authentication.k8s.io", "TokenReview"), ("authentication.k8s.io", "SelfSubjectReview"),
    ("authorization.k8s.io", "SubjectAccessReview"),
    ("authorization.k8s.io", "SelfSubjectAccessReview"),
    ("authorization.k8s.io", "SelfSubjectRulesReview"),
    ("storagemigration.k8s.io", "StorageVersionMigration"),
    ("internal.apiserver.k8s.io", "StorageVersion"),
})
BUILTIN_NAMESPACED: frozenset[tuple[str, str]] = frozenset(
    (spec.api_version.rpartition("/")[0], spec.kind) for spec in KINDS
    if spec.namespaced and spec.kind)


def _matches(pattern: str, namespace: str) -> bool:
    if pattern == "*":
        return True
    if pattern.endswith("*"):
        return namespace.startswith(pattern[:-1])
    if pattern.startswith("*"):
        return namespace.endswith(pattern[1:])
    return namespace == pattern


@dataclass(frozen=True, slots=True)
class NamespaceGuard:
    allowed: tuple[str, ...] = ()
    restricted: tuple[str, ...] = ()

    @classmethod
    def of(cls, allowed: Iterable[object] | None, restricted: Iterable[object] | None
           ) -> NamespaceGuard:
        return cls(tuple(str(p) for p in allowed or () if str(p)),
                   tuple(str(p) for p in restricted or () if str(p)))

    @classmethod
    def for_entry(cls, entry: CrdEntry) -> NamespaceGuard:
        """The guard of a CRD entry: its own lists merged with its Katalog's
        `security.namespaceProtection` (validated by the loader)."""
        return cls(entry.tenancy.allowed_namespaces, entry.tenancy.restricted_namespaces)

    def refusal(self, namespace: str) -> str | None:
        """Why `namespace` is refused, or None when it is allowed."""
        if not (self.restricted or self.allowed):
            return None
        hit = next((p for p in self.restricted if _matches(p, namespace)), None)
        if hit is not None:
            return f"namespace {namespace} is restricted by the Katalog ({hit})"
        if self.allowed and not any(_matches(p, namespace) for p in self.allowed):
            return (f"namespace {namespace} is not in the Katalog's allowedNamespaces "
                    f"({', '.join(self.allowed)})")
        return None


# --- the scope of a kind -----------------------------------------------------------------


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def kind_label(api_version: str, kind: str) -> str:
    """`ClusterRoleBinding (rbac.authorization.k8s.io)`, `Namespace` (core group)."""
    group = _group(api_version)
    return f"{kind} ({group})" if group else kind


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterScope:
    """What a render knows about the scope of kinds (the built-in kinds and the CRDs in
    the repository), and the strict switch (`--strict-cluster-scope`)."""

    cluster: frozenset[tuple[str, str]] = BUILTIN_CLUSTER_SCOPED
    namespaced: frozenset[tuple[str, str]] = BUILTIN_NAMESPACED
    strict: bool = False

    @classmethod
    def of(cls, crds: Iterable[CrdManifest], *, strict: bool = False) -> ClusterScope:
        crds = list(crds)
        return cls(cluster=BUILTIN_CLUSTER_SCOPED | {(m.group, m.kind) for m in crds
                                                     if not m.namespaced},
                   namespaced=BUILTIN_NAMESPACED | {(m.group, m.kind) for m in crds
                                                    if m.namespaced},
                   strict=strict)

    def namespaced_kind(self, api_version: str, kind: str) -> bool | None:
        """True / False when the scope is known here (built-ins first), None otherwise."""
        key = (_group(api_version), kind)
        if key in BUILTIN_CLUSTER_SCOPED:
            return False
        if key in BUILTIN_NAMESPACED:
            return True
        if key in self.cluster:
            return False
        if key in self.namespaced:
            return True
        return None


# --- the cluster-scope policy -----------------------------------------------------------


def _qualified(api_version: str, kind: str) -> str:
    """`Kind.group` as the allow-list spells it (`Namespace.core` for the core group)."""
    return f"{kind}.{_group(api_version) or 'core'}"


def literal_cluster_kinds(operator_box: Mapping[str, Any]) -> tuple[str, ...]:
    """The cluster-scoped kinds a CRD entry names itself: every cluster-scoped template
    key it uses (`namespaces`, `clusterRoles`, ...) and every `custom` entry whose `kind`
    is written out rather than templated (qualified by its group when `apiVersion` is
    written out too). These are the platform's words, not a custom resource's."""
    found: list[str] = []
    for entries in _block_lists(operator_box):
        key, items = entries
        spec = next((s for s in KINDS if s.key == key), None)
        if spec is None:
            continue
        if spec.key != "custom":
            if not spec.namespaced and items:
                found.append(_qualified(spec.api_version, spec.kind))
            continue
        for item in items:
            if not isinstance(item, Mapping):
                continue
            kind, api_version = item.get("kind"), item.get("apiVersion")
            if not isinstance(kind, str) or "{{" in kind or not kind.strip():
                continue
            if isinstance(api_version, str) and "{{" not in api_version and api_version:
                found.append(_qualified(api_version.strip(), kind.strip()))
            else:
                found.append(kind.strip())
    return tuple(dict.fromkeys(found))


def _block_lists(box: Mapping[str, Any]) -> Iterator[tuple[str, list[Any]]]:
    """(template key, entries) of every hook block, onDelete stages included."""
    for name in HOOK_BLOCKS:
        block = box.get(name)
        if not isinstance(block, Mapping):
            continue
        blocks = [block, *[g for g in block.get("groups") or [] if isinstance(g, Mapping)]]
        for part in blocks:
            for key, items in part.items():
                if isinstance(items, list):
                    yield str(key), items


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterScopePolicy:
    """Which cluster-scoped kinds one CRD entry's custom resources may create.

    * `allowedClusterScopedKinds` set: exactly those (`[]`: none);
    * absent: the kinds the entry names literally (literal_cluster_kinds), so every
      Katalog written for Orkestra keeps working, while a kind that only a template
      chooses (`kind: "{{ .spec.kind }}"`) is refused when it turns out cluster-scoped;
    * absent under `--strict-cluster-scope`: none.
    """

    allowed: tuple[str, ...]
    source: str  # "explicit", "literal" or "strict"

    @classmethod
    def for_entry(cls, entry: CrdEntry, *, strict: bool = False) -> ClusterScopePolicy:
        """Asked for every custom resource of the entry: worked out once per entry."""
        return _POLICIES.get(entry, strict, lambda: cls._of(entry, strict=strict))

    @classmethod
    def _of(cls, entry: CrdEntry, *, strict: bool) -> ClusterScopePolicy:
        if entry.tenancy.cluster_scoped_kinds is not None:
            return cls(allowed=entry.tenancy.cluster_scoped_kinds, source="explicit")
        if strict:
            return cls(allowed=(), source="strict")
        return cls(allowed=literal_cluster_kinds(entry.operator_box), source="literal")

    def allows(self, api_version: str, kind: str) -> bool:
        qualified = _qualified(api_version, kind)
        return kind in self.allowed or qualified in self.allowed

    def refusal(self, api_version: str, kind: str) -> str | None:
        """Why a cluster-scoped object of this kind is refused, or None."""
        if self.allows(api_version, kind):
            return None
        what = f"{kind_label(api_version, kind)} is cluster-scoped"
        if self.source == "explicit":
            listed = ", ".join(self.allowed) or "empty"
            return f"{what} and not in the Katalog's {CLUSTER_KINDS_FIELD} ({listed})"
        if self.source == "strict":
            return (f"{what} and the Katalog entry sets no {CLUSTER_KINDS_FIELD} "
                    "(--strict-cluster-scope: none allowed)")
        return (f"{what} and the Katalog entry does not name this kind itself (a kind "
                f"chosen by a template must be listed in {CLUSTER_KINDS_FIELD})")


# --- identities --------------------------------------------------------------------------


def identity_problem(ref: ObjRef) -> str | None:
    """Why a rendered child's identity cannot be written (to the cluster, or as a file
    under the rendered directory), or None. Every builder's output passes through here,
    so a name with `/` or `..` never reaches a path."""
    problem = _type_problem(ref.api_version, ref.kind) or subdomain_problem(ref.name)
    if problem:
        return problem
    if ref.namespace:
        problem = label_problem(ref.namespace)
        if problem:
            return f"namespace {problem}"
    return None


@functools.lru_cache(maxsize=4096)  # a render meets the same few kinds again and again
def _type_problem(api_version: str, kind: str) -> str | None:
    group, _, version = api_version.rpartition("/")
    if not version or label_problem(version) or (group and subdomain_problem(group)):
        return (f"apiVersion {api_version!r} is not valid (version, or group/version "
                "such as example.com/v1)")
    if not kind or not kind.isascii() or not kind.isalnum() or not kind[0].isalpha():
        return f"kind {kind!r} is not valid (letters and digits, such as ConfigMap)"
    return None


_POLICIES: IdentityCache[ClusterScopePolicy] = IdentityCache()
