"""The shard label put on what a shard owns but wrote before the label existed. I/O.

A sharded agent's watches select `orksync.io/shard: I-of-N` (orksync.agent.shard). Every
object a sync writes gets it (orksync.sync.mark_for_cleanup), but an object written once
(`create-if-absent`, a Job) is never written again, so one written by an unsharded agent,
or by a shard of another N, would stay out of the shard's view for good, and be taken for
absent. `label_shard` finds them, one metadata-only LIST per kind selecting orksync's
objects (not the inventories) whose label is missing or another value, and gives those
this shard owns the label: a JSON merge patch of that one label (field manager
`orksync-shard`), nothing else, sent as the identity that writes the object (a child: its
custom resource's ServiceAccount, orksync.apply.impersonation). An object of another
shard is left as it is.
The agent runs it at the first full sync of each leadership term (orksync.agent.runner).
A Sync's objects carry its label from their first write, so once a pass of a Sync's root
found none of its objects without a shard label, `mark_labelled` says so on its inventory
(`orksync.io/labelled: <label>`), and later terms (a restart, a hand-over) skip the pass
while the mark names the root's label: a hand-over then sends none of its LISTs, each of
which the API server answers by reading every orksync object of its kind.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from orksync.apply.inventory import INVENTORY_LABEL, LABELLED_ANNOTATION, configmap_name
from orksync.cluster.kube import Kube
from orksync.errors import ClusterError
from orksync.model import MANAGED_SELECTOR, SHARD_LABEL, ObjRef
from orksync.render.kinds import BY_KEY
from orksync.sync import annotate_inventory

__all__ = ["FIELD_MANAGER", "block_kinds", "label_shard", "mark_labelled"]

log = logging.getLogger("orksync.agent")

FIELD_MANAGER = "orksync-shard"


Owns = Callable[[ObjRef, Mapping[str, Any]], bool]  # (identity, metadata): this shard's?
Writer = Callable[[Mapping[str, Any]], Kube]  # metadata -> the connection that writes it


def label_shard(kube: Kube, kinds: Iterable[tuple[str, str]], mine: Owns,
                label: str, writer: Writer | None = None, *, unlabelled_only: bool = False
                ) -> tuple[list[ObjRef], list[str]]:
    """Label with `orksync.io/shard: label` every object orksync labels, of these kinds
    (apiVersion, kind), that lacks it or carries another value (`unlabelled_only`: that
    lacks any) and that `mine` says this shard owns (told its identity and live
    metadata); listed through `kube`, patched through `writer(metadata)` (default
    `kube`). Returns the objects labelled and the failures (one message each, naming the
    kind or object); a failure stops no other kind nor object. Raises LeadershipLost
    when `kube`'s gate closes."""
    # the inventories (one per root, never shard-labelled) are no root's objects
    selector = f"{MANAGED_SELECTOR},!{INVENTORY_LABEL}," + (
        f"!{SHARD_LABEL}" if unlabelled_only else f"{SHARD_LABEL}!={label}")
    labelled: list[ObjRef] = []
    failures: list[str] = []
    for api_version, kind in sorted(set(kinds)):
        try:
            res = kube.resource(api_version, kind)
            listed = [(ObjRef.of(item), item.get("metadata") or {}) for item in
                      kube.list(res, label_selector=selector, metadata_only=True)]
            found = [(ref, meta) for ref, meta in listed if mine(ref, meta)]
        except ClusterError as err:
            if err.status == 404:  # a kind not served any more: nothing of it to label
                continue
            failures.append(f"{kind} ({api_version}): cannot be listed: {err}")
            continue
        for ref, meta in found:
            try:
                sender = writer(meta) if writer is not None else kube
                sender.request("PATCH", res.path(ref.namespace, ref.name),
                               query={"fieldManager": FIELD_MANAGER},
                               body={"metadata": {"labels": {SHARD_LABEL: label}}},
                               content_type="application/merge-patch+json", subject=str(ref))
            except ClusterError as err:
                if err.status == 404:  # deleted since the list
                    continue
                failures.append(f"{ref}: the shard label cannot be set: {err}")
                continue
            labelled.append(ref)
    if labelled:
        log.info("shard %s: labelled %d object(s) written before the shard label: %s",
                 label, len(labelled), ", ".join(map(str, labelled[:5])) +
                 (", ..." if len(labelled) > 5 else ""))
    return labelled, failures


def mark_labelled(kube: Kube, inventory: str, namespace: str, label: str) -> None:
    """The mark on the root's inventory ConfigMap that every object of it carries
    `label`: a JSON merge patch of that one annotation (field manager `orksync-shard`,
    so the inventory's own server-side applies keep it). One that fails is logged: the
    next term runs the pass again."""
    try:
        if annotate_inventory(kube, inventory, namespace, {LABELLED_ANNOTATION: label},
                              field_manager=FIELD_MANAGER):
            return
        why = "it does not exist"
    except ClusterError as err:
        why = str(err)
    log.info("shard %s: the inventory %s/%s cannot be marked labelled (%s): the next term "
             "looks for unlabelled objects again", label, namespace, configmap_name(inventory),
             why)


def block_kinds(operator_box: Mapping[str, Any]) -> set[tuple[str, str]]:
    """The kinds (apiVersion, kind) an entry's `onCreate` and `onReconcile` blocks name by
    their keys (`configMaps`, `deployments`, ...): where the children of a custom resource
    that did not render may be. A `custom` child's kind is known only to its render."""
    kinds: set[tuple[str, str]] = set()
    for name in ("onCreate", "onReconcile"):
        block = operator_box.get(name)
        if isinstance(block, Mapping):
            kinds |= {(BY_KEY[key].api_version, BY_KEY[key].kind) for key in block
                      if key in BY_KEY and key != "custom"}
    return kinds
