"""Shared informers: one WATCH per kind for every sync root of a process, each root seeing
only the objects of its label value. I/O.

The agent's controller serves many Syncs, each of whose objects carries a label of its own
(`orksync.io/shard: sync-<digest>`). An informer per Sync and kind would hold a thread, a
connection and a watch on the API server per Sync and kind; here each kind has one
informer (`_Routed`), whose watch selects every object carrying the label key (within a
selector: orksync's label), and which keeps the objects of the values subscribed to only
(a `Part` each), routing each event by the object's label value. Objects of other
values (Syncs served by other replicas) are read and dropped.

A value subscribed to (`LabelView.watch`) starts with one LIST of the kind by that value
(its catch-up, on a small pool), once the kind's watch has its starting resourceVersion,
so that every later change reaches the part through the watch. What the watch delivered
meanwhile is kept; the two are merged by resourceVersion, the later one winning, and an
object the watch saw leave the value (deleted, or relabelled) is not brought back by an
older LIST. The kind's watch starts from the resourceVersion of a LIST of one object; a
resourceVersion too old (410) LISTs every object of the key once and rebuilds each part
from it.

An object whose label value changes (a CRD two Syncs ship, written last by the other)
leaves the first part (reported DELETED there, as a watch by that value would) and joins
the second.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from orksync.cluster.kube import Kube, Resource
from orksync.cluster.transport import TransportError
from orksync.cluster.watch import (
    MAX_BACKOFF,
    MIN_BACKOFF,
    Handler,
    Informer,
    Kind,
    KindStores,
)
from orksync.errors import ClusterError
from orksync.model import ObjRef

__all__ = ["LabelView", "Part", "SharedInformers"]

log = logging.getLogger(__name__)

CATCH_UP_WORKERS = 4  # catch-up LISTs at once (a hand-over subscribes many values)

Event = tuple["Part", str, dict[str, Any], "dict[str, Any] | None"]


def _version(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _older(a: str, b: str) -> bool:
    """Whether resourceVersion `a` is before `b` (etcd's are increasing integers; any
    other form is never taken as older)."""
    return a.isdigit() and b.isdigit() and int(a) < int(b)


class Part:
    """The objects of one kind carrying one label value: an informer's store for one
    root (`get`, `items`, `synced`, as `Informer`'s)."""

    def __init__(self, value: str, handler: Handler) -> None:
        self.value = value
        self.handler = handler
        self.synced = threading.Event()
        self.store: dict[ObjRef, dict[str, Any]] = {}
        # until its catch-up is merged: objects the watch saw leave this value, at which
        # resourceVersion (an older LIST must not bring them back)
        self.gone: dict[ObjRef, str] = {}
        self.epoch = 0  # a rebuild (410) since its catch-up began: the catch-up is dropped
        self.closed = False
        self.lock = threading.Lock()  # its informer's, once added to one

    def get(self, ref: ObjRef) -> dict[str, Any] | None:
        with self.lock:
            return self.store.get(ref)

    def items(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.store.values())


class _Routed(Informer):
    """One kind's watch of every object carrying `key`, routed into Parts by value."""

    def __init__(self, kube: Kube, kind: Kind, key: str, *, within: str,
                 pool: ThreadPoolExecutor,
                 on_restart: Callable[[str], None] | None) -> None:
        selector = f"{within},{key}" if within else key
        super().__init__(kube, kind, label_selector=selector, on_restart=on_restart)
        self.key = key
        self.within = within
        self.pool = pool  # where the catch-ups run
        self._started = False  # the watch has its starting resourceVersion
        self.parts: dict[str, Part] = {}
        self._pending: dict[str, Part] = {}  # the parts whose catch-up is not merged yet
        self._where: dict[ObjRef, str] = {}  # the value each stored object is stored under

    def value_of(self, obj: dict[str, Any]) -> str | None:
        return ((obj.get("metadata") or {}).get("labels") or {}).get(self.key)

    # --- the parts -------------------------------------------------------------------------

    def add(self, part: Part) -> None:
        """A part: caught up at once when the watch has its starting point, else by the
        LIST that gives it one."""
        part.lock = self._lock
        with self._lock:
            self.parts[part.value] = self._pending[part.value] = part
            started = self._started
        if started:
            self.schedule(part, 0)

    def schedule(self, part: Part, failures: int) -> None:
        """The part's catch-up, on the pool (none once the informer or the pool stops)."""
        if part.closed or self._stopping.is_set():
            return
        with contextlib.suppress(RuntimeError):  # the pool is shut down: the process stops
            self.pool.submit(self.catch_up, part, failures)

    def remove(self, part: Part) -> None:
        with self._lock:
            part.closed = True
            if self.parts.get(part.value) is part:
                del self.parts[part.value]
            if self._pending.get(part.value) is part:
                del self._pending[part.value]
            for ref in part.store:
                if self._where.get(ref) == part.value:
                    del self._where[ref]

    def catch_up(self, part: Part, failures: int = 0) -> None:
        """The part's objects LISTed and merged with what the watch delivered since it was
        added; the part synced. A failed LIST is tried again after a backoff, until the
        part is removed."""
        if part.closed or self._stopping.is_set():
            return
        epoch = part.epoch
        try:
            items = self._list(f"{self.within},{self.key}={part.value}" if self.within
                               else f"{self.key}={part.value}")
        except (ClusterError, TransportError, ValueError) as err:
            delay = min(MIN_BACKOFF * 2 ** failures, MAX_BACKOFF) * random.uniform(0.8, 1.2)
            log.info("watch %s %s: the objects of %s cannot be listed (%s); again in %.1fs",
                     *self.kind, part.value, err, delay)
            timer = threading.Timer(delay, self.schedule, (part, failures + 1))
            timer.daemon = True
            timer.start()
            return
        events: list[Event] = []
        with self._lock:
            if part.closed or part.epoch != epoch:  # removed, or rebuilt meanwhile
                return
            for ref, item in items.items():
                version = _version(item)
                if ref in part.gone and not _older(part.gone[ref], version):
                    continue
                current = part.store.get(ref)
                if current is not None and not _older(_version(current), version):
                    continue
                events += self._leave(ref, version, keep=part.value)
                part.store[ref] = item
                self._where[ref] = part.value
                events.append((part, "ADDED" if current is None else "MODIFIED", item,
                               current))
            part.gone.clear()
            part.synced.set()
            if self._pending.get(part.value) is part:
                del self._pending[part.value]
        _dispatch(events)

    # --- list and watch --------------------------------------------------------------------

    def _list(self, selector: str) -> dict[ObjRef, dict[str, Any]]:
        res = self.kube.resource(*self.kind)
        items: dict[ObjRef, dict[str, Any]] = {}
        for item in self.kube.list(res, label_selector=selector):
            item.setdefault("apiVersion", res.api_version)
            item.setdefault("kind", res.kind)
            items[ObjRef.of(item)] = item
        return items

    def _relist(self) -> str:
        """The starting resourceVersion. The first: of a LIST of one object, the parts
        caught up from there. After a resourceVersion too old: of a LIST of every object
        of the key, each part rebuilt from it (differences reported)."""
        res = self.kube.resource(*self.kind)
        if not self._started:
            page = self.kube.request("GET", res.path(), query={
                "labelSelector": self.label_selector, "limit": 1})
            version = str(((page or {}).get("metadata") or {}).get("resourceVersion") or "")
            with self._lock:
                self.resource_version = version
                self._started = True
                waiting = list(self._pending.values())
            for part in waiting:
                self.schedule(part, 0)
            return version
        cont: str | None = None
        listed: dict[str, dict[ObjRef, dict[str, Any]]] = {}
        version = ""
        with self._lock:  # a part added meanwhile is caught up after
            values = set(self.parts)
        while True:
            page = self.kube.request("GET", res.path(), query={
                "labelSelector": self.label_selector, "limit": 500, "continue": cont}) or {}
            for item in page.get("items") or []:
                value = self.value_of(item)
                if value in values:
                    item.setdefault("apiVersion", res.api_version)
                    item.setdefault("kind", res.kind)
                    listed.setdefault(str(value), {})[ObjRef.of(item)] = item
            meta = page.get("metadata") or {}
            version = version or str(meta.get("resourceVersion") or "")
            cont = meta.get("continue")
            if not cont:
                break
        events: list[Event] = []
        with self._lock:
            self._where = {}
            for value, part in self.parts.items():
                if value not in values:
                    continue
                old, part.store = part.store, listed.get(value, {})
                part.epoch += 1
                part.gone.clear()
                for ref, item in part.store.items():
                    self._where[ref] = value
                    before = old.get(ref)
                    if before is None:
                        events.append((part, "ADDED", item, None))
                    elif _version(before) != _version(item):
                        events.append((part, "MODIFIED", item, before))
                events += [(part, "DELETED", item, item) for ref, item in old.items()
                           if ref not in part.store]
                part.synced.set()
                self._pending.pop(value, None)
            later = list(self._pending.values())
            self.resource_version = version
        for part in later:
            self.schedule(part, 0)
        _dispatch(events)
        return version

    def _event(self, event: dict[str, Any], res: Resource) -> str:
        kind = event.get("type")
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            return super()._event(event, res)  # a bookmark or an error
        obj = event.get("object") or {}
        obj.setdefault("apiVersion", res.api_version)
        obj.setdefault("kind", res.kind)
        ref, version, value = ObjRef.of(obj), _version(obj), self.value_of(obj)
        with self._lock:
            self.resource_version = version
            keep = value if kind != "DELETED" else None
            events = self._leave(ref, version, keep=keep, last=obj)
            for pending in self._pending.values():  # not in it as of this version
                if pending.value != keep:
                    pending.gone[ref] = version
            part = self.parts.get(str(keep)) if keep is not None else None
            if part is not None:
                current = part.store.get(ref)
                if current is None or not _older(version, _version(current)):
                    part.store[ref] = obj
                    self._where[ref] = part.value
                    events.append((part, "MODIFIED" if current is not None else "ADDED", obj,
                                   current))
        _dispatch(events)
        return version

    def _leave(self, ref: ObjRef, version: str, *, keep: str | None,
               last: dict[str, Any] | None = None) -> list[Event]:
        """The object out of the part it is stored in, unless that is `keep`'s or its
        stored copy is later than `version` (under the lock)."""
        value = self._where.get(ref)
        if value is None or value == keep:
            return []
        part = self.parts.get(value)
        current = part.store.get(ref) if part is not None else None
        if part is None or current is None or _older(version, _version(current)):
            return []
        del part.store[ref]
        del self._where[ref]
        return [(part, "DELETED", last or current, current)]


def _dispatch(events: Iterable[Event]) -> None:
    for part, kind, obj, before in events:
        if not part.closed:
            part.handler(kind, obj, before)


class SharedInformers:
    """The shared informers of one process: one `_Routed` per kind, of the objects
    carrying label `key` (and matching the selector `within`); `view(value, handler)` is
    one root's view of them."""

    def __init__(self, kube: Kube, key: str, *, within: str = "",
                 on_restart: Callable[[str], None] | None = None) -> None:
        self.kube = kube
        self.key = key
        self.within = within  # a selector every object must match too
        self.on_restart = on_restart
        self._kinds: dict[Kind, _Routed] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(CATCH_UP_WORKERS, thread_name_prefix="orksync-catch-up")

    def view(self, value: str, on_event: Handler) -> LabelView:
        return LabelView(self, value, on_event)

    def subscribe(self, kind: Kind, part: Part) -> None:
        with self._lock:
            informer = self._kinds.get(kind)
            if informer is None:
                informer = self._kinds[kind] = _Routed(
                    self.kube, kind, self.key, within=self.within, pool=self._pool,
                    on_restart=self.on_restart)
                informer.start()
            informer.add(part)  # under the lock: not to an informer the last part stops

    def unsubscribe(self, kind: Kind, part: Part) -> None:
        with self._lock:
            informer = self._kinds.get(kind)
            if informer is None:
                return
            informer.remove(part)
            if not informer.parts:  # nobody watches the kind any more
                del self._kinds[kind]
                informer.stop(wait=False)

    def stop(self) -> None:
        with self._lock:
            informers, self._kinds = list(self._kinds.values()), {}
        for informer in informers:
            informer.stop()
        self._pool.shutdown(wait=False, cancel_futures=True)


class LabelView(KindStores[Part]):
    """One root's informers over SharedInformers: the objects of its label value, of the
    kinds it watches (the interface of `Informers`)."""

    def __init__(self, shared: SharedInformers, value: str, on_event: Handler) -> None:
        super().__init__()
        self.shared = shared
        self.value = value
        self.on_event = on_event

    def watch(self, kinds: Iterable[Kind]) -> None:
        wanted = set(kinds)
        with self._lock:
            gone = {k: self._stores.pop(k) for k in list(self._stores) if k not in wanted}
            new = {k: Part(self.value, self.on_event) for k in sorted(wanted - set(self._stores))}
            self._stores.update(new)
        for kind, part in gone.items():
            self.shared.unsubscribe(kind, part)
        for kind, part in new.items():
            self.shared.subscribe(kind, part)

    def stop(self) -> None:
        self.watch(())
