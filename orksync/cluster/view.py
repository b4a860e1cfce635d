"""`WatchedView`: the agent's informers (orksync.cluster.watch) as the live view a render, a
status report and an apply read instead of LISTs. I/O only through what it wraps.

The informers hold only the objects carrying orksync's label (a shard's: its shard label
too), so a lookup is answered from them only where a missing object cannot be taken for
absent: by that label, or unfiltered and found, for a kind listed already. Anything else
goes to a `LiveIndex` made for the one render, which GETs the object for the first
FALLBACK_GETS unfiltered lookups of a kind, and then LISTs that kind once. The apply's
view (`apply_view`) is the same store, Namespaces excepted (always listed). Which lookups
the store answers, and why that is safe: docs/operations.md, "The view".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orksync.cluster.kube import Kube
from orksync.cluster.live import LiveIndex
from orksync.cluster.shared_watch import LabelView
from orksync.cluster.watch import Informers, Kind
from orksync.model import MANAGED_SELECTOR, ObjRef

__all__ = ["AnyInformers", "WatchedView", "apply_view"]

AnyInformers = Informers | LabelView  # a root's own informers, or its view of shared ones
# unfiltered lookups of a kind the fallback answers with a GET each before it lists the kind
FALLBACK_GETS = 50


class WatchedView:
    """A LiveView (orksync.render.children) over `informers`, falling back to one LIST
    per kind through `kube` (see the module doc). One per render or report: the fallback's
    lists are kept for its life."""

    def __init__(self, informers: AnyInformers, kube: Kube, *, strict: bool = True) -> None:
        self.informers = informers
        self.fallback = LiveIndex(kube, strict=strict, gets=FALLBACK_GETS)
        self.strict = strict

    def get(self, ref: ObjRef, selector: str = "") -> dict[str, Any] | None:
        if selector in ("", MANAGED_SELECTOR):
            informer = self.informers.informer((ref.api_version, ref.kind))
            if informer is not None and informer.synced.is_set():
                found = informer.get(ref)
                if found is not None or selector:
                    return found
        return self.fallback.get(ref, selector)


def apply_view(informers: AnyInformers) -> Callable[[Kind, bool], list[dict[str, Any]] | None]:
    """The Applier's `view` (orksync.apply.prefetch.View) over `informers` (module doc)."""
    def view(kind: Kind, whole: bool) -> list[dict[str, Any]] | None:
        if whole and kind == ("v1", "Namespace"):
            return None
        return informers.items(kind)
    return view
