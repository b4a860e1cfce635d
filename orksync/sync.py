"""One sync of one sync root: apply the render, tear down what left Git, prune from the
inventory, store the new inventory. I/O, orchestration only: the rules live in
orksync.apply.inventory, the deletes in orksync.apply.prune and orksync.lifecycle.teardown
(docs/operations.md#one-sync-step-by-step)."""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any

from orksync.apply.delete import (
    DeletionOptions,
    OnDeleteRenderer,
    find_hooks,
    katalog_failures,
    teardown_waits,
)
from orksync.apply.engine import Applier, create_namespace
from orksync.apply.impersonation import Identities, Impersonation, ReadAs
from orksync.apply.inventory import (
    DEFAULT_NAMESPACE,
    INVENTORY_ANNOTATION,
    Inventory,
    InventoryEntry,
    InventoryError,
    PrunePlan,
    check_source,
    configmap_name,
    inventory_identity,
    is_crd,
    plan_prune,
)
from orksync.apply.prefetch import View, fulfil
from orksync.apply.prune import cleanup_absent, prune
from orksync.apply.run import FIELD_MANAGER, ApplyOptions
from orksync.cluster.kube import MERGE_PATCH, Kube
from orksync.cluster.live import LiveIndex, LiveReader
from orksync.errors import ClusterError
from orksync.lifecycle.autoscale import Autoscaler, merge_changes
from orksync.lifecycle.teardown import (
    FINALIZER,
    delete_custom_resource,
    finalize_custom_resource,
)
from orksync.model import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    SHARD_LABEL,
    Action,
    Change,
    ChangeSet,
    ObjRef,
    RenderedObject,
    RenderedSet,
    Source,
    is_plain,
)

if TYPE_CHECKING:
    from orksync.katalog.model import Catalog, CustomResource
    from orksync.lifecycle.hooks import HookRenderer
    from orksync.render.children import LiveView
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
    # False (a Sync's `prune: false`): what left the render is forgotten, never deleted
    prune: bool = True
    # as whom the children are written beyond the rendered custom resources' own
    # serviceAccount directives (orksync.apply.impersonation); None: nobody else
    impersonation: Impersonation | None = None
    # where the apply reads the live objects instead of LISTs (the agent's informers,
    # orksync.cluster.view.apply_view), and the status report its custom resources and
    # children (a WatchedView); None: LISTs
    view: View | None = None
    live: LiveReader | None = None
    # an agent shard's `I-of-N` (orksync.agent.shard.shard_label), stamped on every object
    # as `orksync.io/shard` (`mark_for_cleanup`); "": no such label
    shard: str = ""


class SharedInventory:
    """The agent's copy of its stored inventory, which its scoped syncs (`Scope`) read
    their part of and write back in turn, under `lock`; a full sync replaces it. A part
    is found through an index by custom resource, so a scoped sync costs its own size,
    not the inventory's."""

    def __init__(self, inventory: Inventory) -> None:
        self.lock = threading.Lock()
        self._index: dict[ObjRef, list[InventoryEntry]] | None = None
        self._value = inventory

    @property
    def value(self) -> Inventory:
        return self._value

    @value.setter
    def value(self, inventory: Inventory) -> None:
        self._value, self._index = inventory, None

    def part(self, crs: frozenset[ObjRef]) -> Inventory:
        """`Inventory.part`, from the index."""
        if self._index is None:
            # a child of a custom resource a `custom:` block created belongs to the part
            # of the custom resource at the top of the chain, whose render produces it
            owner_of = {e.ref: e.owner for e in self._value if e.owner is not None}
            index: dict[ObjRef, list[InventoryEntry]] = {}
            for entry in self._value:
                top, steps = entry.owner or entry.ref, 0
                while top in owner_of and steps < len(owner_of):
                    top, steps = owner_of[top], steps + 1
                index.setdefault(top, []).append(entry)
            self._index = index
        found = Inventory.of(e for cr in crs for e in self._index.get(cr, ()))
        return Inventory(found.entries, self._value.source,
                         tuple(c for c in self._value.cleaned if c[0] in crs))


@dataclass(frozen=True, slots=True)
class Scope:
    """A sync of some custom resources only (the agent's per-custom-resource reconcile):
    its render holds them and their children, and everything else of the inventory is
    left as it is: neither pruned nor recorded again. The inventory is read from and
    written back to `inventory`."""

    crs: frozenset[ObjRef]
    inventory: SharedInventory


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
    """One HookRenderer (orksync.lifecycle.hooks) per CRD entry of the repository, keyed by
    (apiVersion, kind)."""
    from orksync.lifecycle.hooks import HookRenderer
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
                progress: Callable[[int], None] | None = None,
                read_as: Impersonation | None = None, live: LiveView | None = None,
                select: Callable[[CustomResource], bool] | None = None,
                strict_fields: bool = False) -> RenderedSet:
    """The render of a sync: `catalog` against the live cluster (see the module doc), read
    as the agent, its `external:` calls made (orksync.egress). `read_as`: each custom
    resource's `.children` read as the ServiceAccount its children are written as
    (orksync.apply.impersonation.ReadAs), for `orksync diff` and `render --live`, which show
    what that identity sees. `live`: the view to read instead (the agent's informers,
    orksync.cluster.view); `select`: the custom resources to render (a shard's), the
    others only read (`.cross`); `strict_fields`: orksync.render.engine.render_catalog."""
    from orksync.egress import HttpEgress
    from orksync.render.engine import render_catalog
    from orksync.render.templates import utc_now

    if live is None:
        live = LiveIndex(kube, strict=True) if read_as is None else \
            ReadAs(Identities(kube, read_as))
    return render_catalog(catalog, clock=clock or utc_now, live=live, egress=HttpEgress(),
                          strict_cluster_scope=strict_cluster_scope, progress=progress,
                          select=select, strict_fields=strict_fields)


@dataclass(frozen=True, slots=True)
class SyncRequest:
    """What one sync of one sync root applies and records (`sync_once`)."""

    rendered: RenderedSet
    _: KW_ONLY
    inventory_name: str
    inventory_namespace: str = DEFAULT_NAMESPACE
    # the onDelete renderers by (apiVersion, kind), from hook_renderers(catalog); without
    # one, a custom resource is still deleted and finalized, but no onDelete runs
    hooks: Mapping[tuple[str, str], OnDeleteRenderer] | None = None
    # (object, owner) pairs whose entry condition turned false; None: `rendered.absent`
    absent: Iterable[tuple[ObjRef, ObjRef]] | None = None
    options: SyncOptions = field(default_factory=SyncOptions)
    on_change: Callable[[Change], None] | None = None
    # one made with `options.apply` and `on_change` whose prefetch the caller started
    # (`orksync apply` starts it from the rendered directory's index, before reading the
    # files)
    applier: Applier | None = None
    # the stored inventory as `prefetch_inventory` reads it, sent with that prefetch
    stored_inventory: Future[Inventory] | None = None
    # where `rendered` comes from, recorded in the inventory; a stored inventory of
    # another source is refused (unless `options.adopt_inventory`); None (tests,
    # benchmarks) checks nothing and keeps the recorded source
    source: Source | None = None
    scope: Scope | None = None  # a scoped sync's (see `Scope`)


def sync_once(kube: Kube, request: SyncRequest) -> SyncResult:
    """Apply, teardown, prune, inventory (docs/operations.md#one-sync-step-by-step).
    Raises InventoryError when the stored inventory is unreadable or belongs to another
    source, before anything is written."""
    rendered, options, on_change = request.rendered, request.options, request.on_change
    inventory_name, inventory_namespace = request.inventory_name, request.inventory_namespace
    hooks, scope = request.hooks, request.scope
    dry_run = options.apply.dry_run
    manager = options.apply.field_manager
    identity = inventory_identity(inventory_name, inventory_namespace)
    impersonation = (options.impersonation or Impersonation()).with_entries(
        h.entry for h in (hooks or {}).values())
    applier = request.applier or Applier(kube, options.apply, on_change=on_change,
                                         impersonation=impersonation, view=options.view)
    if not applier.prefetching:  # the apply's LISTs go out now, while the inventory is read
        applier.prefetch(rendered)
    try:
        if scope is not None:
            whole = scope.inventory.value
        else:
            whole = request.stored_inventory.result() \
                if request.stored_inventory is not None else \
                read_inventory(kube, inventory_name, inventory_namespace)
        if not options.adopt_inventory:
            check_source(whole, request.source, name=inventory_name,
                         namespace=inventory_namespace)
        old = scope.inventory.part(scope.crs) if scope is not None else whole
        rendered, reclassified = hold_reclassified(rendered, old)
        for change in reclassified:
            if on_change is not None:
                on_change(change)
        rendered, held, kept_notes = hold_cleaned(rendered, old)
        # who each custom resource's children are written as: decided once, recorded in
        # the inventory with it (for its teardown after it, and its entry, left Git)
        identities = Identities(kube, impersonation, rendered.objects, recorded=old)
        prepared = identities.resolved(mark_for_cleanup(rendered, identity, options.shard))
        deletion = dataclasses.replace(options.deletion, field_manager=manager,
                                       dry_run=dry_run, inventory=identity,
                                       shard=options.shard,
                                       identities=identities)
        scaler = Autoscaler(kube, prepared.objects, now=options.apply.clock,
                            dry_run=dry_run, on_change=on_change, identities=identities)
        scaled = scaler.before_apply()
    except BaseException:
        applier.discard_prefetch()
        raise
    applied = applier.apply(prepared, written=[c.ref for c in scaled])
    applied = merge_changes(applied, [*scaled, *scaler.after_apply(applied)])
    applied.changes.extend(reclassified)  # failed: the prune halts, the inventory keeps them
    plan = plan_prune(old, prepared, applied, allow_empty=options.allow_empty,
                      allow_orphaning_children=options.allow_orphaning_children,
                      prune_crds=options.prune_crds)
    if not options.prune and not plan.halted:
        plan = dataclasses.replace(plan, delete=[], owned={})
    for reason in plan.refused:  # logged here only, for the CLI and the agent alike
        log.warning("prune refused: %s", reason)
    changes = ChangeSet(changes=list(applied.changes))
    found = hooks or {}
    if not dry_run:
        for change in finish_terminating(kube, prepared, old, plan, found, deletion,
                                         listed=applier.terminating,
                                         errors=rendered.errors):
            changes.changes.append(change)
            if on_change is not None:
                on_change(change)
    pruned, inventory = prune(
        kube, plan, field_manager=manager, dry_run=dry_run, deletion=deletion,
        on_change=on_change,
        teardown=lambda entry, children, opts: delete_custom_resource(
            kube, entry, children, find_hooks(found, entry.ref), opts))
    changes.extend(pruned.changes)
    deleted = pruned.counts()[Action.DELETED]
    absent = rendered.absent if request.absent is None else request.absent
    if not plan.halted and absent:
        claimed = {o.ref for o in rendered.objects} | whole.refs()
        cleaned = cleanup_absent(kube, absent, claimed=claimed, dry_run=dry_run,
                                 on_change=on_change, inventory=identity,
                                 identities=identities)
        changes.extend(cleaned.changes)
        deleted += cleaned.counts()[Action.DELETED]
    # runtime.cleanup: what it deleted, and what Git still holds unchanged of what it
    # deleted before, is remembered; a custom resource the prune did not delete (halted,
    # refused, protected) is decided again at the next sync
    kept = inventory.refs()
    deleted_now = [] if dry_run or plan.halted else \
        [(ref, digest) for ref, digest in rendered.cleaned if ref not in kept]
    inventory = inventory.with_source(request.source or old.source).with_cleaned(
        [*held, *kept_notes, *deleted_now])
    for ref, _ in held:
        change = Change(ref=ref, action=Action.SKIPPED,
                        message="deleted by runtime.cleanup and unchanged in Git: not applied "
                        "again (change it in Git to run it again)")
        changes.changes.append(change)
        if on_change is not None:
            on_change(change)
    if scope is not None and not dry_run:
        with scope.inventory.lock:  # the other scoped syncs' parts as they are now
            current = scope.inventory.value
            if (inventory.entries, inventory.cleaned) == (old.entries, old.cleaned):
                inventory = current  # the common case: its part did not change
            else:
                inventory = current.with_part(scope.crs, inventory)
                write_inventory(kube.own(), inventory, inventory_name, inventory_namespace,
                                field_manager=manager)
                scope.inventory.value = inventory
    elif not dry_run and inventory != old:  # an unchanged inventory costs no request
        # the inventory is the agent's bookkeeping, never its ServiceAccount's (a Sync's)
        ensure_namespace(kube.own(), inventory_namespace)  # not before: a resync writes none
        write_inventory(kube.own(), inventory, inventory_name, inventory_namespace,
                        field_manager=manager)
    return SyncResult(changes=changes, inventory=inventory, pruned=deleted,
                      refused=list(plan.refused), refused_empty=plan.empty,
                      prepared=prepared)


def sync_rendered(kube: Kube, request: SyncRequest, catalog: Catalog | None, *,
                  revision: str = "", status_of: Catalog | None = None,
                  on_phase: Callable[[str], None] | None = None) -> SyncResult:
    """The sync recipe `orksync sync`, `orksync apply` and the agent share: `sync_once`
    with the repository's onDelete renderers (unless the request has them), then, with a
    repository and not in a dry run, each custom resource's status and an Event for its
    changes (`status_of`: the custom resources whose status this replica writes, a
    shard's; default all of `catalog`). `orksync apply DIR` has no catalog: no status."""
    if request.hooks is None and catalog is not None:
        request = dataclasses.replace(request, hooks=hook_renderers(catalog))
    result = sync_once(kube, request)
    options, rendered = request.options, request.rendered
    if catalog is not None and not options.apply.dry_run:
        from orksync.lifecycle.events import report_sync  # the template engines: not for apply

        if on_phase is not None:
            on_phase("status")
        # the custom resources' status and Events: the agent's report about them
        report_sync(kube.own(), status_of or catalog, rendered, result.changes,
                    revision=revision,
                    impersonation=options.impersonation, live=options.live)
    return result


def hold_cleaned(rendered: RenderedSet, old: Inventory
                 ) -> tuple[RenderedSet, list[tuple[ObjRef, str]], list[tuple[ObjRef, str]]]:
    """`rendered` without the custom resources that runtime.cleanup deleted at an earlier
    sync and that Git still holds unchanged (their fingerprint is the one `old` noted),
    nor their children: applying them would undo the deletion (orksync.render.cleanup).
    Also those custom resources (held), and the notes to keep of custom resources this
    render did not render at all: a render with errors, or one that left them out, says
    nothing about whether they left Git. The notes of the others are forgotten: changed in
    Git, or gone from it."""
    if not old.cleaned:
        return rendered, [], []
    from orksync.render.cleanup import fingerprint

    noted = dict(old.cleaned)
    crs = {o.ref: o for o in rendered.objects if o.owner is None and o.ref in noted}
    held = [(ref, noted[ref]) for ref, o in crs.items() if fingerprint(o.body) == noted[ref]]
    left_out = {ref for ref, _ in rendered.skipped}
    kept = [(ref, digest) for ref, digest in old.cleaned
            if ref not in crs and (rendered.errors or ref in left_out)]
    if not held:
        return rendered, [], kept
    gone = {ref for ref, _ in held}
    objects = tuple(o for o in rendered.objects if o.ref not in gone and o.owner not in gone)
    return dataclasses.replace(rendered, objects=objects), held, kept


def hold_reclassified(rendered: RenderedSet, old: Inventory
                      ) -> tuple[RenderedSet, list[Change]]:
    """`rendered` without the plain manifests that are custom resources of this sync
    root: of a kind `old` records as a custom resource, or of the group of a
    CustomResourceDefinition it records. No Katalog entry of this render handles them (a
    Katalog did not load, and the repository alone did not tell their kind); applied as
    plain manifests they would lose the finalizer `orksync.io/cleanup`, and a teardown
    its onDelete. Each is a failed change instead, so nothing is pruned and the inventory
    keeps it as it was: held, with its finalizer and its children."""
    recorded = {(e.ref.group, e.ref.kind) for e in old if e.is_custom_resource}
    crds = {e.ref.name.partition(".")[2]: e.ref.name for e in old if e.is_crd}
    if not recorded and not crds:
        return rendered, []
    cause = next(iter(katalog_failures(rendered.errors)), None) or \
        next(iter(rendered.errors), None)
    why = f"; the render has errors: {cause}" if cause is not None else ""
    held: set[ObjRef] = set()
    changes = []
    for obj in rendered.objects:
        if not is_plain(obj):
            continue
        ref = obj.ref
        if (ref.group, ref.kind) in recorded:
            known = f"the inventory records {ref.kind} ({ref.group}) as a custom resource kind"
        elif ref.group in crds:
            known = (f"its group is that of {crds[ref.group]}, a CustomResourceDefinition "
                     "this sync root applied")
        else:
            continue
        held.add(ref)
        changes.append(Change(ref=ref, action=Action.FAILED, message=(
            f"held, not applied as a plain manifest ({obj.origin.file}): {known}, and no "
            f"Katalog entry of this sync handles it{why}. It is neither applied nor pruned, "
            "and keeps its finalizer and its children, until a Katalog entry handles its "
            "kind again")))
    if not held:
        return rendered, []
    return dataclasses.replace(rendered, objects=tuple(
        o for o in rendered.objects if o.ref not in held)), changes


def mark_for_cleanup(rendered: RenderedSet, inventory: str = "", shard: str = ""
                     ) -> RenderedSet:
    """CRDs, plain manifests and custom resources get orksync's managed-by label; custom
    resources also the finalizer that holds them until their teardown ran; with `inventory`
    (`inventory_identity`), every object the annotation `orksync.io/inventory` naming it;
    with `shard` (an agent shard's `I-of-N`, orksync.agent.shard), every object the label
    `orksync.io/shard` its watches select. Every write of a sync (the apply, the Secret
    runner, create-if-absent and Jobs) sends these bodies, so the marks are made here only.
    The new bodies share all but their `metadata`, labels, annotations and finalizers
    with the rendered ones (no deep copy at every sync): nothing downstream writes into a
    body (the applier and the diff copy what they send)."""
    def mark(obj: RenderedObject) -> RenderedObject:
        if obj.owner is not None and not inventory and not shard:
            return obj
        body = dict(obj.body)
        meta = body["metadata"] = dict(body.get("metadata") or {})
        if inventory:
            meta["annotations"] = {**(meta.get("annotations") or {}),
                                   INVENTORY_ANNOTATION: inventory}
        if shard:
            meta["labels"] = {**(meta.get("labels") or {}), SHARD_LABEL: shard}
        if obj.owner is not None:
            return dataclasses.replace(obj, body=body)
        meta["labels"] = {**(meta.get("labels") or {}), MANAGED_BY_LABEL: MANAGED_BY}
        if not is_crd(obj.ref) and not is_plain(obj):
            finalizers = list(meta.get("finalizers") or [])
            meta["finalizers"] = finalizers if FINALIZER in finalizers else \
                [*finalizers, FINALIZER]
        return dataclasses.replace(obj, body=body)
    return dataclasses.replace(rendered, objects=tuple(mark(o) for o in rendered.objects))


def finish_terminating(kube: Kube, rendered: RenderedSet, old: Inventory, plan: PrunePlan,
                       hooks: Mapping[tuple[str, str], OnDeleteRenderer],
                       options: DeletionOptions, *,
                       listed: Mapping[tuple[str, str], Sequence[dict[str, Any]]] | None = None,
                       errors: Sequence[Exception] = ()) -> list[Change]:
    """Teardown of this root's custom resources that were deleted out of band: one LIST
    per custom resource kind, except for the kinds in `listed` (the Applier's
    `terminating`: the objects with a deletionTimestamp of the kinds it has just listed
    whole, so a sync does not list every custom resource kind twice). `errors`: the
    render's; while it has one, a custom resource no onDelete renderer handles keeps its
    finalizer (orksync.apply.delete.teardown_waits)."""
    known = {o.ref for o in rendered.objects
             if o.owner is None and not is_crd(o.ref) and not is_plain(o)}
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
            waits = teardown_waits(hooks, ref, errors)
            if waits:
                changes.append(Change(ref=ref, action=Action.SKIPPED, message=waits))
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


def recorded_accounts(kube: Kube, namespace: str = DEFAULT_NAMESPACE) -> list[InventoryEntry]:
    """The custom resources of every inventory in `namespace` that record the
    ServiceAccount their children were written as (orksync.apply.impersonation), for
    `orksync rotate`, which reads no repository. An inventory that cannot be read is
    left out with a warning naming it (one broken inventory stops no rotation; the
    Secrets it recorded go as the default ServiceAccount, or as this identity); a LIST
    this identity may not send gives none (logged)."""
    res = kube.resource("v1", "ConfigMap")
    try:
        items = list(kube.list(res, namespace=namespace,
                               label_selector="app.kubernetes.io/component=inventory"))
    except ClusterError as err:
        if err.status not in (403, 404):
            raise
        log.warning("the inventories in %s cannot be read (%s): Secrets are rotated as the "
                    "default ServiceAccount, or as this identity", namespace, err)
        return []
    found: list[InventoryEntry] = []
    for item in items:
        try:
            found.extend(e for e in Inventory.from_configmap(item) if e.account)
        except InventoryError as err:
            log.warning("%s; its ServiceAccounts are not used for this rotation", err)
    return found


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


def annotate_inventory(kube: Kube, name: str, namespace: str, annotations: Mapping[str, str],
                       *, field_manager: str) -> bool:
    """These annotations on the stored inventory's ConfigMap, a JSON merge patch by
    `field_manager` (the inventory's own server-side applies, another manager's, keep
    them); whether they were written (not when there is no inventory yet). Raises
    ClusterError for any other failure."""
    res = kube.resource("v1", "ConfigMap")
    cm = configmap_name(name)
    try:
        kube.request("PATCH", res.path(namespace, cm),
                     body={"metadata": {"annotations": dict(annotations)}},
                     content_type=MERGE_PATCH, query={"fieldManager": field_manager},
                     subject=f"ConfigMap/{namespace}/{cm}")
    except ClusterError as err:
        if err.status == 404:
            return False
        raise
    return True


def ensure_namespace(kube: Kube, namespace: str) -> None:
    if kube.get_or_none(kube.resource("v1", "Namespace"), "", namespace) is None:
        create_namespace(kube, namespace, field_manager=FIELD_MANAGER)
