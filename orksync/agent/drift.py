"""Drift repair: the managed objects of one sync root watched, and a hand edit or delete
repaired by re-applying the objects of its custom resource (its key) from the last
sync's render (`Plan`), without a full sync; a status, cross-read or time trigger renders
a key again, and a custom resource being deleted is torn down in its key. What it writes,
it writes through its sync root (`SyncRoot`, the agent's reconciler). When an event is
drift and what each trigger runs: docs/operations.md, "What the agent reacts to".
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from orksync.agent.metrics import Metrics
from orksync.agent.queue import Item, Workers, WorkQueue
from orksync.agent.shard import shard_selector
from orksync.apply.compare import unchanged
from orksync.apply.delete import OnDeleteRenderer, teardown_waits
from orksync.apply.engine import Applier
from orksync.apply.inventory import INVENTORY_ANNOTATION, Inventory, is_crd
from orksync.apply.rollout import ROLLOUT_ANNOTATION, pod_template
from orksync.apply.run import Kind
from orksync.cluster.kube import Kube
from orksync.cluster.shared_watch import SharedInformers
from orksync.cluster.view import AnyInformers, apply_view
from orksync.cluster.watch import Informers
from orksync.errors import ClusterError, LeadershipLost
from orksync.lifecycle.teardown import FINALIZER
from orksync.model import (
    OWNER_ANNOTATION,
    Action,
    Change,
    ObjRef,
    RenderedObject,
    RenderedSet,
    WritePolicy,
)

__all__ = ["ROOT", "DriftRepair", "Plan", "SyncRoot"]

log = logging.getLogger("orksync.agent")

ROOT = "root"  # the key of the objects no custom resource owns (CRDs)
CATCH_UP = 2.0  # seconds a worker waits for the informers to see its key's last writes


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """The last sync's applied render, by key: a custom resource's objects (itself and its
    children) under its own, the objects of no custom resource (CRDs) under `ROOT`."""

    objects: Mapping[str, tuple[RenderedObject, ...]] = field(default_factory=dict)
    key_of: Mapping[ObjRef, str] = field(default_factory=dict)
    by_ref: Mapping[ObjRef, RenderedObject] = field(default_factory=dict)
    crs: Mapping[str, ObjRef] = field(default_factory=dict)  # key -> its custom resource
    inventory: Inventory = field(default_factory=Inventory)
    hooks: Mapping[tuple[str, str], OnDeleteRenderer] = field(default_factory=dict)
    # key -> a custom resource the inventory still holds and the render no longer has:
    # one that left Git and whose teardown the sync left under way (`DeletionOptions.wait`)
    leaving: Mapping[str, ObjRef] = field(default_factory=dict)
    # the render's errors: while there is one, a teardown no onDelete renderer handles
    # waits (orksync.apply.delete.teardown_waits)
    errors: tuple[Exception, ...] = ()

    @classmethod
    def of(cls, prepared: RenderedSet, inventory: Inventory,
           hooks: Mapping[tuple[str, str], OnDeleteRenderer]) -> Plan:
        objects: dict[str, list[RenderedObject]] = defaultdict(list)
        key_of: dict[ObjRef, str] = {}
        crs: dict[str, ObjRef] = {}
        owner_of = {o.ref: o.owner for o in prepared.objects if o.owner is not None}
        for obj in prepared.objects:
            if obj.owner is not None:
                # a custom resource a `custom:` block created is rendered with the one
                # that created it: its children's key is the custom resource at the top
                top, steps = obj.owner, 0
                while top in owner_of and steps < len(owner_of):
                    top, steps = owner_of[top], steps + 1
                key = str(top)
            elif is_crd(obj.ref):
                key = ROOT
            else:  # a custom resource: its own key, first among its objects
                key = str(obj.ref)
                crs[key] = obj.ref
            objects[key].append(obj)
            key_of[obj.ref] = key
        leaving = _leaving(inventory, key_of)
        return cls(objects={k: tuple(v) for k, v in objects.items()}, key_of=key_of,
                   by_ref={o.ref: o for o in prepared.objects}, crs=crs,
                   inventory=inventory, hooks=hooks, leaving=leaving,
                   errors=tuple(prepared.errors))

    def with_part(self, keys: set[str], prepared: RenderedSet, inventory: Inventory,
                  hooks: Mapping[tuple[str, str], OnDeleteRenderer]) -> Plan:
        """This plan with the objects of these keys replaced by `prepared` (a scoped
        sync's), and the inventory and onDelete renderers of that sync."""
        part = Plan.of(prepared, inventory, hooks)
        objects, key_of, by_ref = dict(self.objects), dict(self.key_of), dict(self.by_ref)
        crs = dict(self.crs)
        for key in keys:
            for obj in objects.pop(key, ()):
                key_of.pop(obj.ref, None)
                by_ref.pop(obj.ref, None)
            crs.pop(key, None)
        objects.update(part.objects)
        key_of.update(part.key_of)
        by_ref.update(part.by_ref)
        crs.update(part.crs)
        leaving = self.leaving if inventory is self.inventory else \
            _leaving(inventory, key_of)
        return Plan(objects=objects, key_of=key_of, by_ref=by_ref, crs=crs,
                    inventory=inventory, hooks=hooks, leaving=leaving, errors=part.errors)

    def kinds(self) -> set[Kind]:
        return {(r.api_version, r.kind) for r in self.by_ref} | \
            {(e.ref.api_version, e.ref.kind) for e in self.inventory}


class SyncRoot(Protocol):
    """The sync root drift repair works for (orksync.agent.reconciler.Reconciler): it
    writes what a repair decides and renders a key again."""

    def leading(self) -> bool:
        """Whether this replica may write."""

    def desired(self, obj: RenderedObject, owner_uid: str | None) -> dict[str, Any]:
        """The body an apply of `obj` sends (orksync.apply.engine.Applier.desired)."""

    def applier(self) -> Applier:
        """The Applier a repair writes with, telling the root each change."""

    def reconcile_key(self, key: str, trigger: str) -> None:
        """Render `key`'s custom resource again and sync it, for the triggers a re-apply
        of the plan does not answer: status, cross, time."""

    def dependents(self, ref: ObjRef) -> set[str]:
        """The keys whose custom resources read `ref`'s (`.cross`, dependsOn)."""

    def finalize(self, plan: Plan, cr: ObjRef, live: dict[str, Any],
                 sleep: Callable[[float], None]) -> tuple[list[Change], bool]:
        """The teardown of a custom resource being deleted: its changes, and whether
        it finished."""

    def repaired(self, change: Change) -> None:
        """A change a repair made."""


class DriftRepair:
    """The informers of a sync root's objects and the work queue of its keys. `root`
    writes; `kube` reads what the informers lack (the gated connection of the jobs);
    `view_kube` watches (ungated, its own connections)."""

    def __init__(self, root: SyncRoot, kube: Kube, view_kube: Kube, *, inventory: str,
                 workers: int, metrics: Metrics, shard: str = "",
                 on_event: Callable[[], None] | None = None,
                 shared: SharedInformers | None = None) -> None:
        self.root = root
        self.kube = kube
        # told of every watch event (the web view's live updates)
        self.on_event = on_event
        # this agent shard's `I-of-N` (orksync.agent.shard): the informers hold only the
        # objects labelled with it; "": one shard, every object orksync labels
        self.shard = shard
        self.view_kube = view_kube
        self.inventory = inventory
        self.metrics = metrics
        self.queue: WorkQueue[str] = WorkQueue()
        # `shared`: the process's informers, one watch per kind for every root, of which
        # this root sees the objects of its shard label (orksync.cluster.shared_watch)
        self.informers: AnyInformers = shared.view(shard, self._event) if shared is not None \
            else Informers(view_kube, label_selector=shard_selector(shard),
                           on_event=self._event, on_restart=self._restarted)
        self.apply_view = apply_view(self.informers)
        self._plan: Plan | None = None
        self._syncing = False
        self._held: set[str] = set()  # keys a scoped sync is writing: their events wait
        self._rerender: dict[str, str] = {}  # keys to render again, by their trigger
        self._timers: dict[str, float] = {}  # keys to render again later: when (monotonic)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        # objects this module applied, with the resourceVersion the apply left, until an
        # event shows the informer has it (`_caught_up`)
        self._written: dict[ObjRef, str] = {}
        self._workers = Workers(self.queue, self._process, count=max(workers, 1),
                                on_done=self._done)
        metrics.queue_depth.set_function(lambda: len(self.queue))
        metrics.view_objects.set_function(self.informers.count)

    # --- what the agent tells it ---------------------------------------------------------

    def watch(self, kinds: set[Kind]) -> None:
        """Watch these kinds (a standby's view, from the stored inventory)."""
        self.informers.watch(kinds | self.informers.kinds())

    def sync_started(self) -> None:
        with self._lock:
            self._syncing = True

    def sync_ended(self, plan: Plan | None) -> None:
        """A full sync ended; `plan`: what it applied (None: keep the last one). Every
        watched object is checked against the plan."""
        with self._lock:
            if plan is not None:
                self._plan = plan
            self._syncing = False
            current = self._plan
        if current is None:
            return
        self.informers.watch(current.kinds())
        if self.root.leading():
            for kind in current.kinds():
                for obj in self.informers.items(kind) or []:
                    self._consider("MODIFIED", obj)
            for key in current.leaving:
                self.queue.add(key, "teardown")

    def hold(self, keys: set[str]) -> None:
        """A scoped sync of these keys starts: their events wait for `release`."""
        with self._lock:
            self._held |= keys

    def release(self, keys: set[str], plan: Plan | None) -> None:
        """A scoped sync of these keys ended; `plan`: the plan with its result (None: it
        wrote nothing). Their watched objects are checked against it."""
        with self._lock:
            if plan is not None:
                self._plan = plan
            self._held -= keys
            current = self._plan
        if current is None:
            return
        self.informers.watch(self.informers.kinds() | {
            (o.ref.api_version, o.ref.kind) for key in keys for o in current.objects.get(key, ())})
        if self.root.leading():
            for key in keys:
                for obj in current.objects.get(key, ()):
                    live = self.informers.get(obj.ref)
                    if live is None:
                        self.queue.add(key, "drift")
                    else:
                        self._consider("MODIFIED", live)

    def plan(self) -> Plan | None:
        with self._lock:
            return self._plan

    def render_again(self, key: str, trigger: str, delay: float = 0.0) -> None:
        """Render `key`'s custom resource again (the scoped sync): now, or at a timer's
        instant `delay` seconds from now (one timer per key, the earliest)."""
        now = time.monotonic()
        with self._lock:
            if delay > 0:  # one timer per key: the earliest instant asked for
                due = self._timers.get(key)
                if due is not None and now < due <= now + delay:
                    return
                self._timers[key] = now + delay
            else:
                self._rerender.setdefault(key, trigger)
        self.queue.add_after(key, delay, trigger)

    def lost_leadership(self) -> None:
        self.queue.clear()
        with self._lock:
            self._timers.clear()
            self._rerender.clear()

    def unsynced(self) -> list[Kind]:
        """The watched kinds not listed yet."""
        return self.informers.unsynced()

    def stop(self) -> None:
        self._stopping.set()  # a teardown waiting for its Job gives up at its next poll
        self._workers.stop()
        self.informers.stop()

    # --- events --------------------------------------------------------------------------

    def _restarted(self, reason: str) -> None:
        self.metrics.watch_restarts.labels(reason=reason).inc()

    def _event(self, event: str, obj: dict[str, Any], previous: dict[str, Any] | None
               ) -> None:
        if self._written:
            ref = ObjRef.of(obj)
            with self._lock:
                wrote = self._written.get(ref)
                if wrote is not None and (event == "DELETED" or _not_older(
                        str((obj.get("metadata") or {}).get("resourceVersion") or ""), wrote)):
                    del self._written[ref]
        if self.on_event is not None:
            self.on_event()
        if self.root.leading():
            self._consider(event, obj, previous)

    def _consider(self, event: str, obj: dict[str, Any],
                  previous: dict[str, Any] | None = None) -> None:
        with self._lock:
            plan = self._plan
        if plan is None:
            return
        ref = ObjRef.of(obj)
        want = plan.by_ref.get(ref)
        if want is None:
            return
        key = plan.key_of[ref]
        # a status change renders again even while a sync writes the key: its render may
        # have read the status before the change
        if event == "MODIFIED" and previous is not None and \
                _reported(obj) != _reported(previous):
            if want.owner is not None:  # a child's status: its conditions, status fields
                self.render_again(key, "status")
            else:  # a custom resource's: those that read it
                for other in self.root.dependents(ref):
                    self.render_again(other, "cross")
        with self._lock:
            if self._syncing or key in self._held:
                return  # the sync writes it anyway; its objects are checked after it
        if event != "DELETED" and self._taken(obj):
            return
        try:
            drifted = event == "DELETED" or self._drifted(want, obj)
        except ClusterError as err:  # discovery: the worker will know
            log.debug("drift check of %s: %s", ref, err)
            drifted = True
        if drifted:
            self.queue.add(key, "drift")

    def _taken(self, live: dict[str, Any] | None) -> str:
        """The sync root that wrote this object last, when it is another one ("": none
        other): an object two roots render (a CRD two repositories ship) is not taken
        back by a repair, which would make the other root's repair take it again, without
        end; each root's full sync writes it."""
        annotations = ((live or {}).get("metadata") or {}).get("annotations") or {}
        writer = str(annotations.get(INVENTORY_ANNOTATION) or "")
        return writer if writer and writer != self.inventory else ""

    def _drifted(self, want: RenderedObject, live: dict[str, Any]) -> bool:
        meta = live.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            # a custom resource being deleted: its teardown; a child: the GC's
            return want.owner is None and FINALIZER in (meta.get("finalizers") or [])
        if want.policy is not WritePolicy.APPLY or want.directives.get("copyFrom") or \
                (want.ref.kind == "Secret" and want.ref.api_version == "v1"):
            # repaired when deleted only (docs/operations.md, "What the agent reacts to")
            return False
        uid = None
        if want.owner is not None:
            owner = self.informers.get(want.owner)
            uid = ((owner or {}).get("metadata") or {}).get("uid")
            if not uid:  # its owner not in the view yet (a sync just created both)
                return False
        body = self.root.desired(want, uid)
        # the Secrets' hash on a pod template is known only to an apply of them
        template = pod_template(body)
        if template is not None:
            ((template.get("metadata") or {}).get("annotations") or {}).pop(
                ROLLOUT_ANNOTATION, None)
        return not unchanged(body, live)

    # --- the workers ---------------------------------------------------------------------

    def _process(self, key: str) -> None:
        with self._lock:
            plan = self._plan
            trigger = self._rerender.pop(key, None)
            due = self._timers.get(key)
            if due is not None and due <= time.monotonic():  # its timer: render again
                del self._timers[key]
                trigger = trigger or "time"
        if plan is None or not self.root.leading():
            return
        leaving = plan.leaving.get(key)
        if leaving is not None:
            self._finish_leaving(plan, leaving)
            return
        if trigger is not None and key != ROOT:
            try:
                self.root.reconcile_key(key, trigger)
            except BaseException:
                with self._lock:  # its retry renders again too
                    self._rerender.setdefault(key, trigger)
                raise
            return
        objects = plan.objects.get(key)
        if not objects:
            return
        cr = plan.crs.get(key)
        live = self.informers.get(cr) if cr is not None else None
        if cr is not None and live is not None and \
                (live.get("metadata") or {}).get("deletionTimestamp"):
            self._teardown(plan, cr, live)
            return
        self._caught_up(objects)
        if self.shard:
            objects = self._not_taken(objects)
        applier = self.root.applier()
        try:
            changes = applier.apply(objects)
        finally:
            for ref, version in applier.versions.items():
                seen = ((self.informers.get(ref) or {}).get("metadata") or {}).get(
                    "resourceVersion")
                if seen and _not_older(str(seen), version):
                    continue  # seen already (or the apply changed nothing: no event comes)
                with self._lock:
                    self._written[ref] = version
        failed = changes.failed
        if failed:
            raise ClusterError(f"{len(failed)} object(s) failed: " + "; ".join(
                f"{c.ref}: {c.message}" for c in failed[:3]), subject=key)

    def _not_taken(self, objects: tuple[RenderedObject, ...]) -> tuple[RenderedObject, ...]:
        """These objects without those a custom resource of another shard, or another
        sync root (`_taken`), has taken. A shard's view holds only what carries its label,
        so an object missing from it may exist, rewritten by a custom resource of another
        shard that renders it too (each shard renders only its own custom resources, so no
        render sees that conflict), or by another root (a Sync's objects carry a label of
        their own).
        Taking it back would make that shard's repair take it again, without end: it is
        left to its writer, and said. The next full sync writes it again (once a resync)."""
        kept = []
        for obj in objects:
            if self.informers.get(obj.ref) is None:
                live = self.view_kube.get_or_none(
                    self.view_kube.resource(obj.ref.api_version, obj.ref.kind),
                    obj.ref.namespace, obj.ref.name)
                annotations = ((live or {}).get("metadata") or {}).get("annotations") or {}
                owner = annotations.get(OWNER_ANNOTATION)
                if obj.owner is not None and owner and owner != str(obj.owner):
                    log.warning("%s: not repaired: %s, a custom resource of another shard, "
                                "renders it too and wrote it; one of them must stop "
                                "rendering it", obj.ref, owner)
                    continue
                writer = self._taken(live)
                if writer:
                    log.warning("%s: not repaired: the sync root %s renders it too and "
                                "wrote it last", obj.ref, writer)
                    continue
            kept.append(obj)
        return tuple(kept)

    def _caught_up(self, objects: tuple[RenderedObject, ...]) -> None:
        """Wait (a little) until the informers have seen this module's last writes of
        these objects: a key processed again right after its repair (an event that came
        during it) would otherwise compare with the view from before its own write, and
        send again what it just sent."""
        deadline = time.monotonic() + CATCH_UP
        while not self._stopping.is_set():
            with self._lock:
                pending = any(o.ref in self._written for o in objects)
            if not pending:
                return
            if time.monotonic() > deadline:
                with self._lock:  # given up: the apply compares with what is listed
                    for o in objects:
                        self._written.pop(o.ref, None)
                return
            self._stopping.wait(0.01)

    def _finish_leaving(self, plan: Plan, cr: ObjRef) -> None:
        """The teardown of a custom resource that left Git, which the full sync started
        and left under way; the next full sync drops it from the inventory."""
        live = self.informers.get(cr)
        if live is None:
            live = self.kube.get_or_none(self.kube.resource(cr.api_version, cr.kind),
                                         cr.namespace, cr.name)
        if live is not None and (live.get("metadata") or {}).get("deletionTimestamp"):
            self._teardown(plan, cr, live)

    def _teardown(self, plan: Plan, cr: ObjRef, live: dict[str, Any]) -> None:
        """A custom resource deleted by hand: onDelete, its children no owner reference
        covers, the finalizer (as the full sync's teardown); Git recreates it after."""
        if FINALIZER not in ((live.get("metadata") or {}).get("finalizers") or []):
            return
        waits = teardown_waits(plan.hooks, cr, plan.errors)
        if waits:  # the first full sync without errors finishes it
            self.root.repaired(Change(ref=cr, action=Action.SKIPPED, message=waits))
            return
        changes, done = self.root.finalize(plan, cr, live, self._sleep)
        for change in changes:
            self.root.repaired(change)
        if not done:
            raise ClusterError("teardown not finished", subject=str(cr))

    def _sleep(self, seconds: float) -> None:
        if self._stopping.wait(seconds):
            raise LeadershipLost("the agent is stopping: teardown abandoned, resumed by the "
                                 "next leader")

    def _done(self, item: Item[str], outcome: str) -> None:
        self.metrics.repairs.labels(result=outcome).inc()
        if outcome == "ok" and item.trigger != "retry":
            self.metrics.reconcile_duration.labels(trigger=item.trigger).observe(
                time.monotonic() - item.added)


def _leaving(inventory: Inventory, key_of: Mapping[ObjRef, str]) -> dict[str, ObjRef]:
    """By key, the custom resources the inventory holds and the plan does not."""
    return {str(e.ref): e.ref for e in inventory
            if e.is_custom_resource and e.ref not in key_of}


def _reported(obj: dict[str, Any]) -> Any:
    """An object's status as others report it: without what orksync writes itself into
    a custom resource's status (`status.orksync`: its revision, inventory and times), so
    that its own status writes trigger nothing."""
    status = obj.get("status")
    if isinstance(status, dict) and "orksync" in status:
        return {k: v for k, v in status.items() if k != "orksync"}
    return status


def _not_older(seen: str, wrote: str) -> bool:
    """Whether the resourceVersion `seen` is the one written or a later one. etcd's are
    increasing integers; any other form is compared for equality only."""
    if seen.isdigit() and wrote.isdigit():
        return int(seen) >= int(wrote)
    return seen == wrote
