"""Shared informers: one WATCH per kind for every sync root of a process, each root seeing
only the objects of its label value. I/O.

The controller's Syncs each label their objects (`orksync.io/shard: sync-<digest>`). Each
kind has one informer (`_Routed`) whose watch selects every object carrying the label key
(within orksync's label) and keeps the objects of the values subscribed to (a `Part`
each), routing each event by the object's label value; other values' are dropped.

A part starts with a catch-up LIST by its value, once the watch has its starting
resourceVersion, merged with what the watch delivered meanwhile by resourceVersion (the
later wins; an object the watch saw deleted or relabelled is not brought back). The parts
waiting for a catch-up share one LIST (`key in (a,b,...)`, up to CATCH_UP_BATCH): the API
server answers each LIST by label by reading every object of the kind. A process about to
serve many values says so (`SharedInformers.expect`): each kind watched gets an early part
per value at once, caught up together, which the value's view takes over when it
subscribes. A 410 Gone LISTs every object of the key once and rebuilds each part. An
object whose label value changes (a CRD two Syncs ship) leaves the first part (DELETED
there) and joins the second.
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
CATCH_UP_BATCH = 50  # values one catch-up LIST selects at most (its query stays short)

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
        self.early = False  # made for an expected value, no view has taken it yet
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
        # the parts waiting for a worker, with their failed catch-ups so far
        self._queued: dict[str, tuple[Part, int]] = {}
        self._where: dict[ObjRef, str] = {}  # the value each stored object is stored under

    def value_of(self, obj: dict[str, Any]) -> str | None:
        return ((obj.get("metadata") or {}).get("labels") or {}).get(self.key)

    # --- the parts -------------------------------------------------------------------------

    def add(self, *parts: Part) -> None:
        """Parts: caught up at once when the watch has its starting point, else by the
        LIST that gives it one."""
        with self._lock:
            for part in parts:
                part.lock = self._lock
                self.parts[part.value] = self._pending[part.value] = part
            started = self._started
        if started:
            self._enqueue([(part, 0) for part in parts])

    def schedule(self, part: Part, failures: int) -> None:
        """The part's catch-up, on the pool with those queued beside it."""
        self._enqueue([(part, failures)])

    def _enqueue(self, entries: list[tuple[Part, int]]) -> None:
        """Catch-ups queued, and a run of the pool for each CATCH_UP_BATCH of them (none
        once the informer or the pool stops): queued together, they share LISTs."""
        entries = [(part, failures) for part, failures in entries if not part.closed]
        if not entries or self._stopping.is_set():
            return
        with self._lock:
            for part, failures in entries:
                self._queued[part.value] = (part, failures)
        for _ in range(-(-len(entries) // CATCH_UP_BATCH)):
            with contextlib.suppress(RuntimeError):  # the pool is shut down: the end
                self.pool.submit(self._catch_up_queued)

    def _catch_up_queued(self) -> None:
        """Up to CATCH_UP_BATCH queued parts caught up by one LIST (nothing when an
        earlier run took them)."""
        with self._lock:
            batch: list[tuple[Part, int]] = []
            while self._queued and len(batch) < CATCH_UP_BATCH:
                part, failures = self._queued.pop(next(iter(self._queued)))
                batch.append((part, failures))
        if batch:
            self._catch_up(batch)

    def remove(self, part: Part) -> None:
        with self._lock:
            part.closed = True
            if self.parts.get(part.value) is part:
                del self.parts[part.value]
            if self._pending.get(part.value) is part:
                del self._pending[part.value]
            if self._queued.get(part.value, (None, 0))[0] is part:
                del self._queued[part.value]
            for ref in part.store:
                if self._where.get(ref) == part.value:
                    del self._where[ref]

    def _catch_up(self, batch: list[tuple[Part, int]]) -> None:
        """The objects of the parts' values LISTed at once, and each part's merged with
        what the watch delivered since it was added; the parts synced. A failed LIST is
        tried again for each part after its backoff, until the part is removed."""
        batch = [(part, failures) for part, failures in batch if not part.closed]
        if not batch or self._stopping.is_set():
            return
        epochs = [part.epoch for part, _ in batch]
        values = sorted({part.value for part, _ in batch})
        selected = f"{self.key}={values[0]}" if len(values) == 1 else \
            f"{self.key} in ({','.join(values)})"
        try:
            items = self._list(f"{self.within},{selected}" if self.within else selected)
        except (ClusterError, TransportError, ValueError) as err:
            log.info("watch %s %s: the objects of %s cannot be listed (%s); again after a "
                     "backoff", *self.kind, ", ".join(values[:3]) +
                     (", ..." if len(values) > 3 else ""), err)
            for part, failures in batch:
                delay = min(MIN_BACKOFF * 2 ** failures, MAX_BACKOFF) * \
                    random.uniform(0.8, 1.2)
                timer = threading.Timer(delay, self.schedule, (part, failures + 1))
                timer.daemon = True
                timer.start()
            return
        by_value: dict[str, dict[ObjRef, dict[str, Any]]] = {}
        for ref, item in items.items():
            by_value.setdefault(str(self.value_of(item)), {})[ref] = item
        for (part, _), epoch in zip(batch, epochs, strict=True):
            self._merge(part, epoch, by_value.get(part.value, {}))

    def _merge(self, part: Part, epoch: int, items: dict[ObjRef, dict[str, Any]]) -> None:
        """A catch-up's LIST of the part's value merged into it (not when the part was
        removed or rebuilt since the LIST began)."""
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
            items[ObjRef.of(item)] = self._admit(item, res)
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
            self._enqueue([(part, 0) for part in waiting])
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
                    listed.setdefault(str(value), {})[ObjRef.of(item)] = self._admit(item, res)
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
        self._enqueue([(part, 0) for part in later])
        _dispatch(events)
        return version

    def _event(self, event: dict[str, Any], res: Resource) -> str:
        kind = event.get("type")
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            return super()._event(event, res)  # a bookmark or an error
        obj = self._admit(event.get("object") or {}, res)
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


def _unread(*_: Any) -> None:
    """An early part's handler: no view reads its events yet."""


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
        self._expected: set[str] = set()  # values whose view subscribes soon
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(CATCH_UP_WORKERS, thread_name_prefix="orksync-catch-up")

    def view(self, value: str, on_event: Handler) -> LabelView:
        return LabelView(self, value, on_event)

    def expect(self, values: Iterable[str]) -> None:
        """Early parts of these values in every kind watched now and in each kind first
        watched later, until a view of the value takes the part or `forget`."""
        with self._lock:
            new = set(values) - self._expected
            self._expected |= new
            for informer in self._kinds.values():
                self._add_early(informer, new)

    def forget(self, value: str) -> None:
        """No more early parts of `value`; those no view took are dropped."""
        with self._lock:
            self._expected.discard(value)
            for kind, informer in list(self._kinds.items()):
                part = informer.parts.get(value)
                if part is not None and part.early:
                    self._remove(kind, informer, part)

    def subscribe(self, kind: Kind, value: str, handler: Handler) -> Part:
        """The part of `value` in the kind's informer, reported to `handler`: the early
        one, listed already or soon, else a new one."""
        with self._lock:
            informer = self._kinds.get(kind)
            if informer is None:
                informer = self._kinds[kind] = _Routed(
                    self.kube, kind, self.key, within=self.within, pool=self._pool,
                    on_restart=self.on_restart)
                informer.start()
                self._add_early(informer, self._expected - {value})
            part = informer.parts.get(value)
            if part is not None and part.early:
                part.handler, part.early = handler, False
                return part
            part = Part(value, handler)
            informer.add(part)  # under the lock: not to an informer the last part stops
            return part

    def unsubscribe(self, kind: Kind, part: Part) -> None:
        with self._lock:
            informer = self._kinds.get(kind)
            if informer is not None:
                self._remove(kind, informer, part)

    @staticmethod
    def _add_early(informer: _Routed, values: Iterable[str]) -> None:
        parts = [Part(value, _unread) for value in sorted(values) if value not in informer.parts]
        for part in parts:
            part.early = True
        informer.add(*parts)

    def _remove(self, kind: Kind, informer: _Routed, part: Part) -> None:
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
        self._watching = threading.Lock()  # one change of the kinds at a time

    def watch(self, kinds: Iterable[Kind]) -> None:
        wanted = set(kinds)
        with self._watching:
            with self._lock:
                gone = {k: self._stores.pop(k) for k in list(self._stores) if k not in wanted}
                new = sorted(wanted - set(self._stores))
            for kind, part in gone.items():
                self.shared.unsubscribe(kind, part)
            for kind in new:
                part = self.shared.subscribe(kind, self.value, self.on_event)
                with self._lock:
                    self._stores[kind] = part

    def stop(self) -> None:
        """Every part unsubscribed, and the value no longer expected."""
        self.watch(())
        self.shared.forget(self.value)
