"""ServiceAccount, Role, ClusterRole, RoleBinding and ClusterRoleBinding (semantics §2.4).
Pure.

* ServiceAccount: labels, plus (orksync) `imagePullSecrets` (names or {name}) and
  `automountServiceAccountToken` when given.
* Role/ClusterRole: `rules[] {apiGroups, resources, verbs, resourceNames}`; at least one
  rule (Orkestra's schema says required), each with verbs, and apiGroups whenever
  resources are named (`[""]` is the core group) — the API server's own rules, checked
  here to name the field.
* RoleBinding/ClusterRoleBinding: `roleRef {name (required), kind}` with kind default Role
  (RB) / ClusterRole (CRB; a CRB can only bind a ClusterRole), apiGroup
  rbac.authorization.k8s.io. `subjects[] {kind, name, namespace}`, at least one. orksync
  defaults (Orkestra has none, so its empty kind/namespace fail at the API server):
  kind ServiceAccount; a ServiceAccount subject's namespace defaults to the binding's
  namespace (RB) or the custom resource's namespace (CRB). User and Group subjects get
  apiGroup rbac.authorization.k8s.io and no namespace default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orksync.render.builders import BuildContext, BuildError, metadata
from orksync.render.builders.common import (
    as_bool,
    as_text,
    choice,
    node,
    nodes,
    pull_secrets,
    required,
    string_list,
    sub,
)

RBAC_GROUP = "rbac.authorization.k8s.io"
RBAC_API = f"{RBAC_GROUP}/v1"
SUBJECT_KINDS = ("ServiceAccount", "User", "Group")


def build_service_account(entry: Mapping[str, Any], ctx: BuildContext) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "ServiceAccount",
                            "metadata": metadata(ctx)}
    secrets = pull_secrets(entry.get("imagePullSecrets"), "imagePullSecrets")
    if secrets:
        body["imagePullSecrets"] = secrets
    if as_text(entry.get("automountServiceAccountToken"), "automountServiceAccountToken"):
        body["automountServiceAccountToken"] = as_bool(entry["automountServiceAccountToken"],
                                                       "automountServiceAccountToken")
    return body


def _rules(entry: Mapping[str, Any]) -> list[dict[str, Any]]:
    raw = nodes(entry.get("rules"), "rules")
    if not raw:
        raise BuildError("rules", "needs at least one rule {apiGroups, resources, verbs}")
    out = []
    for i, rule in enumerate(raw):
        field = sub("rules", i)
        lists = {k: string_list(rule.get(k), sub(field, k), allow_empty_items=k == "apiGroups")
                 for k in ("apiGroups", "resources", "verbs", "resourceNames")}
        if not lists["verbs"]:
            raise BuildError(sub(field, "verbs"), "is required (such as [get, list, watch])")
        if lists["resources"] and not lists["apiGroups"]:
            raise BuildError(sub(field, "apiGroups"), "is required with resources (use [\"\"] "
                             "for the core group)")
        out.append({k: v for k, v in lists.items() if v})
    return out


def build_role(entry: Mapping[str, Any], ctx: BuildContext) -> dict[str, Any]:
    return {"apiVersion": RBAC_API, "kind": "Role", "metadata": metadata(ctx),
            "rules": _rules(entry)}


def build_cluster_role(entry: Mapping[str, Any], ctx: BuildContext) -> dict[str, Any]:
    return {"apiVersion": RBAC_API, "kind": "ClusterRole", "metadata": metadata(ctx),
            "rules": _rules(entry)}


def _binding(entry: Mapping[str, Any], ctx: BuildContext, kind: str,
             role_kinds: tuple[str, ...], subject_namespace: str) -> dict[str, Any]:
    ref = node(entry.get("roleRef"), "roleRef")
    role_ref = {"apiGroup": RBAC_GROUP,
                "kind": choice(ref.get("kind"), "roleRef.kind", role_kinds, role_kinds[0]),
                "name": required(ref.get("name"), "roleRef.name")}
    subjects = []
    for i, raw in enumerate(nodes(entry.get("subjects"), "subjects")):
        field = sub("subjects", i)
        subject_kind = choice(raw.get("kind"), sub(field, "kind"), SUBJECT_KINDS,
                              "ServiceAccount")
        subject: dict[str, Any] = {"kind": subject_kind,
                                   "name": required(raw.get("name"), sub(field, "name"))}
        namespace = as_text(raw.get("namespace"), sub(field, "namespace"))
        if subject_kind == "ServiceAccount":
            namespace = namespace or subject_namespace
            if not namespace:
                raise BuildError(sub(field, "namespace"), "is required for a ServiceAccount "
                                 "subject (the custom resource has no namespace to default to)")
        else:
            subject["apiGroup"] = RBAC_GROUP
        if namespace:
            subject["namespace"] = namespace
        subjects.append(subject)
    if not subjects:
        raise BuildError("subjects", "needs at least one subject {kind, name, namespace}")
    return {"apiVersion": RBAC_API, "kind": kind, "metadata": metadata(ctx),
            "roleRef": role_ref, "subjects": subjects}


def build_role_binding(entry: Mapping[str, Any], ctx: BuildContext) -> dict[str, Any]:
    return _binding(entry, ctx, "RoleBinding", ("Role", "ClusterRole"), ctx.namespace)


def build_cluster_role_binding(entry: Mapping[str, Any], ctx: BuildContext) -> dict[str, Any]:
    return _binding(entry, ctx, "ClusterRoleBinding", ("ClusterRole",), ctx.cr_namespace)
