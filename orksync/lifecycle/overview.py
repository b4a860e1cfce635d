"""What orksync manages and how it is doing, read from the cluster only (inventories and
live objects, no repository): the `orksync status` and `orksync tree` views. I/O
(reading) plus pure formatting
(docs/operations.md#seeing-what-orksync-manages-status-and-tree)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from orksync.apply.inventory import (
    CONFIGMAP_PREFIX,
    INVENTORY_ANNOTATION,
    Inventory,
    InventoryEntry,
)
from orksync.cluster.kube import Kube
from orksync.errors import ClusterError, OrksyncError, UsageError
from orksync.model import ObjRef
from orksync.status.health import HealthStatus, assess

__all__ = ["ChildRow", "ResourceRow", "Tree", "age", "find_tree", "read_rows",
           "status_table", "tree_table"]

log = logging.getLogger(__name__)

UNKNOWN = "Unknown"
MISSING = "Missing"
MISSING_MESSAGE = "not in the cluster"
_METADATA_ONLY = {("v1", "Secret"), ("v1", "ConfigMap")}  # no rollout; values never read
_ORDER = {HealthStatus.FAILED.value: 0, MISSING: 1, HealthStatus.IN_PROGRESS.value: 2,
          HealthStatus.TERMINATING.value: 2, UNKNOWN: 3, HealthStatus.CURRENT.value: 4}
# Ready reasons of a failed sync (SyncFailed, Stalled: the agent's, orksync.agent.failure)
_SYNC_ERRORS = ("ReconcileError", "RenderFailed", "SyncFailed", "Stalled")


@dataclass(frozen=True, slots=True)
class ChildRow:
    """One child of a custom resource. A custom resource a `custom:` block created and
    rendered through its own Katalog entry has its own children beneath it (`children`),
    its health rolled up from theirs, and its Ready condition (`ready`; "" for any
    other child)."""

    ref: ObjRef
    health: str
    message: str
    children: tuple[ChildRow, ...] = ()
    ready: str = ""

    @property
    def nested(self) -> bool:
        return bool(self.ready)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"object": str(self.ref), "kind": self.ref.kind,
                               "namespace": self.ref.namespace, "name": self.ref.name,
                               "health": self.health, "message": self.message}
        if self.nested:
            out["ready"] = self.ready
            out["children"] = [c.to_dict() for c in self.children]
        return out

    def walk(self, depth: int = 0) -> Iterator[tuple[int, ChildRow]]:
        """This child and, depth first, every child beneath it, with its depth."""
        yield depth, self
        for child in self.children:
            yield from child.walk(depth + 1)


@dataclass(frozen=True, slots=True)
class ResourceRow:
    """One managed custom resource or plain manifest, as the cluster holds it now."""

    ref: ObjRef
    root: str  # the sync root (inventory name) that wrote it last, else the first listing it
    ready: str  # the Ready condition's status; "-" when the object is not found
    health: str  # assessed now from the live objects
    revision: str  # status.orksync.lastAppliedRevision
    created: str  # metadata.creationTimestamp
    message: str
    children: tuple[ChildRow, ...] = field(default=())
    plain: bool = False  # a plain manifest of the repository, not a custom resource
    roots: tuple[str, ...] = ()  # every sync root whose inventory lists it, `root` first
    # a custom resource a `custom:` block created: the custom resource that created it
    owner: ObjRef | None = None
    # the Sync (`namespace/name`) whose inventory is `root`, "" for a root of `orksync
    # sync` or a --repo-url agent; `syncs`: `roots` so named (set by `orksync status`)
    sync: str = ""
    syncs: tuple[str, ...] = ()

    @property
    def root_label(self) -> str:
        """The SYNC ROOT column: each root listing it, a Sync's as `namespace/name`."""
        return ",".join(self.syncs or self.roots or (self.sync or self.root,))

    def to_dict(self, now: datetime) -> dict[str, Any]:
        return {"kind": self.ref.kind, "apiVersion": self.ref.api_version,
                "namespace": self.ref.namespace, "name": self.ref.name,
                "syncRoot": self.root, "syncRoots": list(self.roots or (self.root,)),
                "sync": self.sync,
                "ready": self.ready, "health": self.health,
                "lastAppliedRevision": self.revision, "age": age(self.created, now),
                "created": self.created, "message": self.message, "plain": self.plain,
                **({"owner": str(self.owner)} if self.owner is not None else {})}


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


@dataclass(slots=True)
class _Listed:
    """One object the inventories list at the top (custom resource or plain manifest), or
    a custom resource a `custom:` block created (`entry.owner` set: the inventory records
    it as a child of the custom resource that created it, and its own children under it):
    the roots listing it and its children (union over those roots)."""

    entry: InventoryEntry
    roots: list[str]
    children: dict[ObjRef, InventoryEntry]


def _listed(inventories: Mapping[str, Inventory]) -> dict[ObjRef, _Listed]:
    """The objects of the inventories with a row of their own: the custom resources and
    plain manifests, and every child that owns children of its own (a custom resource a
    `custom:` block created, rendered through its own entry)."""
    out: dict[ObjRef, _Listed] = {}
    owned: dict[ObjRef, dict[ObjRef, InventoryEntry]] = {}
    entries: dict[ObjRef, InventoryEntry] = {}
    roots_of: dict[ObjRef, list[str]] = {}
    for name, inventory in inventories.items():
        for entry in inventory:
            if entry.owner is not None:
                owned.setdefault(entry.owner, {})[entry.ref] = entry
                entries.setdefault(entry.ref, entry)
                roots_of.setdefault(entry.ref, []).append(name)
            elif entry.is_custom_resource or entry.plain:
                item = out.setdefault(entry.ref, _Listed(entry, [], {}))
                item.roots.append(name)
    for ref in owned:
        if ref not in out and ref in entries:
            out[ref] = _Listed(entries[ref], roots_of[ref], {})
    for ref, item in out.items():
        item.children = dict(sorted(owned.get(ref, {}).items(), key=lambda kv: str(kv[0])))
    return out


class _LiveObjects:
    """The live objects of the given identities, one LIST per kind."""

    def __init__(self, kube: Kube, refs: Iterable[ObjRef]) -> None:
        self._kube = kube
        self._namespaces: dict[tuple[str, str], set[str]] = {}
        for ref in refs:
            self._namespaces.setdefault((ref.api_version, ref.kind), set()).add(ref.namespace)
        self._kinds: dict[tuple[str, str], dict[ObjRef, dict[str, Any]] | str] = {}

    def get(self, ref: ObjRef) -> tuple[dict[str, Any] | None, str]:
        """(live object or None when absent, "") or (None, why it cannot be read)."""
        key = (ref.api_version, ref.kind)
        if key not in self._kinds:
            self._kinds[key] = self._list(key)
        listed = self._kinds[key]
        if isinstance(listed, str):
            return None, listed
        return listed.get(ref), ""

    def _list(self, key: tuple[str, str]) -> dict[ObjRef, dict[str, Any]] | str:
        api_version, kind = key
        metadata_only = key in _METADATA_ONLY
        try:
            res = self._kube.resource(api_version, kind)
            try:
                items = list(self._kube.list(res, metadata_only=metadata_only))
            except ClusterError as err:
                if err.status != 403 or not res.namespaced:
                    raise
                items = [item for ns in sorted(self._namespaces.get(key, ())) if ns
                         for item in self._kube.list(res, namespace=ns,
                                                     metadata_only=metadata_only)]
        except ClusterError as err:
            return f"cannot read {kind}.{api_version}: {err.detail}"
        return {ObjRef.of(item): item for item in items}


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _child(ref: ObjRef, live: dict[str, Any] | None, problem: str, now: datetime) -> ChildRow:
    if problem:
        return ChildRow(ref, UNKNOWN, problem)
    if live is None:
        return ChildRow(ref, MISSING, MISSING_MESSAGE)
    health = assess(live, now)
    return ChildRow(ref, health.status.value, health.message)


def _worst(children: Sequence[ChildRow]) -> tuple[str, str]:
    """A custom resource's health and message from its children's."""
    if not children:
        return HealthStatus.CURRENT.value, "no children"
    ranked = sorted(children, key=lambda c: (_ORDER.get(c.health, 3), str(c.ref)))
    first = ranked[0]
    if first.health == HealthStatus.CURRENT.value:
        return first.health, f"{len(children)} objects current"
    same = [c for c in ranked if _ORDER.get(c.health, 3) == _ORDER.get(first.health, 3)]
    more = f" (and {len(same) - 1} more)" if len(same) > 1 else ""
    text = f"{first.ref}: {first.health}"
    if first.message:
        text += f": {first.message}"
    return first.health, text + more


def _root(live: Mapping[str, Any] | None, roots: Sequence[str], namespace: str) -> list[str]:
    """`roots` with the one the object's inventory annotation names first."""
    annotations = _map(_map((live or {}).get("metadata")).get("annotations"))
    writer_ns, _, writer = str(annotations.get(INVENTORY_ANNOTATION) or "").partition("/")
    if writer_ns == namespace and writer in roots:
        return [writer, *(r for r in roots if r != writer)]
    return list(roots)


def _row(item: _Listed, roots: Sequence[str], live: dict[str, Any] | None, problem: str,
         children: Sequence[ChildRow]) -> ResourceRow:
    if live is None:
        return ResourceRow(ref=item.entry.ref, root=roots[0], roots=tuple(roots), ready="-",
                           health=UNKNOWN if problem else MISSING, revision="", created="",
                           message=problem or MISSING_MESSAGE, children=tuple(children))
    status = _map(live.get("status"))
    ready: Mapping[str, Any] = next((c for c in status.get("conditions") or []
                                     if isinstance(c, Mapping) and c.get("type") == "Ready"),
                                    {})
    own = _map(status.get("orksync"))
    recorded = _map(own.get("health"))
    health, message = _worst(children)
    if recorded.get("reason") == "HealthTimeout" and health != HealthStatus.CURRENT.value:
        health, message = HealthStatus.FAILED.value, str(recorded.get("message") or message)
    if ready.get("reason") in _SYNC_ERRORS or health == HealthStatus.CURRENT.value:
        message = str(ready.get("message") or message)
    return ResourceRow(
        ref=item.entry.ref, root=roots[0], roots=tuple(roots),
        ready=str(ready.get("status") or UNKNOWN), health=health,
        revision=str(own.get("lastAppliedRevision") or ""),
        created=str(_map(live.get("metadata")).get("creationTimestamp") or ""),
        message=message, children=tuple(children))


def _plain_row(item: _Listed, roots: Sequence[str], live: dict[str, Any] | None,
               problem: str, now: datetime) -> ResourceRow:
    if live is None:
        return ResourceRow(ref=item.entry.ref, root=roots[0], roots=tuple(roots), ready="-",
                           health=UNKNOWN if problem else MISSING, revision="", created="",
                           message=problem or MISSING_MESSAGE, plain=True)
    health = assess(live, now)
    return ResourceRow(
        ref=item.entry.ref, root=roots[0], roots=tuple(roots),
        ready="True" if health.current else "False", health=health.status.value,
        revision="", created=str(_map(live.get("metadata")).get("creationTimestamp") or ""),
        message=health.message, plain=True)


def _rows(kube: Kube, namespace: str, items: Sequence[_Listed],
          listed: Mapping[ObjRef, _Listed]) -> list[ResourceRow]:
    """The rows of `items`, from their live objects and their children's; a child that is
    a custom resource a `custom:` block created (in `listed` with children of its own)
    carries its own children beneath it, its health rolled up from theirs."""
    refs: set[ObjRef] = set()
    pending = [item.entry.ref for item in items]
    while pending:  # the objects of the items and of every custom resource beneath them
        ref = pending.pop()
        if ref in refs:
            continue
        refs.add(ref)
        below = listed.get(ref)
        if below is not None:
            pending.extend(below.children)
    live_objects = _LiveObjects(kube, sorted(refs, key=str))
    now = datetime.now(UTC)
    made: dict[ObjRef, ResourceRow] = {}

    def row_of(item: _Listed, path: tuple[ObjRef, ...]) -> ResourceRow:
        done = made.get(item.entry.ref)
        if done is not None:
            return done
        live, problem = live_objects.get(item.entry.ref)
        roots = _root(live, item.roots, namespace)
        if item.entry.plain:
            row = _plain_row(item, roots, live, problem, now)
        else:
            children = [child_of(ref, (*path, item.entry.ref)) for ref in item.children]
            row = replace(_row(item, roots, live, problem, children), owner=item.entry.owner)
        made[item.entry.ref] = row
        return row

    def child_of(ref: ObjRef, path: tuple[ObjRef, ...]) -> ChildRow:
        below = listed.get(ref)
        if below is None or below.entry.plain or ref in path:  # a chain back: as a leaf
            return _child(ref, *live_objects.get(ref), now)
        row = row_of(below, path)
        return ChildRow(ref, row.health, row.message, children=row.children, ready=row.ready)

    rows = [row_of(item, ()) for item in items]
    return sorted(rows, key=lambda r: (r.ref.kind, r.ref.group, r.ref.namespace, r.ref.name))


def read_rows(kube: Kube, namespace: str, roots: Iterable[str] = ()) -> list[ResourceRow]:
    """Every custom resource and plain manifest the inventories of `namespace` list (only
    those a root of `roots` lists, when given), one row each, with its health read now;
    sorted by kind, namespace, name. Raises OrksyncError naming the sync roots that exist
    when a root of `roots` has no inventory."""
    wanted = set(roots)
    inventories = read_inventories(kube, namespace)
    unknown = sorted(wanted - inventories.keys())
    if unknown:
        known = ", ".join(inventories) or "none"
        raise OrksyncError(f"no sync root named {', '.join(unknown)} (no inventory "
                           f"{CONFIGMAP_PREFIX}<name> in namespace {namespace}); the sync "
                           f"roots there: {known}")
    listed = _listed(inventories)
    items = [item for item in listed.values() if not wanted or wanted & set(item.roots)]
    return _rows(kube, namespace, items, listed)


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
    listed = _listed(read_inventories(kube, namespace))
    items = [item for ref, item in listed.items()
             if ref.namespace == ns and ref.name == name and _kind_matches(ref, kind)]
    rows = _rows(kube, namespace, items, listed)
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


STATUS_COLUMNS = ("KIND", "NAMESPACE", "NAME", "SYNC ROOT", "READY", "HEALTH", "REVISION",
                  "AGE", "MESSAGE")
TREE_COLUMNS = ("OBJECT", "SYNC ROOT", "READY", "HEALTH", "AGE", "MESSAGE")


def status_table(rows: Sequence[ResourceRow], now: datetime) -> str:
    return table(STATUS_COLUMNS, (
        (_kind_label(r.ref), r.ref.namespace or "-", r.ref.name, r.root_label, r.ready,
         r.health, r.revision[:12] or "-", age(r.created, now), r.message) for r in rows))


def tree_table(tree: Tree, now: datetime) -> str:
    """The custom resource, then its children as branches; a custom resource a `custom:`
    block created has its own children indented beneath it, and its Ready in READY."""
    row = tree.resource
    lines = [(str(row.ref), row.root_label, row.ready, row.health, age(row.created, now),
              row.message)]

    def branches(children: Sequence[ChildRow], indent: str) -> None:
        for i, child in enumerate(children):
            last = i == len(children) - 1
            lines.append((indent + ("└── " if last else "├── ") + str(child.ref), "",
                          child.ready, child.health, "", child.message))
            branches(child.children, indent + ("    " if last else "│   "))

    branches(row.children, "")
    return table(TREE_COLUMNS, lines)
