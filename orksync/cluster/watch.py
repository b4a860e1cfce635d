"""Informers: a live view of one kind kept current by a WATCH, and a set of them. I/O.

An informer LISTs its kind (cluster-wide, optionally by label selector), then WATCHes from
the list's resourceVersion with bookmarks (`Kube.watch`), keeping a store of the objects
keyed by identity (`ObjRef`) and calling its handler for every object added, modified or
deleted. The watch ends after the server's timeout and is opened again from the last
resourceVersion seen (an event's or a bookmark's), so no event is missed between two
watches. A resourceVersion the server no longer has (410 Gone, as the watch's answer or as
an ERROR event) makes it LIST again; the new list is compared with the store, so an object
changed or deleted while no watch was open is still reported (as modified or deleted). A
failure (a cut connection, a refused request, a kind not served yet) is followed by a
new attempt after a backoff (doubling, with jitter, up to `MAX_BACKOFF`), from the last
resourceVersion; it is reset by a watch that delivers an event. `synced` is set once the
first LIST is in.

One thread per informer: each watched kind blocks on its own connection's reads
(`Stream.lines` is a blocking iterator), and orksync watches a few tens of kinds at most
(the kinds it applies), so a thread per kind costs little and keeps each loop plain
(one selector loop would need a non-blocking parser per connection, for no gain at that
scale). The store keeps whole objects less `metadata.managedFields` (about half of a small
object's memory): the drift check compares the fields orksync set with the live ones
(orksync.apply.compare), which needs the body, not only metadata, and no reader of a
view needs which manager set what, but for a Secret (orksync.secrets.plan reads which
data keys orksync applied), whose are kept.
"""

from __future__ import annotations

import json
import logging
import random
import threading
from collections.abc import Callable, Iterable
from typing import Any, Generic, Protocol, TypeVar

from orksync.cluster.kube import Kube, Resource
from orksync.cluster.outage import Outages
from orksync.cluster.transport import TransportError
from orksync.errors import ClusterError
from orksync.model import ObjRef

__all__ = ["Informer", "Informers", "Kind", "KindStores"]

log = logging.getLogger(__name__)

Kind = tuple[str, str]  # (apiVersion, kind)
# (event, object, previous): event is ADDED, MODIFIED or DELETED; previous is the stored
# object before the event (None for ADDED); a DELETED object is its last known state
Handler = Callable[[str, dict[str, Any], dict[str, Any] | None], None]

# the kinds whose stored objects keep metadata.managedFields (module doc)
KEEP_MANAGED_FIELDS = frozenset({("v1", "Secret")})
MIN_BACKOFF = 0.2
MAX_BACKOFF = 30.0
WATCH_TIMEOUT = 300  # seconds the server keeps one watch open (spread by up to a fifth)
# the watches of a process, as one component: an API server outage fails every informer
# at every reconnect; its start and end are logged once, not once per kind and attempt
OUTAGES = Outages(log)


class _Gone(Exception):
    """The watch's resourceVersion is too old: list again."""


class Informer:
    """The live objects of one kind (see the module doc). `on_event` runs on the
    informer's thread, after the store is updated; `on_restart(reason)` when a watch ends
    other than by the server's timeout (`gone`: a relist follows; `error`)."""

    def __init__(self, kube: Kube, kind: Kind, *, label_selector: str | None = None,
                 on_event: Handler | None = None,
                 on_restart: Callable[[str], None] | None = None,
                 watch_timeout: int = WATCH_TIMEOUT) -> None:
        self.kube = kube
        self.kind = kind
        self.label_selector = label_selector
        self.on_event = on_event or (lambda *_: None)
        self.on_restart = on_restart or (lambda _: None)
        self.watch_timeout = watch_timeout
        self._slim = tuple(kind) not in KEEP_MANAGED_FIELDS
        self.synced = threading.Event()
        self.restarts = 0
        self.resource_version = ""
        self._store: dict[ObjRef, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._stream: Any = None
        self._thread: threading.Thread | None = None

    # --- the view ------------------------------------------------------------------------

    def get(self, ref: ObjRef) -> dict[str, Any] | None:
        with self._lock:
            return self._store.get(ref)

    def items(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._store.values())

    # --- lifecycle -----------------------------------------------------------------------

    def start(self) -> Informer:
        self._thread = threading.Thread(target=self.run, daemon=True,
                                        name=f"orksync-watch-{self.kind[1]}")
        self._thread.start()
        return self

    def stop(self, *, wait: bool = True) -> None:
        """End the loop; the open watch is closed at once."""
        self._stopping.set()
        stream = self._stream
        if stream is not None:
            stream.close()
        if wait and self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(10)

    def run(self) -> None:
        failures = 0
        resource_version = ""
        while not self._stopping.is_set():
            try:
                if not resource_version:
                    resource_version = self._relist()
                    self.synced.set()
                    OUTAGES.recovered("watch")
                resource_version, delivered = self._watch(resource_version)
                if delivered:
                    failures = 0
                continue  # the server's timeout: watch again from where it stopped
            except _Gone:
                log.info("watch %s %s: resourceVersion too old, listing again", *self.kind)
                resource_version = ""
                self._restarted("gone")
                continue
            except (ClusterError, TransportError, ValueError) as err:  # ValueError: bad JSON
                if self._stopping.is_set():
                    return
                if isinstance(err, ClusterError) and err.status == 410:
                    resource_version = ""
                    self._restarted("gone")
                    continue
                failures += 1
                delay = min(MIN_BACKOFF * 2 ** (failures - 1), MAX_BACKOFF)
                delay *= random.uniform(0.8, 1.2)
                quiet = _unavailable(err)  # an outage: its start and end are logged
                if quiet:
                    OUTAGES.failed("watch", f"{self.kind[1]} ({self.kind[0]}): {err}")
                log.log(logging.DEBUG if quiet else logging.INFO,
                        "watch %s %s failed (%s); again in %.1fs", *self.kind, err, delay)
                self._restarted("error")
                self._stopping.wait(delay)

    def _restarted(self, reason: str) -> None:
        self.restarts += 1
        self.on_restart(reason)

    # --- list and watch ------------------------------------------------------------------

    def _relist(self) -> str:
        """LIST the kind; the store replaced by it, the differences reported; the list's
        resourceVersion."""
        res = self.kube.resource(*self.kind)
        items: dict[ObjRef, dict[str, Any]] = {}
        cont: str | None = None
        resource_version = ""
        while True:
            page = self.kube.request("GET", res.path(), query={
                "labelSelector": self.label_selector, "limit": 500, "continue": cont})
            for item in page.get("items") or []:
                items[ObjRef.of(item)] = self._admit(item, res)
            meta = page.get("metadata") or {}
            resource_version = resource_version or str(meta.get("resourceVersion") or "")
            cont = meta.get("continue")
            if not cont:
                break
        with self._lock:
            old, self._store = self._store, items
            self.resource_version = resource_version
        for ref, item in items.items():
            before = old.get(ref)
            if before is None:
                self.on_event("ADDED", item, None)
            elif _version(before) != _version(item):
                self.on_event("MODIFIED", item, before)
        for ref, item in old.items():
            if ref not in items:
                self.on_event("DELETED", item, item)
        return resource_version

    def _watch(self, resource_version: str) -> tuple[str, bool]:
        """One WATCH from `resource_version` until the server ends it; the last
        resourceVersion seen and whether any event came."""
        res = self.kube.resource(*self.kind)
        timeout = int(self.watch_timeout * random.uniform(0.8, 1.0)) or 1
        stream = self.kube.watch(res, resource_version=resource_version,
                                 label_selector=self.label_selector,
                                 timeout_seconds=timeout, idle=timeout + 60.0)
        self._stream = stream
        OUTAGES.recovered("watch")  # the server answered the watch
        delivered = False
        try:
            if self._stopping.is_set():
                return resource_version, delivered
            for line in stream.lines():
                resource_version = self._event(json.loads(line), res) or resource_version
                delivered = True
        finally:
            self._stream = None
            stream.close()
        return resource_version, delivered

    def _admit(self, obj: dict[str, Any], res: Resource) -> dict[str, Any]:
        """A listed or watched object as the store keeps it: named by its kind (a LIST's
        items of built-in kinds are not), without its managedFields (module doc)."""
        obj.setdefault("apiVersion", res.api_version)
        obj.setdefault("kind", res.kind)
        if self._slim:
            (obj.get("metadata") or {}).pop("managedFields", None)
        return obj

    def _event(self, event: dict[str, Any], res: Resource) -> str:
        """Apply one watch event to the store; its resourceVersion."""
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise _Gone()
            raise ClusterError(f"watch error: {obj.get('code')} {obj.get('reason')}: "
                               f"{obj.get('message')}", subject=f"{res.kind} ({res.api_version})",
                               status=int(obj.get("code") or 0))
        version = _version(obj)
        if kind == "BOOKMARK":
            with self._lock:
                self.resource_version = version
            return version
        ref = ObjRef.of(self._admit(obj, res))
        with self._lock:
            before = self._store.get(ref)
            if kind == "DELETED":
                self._store.pop(ref, None)
            else:
                self._store[ref] = obj
            self.resource_version = version
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            self.on_event(str(kind), obj, before)
        return version


class _Store(Protocol):
    synced: threading.Event

    def get(self, ref: ObjRef) -> dict[str, Any] | None: ...

    def items(self) -> list[dict[str, Any]]: ...


S = TypeVar("S", bound=_Store)


class KindStores(Generic[S]):
    """A root's stores, one per watched kind (`_stores`, under `_lock`): what the view, a
    render and drift repair read."""

    def __init__(self) -> None:
        self._stores: dict[Kind, S] = {}
        self._lock = threading.Lock()

    def kinds(self) -> set[Kind]:
        with self._lock:
            return set(self._stores)

    def synced(self) -> bool:
        """Whether every kind has its first LIST in."""
        return not self.unsynced()

    def unsynced(self) -> list[Kind]:
        """The kinds whose first LIST is not in yet."""
        with self._lock:
            return sorted(k for k, i in self._stores.items() if not i.synced.is_set())

    def informer(self, kind: Kind) -> S | None:
        with self._lock:
            return self._stores.get(kind)

    def items(self, kind: Kind) -> list[dict[str, Any]] | None:
        """The kind's objects, or None when the kind is not watched or not synced yet."""
        store = self.informer(kind)
        if store is None or not store.synced.is_set():
            return None
        return store.items()

    def count(self) -> int:
        """Objects in all the stores."""
        with self._lock:
            stores = list(self._stores.values())
        return sum(len(i.items()) for i in stores)

    def get(self, ref: ObjRef) -> dict[str, Any] | None:
        store = self.informer((ref.api_version, ref.kind))
        return store.get(ref) if store is not None else None


class Informers(KindStores[Informer]):
    """One informer per kind, all with the same label selector and handler; kinds are
    added and removed as the set of watched kinds changes (`watch`)."""

    def __init__(self, kube: Kube, *, label_selector: str | None = None,
                 on_event: Handler | None = None,
                 on_restart: Callable[[str], None] | None = None) -> None:
        super().__init__()
        self.kube = kube
        self.label_selector = label_selector
        self.on_event = on_event
        self.on_restart = on_restart

    def watch(self, kinds: Iterable[Kind]) -> None:
        """Watch exactly these kinds: informers started for new ones, stopped for the
        others."""
        wanted = set(kinds)
        with self._lock:
            gone = [self._stores.pop(k) for k in list(self._stores) if k not in wanted]
            for kind in sorted(wanted - set(self._stores)):
                self._stores[kind] = Informer(
                    self.kube, kind, label_selector=self.label_selector,
                    on_event=self.on_event, on_restart=self.on_restart).start()
        for informer in gone:
            informer.stop(wait=False)

    def stop(self) -> None:
        with self._lock:
            informers, self._stores = list(self._stores.values()), {}
        for informer in informers:
            informer.stop(wait=False)
        for informer in informers:
            informer.stop()


def _unavailable(err: BaseException) -> bool:
    """A failure of the server or the way to it (no answer, a 5xx), not of the request."""
    if isinstance(err, TransportError):
        return True
    return isinstance(err, ClusterError) and (not err.status or err.status >= 500)


def _version(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")
