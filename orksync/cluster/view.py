"""`WatchedView`: the agent's informers (orksync.cluster.watch) as the live view a render, a
status report and an apply read instead of LISTs. I/O only through what it wraps.

The informers watch the objects carrying orksync's managed-by label (every object a sync
applies carries it, the custom resources and CRDs included); a sharded agent's only those
that also carry its shard label (orksync.agent.shard), which every object it writes
carries. So a lookup is answered from them when its kind is watched and listed already and
either the lookup is by that label (`.children`, `status`: always of this shard's own custom
resources, whose children are all in its view once the agent labelled those written before
the shard label, orksync.agent.relabel), or it is unfiltered and the object is there (a
custom resource's own status, a `.cross` target of this shard). Anything else (a kind not
watched yet, an object orksync did not label: a custom resource it has not created yet; a
`.cross` target or dependency of another shard) goes to the fallback, a `LiveIndex` made
for this one render, which LISTs that kind once: an object missing from the view is never
taken for absent by an unfiltered lookup.

The apply's view (`apply_view`) is the same store: the kinds listed whole by an apply
(custom resources, CRDs) hold only labelled objects there (a shard's: its own), so an
object orksync (this shard) never applied is seen as absent, which a server-side apply
does not mind and a create-if-absent answers with a conflict that changes nothing;
Namespaces (listed whole for the custom resources' namespaces, most of which orksync did
not make) are always listed.

The store may be a moment behind a write that was just made: a decision taken on it is
taken again when the informer's event for that write arrives (the agent's triggers), the
same eventual consistency as a controller's informer cache.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orksync.cluster.kube import Kube
from orksync.cluster.live import LiveIndex
from orksync.cluster.watch import Informers, Kind
from orksync.model import MANAGED_SELECTOR, ObjRef

__all__ = ["WatchedView", "apply_view"]


class WatchedView:
    """A LiveView (orksync.render.children) over `informers`, falling back to one LIST
    per kind through `kube` (see the module doc). One per render or report: the fallback's
    lists are kept for its life."""

    def __init__(self, informers: Informers, kube: Kube, *, strict: bool = True) -> None:
        self.informers = informers
        self.fallback = LiveIndex(kube, strict=strict)
        self.strict = strict

    def get(self, ref: ObjRef, selector: str = "") -> dict[str, Any] | None:
        if selector in ("", MANAGED_SELECTOR):
            informer = self.informers.informer((ref.api_version, ref.kind))
            if informer is not None and informer.synced.is_set():
                found = informer.get(ref)
                if found is not None or selector:
                    return found
        return self.fallback.get(ref, selector)


def apply_view(informers: Informers) -> Callable[[Kind, bool], list[dict[str, Any]] | None]:
    """The Applier's `view` (orksync.apply.prefetch.View) over `informers` (module doc)."""
    def view(kind: Kind, whole: bool) -> list[dict[str, Any]] | None:
        if whole and kind == ("v1", "Namespace"):
            return None
        return informers.items(kind)
    return view
