"""One sync of one sync root: apply the render, tear down what left Git, prune from the
inventory, store the new inventory. I/O (orchestration only; the rules live in
orksync.apply.inventory, the deletes in orksync.apply.prune and orksync.apply.deletion).

Order of one run:

1. read the inventory ConfigMap (`orksync-inventory-<name>`; its namespace, default
   `orksync-system`, is created when missing, before the inventory is written in step 7),
   and refuse (InventoryError, before any write) when it holds objects of another
   recorded source (`orksync.apply.inventory.check_source`);
2. stamp the custom resources with the finalizer `orksync.io/cleanup`, every CRD and
   custom resource with `app.kubernetes.io/managed-by: orksync` (the ownership marker the
   prune checks) and every object with `orksync.io/inventory: <namespace>/<name>` (the
   sync root that wrote it last, re-checked before a delete), then apply
   (orksync.apply.engine); workloads with `autoscale` get their replica count from
   orksync.apply.autoscale, before the apply for those that exist, after it for those it
   created;
3. plan the prune (nothing at all when the render had errors or an apply failed);
4. finish the teardown of custom resources deleted out of band (deletionTimestamp and
   our finalizer while still in Git or in the inventory): onDelete, then the finalizer;
   Git recreates them on a later sync. This runs even when the prune is halted: the
   delete was already issued, by a person or by an earlier sync;
5. prune: children, then custom resources leaving Git (onDelete, finalizer), then CRDs
   (only with `prune_crds`);
6. Orkestra's DeleteIfOwned for objects whose entry condition turned false (`absent`),
   unless they are in the inventory (the prune handles those);
7. write the inventory (server-side apply, field manager `orksync`), failed deletes kept,
   with this sync's source.

A dry run applies with dryRun=All, deletes nothing, and writes no inventory.

`render_live` is the render of a sync: the repository rendered against the cluster's live
state (`.children`, the custom resources' own `.status`, `.cross.<as>.status`), one LIST
per kind for all custom resources (orksync.apply.status.LiveIndex, strict: a failed read
fails the custom resources that needed it, never hides a child).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from orksync.apply.autoscale import Autoscaler, merge_changes
from orksync.apply.deletion import (
    FINALIZER,
    DeletionOptions,
    OnDeleteRenderer,
    finalize_custom_resource,
    find_hooks,
)
from orksync.apply.engine import (
    FIELD_MANAGER,
    Applier,
    ApplyOptions,
    create_namespace,
    fulfil,
)
from orksync.apply.inventory import (
    DEFAULT_NAMESPACE,
    INVENTORY_ANNOTATION,
    Inventory,
    PrunePlan,
    check_source,
    configmap_name,
    inventory_identity,
    is_crd,
    plan_prune,
)
from orksync.apply.kube import Kube
from orksync.apply.live import LiveIndex
from orksync.apply.prune import cleanup_absent, prune
from orksync.errors import ClusterError
from orksync.model import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    Action,
    Change,
    ChangeSet,
    ObjRef,
    RenderedObject,
    RenderedSet,
    Source,
)

if TYPE_CHECKING:
    from orksync.apply.hooks import HookRenderer
    from orksync.katalog.model import Catalog
    from orksync.render.templates import Clock

log = logging.getLogger(__name__)


@dataclass(slots=True, kw_only=True)
class SyncOptions:
    apply: ApplyOptions = field(default_factory=ApplyOptions)  # dry_run, field manager
    deletion: DeletionOptions = field(default_factory=DeletionOptions)  # timeouts
    allow_empty: bool = False
    allow_orphaning_children: bool = False
    prune_crds: bool = False
    adopt_inventory: bool = False  # take over an inventory another source recorded


@dataclass(slots=True, kw_only=True)
class SyncResult:
    changes: ChangeSet  # apply, teardown, prune and absent-cleanup changes, in that order
    inventory: Inventory  # as stored (or as it would be, in a dry run)
    pruned: int  # objects deleted by the prune and the absent cleanup
    refused: list[str]  # why something was not pruned
    refused_empty: bool = False  # the render was empty and the inventory was not: no prune
    prepared: RenderedSet | None = None  # what was applied: the render marked for cleanup


# --- the render side (imported where first needed) ----------------------------------------
# `orksync apply DIR` has neither a repository nor Katalogs: it must not pay for importing
# the template engines and the render engine at start-up, so they are imported inside.


def hook_renderers(catalog: Catalog, *, clock: Clock | None = None
                   ) -> dict[tuple[str, str], HookRenderer]:
    """One HookRenderer (orksync.apply.hooks) per CRD entry of the repository, keyed by
    (apiVersion, kind)."""
    from orksync.apply.hooks import HookRenderer
    from orksync.render.templates import templates_for, utc_now

    out: dict[tuple[str, str], HookRenderer] = {}
    for katalog in catalog.katalogs:
        templates = templates_for(katalog, clock or utc_now)
        for entry in katalog.crds:
            out[(entry.api_version, entry.kind)] = HookRenderer(entry, templates)
    return out


# --- one sync ----------------------------------------------------------------------------


def render_live(kube: Kube, catalog: Catalog, *, clock: Clock | None = None,
                strict_cluster_scope: bool = False,
                progress: Callable[[int], None] | None = None) -> RenderedSet:
    """The render of a sync: `catalog` against the live cluster (see the module doc)."""
    from orksync.render.engine import render_catalog
    from orksync.render.templates import utc_now

    return render_catalog(catalog, clock=clock or utc_now, live=LiveIndex(kube, strict=True),
                          strict_cluster_scope=strict_cluster_scope, progress=progress)


def sync_once(kube: Kube, rendered: RenderedSet, *, inventory_name: str,
              inventory_namespace: str = DEFAULT_NAMESPACE,
              hooks: Mapping[tuple[str, str], OnDeleteRenderer] | None = None,
              absent: Iterable[tuple[ObjRef, ObjRef]] | None = None,
              options: SyncOptions | None = None,
              on_change: Callable[[Change], None] | None = None,
              applier: Applier | None = None,
              stored_inventory: Future[Inventory] | None = None,
              source: Source | None = None) -> SyncResult:
    """`hooks`: the onDelete renderers by (apiVersion, kind), from hook_renderers(catalog);
    without one, a custom resource is still deleted and finalized, but no onDelete runs.
    `absent`: (object, owner) pairs whose entry condition turned false; defaults to
    `rendered.absent`. `applier`: one made with `options.apply` and `on_change` whose
    prefetch the caller started (`orksync apply` starts it from the rendered directory's
    index, before reading the files). `stored_inventory`: the stored inventory as
    `prefetch_inventory` reads it, sent by the caller with that prefetch. `source`: where
    `rendered` comes from, recorded in the inventory; a stored inventory of another
    source is refused (unless `options.adopt_inventory`); None (tests, benchmarks)
    checks nothing and keeps the recorded source. Raises InventoryError when the stored
    inventory is unreadable or belongs to another source, before anything is written."""
    options = options or SyncOptions()
    dry_run = options.apply.dry_run
    manager = options.apply.field_manager
    identity = inventory_identity(inventory_name, inventory_namespace)
    deletion = dataclasses.replace(options.deletion, field_manager=manager, dry_run=dry_run,
                                   inventory=identity)
    applier = applier or Applier(kube, options.apply, on_change=on_change)
    if not applier.prefetching:  # the apply's LISTs go out now, while the inventory is read
        applier.prefetch(rendered)
    try:
        old = stored_inventory.result() if stored_inventory is not None else \
            read_inventory(kube, inventory_name, inventory_namespace)
        if not options.adopt_inventory:
            check_source(old, source, name=inventory_name, namespace=inventory_namespace)
        prepared = mark_for_cleanup(rendered, identity)
        scaler = Autoscaler(kube, prepared.objects, now=options.apply.clock,
                            dry_run=dry_run, on_change=on_change)
        scaled = scaler.before_apply()
    except BaseException:
        applier.discard_prefetch()
        raise
    applied = applier.apply(prepared, written=[c.ref for c in scaled])
    applied = merge_changes(applied, [*scaled, *scaler.after_apply(applied)])
    plan = plan_prune(old, prepared, applied, allow_empty=options.allow_empty,
                      allow_orphaning_children=options.allow_orphaning_children,
                      prune_crds=options.prune_crds)
    for reason in plan.refused:  # logged here only, for the CLI and the agent alike
        log.warning("prune refused: %s", reason)
    changes = ChangeSet(changes=list(applied.changes))
    if not dry_run:
        for change in finish_terminating(kube, prepared, old, plan, hooks or {}, deletion,
                                         listed=applier.terminating):
            changes.changes.append(change)
            if on_change is not None:
                on_change(change)
    pruned, inventory = prune(kube, plan, field_manager=manager, dry_run=dry_run, hooks=hooks,
                              deletion=deletion, on_change=on_change)
    changes.extend(pruned.changes)
    deleted = pruned.counts()[Action.DELETED]
    if absent is None:
        absent = rendered.absent
    if not plan.halted and absent:
        claimed = {o.ref for o in rendered.objects} | old.refs()
        cleaned = cleanup_absent(kube, absent, claimed=claimed, dry_run=dry_run,
                                 on_change=on_change, inventory=identity)
        changes.extend(cleaned.changes)
        deleted += cleaned.counts()[Action.DELETED]
    inventory = inventory.with_source(source or old.source)
    if not dry_run and inventory != old:  # an unchanged inventory costs no request
        ensure_namespace(kube, inventory_namespace)  # not before: a resync writes none
        write_inventory(kube, inventory, inventory_name, inventory_namespace,
                        field_manager=manager)
    return SyncResult(changes=changes, inventory=inventory, pruned=deleted,
                      refused=list(plan.refused), refused_empty=plan.empty,
                      prepared=prepared)


def mark_for_cleanup(rendered: RenderedSet, inventory: str = "") -> RenderedSet:
    """CRDs and custom resources get orksync's managed-by label; custom resources also
    the finalizer that holds them until their teardown ran; with `inventory`
    (`inventory_identity`), every object the annotation `orksync.io/inventory` naming it.
    The new bodies share all but their `metadata`, labels, annotations and finalizers
    with the rendered ones (no deep copy at every sync): nothing downstream writes into a
    body (the applier and the diff copy what they send)."""
    def mark(obj: RenderedObject) -> RenderedObject:
        if obj.owner is not None and not inventory:
            return obj
        body = dict(obj.body)
        meta = body["metadata"] = dict(body.get("metadata") or {})
        if inventory:
            meta["annotations"] = {**(meta.get("annotations") or {}),
                                   INVENTORY_ANNOTATION: inventory}
        if obj.owner is not None:
            return dataclasses.replace(obj, body=body)
        meta["labels"] = {**(meta.get("labels") or {}), MANAGED_BY_LABEL: MANAGED_BY}
        if not is_crd(obj.ref):
            finalizers = list(meta.get("finalizers") or [])
            meta["finalizers"] = finalizers if FINALIZER in finalizers else \
                [*finalizers, FINALIZER]
        return dataclasses.replace(obj, body=body)
    return dataclasses.replace(rendered, objects=tuple(mark(o) for o in rendered.objects))


def finish_terminating(kube: Kube, rendered: RenderedSet, old: Inventory, plan: PrunePlan,
                       hooks: Mapping[tuple[str, str], OnDeleteRenderer],
                       options: DeletionOptions, *,
                       listed: Mapping[tuple[str, str], Sequence[dict[str, Any]]] | None = None
                       ) -> list[Change]:
    """Teardown of this root's custom resources that were deleted out of band: one LIST
    per custom resource kind, except for the kinds in `listed` (the Applier's
    `terminating`: the objects with a deletionTimestamp of the kinds it has just listed
    whole, so a sync does not list every custom resource kind twice)."""
    known = {o.ref for o in rendered.objects if o.owner is None and not is_crd(o.ref)}
    known |= {e.ref for e in old if e.is_custom_resource}
    known -= plan.custom_resources  # the prune tears those down
    changes: list[Change] = []
    for api_version, kind in sorted({(r.api_version, r.kind) for r in known}):
        items = (listed or {}).get((api_version, kind))
        if items is None:
            try:
                items = list(kube.list(kube.resource(api_version, kind)))
            except ClusterError as err:
                log.warning("cannot list %s %s for deleted custom resources: %s",
                            api_version, kind, err)
                continue
        for item in items:
            ref = ObjRef.of(item)
            meta = item.get("metadata") or {}
            if ref not in known or not meta.get("deletionTimestamp") or \
                    FINALIZER not in (meta.get("finalizers") or []):
                continue
            children = Inventory.of([*old.owned_by(ref), *plan.keep.owned_by(ref)])
            done_changes, _ = finalize_custom_resource(
                kube, item, list(children), find_hooks(hooks, ref), options)
            changes.extend(done_changes)
    return changes


def read_inventory(kube: Kube, name: str, namespace: str = DEFAULT_NAMESPACE) -> Inventory:
    """The stored inventory (empty when there is none, its namespace included: a read
    creates nothing, `sync_once` makes the namespace before it writes). Raises
    InventoryError when it cannot be decoded: a sync must not start from a forgotten
    inventory."""
    res = kube.resource("v1", "ConfigMap")
    return Inventory.from_configmap(kube.get_or_none(res, namespace, configmap_name(name)))


def prefetch_inventory(kube: Kube, name: str, namespace: str = DEFAULT_NAMESPACE
                       ) -> Future[Inventory]:
    """`read_inventory` in a thread of its own, started now: `orksync apply` sends it with
    the apply's LISTs, while the rendered files are read, instead of after them. Its result
    or error (a ClusterError, an InventoryError) is `sync_once`'s, where it reads the
    inventory. It is read a fraction of a second earlier than otherwise, as the LISTs are:
    a sync in between (another `orksync apply` of the same name) is the same race as
    before, over a slightly longer window."""
    future: Future[Inventory] = Future()
    read = functools.partial(read_inventory, kube, name, namespace)
    threading.Thread(target=fulfil, args=(future, read), name="orksync-inventory",
                     daemon=True).start()
    return future


def write_inventory(kube: Kube, inventory: Inventory, name: str,
                    namespace: str = DEFAULT_NAMESPACE, *, field_manager: str = "orksync"
                    ) -> dict[str, Any]:
    res = kube.resource("v1", "ConfigMap")
    body = inventory.to_configmap(name, namespace)
    _, live = kube.apply(res, body, field_manager=field_manager, force=True,
                         subject=f"ConfigMap/{namespace}/{configmap_name(name)}")
    return dict(live or {})


def ensure_namespace(kube: Kube, namespace: str) -> None:
    if kube.get_or_none(kube.resource("v1", "Namespace"), "", namespace) is None:
        create_namespace(kube, namespace, field_manager=FIELD_MANAGER)
