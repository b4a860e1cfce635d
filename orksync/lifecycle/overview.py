"""What orksync manages and how it is doing, read from the cluster only: the `orksync
status` and `orksync tree` views. I/O (reading) plus pure formatting.

Sources: the inventory ConfigMaps (`orksync-inventory-<name>`) of the inventory namespace
(one LIST), which name every custom resource a sync root applied and its children, and
each custom resource's status as the last sync wrote it (one LIST per custom resource
kind): the `Ready` condition, `status.orksync.lastAppliedRevision` and
`status.orksync.health` (orksync.lifecycle.health). No repository is read and no child is
fetched: a child's health is the one the last sync recorded. The repository's plain
manifests the inventories list are rows too (`plain`), each with the health of its live
object assessed now by the same rules (they carry no status of orksync's), read with one
LIST per kind; a plain manifest has no revision and no children.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from orksync.apply.inventory import CONFIGMAP_PREFIX, Inventory, InventoryEntry
from orksync.cluster.kube import Kube
from orksync.errors import ClusterError, OrksyncError, UsageError
from orksync.lifecycle.health import assess
from orksync.model import ObjRef

__all__ = ["ChildRow", "ResourceRow", "Tree", "age", "find_tree", "read_rows",
           "status_table", "tree_table"]

log = logging.getLogger(__name__)

UNKNOWN = "Unknown"


@dataclass(frozen=True, slots=True)
class ChildRow:
    ref: ObjRef
    health: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"object": str(self.ref), "kind": self.ref.kind,
                "namespace": self.ref.namespace, "name": self.ref.name,
                "health": self.health, "message": self.message}


@dataclass(frozen=True, slots=True)
class ResourceRow:
    """One managed custom resource as its status tells it."""

    ref: ObjRef
    root: str  # the sync root (inventory name) that applied it
    ready: str  # the Ready condition's status; "-" when the object is not found
    health: str  # status.orksync.health.status
    revision: str  # status.orksync.lastAppliedRevision
    created: str  # metadata.creationTimestamp
    message: str
    children: tuple[ChildRow, ...] = field(default=())
    plain: bool = False  # a plain manifest of the repository, not a custom resource

    def to_dict(self, now: datetime) -> dict[str, Any]:
        return {"kind": self.ref.kind, "apiVersion": self.ref.api_version,
                "namespace": self.ref.namespace, "name": self.ref.name,
                "syncRoot": self.root, "ready": self.ready, "health": self.health,
                "lastAppliedRevision": self.revision, "age": age(self.created, now),
                "created": self.created, "message": self.message, "plain": self.plain}


@dataclass(frozen=True, slots=True)
class Tree:
    resource: ResourceRow

    def to_dict(self, now: datetime) -> dict[str, Any]:
        return {**self.resource.to_dict(now),
                "children": [c.to_dict() for c in self.resource.children]}


def read_inventories(kube: Kube, namespace: str) -> dict[str, Inventory]:
    """Every sync root's inventory in `namespace`, by root name (one LIST). An
    inventory that cannot be decoded is logged and left out."""
    out: dict[str, Inventory] = {}
    res = kube.resource("v1", "ConfigMap")
    for item in kube.list(res, namespace=namespace):
        name = str((item.get("metadata") or {}).get("name") or "")
        if not name.startswith(CONFIGMAP_PREFIX):
            continue
        try:
            out[name[len(CONFIGMAP_PREFIX):]] = Inventory.from_configmap(item)
        except OrksyncError as err:
            log.warning("ConfigMap/%s/%s: %s", namespace, name, err)
    return dict(sorted(out.items()))


def _list_kind(kube: Kube, api_version: str, kind: str) -> dict[ObjRef, dict[str, Any]] | str:
    """The live objects of one kind by identity, or why they cannot be read."""
    try:
        res = kube.resource(api_version, kind)
        return {ObjRef.of(item): item for item in kube.list(res)}
    except ClusterError as err:
        return f"cannot read {kind}.{api_version}: {err.detail}"


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _row(entry: InventoryEntry, root: str, live: dict[str, Any] | None, problem: str,
         children: Sequence[InventoryEntry]) -> ResourceRow:
    if live is None:
        return ResourceRow(ref=entry.ref, root=root, ready="-", health="NotFound",
                           revision="", created="", message=problem or "not found",
                           children=tuple(ChildRow(c.ref, UNKNOWN, "") for c in children))
    status = _map(live.get("status"))
    ready: Mapping[str, Any] = next((c for c in status.get("conditions") or []
                                     if isinstance(c, Mapping) and c.get("type") == "Ready"),
                                    {})
    own = _map(status.get("orksync"))
    health = _map(own.get("health"))
    by_child = {str(c.get("object")): c for c in health.get("children") or []
                if isinstance(c, Mapping)}
    rows = []
    for child in children:
        found = by_child.get(str(child.ref)) or {}
        rows.append(ChildRow(child.ref, str(found.get("status") or UNKNOWN),
                             str(found.get("message") or "")))
    return ResourceRow(
        ref=entry.ref, root=root,
        ready=str(ready.get("status") or UNKNOWN),
        health=str(health.get("status") or UNKNOWN),
        revision=str(own.get("lastAppliedRevision") or ""),
        created=str((live.get("metadata") or {}).get("creationTimestamp") or ""),
        message=str(ready.get("message") or ""),
        children=tuple(rows))


def _plain_row(entry: InventoryEntry, root: str, live: dict[str, Any] | None,
               problem: str) -> ResourceRow:
    if live is None:
        return ResourceRow(ref=entry.ref, root=root, ready="-", health="NotFound",
                           revision="", created="", message=problem or "not found",
                           plain=True)
    health = assess(live)
    return ResourceRow(
        ref=entry.ref, root=root, ready="True" if health.current else "False",
        health=health.status.value, revision="",
        created=str((live.get("metadata") or {}).get("creationTimestamp") or ""),
        message=health.message, plain=True)


def read_rows(kube: Kube, namespace: str, roots: Iterable[str] = ()) -> list[ResourceRow]:
    """Every custom resource and plain manifest the inventories of `namespace` list (only
    those of `roots` when given), with its status; sorted by kind, namespace, name."""
    wanted = set(roots)
    inventories = {name: inv for name, inv in read_inventories(kube, namespace).items()
                   if not wanted or name in wanted}
    crs: list[tuple[InventoryEntry, str, list[InventoryEntry]]] = []
    for name, inventory in inventories.items():
        owned: dict[ObjRef, list[InventoryEntry]] = {}
        for entry in inventory:
            if entry.owner is not None:
                owned.setdefault(entry.owner, []).append(entry)
        crs.extend((entry, name, owned.get(entry.ref, []))
                   for entry in inventory if entry.is_custom_resource or entry.plain)
    lists: dict[tuple[str, str], dict[ObjRef, dict[str, Any]] | str] = {}
    rows = []
    for entry, root, children in crs:
        key = (entry.ref.api_version, entry.ref.kind)
        if key not in lists:
            lists[key] = _list_kind(kube, *key)
        listed = lists[key]
        live, problem = (None, listed) if isinstance(listed, str) else \
            (listed.get(entry.ref), "")
        rows.append(_plain_row(entry, root, live, problem) if entry.plain
                    else _row(entry, root, live, problem, children))
    return sorted(rows, key=lambda r: (r.ref.kind, r.ref.group, r.ref.namespace, r.ref.name,
                                       r.root))


def parse_target(text: str) -> tuple[str, str, str]:
    """`KIND/NAMESPACE/NAME` (or `KIND/NAME` for a cluster-scoped one) as (kind,
    namespace, name); KIND is a kind (`Widget`) or a kind and group (`Widget.example.io`)."""
    parts = text.split("/")
    if len(parts) == 3 and all(parts):
        return parts[0], parts[1], parts[2]
    if len(parts) == 2 and all(parts):
        return parts[0], "", parts[1]
    raise UsageError(f"{text!r}: expected KIND/NAMESPACE/NAME (or KIND/NAME)")


def _kind_matches(ref: ObjRef, kind: str) -> bool:
    kind = kind.lower()
    return kind in (ref.kind.lower(), f"{ref.kind}.{ref.group}".lower())


def find_tree(kube: Kube, namespace: str, target: str) -> Tree:
    """The custom resource `target` names and its children. Raises OrksyncError when no
    inventory lists it (or more than one custom resource matches a bare kind)."""
    kind, ns, name = parse_target(target)
    rows = [r for r in read_rows(kube, namespace)
            if r.ref.namespace == ns and r.ref.name == name and _kind_matches(r.ref, kind)]
    if not rows:
        raise OrksyncError(f"{target}: no custom resource or manifest of that kind, "
                           f"namespace and name is managed by orksync (no inventory in "
                           f"namespace {namespace} lists it)")
    if len({r.ref for r in rows}) > 1:
        kinds = ", ".join(sorted({f"{r.ref.kind}.{r.ref.group}" for r in rows}))
        raise OrksyncError(f"{target}: the kind is ambiguous ({kinds}); name it with its group")
    return Tree(rows[0])


# --- formatting (pure) -------------------------------------------------------------------

def age(created: str, now: datetime) -> str:
    """kubectl's short age: `45s`, `12m`, `5h`, `3d`, `2y`; `-` when unknown."""
    try:
        then = datetime.fromisoformat(created.replace("Z", "+00:00"))
    except ValueError:
        return "-"
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    seconds = max(int((now - then).total_seconds()), 0)
    for unit, size in (("y", 365 * 86400), ("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _kind_label(ref: ObjRef) -> str:
    return str(ref).split("/", 1)[0]


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Columns padded to their widest cell, three spaces apart, no trailing blanks."""
    body = [list(header), *(list(r) for r in rows)]
    widths = [max(len(r[i]) for r in body) for i in range(len(header))]
    lines = ["   ".join(cell.ljust(widths[i]) for i, cell in enumerate(r)).rstrip()
             for r in body]
    return "\n".join(lines) + "\n"


def status_table(rows: Sequence[ResourceRow], now: datetime) -> str:
    return table(("KIND", "NAMESPACE", "NAME", "READY", "HEALTH", "REVISION", "AGE", "MESSAGE"),
                 ((_kind_label(r.ref), r.ref.namespace or "-", r.ref.name, r.ready, r.health,
                   r.revision[:12] or "-", age(r.created, now), r.message) for r in rows))


def tree_table(tree: Tree, now: datetime) -> str:
    row = tree.resource
    lines = [(str(row.ref), row.ready, row.health, age(row.created, now), row.message)]
    for i, child in enumerate(row.children):
        branch = "└── " if i == len(row.children) - 1 else "├── "
        lines.append((branch + str(child.ref), "", child.health, "", child.message))
    return table(("OBJECT", "READY", "HEALTH", "AGE", "MESSAGE"), lines)
