"""What the web view shows, read from the cluster and the agent, and cut down to what one
user may read.

The sync roots are given by the agent as `RootStatus` values (one today: the agent's own
root; a list, so that more roots plug in the same way); the custom resources, their
children and health come from orksync.lifecycle.overview (the `orksync status` and `orksync
tree` views: the inventories and the live objects, Secrets as metadata only); the Events
orksync wrote from one LIST. These are read at most once every `FRESH` seconds, whoever
asks (`Snapshots`), then filtered per request (`visible`): a custom resource or manifest
is shown when its reader may `list` its kind in its namespace; a child, an Event and a
repaired object likewise; a root, its history and its repairs when they may `get` the
object the root is (its inventory ConfigMap). No value of a Secret is ever read.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from orksync.agent.ui.access import Access
from orksync.agent.ui.journal import Journal, Repair, SyncRecord
from orksync.cluster.kube import Kube
from orksync.errors import ClusterError, OrksyncError
from orksync.lifecycle.overview import ChildRow, ResourceRow, read_rows
from orksync.model import ObjRef

__all__ = ["Page", "RootStatus", "Snapshots", "visible"]

_Row = TypeVar("_Row", ResourceRow, ChildRow)

FRESH = 2.0  # seconds a snapshot of the cluster serves every request
MAX_ROWS = 300  # custom resources and manifests on one page
MAX_CHILDREN = 300  # children in one tree
MAX_EVENTS = 50  # Events on one page
EVENT_READ_CAP = 2000  # Events read at most per snapshot
EVENT_COMPONENT = "orksync"  # the source.component of the Events orksync writes


@dataclass(frozen=True, slots=True)
class RootStatus:
    """A sync root as its agent knows it, and the object whose `get` permission lets a
    user see it (the inventory ConfigMap today)."""

    name: str
    source: str  # URL, ref and path
    revision: str  # the last revision synced, "" before the first
    ready: bool
    message: str
    group: str
    resource: str
    namespace: str
    object_name: str


@dataclass(frozen=True, slots=True)
class EventRow:
    namespace: str
    involved: ObjRef | None
    type: str
    reason: str
    message: str
    time: str


@dataclass(frozen=True, slots=True)
class Snapshot:
    rows: tuple[ResourceRow, ...]
    events: tuple[EventRow, ...]
    problem: str  # why the custom resources could not be read, "" when they were
    events_problem: str


class Snapshots:
    """The cluster's part of the view, read by one request at a time and reused for
    `FRESH` seconds (a page reloaded by many users costs one read)."""

    def __init__(self, kube: Kube, inventory_namespace: str,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.kube = kube
        self.inventory_namespace = inventory_namespace
        self._clock = clock
        self._lock = threading.Lock()
        self._last: tuple[float, tuple[str, ...], Snapshot] | None = None
        self.reads = 0  # snapshots read, for tests

    def get(self, roots: Sequence[str]) -> Snapshot:
        """The objects the inventories of `roots` list, and the Events."""
        key = tuple(roots)
        with self._lock:
            if self._last is not None and self._last[1] == key and \
                    self._clock() - self._last[0] < FRESH:
                return self._last[2]
            snapshot = self._read(roots)
            self._last = (self._clock(), key, snapshot)
            return snapshot

    def _read(self, roots: Sequence[str]) -> Snapshot:
        self.reads += 1
        problem = events_problem = ""
        rows: list[ResourceRow] = []
        try:
            rows = read_rows(self.kube, self.inventory_namespace, roots) if roots else []
        except OrksyncError as err:
            problem = f"the custom resources could not be read: {err}"
        events: list[EventRow] = []
        try:
            events = self._events()
        except ClusterError as err:
            events_problem = ("the agent may not list Events (its ClusterRole grants "
                              "create only)" if err.status == 403 else
                              f"the Events could not be read: {err.detail}")
        return Snapshot(tuple(rows), tuple(events), problem, events_problem)

    def _events(self) -> list[EventRow]:
        """The Events orksync wrote, newest first: pages of one LIST, at most
        EVENT_READ_CAP of them."""
        found: list[EventRow] = []
        cont: str | None = None
        while len(found) < EVENT_READ_CAP:
            _, page = self.kube.request_with_status(
                "GET", "/api/v1/events", query={
                    "fieldSelector": f"source={EVENT_COMPONENT}", "limit": 500,
                    "continue": cont})
            page = page or {}
            for item in page.get("items") or []:
                found.append(_event_row(item))
            cont = (page.get("metadata") or {}).get("continue")
            if not cont:
                break
        found.sort(key=lambda e: e.time, reverse=True)
        return found


def _event_row(item: dict[str, Any]) -> EventRow:
    meta = item.get("metadata") or {}
    obj = item.get("involvedObject") or {}
    involved = None
    if obj.get("kind") and obj.get("name"):
        involved = ObjRef(api_version=str(obj.get("apiVersion") or ""),
                          kind=str(obj["kind"]), namespace=str(obj.get("namespace") or ""),
                          name=str(obj["name"]))
    return EventRow(namespace=str(meta.get("namespace") or ""), involved=involved,
                    type=str(item.get("type") or ""), reason=str(item.get("reason") or ""),
                    message=str(item.get("message") or ""),
                    time=str(item.get("lastTimestamp") or item.get("eventTime") or
                             meta.get("creationTimestamp") or ""))


@dataclass(slots=True)
class RootView:
    status: RootStatus
    syncs: list[SyncRecord]
    repairs: list[Repair]


@dataclass(slots=True)
class Page:
    """One user's share of the view."""

    user: str
    roots: list[RootView] = field(default_factory=list)
    rows: list[ResourceRow] = field(default_factory=list)
    events: list[EventRow] = field(default_factory=list)
    hidden_rows: int = 0  # beyond MAX_ROWS
    truncated: bool = False  # the request's authorisation budget ran out
    problems: list[str] = field(default_factory=list)


class Filter:
    """What one user may read, per kind and namespace (orksync.agent.ui.access)."""

    def __init__(self, kube: Kube, access: Access) -> None:
        self.kube = kube
        self.access = access

    def may_list(self, ref: ObjRef) -> bool:
        try:
            res = self.kube.resource(ref.api_version, ref.kind)
        except ClusterError:
            return False  # a kind the cluster no longer serves: nothing to show
        return self.access.may("list", res.group, res.plural,
                               ref.namespace if res.namespaced else "")

    def may_see_root(self, root: RootStatus) -> bool:
        return self.access.may("get", root.group, root.resource, root.namespace,
                               root.object_name)

    def row(self, row: ResourceRow) -> ResourceRow | None:
        """The row as this user may see it: None when they may not list its kind in its
        namespace; else with the children they may not read left out, and the health's
        message, which may name such a child, replaced when one was."""
        if not self.may_list(row.ref):
            return None
        kept, hidden = self._children(row.children)
        if not hidden:
            return row
        total = sum(1 for c in row.children for _ in c.walk())
        return _replace(row, children=kept,
                        message=f"{row.health}: health of {total} children, "
                                f"{hidden} of them not shown to you")

    def _children(self, children: Sequence[ChildRow]) -> tuple[tuple[ChildRow, ...], int]:
        """The children this user may list, each created custom resource's own children
        cut the same way (one it may not list is left out with everything beneath it), and
        how many were left out."""
        kept: list[ChildRow] = []
        hidden = 0
        for child in children:
            if not self.may_list(child.ref):
                hidden += sum(1 for _ in child.walk())
                continue
            below, more = self._children(child.children)
            if more:
                child = _replace(child, children=below,
                                 message=f"{child.health}: {more} children not shown to you")
            kept.append(child)
            hidden += more
        return tuple(kept), hidden


def _replace(row: _Row, **changes: Any) -> _Row:
    return dataclasses.replace(row, **changes)


def visible(snapshot: Snapshot, roots: Sequence[RootStatus], journal: Journal,
            flt: Filter, user: str) -> Page:
    page = Page(user=user)
    for root in roots:
        if flt.may_see_root(root):
            page.roots.append(RootView(root, journal.syncs(root.name),
                                       [r for r in journal.repairs(root.name)
                                        if flt.may_list(r.ref)]))
    for row in snapshot.rows:
        if len(page.rows) >= MAX_ROWS:
            page.hidden_rows += 1
            continue
        shown = flt.row(row)
        if shown is not None:
            page.rows.append(shown)
    if snapshot.problem and page.roots:
        page.problems.append(snapshot.problem)
    shown_refs = {r.ref for r in page.rows}
    for event in snapshot.events:
        if len(page.events) >= MAX_EVENTS:
            break
        if event.involved in shown_refs and \
                flt.access.may("list", "", "events", event.namespace):
            page.events.append(event)
    if snapshot.events_problem and page.rows:
        page.problems.append(snapshot.events_problem)
    page.truncated = flt.access.truncated
    return page


def find_row(rows: Sequence[ResourceRow], kind: str, namespace: str, name: str
             ) -> ResourceRow | None:
    """The row of `kind` (Kind or Kind.group), namespace and name."""
    wanted = kind.lower()
    for row in rows:
        if row.ref.namespace == namespace and row.ref.name == name and \
                wanted in (row.ref.kind.lower(), f"{row.ref.kind}.{row.ref.group}".lower()):
            return row
    return None


def children(row: ResourceRow) -> tuple[list[ChildRow], int]:
    """The children to show, each created custom resource's own beneath it, at most
    MAX_CHILDREN of them in all (depth first), and how many more there are."""
    budget = MAX_CHILDREN

    def cut(items: Sequence[ChildRow]) -> list[ChildRow]:
        nonlocal budget
        out: list[ChildRow] = []
        for child in items:
            if budget <= 0:
                break
            budget -= 1
            below = cut(child.children)
            out.append(child if len(below) == len(child.children) else
                       _replace(child, children=tuple(below)))
        return out

    kept = cut(row.children)
    total = sum(1 for c in row.children for _ in c.walk())
    return kept, total - sum(1 for c in kept for _ in c.walk())
