"""`.children` (semantics §1.9): the live objects a custom resource's Katalog entry declares,
as templates and status fields see them. Pure: the cluster is reached only through an
injected `LiveView` (orksync.cluster.live.LiveIndex), which lists each kind once for all
custom resources.

The map has, for every kind the entry declares under `onCreate` or `onReconcile` (in
either block, whatever their conditions, as Orkestra's ReadChildren), two keys:

* the plural (`deployments`, `jobs`, `customs`, `persistentvolumeclaims`, `hpas`, ...) =
  {name: live object} of the declared objects that exist;
* the singular (`deployment`, `job`, `custom`, `pvc`, `hpa`, ...) = the first of them in
  declaration order (onCreate before onReconcile, entries in order, forEach items in
  order). Orkestra takes the first of a Go map, which is random: orksync's order is
  stable, so a render is deterministic for a given cluster state. When none exists it is
  Orkestra's placeholder `{_placeholder: true, status: {}}`, so
  `{{ .children.deployment.status.readyReplicas }}` renders empty instead of failing.

Every object has a `status` map (empty when the API server gave none), as in Orkestra.
Only objects labelled as managed by orksync are found (the LIST is by that label).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from orksync.model import ObjRef
from orksync.render.kinds import KINDS

__all__ = ["CHILD_KEYS", "PLACEHOLDER", "PLACEHOLDER_KEY", "LiveView", "children_map",
           "kind_key_of"]

# Template key of the Katalog -> (singular, plural) under `.children` (Orkestra's names).
CHILD_KEYS: dict[str, tuple[str, str]] = {
    "namespaces": ("namespace", "namespaces"),
    "secrets": ("secret", "secrets"),
    "configMaps": ("configmap", "configmaps"),
    "networkPolicies": ("networkpolicy", "networkpolicies"),
    "resourceQuotas": ("resourcequota", "resourcequotas"),
    "limitRanges": ("limitrange", "limitranges"),
    "clusterRoles": ("clusterrole", "clusterroles"),
    "clusterRoleBindings": ("clusterrolebinding", "clusterrolebindings"),
    "serviceAccounts": ("serviceaccount", "serviceaccounts"),
    "roles": ("role", "roles"),
    "roleBindings": ("rolebinding", "rolebindings"),
    "custom": ("custom", "customs"),
    "replicaSets": ("replicaset", "replicasets"),
    "deployments": ("deployment", "deployments"),
    "services": ("service", "services"),
    "jobs": ("job", "jobs"),
    "cronJobs": ("cronjob", "cronjobs"),
    "statefulSets": ("statefulset", "statefulsets"),
    "persistentVolumes": ("pv", "persistentvolumes"),
    "persistentVolumeClaims": ("pvc", "persistentvolumeclaims"),
    "ingresses": ("ingress", "ingresses"),
    "hpa": ("hpa", "hpas"),
    "pdb": ("pdb", "pdbs"),
    "pods": ("pod", "pods"),
}
PLACEHOLDER_KEY = "_placeholder"
PLACEHOLDER: Mapping[str, Any] = {PLACEHOLDER_KEY: True, "status": {}}

# (apiVersion, kind) -> template key, for the built-in kinds (anything else is `custom`).
_BUILTIN = {(k.api_version, k.kind): k.key for k in KINDS if k.key != "custom"}


def kind_key_of(ref: ObjRef) -> str:
    """The template key a rendered child came from, judged by its kind."""
    return _BUILTIN.get((ref.api_version, ref.kind), "custom")


class LiveView(Protocol):
    """Read access to the live cluster for a render. `get` looks one object up in a list
    of its kind made once (with `selector`, a label selector, or unfiltered) and raises
    ClusterError when that list failed; a kind the API server does not serve has no
    objects."""

    def get(self, ref: ObjRef, selector: str = "") -> dict[str, Any] | None: ...


def children_view(live: LiveView, owner: ObjRef, account: str) -> LiveView:
    """The view `owner`'s `.children` are read through: the one its identity reads with,
    when `live` offers one (`for_children(owner, account)`, `account` the ServiceAccount
    its Katalog entry names, `namespace/name` or ""; orksync.apply.impersonation),
    else `live` itself. Raises ClusterError when that identity cannot be decided."""
    for_children = getattr(live, "for_children", None)
    return live if for_children is None else for_children(owner, account)


def children_map(declared: Sequence[tuple[str, ObjRef]],
                 found: Mapping[ObjRef, Mapping[str, Any]]) -> dict[str, Any]:
    """`declared`: (template key, object) in declaration order; `found`: the live objects
    among them. Every declared key gets its plural map and its singular (see module doc)."""
    out: dict[str, Any] = {}
    for key, ref in declared:
        singular, plural = CHILD_KEYS.get(key, CHILD_KEYS["custom"])
        group = out.setdefault(plural, {})
        obj = found.get(ref)
        if obj is None or ref.name in group:
            continue
        child = {**obj, "status": obj.get("status") or {}}
        group[ref.name] = child
        if singular not in out:
            out[singular] = child
    for key, _ in declared:
        singular, _plural = CHILD_KEYS.get(key, CHILD_KEYS["custom"])
        if singular not in out:
            out[singular] = {PLACEHOLDER_KEY: True, "status": {}}
    return out
