"""The reconciler of one sync root: its full sync, the scoped sync of the custom resources
a revision changed, and the render again of one work-queue key; the only module of the
agent that runs orksync.sync. It owns drift repair (orksync.agent.drift) and writes what
a repair decides (`drift.SyncRoot`). Its lock is the root's: the syncs and the jobs share
the inventory (docs/operations.md, "What the agent reacts to")."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from datetime import UTC, datetime
from typing import Any

from orksync.agent.config import AgentConfig, RootState
from orksync.agent.drift import DriftRepair, Plan
from orksync.agent.incremental import changed_custom_resources, cross_readers
from orksync.agent.jobs import Jobs
from orksync.agent.metrics import Metrics
from orksync.agent.relabel import block_kinds, label_shard, mark_labelled
from orksync.agent.shard import shard_filter, shard_label, shard_of
from orksync.agent.ui.journal import Journal
from orksync.apply.crds import discovered
from orksync.apply.delete import DeletionOptions, OnDeleteRenderer, find_hooks
from orksync.apply.engine import Applier
from orksync.apply.impersonation import Identities, Impersonation
from orksync.apply.inventory import Inventory, inventory_identity
from orksync.apply.run import ApplyOptions
from orksync.cluster.kube import Kube
from orksync.cluster.retry import RetryPolicy
from orksync.cluster.shared_watch import SharedInformers
from orksync.cluster.view import WatchedView
from orksync.egress import HttpEgress
from orksync.errors import ClusterError, OrksyncError
from orksync.katalog.loader import load_repository
from orksync.katalog.model import Catalog, CustomResource
from orksync.katalog.schema import catalog_schema_errors
from orksync.lifecycle.teardown import finalize_custom_resource
from orksync.model import (
    OWNER_ANNOTATION,
    Action,
    Change,
    ObjRef,
    RenderedObject,
    RenderedSet,
    Source,
)
from orksync.render.boundaries import entry_boundary
from orksync.render.engine import CrResult, RenderPlan
from orksync.runtime.logs import log_change, log_problems, summary_line
from orksync.source.git import Revision
from orksync.sync import (
    Scope,
    SharedInventory,
    SyncOptions,
    SyncRequest,
    SyncResult,
    hook_renderers,
    read_inventory,
    render_live,
    sync_rendered,
)

log = logging.getLogger("orksync.agent")

SYNC_LABEL_PREFIX = "sync-"  # the shard label of a Sync's root (orksync.agent.roots)
VIEW_WAIT = 20.0  # seconds a Sync's first full sync waits for its view to be listed


def schema_checked(catalog: Catalog, rendered: RenderedSet) -> RenderedSet:
    """The render less what does not fit its CRD's schema, by `orksync validate`'s check
    (orksync.katalog.schema): a custom resource, or a rendered child of a kind the
    repository defines, that the API server would refuse the same way at every try is
    not sent. Each problem becomes an error of the render (file:line, object, field), so
    the sync fails, backs off and prunes nothing, as for any render error; the custom
    resource concerned is held whole (itself and its children: neither applied nor
    pruned), the others are synced."""
    errors = catalog_schema_errors(catalog, rendered.objects)
    if not errors:
        return rendered
    bad = {err.obj for err in errors}
    held = {o.ref if o.owner is None else o.owner for o in rendered.objects
            if str(o.ref) in bad}
    objects = tuple(o for o in rendered.objects
                    if o.ref not in held and o.owner not in held and str(o.ref) not in bad)
    return dataclasses.replace(rendered, objects=objects,
                               errors=(*rendered.errors, *errors))


class Reconciler:
    """`leading()`: whether this replica may write; `full_wanted()`: a sync job now (a
    key's scoped sync could not decide alone)."""

    def __init__(self, config: AgentConfig, kube: Kube, *, metrics: Metrics,
                 state: RootState, jobs: Jobs, journal: Journal,
                 leading: Callable[[], bool], full_wanted: Callable[[], None]) -> None:
        self.config = config
        self.kube = kube
        self.metrics = metrics
        self.state = state
        self.jobs = jobs
        self.journal = journal
        self.leading = leading
        self._full_wanted = full_wanted
        self.lock = threading.Lock()  # one job touches the cluster at a time
        self.drift: DriftRepair | None = None  # made by `drift_repair`
        self._checker: Applier | None = None  # drift repair's `desired` bodies; never writes
        # a shard's `orksync.io/shard` value ("" unsharded), and whether the objects it
        # owns carry it since this leadership term began (`_full`, orksync.agent.relabel)
        self.shard_label = shard_label(config.shard, config.shards)
        self.labelled = False
        # the catalog and, by custom resource, the keys of those that read it (`dependents`)
        self._readers: tuple[Catalog | None, dict[ObjRef, frozenset[str]]] = (None, {})
        self._keys: tuple[Catalog | None, dict[str, ObjRef]] = (None, {})
        # keys to render again that found a job holding the lock: queued when it ends
        self._deferred: dict[str, str] = {}
        self._deferred_lock = threading.Lock()
        # the commit status's message of the last full sync (orksync.agent.notify)
        self.notify_message = ""

    # --- drift repair ----------------------------------------------------------------------

    def drift_repair(self, view_kube: Kube | None = None,
                     shared: SharedInformers | None = None) -> DriftRepair:
        """The informers and the work queue (orksync.agent.drift), on `view_kube` (default:
        connections of their own), or a view of `shared`; the informers select this
        shard's objects."""
        view_kube = view_kube or self.kube.sibling(timeout=30.0, retry=RetryPolicy(),
                                                   pool_size=4)
        self._checker = Applier(view_kube)
        self.drift = DriftRepair(
            self, self.kube, view_kube,
            inventory=inventory_identity(self.config.name, self.config.inventory_namespace),
            workers=self.config.repair_workers, metrics=self.metrics, shard=self.shard_label,
            on_event=self.journal.touch, shared=shared)
        return self.drift

    def stop_drift(self) -> None:
        """Drift repair stopped, its connections closed: no repair writes after this."""
        if self.drift is not None:
            self.drift.stop()
            self.drift.view_kube.close()
            self.drift = None

    def desired(self, obj: RenderedObject, owner_uid: str | None) -> dict[str, Any]:
        assert self._checker is not None
        return self._checker.desired(obj, owner_uid)

    def applier(self) -> Applier:
        """The Applier a repair writes with: the informers' view instead of LISTs."""
        assert self.drift is not None
        return Applier(self.kube, ApplyOptions(workers=2), on_change=self.repaired,
                       view=self.drift.apply_view)

    def finalize(self, plan: Plan, cr: ObjRef, live: dict[str, Any],
                 sleep: Callable[[float], None]) -> tuple[list[Change], bool]:
        """A custom resource's teardown (onDelete, its children no owner reference covers,
        the finalizer), its children deleted as the sync wrote them."""
        return finalize_custom_resource(
            self.kube, live, plan.inventory.owned_by(cr), find_hooks(plan.hooks, cr),
            DeletionOptions(inventory=inventory_identity(self.config.name,
                                                         self.config.inventory_namespace),
                            sleep=sleep, shard=self.shard_label,
                            identities=Identities(self.kube, None, plan.by_ref.values(),
                                                  recorded=plan.inventory)))

    def repaired(self, change: Change) -> None:
        self.metrics.objects.labels(action=change.action.value).inc()
        log_change(change, log)
        self.journal.repaired(self.config.name, change)

    # --- syncs -----------------------------------------------------------------------------

    def full_due(self) -> bool:
        """Whether the next sync renders everything: never synced, asked for (a new
        leader, a failure, a scoped sync that could not decide alone), the resync
        interval has passed since the last full sync, or nothing is watched (no repair
        workers: every interval is a full sync)."""
        return self.drift is None or self.state.full_wanted or self.state.full_at is None or \
            time.monotonic() - self.state.full_at >= self.config.resync_interval

    def sync(self, revision: Revision, moved: bool) -> bool | None:
        """A full sync, or, for a new revision that changes only some custom resources
        (orksync.agent.incremental) while no full sync is due, their scoped sync. Drift
        repair holds its events during a full sync and takes its applied render as its
        plan after it."""
        if moved:
            catalog = load_repository(revision.path)
            scope = None
            if not self.full_due() and self.state.catalog is not None and \
                    self.drift is not None and self.drift.plan() is not None:
                scope = changed_custom_resources(self.state.catalog, catalog)
            self.state.catalog, self.state.revision = catalog, revision
            self.state.render_plan = self.state.hooks = None
            if scope is not None:
                done = self.scoped_sync(scope, revision.sha)
                if done is not None:
                    return done
        if self.drift is None:
            return self._full(None)
        self.drift.sync_started()
        plan: list[Plan] = []
        try:
            return self._full(plan)
        finally:
            self.drift.sync_ended(plan[0] if plan else None)

    def log_change(self, change: Change) -> None:
        """A sync's change logged; a failure the same object met with the same message
        at this revision already (a refusal that repeats at every attempt of the backoff)
        only at debug level: once per revision."""
        if change.action is Action.FAILED:
            said = (self.state.attempted, str(change.ref), change.message)
            if said in self.state.said_changes:
                log.debug("failed %s: %s (again)", change.ref, change.message)
                return
            self.state.said_changes.add(said)
        log_change(change, log)

    def _options(self, *, listed: bool = False) -> SyncOptions:
        """`listed`: the apply and the status report read LISTs, not the informers."""
        assert self.state.catalog is not None
        view = live = None
        if self.drift is not None and not listed:  # the informers instead of LISTs
            view, live = self.drift.apply_view, WatchedView(self.drift.informers, self.kube,
                                                            strict=False)
        return SyncOptions(apply=ApplyOptions(workers=self.config.workers),
                           # a teardown waiting for its onDelete Jobs goes on in the work
                           # queue, in its custom resource's key (orksync.agent.drift)
                           deletion=DeletionOptions(wait=self.drift is None),
                           allow_empty=self.config.allow_empty,
                           prune_crds=self.config.prune_crds,
                           impersonation=Impersonation.of_catalog(
                               self.state.catalog, self.config.default_service_account),
                           view=view, live=live, shard=self.shard_label,
                           adopt_inventory=self.config.adopt_inventory,
                           prune=self.config.prune)

    def _mine(self, cr: CustomResource) -> bool:
        return self.config.shards <= 1 or \
            shard_of(cr.ref, self.config.shards) == self.config.shard

    def _full(self, plan: list[Plan] | None) -> bool:
        revision, catalog = self.state.revision, self.state.catalog
        assert revision is not None and catalog is not None
        started = time.monotonic()
        self.state.full_wanted = False
        # a shard's first full sync of its leadership term reads LISTs, not its view: the
        # objects written before the shard label (or with another N's) are not in the
        # view until `_label_shard` labels them after the apply
        relabel = bool(self.shard_label) and not self.labelled
        stored = self._stored() if relabel else None
        listed = relabel and not self._view_first(catalog, stored)
        rendered = render_live(
            self.kube, catalog, strict_cluster_scope=self.config.strict_cluster_scope,
            live=WatchedView(self.drift.informers, self.kube)
            if self.drift is not None and not listed else None,
            select=self._mine)
        rendered = schema_checked(catalog if self.config.shards <= 1 else dataclasses.replace(
            catalog, crs=tuple(filter(self._mine, catalog.crs))), rendered)
        said = (rendered.warnings, tuple(map(str, rendered.errors)))
        if said != self.state.said:  # once per revision, and when they change
            log_problems(rendered.warnings, rendered.errors, log)
            self.state.said = said
        full = rendered
        rendered = shard_filter(rendered, self.config.shard, self.config.shards)
        self.state.rendered = rendered
        start = time.monotonic()
        hooks = self.hooks()
        try:
            result = sync_rendered(
                self.kube, SyncRequest(
                    rendered, inventory_name=self.config.name,
                    inventory_namespace=self.config.inventory_namespace, hooks=hooks,
                    options=self._options(listed=listed),
                    source=Source.of(self.config.repo_url, self.config.path),
                    on_change=self.log_change, stored_inventory=stored),
                catalog, revision=revision.sha,
                # status only for this shard's custom resources
                status_of=dataclasses.replace(catalog,
                                              crs=tuple(filter(self._mine, catalog.crs)))
                if self.config.shards > 1 else None)
        finally:
            self.jobs.copy_revision(full, revision.sha)  # a failed sync's render too
        self.state.inventory = SharedInventory(result.inventory)
        self.state.changes = result.changes
        if relabel:
            self.labelled = self._label_shard(rendered, result.inventory, stored)
        if plan is not None and result.prepared is not None:
            plan.append(Plan.of(result.prepared, result.inventory, hooks))
        self._schedule_boundaries([cr for cr in catalog.crs if self._mine(cr)])
        for change in result.changes.changes:
            self.metrics.objects.labels(action=change.action.value).inc()
        log.info(summary_line("sync", result.changes, revision=revision.sha,
                              seconds=time.monotonic() - start, errors=len(rendered.errors)))
        self.metrics.revision.clear()
        self.metrics.revision.labels(revision=revision.sha).set(1)
        # a refused prune (an empty render of a root that has objects) is a failed sync:
        # it backs off and is counted and reported as one, Stalled until Git changes
        ok = not rendered.errors and not result.changes.failed and not result.refused_empty
        self.state.synced_once = self.state.synced_once or ok
        if ok:
            self.state.full_at = started
        else:
            self.state.full_wanted = True
        if result.refused_empty:
            self.state.stalled = "; ".join(result.refused) or "the render is empty"
        if not ok:  # the root's custom resources did not reach this revision: said on
            # each, but for those whose status names their own error already
            self.state.unreported_crs = True
            self.state.own_errors = frozenset(
                str(getattr(e, "obj", "")) for e in rendered.errors) | frozenset(
                str(c.ref) for c in result.changes.failed)
        self.state.last_error = "" if ok else self.state.stalled or "; ".join(
            [*(str(e) for e in rendered.errors[:3]),
             *(f"{c.ref}: {c.message}" for c in result.changes.failed[:3])]) or (
            f"{len(rendered.errors)} render error(s), {len(result.changes.failed)} failed")
        # the commit status names the first error, then the counts (orksync.agent.notify)
        first = [str(e) for e in rendered.errors[:1]] + [
            f"{c.ref}: {c.message}" for c in result.changes.failed[:1]]
        self.notify_message = f"{'; '.join(first)} ({self.state.last_error})" if first \
            else self.state.last_error
        self.journal.synced(self.config.name, kind="full", revision=revision.sha, ok=ok,
                            counts=_counts(result.changes.counts()),
                            message=self.state.last_error)
        return ok

    def _stored(self) -> Future[Inventory] | None:
        """A Sync's stored inventory, read once for `_view_first` and its sync; None (the
        sync reads it, and reports what fails) elsewhere or when it cannot be read."""
        if self.drift is None or not self.shard_label.startswith(SYNC_LABEL_PREFIX):
            return None
        stored: Future[Inventory] = Future()
        try:
            stored.set_result(read_inventory(self.kube, self.config.name,
                                             self.config.inventory_namespace))
        except OrksyncError:
            return None
        return stored

    def _view_first(self, catalog: Catalog, stored: Future[Inventory] | None) -> bool:
        """A Sync's first full sync of its term (after a start or a hand-over) reads its
        own objects from its informers, not LISTs of every Sync's objects of its kinds:
        whether the kinds of its stored inventory and of its catalog are watched (by its
        label) and listed within VIEW_WAIT seconds. What it wrote before carries its label
        (every write of a Sync's root does), so the view holds it; an object it has not
        labelled yet is seen as absent, as in any full sync (docs/operations.md, "The
        view"), and labelled after the apply."""
        drift = self.drift
        if drift is None or stored is None:
            return False
        kinds = {(e.ref.api_version, e.ref.kind) for e in stored.result()}
        for cr in catalog.crs:
            if self._mine(cr):
                kinds.add((cr.ref.api_version, cr.ref.kind))
                kinds |= block_kinds(cr.entry.operator_box)
        # a kind not served yet (its CRD comes with this sync) is listed by the sync
        drift.watch({kind for kind in kinds if discovered(self.kube, *kind)})
        deadline = time.monotonic() + VIEW_WAIT
        while not drift.informers.synced():
            if time.monotonic() > deadline or self.drift is not drift:  # (stopped)
                log.info("the view of %s is not listed yet (%s): this sync lists",
                         self.config.name, ", ".join(map(str, drift.informers.unsynced()[:3])))
                return False
            time.sleep(0.05)
        return True

    def _label_shard(self, rendered: RenderedSet, inventory: Inventory,
                     stored: Future[Inventory] | None = None) -> bool:
        """The shard label on the objects this shard owns (rendered by it now, or in its
        inventory, and its custom resources this render left out, skipped or failing to
        render; and whatever names one of its custom resources as its owner
        (`orksync.io/owner`): their children, a TLS Secret's CA Secret) that lack it: written
        before it existed or by a shard of another N (orksync.agent.relabel); one LIST per
        kind it applies or has in its inventory, or a left-out custom resource's entry
        names; each patched as the identity that writes it. Whether all of them carry it
        now. A Sync's root whose `stored` inventory is marked with its label skips the
        pass, and one whose pass found every object labelled marks it
        (orksync.agent.relabel.mark_labelled)."""
        assert self.state.catalog is not None
        # a Sync's objects carry its label from their first write, and those of another
        # Sync are that Sync's: only objects without any shard label are looked for (not
        # every Sync's objects of these kinds), unless an inventory may have been adopted
        # from a sharded --repo-url agent (labelled `I-of-N`)
        unlabelled_only = self.shard_label.startswith(SYNC_LABEL_PREFIX) and \
            not self.config.adopt_inventory
        if unlabelled_only and stored is not None and \
                stored.result().labelled == self.shard_label:
            return True
        refs = {o.ref for o in rendered.objects} | inventory.refs()
        crs = [cr for cr in self.state.catalog.crs if self._mine(cr)]
        owners = {str(cr.ref) for cr in crs}
        kinds = {(r.api_version, r.kind) for r in refs}
        for cr in crs:  # a custom resource left out: its kind and its blocks' kinds
            if cr.ref not in refs:
                kinds.add((cr.ref.api_version, cr.ref.kind))
                kinds |= block_kinds(cr.entry.operator_box)

        def mine(ref: ObjRef, meta: Mapping[str, Any]) -> bool:
            return ref in refs or str(ref) in owners or \
                (meta.get("annotations") or {}).get(OWNER_ANNOTATION) in owners

        identities = Identities(self.kube, Impersonation.of_catalog(
            self.state.catalog, self.config.default_service_account), rendered.objects,
            recorded=inventory)

        def writer(meta: Mapping[str, Any]) -> Kube:  # as the sync writes it
            owner = (meta.get("annotations") or {}).get(OWNER_ANNOTATION)
            return identities.kube_for_owner(str(owner)) if owner else self.kube

        _, failures = label_shard(self.kube, kinds, mine, self.shard_label, writer,
                                  unlabelled_only=unlabelled_only)
        for failure in failures:
            log.error("shard %s: %s", self.shard_label, failure)
        if unlabelled_only and not failures:
            # the inventory is the agent's own, written as itself (orksync.sync)
            mark_labelled(self.kube.own(), self.config.name, self.config.inventory_namespace,
                          self.shard_label)
        return not failures

    # --- scoped and per-key syncs ---------------------------------------------------------

    def scoped_sync(self, refs: frozenset[ObjRef], revision: str) -> bool | None:
        """Render and sync only these custom resources (orksync.sync.Scope) of the
        current catalog: whether it succeeded, or None when it cannot be decided without
        a full sync (a custom resource refused, broken, to be cleaned up or failing to
        render; an object another custom resource owns), which then runs."""
        catalog, drift, shared = self.state.catalog, self.drift, self.state.inventory
        assert catalog is not None and drift is not None
        plan = drift.plan()
        if plan is None or shared is None or (self.shard_label and not self.labelled):
            return None  # (a shard's view lacks what it wrote before its label: `_full`)
        crs = [cr for cr in catalog.crs if cr.ref in refs and self._mine(cr)]
        if not crs:  # a revision that changed none of this shard's custom resources
            self.metrics.revision.clear()
            self.metrics.revision.labels(revision=revision).set(1)
            return True
        keys = {str(cr.ref) for cr in crs}
        if self.state.render_plan is None:
            self.state.render_plan = RenderPlan(
                catalog, strict_cluster_scope=self.config.strict_cluster_scope)
        render_plan = self.state.render_plan
        merger = render_plan.merger()
        known = len(merger.errors)  # the catalog's own (a full sync reports them)
        live = WatchedView(drift.informers, self.kube)
        egress = HttpEgress()
        objects: list[RenderedObject] = []
        for cr in crs:
            outcome = render_plan.outcome(cr, live, egress)
            # an object another custom resource (or manifest) of the last render owns
            taken = next((c.ref for c in outcome.children
                          if plan.key_of.get(c.ref, str(cr.ref)) not in keys),
                         None) if isinstance(outcome, CrResult) else None
            if taken is not None or not merger.accept(cr, outcome) or \
                    len(merger.errors) > known:
                why = f"{taken} belongs to {plan.key_of[taken]}" if taken is not None else \
                    merger.errors[-1] if len(merger.errors) > known else "left out"
                log.info("%s: cannot be synced alone (%s): a full sync follows", cr.ref, why)
                self.state.full_wanted = True
                return None
            assert isinstance(outcome, CrResult)
            objects.extend((outcome.resource, *outcome.children))
        if catalog_schema_errors(dataclasses.replace(catalog, crs=tuple(crs)), objects):
            log.info("a custom resource does not fit its CRD's schema: a full sync follows "
                     "(it reports it)")
            self.state.full_wanted = True
            return None
        objects.sort(key=lambda o: (o.stage, o.ref))
        rendered = merger.rendered_set(tuple(objects))
        start = time.monotonic()
        drift.hold(keys)
        result = None
        try:
            result = sync_rendered(
                self.kube, SyncRequest(
                    rendered, inventory_name=self.config.name,
                    inventory_namespace=self.config.inventory_namespace, hooks=self.hooks(),
                    options=self._options(),
                    source=Source.of(self.config.repo_url, self.config.path),
                    on_change=self.log_change,
                    scope=Scope(frozenset(cr.ref for cr in crs), shared)),
                catalog, revision=revision,
                status_of=dataclasses.replace(catalog, crs=tuple(crs)))
        finally:
            drift.release(keys, plan.with_part(keys, result.prepared, result.inventory,
                                               self.hooks())
                          if result is not None and result.prepared is not None else None)
        self._schedule_boundaries(crs)
        self.state.changes = result.changes
        for change in result.changes.changes:
            self.metrics.objects.labels(action=change.action.value).inc()
        log.info(summary_line(f"scoped sync of {len(crs)} custom resource(s)", result.changes,
                              revision=revision, seconds=time.monotonic() - start, errors=0))
        self.journal.synced(self.config.name, kind="scoped", revision=revision,
                            ok=not result.changes.failed,
                            counts=_counts(result.changes.counts()),
                            message=f"{len(result.changes.failed)} failed"
                            if result.changes.failed else "")
        self.metrics.revision.clear()
        self.metrics.revision.labels(revision=revision).set(1)
        return not result.changes.failed

    def reconcile_key(self, key: str, trigger: str) -> None:
        """A work-queue key to render again (drift repair's status, cross or time
        trigger): its custom resource's scoped sync, beside no other job. A
        scoped sync that cannot decide alone makes the next sync a full one, now."""
        if self.drift is None:
            return
        if not self.lock.acquire(blocking=False):  # a sync runs: this worker stays free
            with self._deferred_lock:
                self._deferred[key] = trigger
            if not self.lock.locked():  # the sync ended meanwhile
                self.flush_deferred()
            return
        try:
            catalog, revision = self.state.catalog, self.state.revision
            if catalog is None or revision is None or not self.leading():
                return
            ref = self._refs(catalog).get(key)
            if ref is None:  # left Git: the next full sync prunes it
                return
            log.debug("%s: rendered again (%s)", key, trigger)
            done = self.scoped_sync(frozenset({ref}), revision.sha)
        finally:
            self.lock.release()
            self.flush_deferred()
        if done is None:  # a full sync, unless syncs back off after a failure
            self.state.full_wanted = True
            if time.monotonic() >= self.state.next_attempt:
                self._full_wanted()
        elif not done:
            raise ClusterError("scoped sync failed", subject=key)

    def flush_deferred(self) -> None:
        """The keys that found the lock held, handed back to the work queue."""
        with self._deferred_lock:
            deferred, self._deferred = self._deferred, {}
        if self.drift is not None:
            for key, trigger in deferred.items():
                self.drift.render_again(key, trigger)

    def hooks(self) -> Mapping[tuple[str, str], OnDeleteRenderer]:
        """The current catalog's onDelete renderers, made once per catalog."""
        assert self.state.catalog is not None
        if self.state.hooks is None:
            self.state.hooks = hook_renderers(self.state.catalog)
        return self.state.hooks

    def _refs(self, catalog: Catalog) -> Mapping[str, ObjRef]:
        """The catalog's custom resources by work-queue key, made once per catalog."""
        if self._keys[0] is not catalog:
            self._keys = (catalog, {str(cr.ref): cr.ref for cr in catalog.crs})
        return self._keys[1]

    def dependents(self, ref: ObjRef) -> set[str]:
        """The keys of the custom resources that read `ref`'s (drift repair's
        `dependents`): its entry's cross readers and dependsOn dependents."""
        catalog = self.state.catalog
        if catalog is None:
            return set()
        if self._readers[0] is not catalog:  # once per catalog
            by_entry: dict[tuple[str, str], set[str]] = {
                entry: {str(r) for r in refs}
                for entry, refs in cross_readers(catalog).items()}
            for c in catalog.crs:
                for name, _ in c.entry.depends_on:
                    by_entry.setdefault((c.entry.katalog, name), set()).add(str(c.ref))
            entries = {cr.ref: (cr.entry.katalog, cr.entry.key) for cr in catalog.crs}
            self._readers = (catalog, {ref: frozenset(by_entry.get(entry, ()))
                                       for ref, entry in entries.items()})
        return set(self._readers[1].get(ref, ())) - {str(ref)}

    def _schedule_boundaries(self, crs: list[CustomResource]) -> None:
        """Each custom resource whose conditions read the clock is rendered again at the
        next instant one of them may change (a time window's edge, a cron fire)."""
        if self.drift is None:
            return
        now = datetime.now(UTC)
        found: dict[tuple[str, str], datetime | None] = {}
        for cr in crs:
            key = (cr.entry.katalog, cr.entry.key)
            if key not in found:
                found[key] = entry_boundary(cr.entry, now)
            when = found[key]
            if when is not None:
                # a little after the instant: a timer may fire early, never late
                self.drift.render_again(str(cr.ref), "time",
                                        delay=max((when - now).total_seconds(), 0.0) + 0.05)


def prune_all(kube: Kube, name: str, namespace: str, *, catalog: Catalog | None,
              account: str, workers: int, source: Source,
              on_change: Callable[[Change], None]) -> SyncResult:
    """An empty render synced to the inventory `name`: the prune deletes all it holds
    (a deleted Sync's), custom resources through the catalog's onDelete renderers, each
    object written as the identity that wrote it."""
    return sync_rendered(kube, SyncRequest(
        RenderedSet(objects=()), inventory_name=name, inventory_namespace=namespace,
        hooks=None if catalog is None else hook_renderers(catalog),
        options=SyncOptions(apply=ApplyOptions(workers=workers),
                            deletion=DeletionOptions(wait=True), allow_empty=True,
                            adopt_inventory=True,
                            impersonation=Impersonation.of_catalog(catalog, account)),
        source=source, on_change=on_change), None)


def _counts(counts: Mapping[Action, int]) -> dict[str, int]:
    return {action.value: n for action, n in counts.items()}
