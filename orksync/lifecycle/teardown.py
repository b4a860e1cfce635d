"""Deleting a custom resource with its `onDelete`, behind the `orksync.io/cleanup`
finalizer, so a failure keeps it and the next sync resumes. I/O
(docs/operations.md#deleting-a-custom-resource-ondelete)."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from orksync.apply.delete import (
    DeletionOptions,
    OnDeleteRenderer,
    attempt_delete,
    children_kube,
    delete_if_owned,
    delete_live,
)
from orksync.apply.inventory import InventoryEntry, ownership_problem
from orksync.apply.run import FIELD_MANAGER
from orksync.apply.write import owner_reference_allowed
from orksync.cluster.kube import Kube, Resource
from orksync.cluster.retry import JSON_PATCH
from orksync.durations import parse_duration
from orksync.errors import ClusterError, InputError
from orksync.model import SHARD_LABEL, Action, Change, ObjRef, RenderedObject

FINALIZER = "orksync.io/cleanup"
OWNER_UID_ANNOTATION = "orksync.io/owner-uid"


def _render_errors() -> tuple[type[Exception], ...]:
    """What a hook renderer raises for a block that does not render. A function, called in
    the `except` clause (evaluated only once something was raised), so that this module,
    which `orksync apply DIR` imports, does not import the template engine."""
    from orksync.render.gotemplate import GoTemplateError

    return (InputError, GoTemplateError, ValueError, KeyError, TypeError)


# --- the custom resource ------------------------------------------------------------------


def delete_custom_resource(kube: Kube, entry: InventoryEntry,
                           children: Sequence[InventoryEntry], hooks: OnDeleteRenderer | None,
                           options: DeletionOptions) -> tuple[list[Change], bool]:
    """Delete a custom resource that left Git. Returns (changes, done); not done: keep it
    and its children in the inventory (the finalizer holds it), the next sync resumes."""
    ref = entry.ref
    try:
        res = kube.resource(ref.api_version, ref.kind)
        live = kube.get_or_none(res, ref.namespace, ref.name)
    except ClusterError as err:
        if err.status != 404:
            return [Change(ref=ref, action=Action.FAILED, message=err.detail)], False
        live = None
    if live is None:
        cleanup, done = cleanup_children(kube, ref, children, options)
        return [*cleanup, Change(ref=ref, action=Action.DELETED, message="already gone")], done
    problem = ownership_problem(live, None, options.inventory)
    if problem:
        return [Change(ref=ref, action=Action.SKIPPED, message=problem)], True
    if options.dry_run:
        # what the real run reports besides its onDelete's own work (which a dry run
        # cannot foresee: its Jobs run in the cluster): the children no owner reference
        # covers, then the custom resource
        cleanup, _ = cleanup_children(kube, ref, children, options)
        on_delete = hooks is not None and bool(hooks.entry.operator_box.get("onDelete"))
        return [*cleanup, Change(ref=ref, action=Action.DELETED, message="dry run" + (
            "; its onDelete runs first" if on_delete else ""))], True
    if not (live.get("metadata") or {}).get("deletionTimestamp"):
        try:
            if FINALIZER not in (live["metadata"].get("finalizers") or []):
                live = _add_finalizer(kube, res, live, options.field_manager)
            kube.delete(res, ref.namespace, ref.name, propagation="Background",
                        precondition_uid=live["metadata"].get("uid"), subject=str(ref))
            live = kube.get_or_none(res, ref.namespace, ref.name)
        except ClusterError as err:
            if err.status != 404:
                return [Change(ref=ref, action=Action.FAILED, message=err.detail)], False
            live = None
        if live is None:  # no finalizer held it (another client removed ours)
            cleanup, done = cleanup_children(kube, ref, children, options)
            return [*cleanup, Change(ref=ref, action=Action.DELETED,
                                     message="deleted; onDelete not run: nothing held it")], done
    return finalize_custom_resource(kube, live, children, hooks, options)


def finalize_custom_resource(kube: Kube, live: Mapping[str, Any],
                             children: Sequence[InventoryEntry], hooks: OnDeleteRenderer | None,
                             options: DeletionOptions) -> tuple[list[Change], bool]:
    """Steps 2-4 for a custom resource that has a deletionTimestamp and our finalizer."""
    ref = ObjRef.of(live)
    changes: list[Change] = []
    note = ""
    if hooks is None:
        note = "; no Katalog entry for its kind, so no onDelete"
        done = True
    else:
        try:
            changes, done = run_on_delete(children_kube(kube, ref, options.identities), live,
                                          hooks, options=options)
        except ClusterError as err:
            changes, done = [Change(ref=ref, action=Action.FAILED, message=err.detail)], False
    if done:
        cleanup, done = cleanup_children(kube, ref, children, options)
        changes.extend(cleanup)
    if done:
        try:
            res = kube.resource(ref.api_version, ref.kind)
            remove_finalizer(kube, res, live, field_manager=options.field_manager)
        except ClusterError as err:
            changes.append(Change(ref=ref, action=Action.FAILED,
                                  message=f"finalizer not removed: {err.detail}"))
            return changes, False
        changes.append(Change(ref=ref, action=Action.DELETED, message="teardown done, "
                              f"finalizer removed; the garbage collector takes the rest{note}"))
        return changes, True
    failed = "; ".join(f"{c.ref}: {c.message}" for c in changes if c.action is Action.FAILED)
    if not failed and any(c.action is Action.WAITING for c in changes):
        changes.append(Change(ref=ref, action=Action.WAITING, message="teardown under way "
                              "(onDelete running): the finalizer is kept until it is done"))
        return changes, False
    changes.append(Change(ref=ref, action=Action.FAILED, message="finalizer kept, retried "
                          f"on the next sync: {failed or 'teardown incomplete'}"))
    return changes, False


def cleanup_children(kube: Kube, owner: ObjRef, children: Sequence[InventoryEntry],
                     options: DeletionOptions) -> tuple[list[Change], bool]:
    """Delete the owned children no owner reference covers (cluster-scoped ones and other
    namespaces, for a namespaced owner); the garbage collector takes the rest."""
    changes = [delete_if_owned(kube, child.ref, owner, dry_run=options.dry_run,
                               inventory=options.inventory, identities=options.identities)
               for child in children
               if not owner_reference_allowed(owner, child.ref, bool(child.ref.namespace))]
    return changes, not any(c.action is Action.FAILED for c in changes)


def run_on_delete(kube: Kube, cr_live: Mapping[str, Any], hooks: OnDeleteRenderer, *,
                  options: DeletionOptions) -> tuple[list[Change], bool]:
    """Run the entry's onDelete block against the live custom resource: (changes, done)."""
    ref = ObjRef.of(cr_live)
    block = hooks.entry.operator_box.get("onDelete")
    if not isinstance(block, Mapping) or not block:
        return [], True
    try:
        if not hooks.active(cr_live, block):
            return [], True
        default = _seconds(block.get("timeout"), options.timeout)
        if str(block.get("ordered")).lower() in ("true", "1", "yes"):
            return _run_ordered(kube, cr_live, hooks, block, default, options)
        jobs = hooks.jobs(cr_live, block)
    except _render_errors() as err:
        return [Change(ref=ref, action=Action.FAILED,
                       message=f"onDelete does not render: {err}")], False
    return run_jobs(kube, jobs, cr_live, deadline=options.clock() + default, options=options)


def _run_ordered(kube: Kube, cr_live: Mapping[str, Any], hooks: OnDeleteRenderer,
                 block: Mapping[str, Any], default: float,
                 options: DeletionOptions) -> tuple[list[Change], bool]:
    owner = ObjRef.of(cr_live)
    groups = block.get("groups")
    stages = [g for g in groups if isinstance(g, Mapping)] if isinstance(groups, list) \
        and groups else [block]
    changes: list[Change] = []
    for i, stage in enumerate(stages):
        name = str(stage.get("name") or f"stage {i + 1}")
        if stage is not block and not hooks.active(cr_live, stage):
            continue
        timeout = _seconds(stage.get("timeout"), default)
        deadline = options.clock() + timeout
        job_changes, done = run_jobs(kube, hooks.jobs(cr_live, stage), cr_live,
                                     deadline=deadline, options=options)
        changes.extend(job_changes)
        if not done:
            return changes, False
        waiting: list[ObjRef] = []
        for ref, refusal in hooks.refs(cr_live, stage):
            if refusal:
                changes.append(Change(ref=ref, action=Action.SKIPPED, message=refusal))
                continue
            change, existed = attempt_delete(kube, ref, owner, propagation="Foreground",
                                             dry_run=options.dry_run,
                                             inventory=options.inventory)
            message = f"onDelete {name}" + (f": {change.message}" if change.message else "")
            changes.append(dataclasses.replace(change, message=message))
            if existed and change.action is Action.DELETED:
                waiting.append(ref)
        if any(c.action is Action.FAILED for c in changes):
            return changes, False
        for ref in _wait_gone(kube, waiting, deadline, options):
            if not options.wait:
                changes.append(Change(ref=ref, action=Action.WAITING,
                                      message=f"onDelete {name}: being deleted"))
                continue
            changes.append(Change(ref=ref, action=Action.FAILED, message=f"onDelete {name}: "
                                  f"still present after {timeout:g}s"))
        if any(c.action is Action.WAITING for c in changes):
            return changes, False
        if any(c.action is Action.FAILED for c in changes):
            return changes, False
    return changes, True


def run_jobs(kube: Kube, jobs: Sequence[RenderedObject], cr_live: Mapping[str, Any], *,
             deadline: float, options: DeletionOptions) -> tuple[list[Change], bool]:
    """Create each Job when absent (no owner references) and wait until every one is
    Complete or Failed, or the deadline passes."""
    if not jobs:
        return [], True
    owner, uid = ObjRef.of(cr_live), str(cr_live["metadata"].get("uid") or "")
    res = kube.resource("batch/v1", "Job")
    pending = {j.ref: j for j in jobs}
    created: set[ObjRef] = set()
    results: dict[ObjRef, Change] = {}
    while True:
        for ref, job in list(pending.items()):
            try:
                live = kube.get_or_none(res, ref.namespace, ref.name)
                if live is None:
                    try:
                        kube.create(res, _job_body(job, uid, options.shard),
                                    field_manager=options.field_manager, subject=str(ref))
                    except ClusterError as err:
                        if err.status != 403 or "being terminated" not in err.detail:
                            raise
                        # the namespace is going away: a Job cannot run there any more,
                        # and holding the finalizer would hold the namespace forever
                        results[ref] = Change(ref=ref, action=Action.SKIPPED, message=(
                            f"not run: namespace {ref.namespace} is being deleted"))
                        continue
                    created.add(ref)
                    continue
                problem = ownership_problem(live, owner)
                if problem:
                    results[ref] = Change(ref=ref, action=Action.FAILED, message="a Job of "
                                          f"this name exists and is not an onDelete Job of "
                                          f"{owner} ({problem}); delete or rename it")
                    continue
                state = _job_state(live)
                annotations = live["metadata"].get("annotations") or {}
                stale = annotations.get(OWNER_UID_ANNOTATION) != uid
                if stale:  # left by an earlier custom resource of the same name
                    if state:
                        delete_live(kube, res, ref, live, propagation="Background", dry_run=False)
                    continue
                if state and state[0] == "Complete":
                    results[ref] = Change(ref=ref, action=Action.CREATED if ref in created
                                          else Action.UNCHANGED, message="onDelete job complete")
                elif state:
                    results[ref] = Change(ref=ref, action=Action.FAILED,
                                          message=f"onDelete job failed: {state[1] or 'Failed'}")
            except ClusterError as err:
                results[ref] = Change(ref=ref, action=Action.FAILED, message=err.detail)
        for ref in results:
            pending.pop(ref, None)
        if not pending or options.clock() >= deadline or not options.wait:
            break
        options.sleep(options.poll)
        kube.check_gate()  # a long wait ends as soon as this process may not write
    for ref in pending:
        results[ref] = Change(ref=ref, action=Action.FAILED,
                              message="onDelete job not finished in time") if options.wait \
            else Change(ref=ref, action=Action.WAITING, message="onDelete job running")
    if pending and not options.wait:
        return [results[j.ref] for j in jobs], False
    changes = [results[j.ref] for j in jobs]
    return changes, not any(c.action is Action.FAILED for c in changes)


def _job_body(job: RenderedObject, owner_uid: str, shard: str = "") -> dict[str, Any]:
    body = copy.deepcopy(dict(job.body))
    meta = body.setdefault("metadata", {})
    if shard:
        meta["labels"] = {**(meta.get("labels") or {}), SHARD_LABEL: shard}
    meta.pop("ownerReferences", None)  # the Job must outlive the custom resource
    meta.setdefault("annotations", {})[OWNER_UID_ANNOTATION] = owner_uid
    return body


def _job_state(live: Mapping[str, Any]) -> tuple[str, str] | None:
    """("Complete" | "Failed", reason) once the Job finished."""
    for cond in (live.get("status") or {}).get("conditions") or []:
        if cond.get("status") == "True" and cond.get("type") in ("Complete", "Failed"):
            return str(cond["type"]), str(cond.get("reason") or cond.get("message") or "")
    return None


def _wait_gone(kube: Kube, refs: list[ObjRef], deadline: float,
               options: DeletionOptions) -> list[ObjRef]:
    """Poll until each object is gone; the ones still present at the deadline."""
    while refs:
        left = []
        for ref in refs:
            try:
                res = kube.resource(ref.api_version, ref.kind)
                if kube.get_or_none(res, ref.namespace, ref.name) is not None:
                    left.append(ref)
            except ClusterError:
                left.append(ref)
        refs = left
        if not refs or options.clock() >= deadline or not options.wait:
            break
        options.sleep(options.poll)
        kube.check_gate()
    return refs


def _seconds(value: Any, default: float) -> float:
    if value in (None, ""):
        return default
    if isinstance(value, int | float):
        return float(value)
    return parse_duration(str(value)).total_seconds()


# --- the finalizer --------------------------------------------------------------------------


def _add_finalizer(kube: Kube, res: Resource, live: Mapping[str, Any],
                   field_manager: str) -> Any:
    meta = live["metadata"]
    patch: list[dict[str, Any]] = (
        [{"op": "add", "path": "/metadata/finalizers/-", "value": FINALIZER}]
        if meta.get("finalizers") else
        [{"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]},
         {"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]}])
    return kube.request("PATCH", res.path(meta.get("namespace") or "", meta["name"]),
                        query={"fieldManager": field_manager}, body=patch,
                        content_type=JSON_PATCH, subject=str(ObjRef.of(live)))


def remove_finalizer(kube: Kube, res: Resource, live: Mapping[str, Any], *,
                     field_manager: str = FIELD_MANAGER, attempts: int = 5) -> None:
    """Remove FINALIZER only: a JSON patch that tests the entry at its index before removing
    it, re-read and retried when the list moved. A missing object or finalizer is done."""
    meta = live.get("metadata") or {}
    ref = ObjRef.of(live)
    path = res.path(str(meta.get("namespace") or ""), str(meta["name"]))
    for _ in range(attempts):
        finalizers = list(meta.get("finalizers") or [])
        if FINALIZER not in finalizers:
            return
        i = finalizers.index(FINALIZER)
        try:
            kube.request("PATCH", path, query={"fieldManager": field_manager},
                         content_type=JSON_PATCH, subject=str(ref),
                         body=[{"op": "test", "path": f"/metadata/finalizers/{i}",
                                "value": FINALIZER},
                               {"op": "remove", "path": f"/metadata/finalizers/{i}"}])
            return
        except ClusterError as err:
            if err.status == 404:
                return
            if err.status not in (409, 422):
                raise
        current = kube.get_or_none(res, ref.namespace, ref.name)
        if current is None:
            return
        meta = current.get("metadata") or {}
    raise ClusterError(f"the finalizers kept changing; {FINALIZER} not removed",
                       subject=str(ref))
