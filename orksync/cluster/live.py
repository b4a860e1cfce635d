"""`LiveIndex`: the cluster's live objects, one LIST per kind, looked up by identity. I/O.

The render's view of the cluster (orksync.render.children.LiveView), the status writer's
(orksync.lifecycle.status) and the autoscaler's (orksync.lifecycle.autoscale). Kept apart from the
status module so that applying a rendered directory (which may autoscale but never
renders) does not import the template engines the status fields need.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Protocol

from orksync.cluster.kube import Kube
from orksync.durations import rfc3339
from orksync.errors import ClusterError
from orksync.model import ObjRef

__all__ = ["LiveIndex", "LiveReader", "rfc3339"]

log = logging.getLogger(__name__)


class LiveReader(Protocol):
    """What reads one live object by identity, from a list of its kind made once (with
    `selector`, a label selector, or unfiltered): a LiveIndex, or the agent's informers
    (orksync.cluster.view.WatchedView)."""

    def get(self, ref: ObjRef, selector: str = "") -> dict[str, Any] | None: ...


class LiveIndex:
    """Live objects listed once per kind (cluster-wide, optionally by label) and looked up
    by identity, so reporting on (or rendering) N custom resources costs one LIST per kind,
    not N. With `gets`, the first `gets` unfiltered lookups of a kind are GETs instead (the
    agent's view, orksync.cluster.view: a Sync of a few custom resources, among the
    thousands of a kind many Syncs hold, reads its own and not the cluster's, whose LIST the
    API server reads whole and the agent holds while it renders). A kind the API server
    does not serve has no objects. Any other failed read is logged and taken as nothing
    found, or, with `strict` (the render's view: a missing child must never be mistaken for
    an absent one), raised again as ClusterError on every lookup of that kind. The
    orksync.render.children.LiveView of a live render.

    `by_namespace`: one LIST per kind and namespace instead (cluster-scoped kinds still
    cluster-wide): the view of an impersonated tenant (orksync.apply.impersonation),
    whose RBAC is usually granted per namespace. `hide_forbidden`: a LIST the API server
    refuses (403) is a kind of which this identity sees nothing, even when `strict`: for
    views that only show (`orksync diff`, `render --live`), never for one a sync acts on."""

    def __init__(self, kube: Kube, *, strict: bool = False, by_namespace: bool = False,
                 hide_forbidden: bool = False, gets: int = 0) -> None:
        self.kube = kube
        self.gets = gets
        self.strict = strict
        self.by_namespace = by_namespace
        self.hide_forbidden = hide_forbidden
        self._lists: dict[tuple[str, str, str, str], dict[ObjRef, dict[str, Any]]] = {}
        self._errors: dict[tuple[str, str, str, str], ClusterError] = {}
        self._got: dict[tuple[str, str, str, str], dict[ObjRef, dict[str, Any] | None]] = {}
        self._lock = threading.Lock()

    def get(self, ref: ObjRef, selector: str = "") -> dict[str, Any] | None:
        key = (ref.api_version, ref.kind, selector,
               ref.namespace if self.by_namespace else "")
        with self._lock:
            if key not in self._errors and key not in self._lists:
                got = self._got.setdefault(key, {}) if self.gets and not selector else None
                if got is not None and (ref in got or len(got) < self.gets):
                    if ref not in got:
                        got[ref] = self._get(ref, key)
                    if key not in self._errors:
                        return got[ref]
                else:
                    self._got.pop(key, None)
                    self._lists[key] = self._list(ref, selector, key)
            if key in self._errors:
                raise self._errors[key]
            return self._lists[key].get(ref)

    def _get(self, ref: ObjRef, key: tuple[str, str, str, str]) -> dict[str, Any] | None:
        try:
            res = self.kube.resource(ref.api_version, ref.kind)
            found: dict[str, Any] | None = self.kube.get_or_none(
                res, ref.namespace if res.namespaced else "", ref.name)
            return found
        except ClusterError as err:
            self._failed(ref, key, err)
            return None

    def _list(self, ref: ObjRef, selector: str,
              key: tuple[str, str, str, str]) -> dict[ObjRef, dict[str, Any]]:
        items: dict[ObjRef, dict[str, Any]] = {}
        try:
            res = self.kube.resource(ref.api_version, ref.kind)
            for item in self.kube.list(res, namespace=key[3] if res.namespaced else "",
                                       label_selector=selector or None):
                items[ObjRef.of(item)] = item
        except ClusterError as err:
            self._failed(ref, key, err)
            return {}
        return items

    def _failed(self, ref: ObjRef, key: tuple[str, str, str, str], err: ClusterError) -> None:
        if self.strict and err.status != 404 and not (
                self.hide_forbidden and err.status == 403):
            self._errors[key] = err
        log.debug("cannot read %s %s: %s", ref.api_version, ref.kind, err)
