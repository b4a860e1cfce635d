"""The platform's limits on a CRD entry (docs/multi-tenancy.md): the namespace guard and
the cluster-scoped kinds its custom resources may create. Pure: read and validated at
load time, enforced by orksync.render.guard.

Where they are written:

* `spec.crds.<key>.allowedNamespaces` / `restrictedNamespaces` (Orkestra's CRD level);
* `security.namespaceProtection.allowedNamespaces` / `restrictedNamespaces` (Orkestra's
  Katalog level), merged additively with the CRD level as Orkestra merges them: a
  namespace allowed at either level is allowed, one restricted at either is restricted;
* `spec.crds.<key>.allowedClusterScopedKinds` (orksync's; Orkestra has no such limit):
  the cluster-scoped kinds the entry's custom resources may create, as `Kind` (any API
  group) or `Kind.group` (that group only; `Kind.core` is the core group). Absent: see
  orksync.render.guard.ClusterScopePolicy for the default;
* `spec.crds.<key>.serviceAccountName` (orksync's, after Flux's field of that name): the
  ServiceAccount the custom resources' children are written as (the cluster's RBAC, a
  second wall behind these checks): `name`, in each custom resource's own namespace, or
  `namespace/name`. A cluster-scoped kind has no namespace of its own, so it needs the
  second form.

A pattern is `*`, a namespace name, `prefix*` or `*suffix` (Orkestra's syntax). Anything
else is refused here: Orkestra reads a misspelled list (`restrictedNamespaces: kube-system`,
a string) as no restriction at all, which is the wrong way to fail.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from orksync.names import label_problem, subdomain_problem

__all__ = ["CLUSTER_KINDS_FIELD", "GUARD_FIELDS", "SERVICE_ACCOUNT_FIELD", "Tenancy",
           "service_account_of", "tenancy_of"]

GUARD_FIELDS = ("allowedNamespaces", "restrictedNamespaces")
CLUSTER_KINDS_FIELD = "allowedClusterScopedKinds"
SERVICE_ACCOUNT_FIELD = "serviceAccountName"
KATALOG_GUARD_PATH = ("security", "namespaceProtection")

_PATTERN = re.compile(r"^(\*|[a-z0-9]([-a-z0-9]*[a-z0-9])?"  # *, exact name
                      r"|[a-z0-9][-a-z0-9]*\*|\*[-a-z0-9]*[a-z0-9])$")  # prefix*, *suffix
_KIND = re.compile(r"^[A-Za-z][A-Za-z0-9]{0,62}$")

Problem = tuple[list[str | int], str]  # (field path from the document root, message)


@dataclass(frozen=True, slots=True, kw_only=True)
class Tenancy:
    """One CRD entry's effective limits (both levels merged)."""

    allowed_namespaces: tuple[str, ...] = ()  # empty: every namespace
    restricted_namespaces: tuple[str, ...] = ()
    # None: the field is absent (the default applies); () : none allowed
    cluster_scoped_kinds: tuple[str, ...] | None = None
    # serviceAccountName as written: "" (none: the agent's default), `name` (in each
    # custom resource's namespace) or `namespace/name`
    service_account: str = ""


def tenancy_of(katalog: Mapping[str, Any], entry: Mapping[str, Any],
               entry_path: list[str | int], *, namespaced: bool = True
               ) -> tuple[Tenancy, list[Problem]]:
    """The limits of one CRD entry of the Katalog document `katalog`, and every problem
    found (each names its field; an entry with problems must not be rendered).
    `namespaced`: whether the entry's custom resources are."""
    problems: list[Problem] = []
    levels: list[tuple[Mapping[str, Any], list[str | int]]] = [(entry, entry_path)]
    security = katalog.get(KATALOG_GUARD_PATH[0])
    protection = security.get(KATALOG_GUARD_PATH[1]) if isinstance(security, Mapping) else None
    if protection is not None:
        if isinstance(protection, Mapping):
            levels.append((protection, list(KATALOG_GUARD_PATH)))
        else:
            problems.append((list(KATALOG_GUARD_PATH), "must be a map"))
    merged: dict[str, list[str]] = {name: [] for name in GUARD_FIELDS}
    for node, path in levels:
        for name in GUARD_FIELDS:
            for pattern in _strings(node.get(name), [*path, name], problems, _pattern_problem):
                if pattern not in merged[name]:
                    merged[name].append(pattern)
    kinds: tuple[str, ...] | None = None
    if entry.get(CLUSTER_KINDS_FIELD) is not None:
        kinds = tuple(_strings(entry[CLUSTER_KINDS_FIELD], [*entry_path, CLUSTER_KINDS_FIELD],
                               problems, _kind_problem))
    account = entry.get(SERVICE_ACCOUNT_FIELD)
    if account is not None:
        problem = _account_problem(account, namespaced)
        if problem:
            problems.append(([*entry_path, SERVICE_ACCOUNT_FIELD], problem))
            account = None
    return (Tenancy(allowed_namespaces=tuple(merged["allowedNamespaces"]),
                    restricted_namespaces=tuple(merged["restrictedNamespaces"]),
                    cluster_scoped_kinds=kinds, service_account=account or ""), problems)


def service_account_of(tenancy: Tenancy, namespace: str) -> str:
    """`namespace/name` of the entry's ServiceAccount for a custom resource of
    `namespace`; "" when the entry names none."""
    account = tenancy.service_account
    if account and "/" not in account:  # refused at load for a cluster-scoped kind
        account = f"{namespace}/{account}"
    return account


def _account_problem(value: Any, namespaced: bool) -> str | None:
    """What is wrong with a serviceAccountName (None: nothing)."""
    if not isinstance(value, str):
        return f"must be text, got {type(value).__name__} {value!r}"
    namespace, _, name = value.rpartition("/")
    if "{{" in value:
        return "is the platform's choice, not a template: write the name out"
    problem = subdomain_problem(name) or (label_problem(namespace) if namespace else None)
    if problem:
        return f"{value!r} is not a ServiceAccount: `name` or `namespace/name` ({problem})"
    if not namespace and not namespaced:
        return (f"{value!r} names no namespace, and the custom resources of this entry are "
                "cluster-scoped (they have none): write `namespace/name`")
    return None


def _strings(value: Any, path: list[str | int], problems: list[Problem],
             check: Callable[[str], str | None]) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        problems.append((path, f"must be a list, got {type(value).__name__} {value!r}"))
        return []
    out = []
    for i, item in enumerate(value):
        problem = check(item) if isinstance(item, str) else \
            f"must be text, got {type(item).__name__} {item!r}"
        if problem:
            problems.append(([*path, i], problem))
        else:
            out.append(item)
    return out


def _pattern_problem(pattern: str) -> str | None:
    if _PATTERN.match(pattern) and len(pattern.strip("*")) <= 63:
        return None
    return (f"{pattern!r} is not a namespace pattern: use a namespace name, `prefix*`, "
            "`*suffix` or `*`")


def _kind_problem(text: str) -> str | None:
    kind, _, group = text.partition(".")
    if not _KIND.match(kind) or (group and group != "core" and subdomain_problem(group)):
        return (f"{text!r} is not a kind: use `Kind` (any API group) or `Kind.group`, such "
                "as Namespace or Tenant.example.io")
    return None


ALLOWED_HOSTS_FIELD = "allowedExternalHosts"  # an entry's egress allow-list (external:)


def allowed_hosts_problem(value: Any) -> str | None:
    """Why an entry's allowedExternalHosts is not a list of host patterns (None: it is)."""
    if value is None:
        return None
    if not isinstance(value, list):
        return "must be a list of host names (host, host:port or *.domain)"
    for item in value:
        if not isinstance(item, str) or not re.fullmatch(
                r"(\*\.)?[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:[0-9]{1,5})?", item):
            return f"{item!r} is not a host name (host, host:port or *.domain)"
    return None
