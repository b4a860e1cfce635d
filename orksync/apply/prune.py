"""Carrying out a prune plan, and Orkestra's DeleteIfOwned for entries whose condition
turned false. I/O.

Every delete re-reads the live object first and deletes it only while it still carries
orksync's ownership markers (label `app.kubernetes.io/managed-by: orksync`; for a child
also `orkestra-owner` and the annotation `orksync.io/owner` naming the inventory owner),
no annotation `orksync.io/inventory` naming another sync root's inventory (one written by
an earlier orksync carries none and is judged by the rest) and no
`orksync.io/prune: disabled` opt-out; otherwise it is `skipped` with the reason and
forgotten (it is no longer ours). The DELETE carries the UID just read as a precondition,
so an object replaced in between is never deleted by mistake, and uses background
propagation. A missing object is `deleted` (already gone). A failed delete is `failed`
and stays in the returned inventory, so the next sync retries it (prior art, lesson 4).

Custom resources leaving Git go through orksync.lifecycle.teardown (onDelete, finalizer);
their children are left to that path and stay in the inventory until it completes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable
from typing import Any

from orksync.apply.delete import DeletionOptions, TearDown, attempt_delete, delete_if_owned
from orksync.apply.impersonation import Identities
from orksync.apply.inventory import Inventory, InventoryEntry, PrunePlan
from orksync.apply.run import FIELD_MANAGER
from orksync.cluster.kube import Kube
from orksync.errors import ClusterError
from orksync.katalog.model import DELETION_PROTECTION_LABEL
from orksync.model import Action, Change, ChangeSet, ObjRef

OnChange = Callable[[Change], None]


def prune(kube: Kube, plan: PrunePlan, *, field_manager: str = FIELD_MANAGER,
          dry_run: bool = False, teardown: TearDown,
          deletion: DeletionOptions | None = None, on_change: OnChange | None = None
          ) -> tuple[ChangeSet, Inventory]:
    """Delete the plan's entries in order; return the changes and the inventory to store
    (the plan's `keep` plus every entry whose delete did not complete). A custom resource
    goes through `teardown` (its onDelete, then its finalizer)."""
    options = dataclasses.replace(deletion or DeletionOptions(), field_manager=field_manager,
                                  dry_run=dry_run)
    changes = ChangeSet()
    record = _recorder(changes, on_change)
    if plan.halted:
        return changes, plan.keep
    retry: list[InventoryEntry] = []
    held_groups: set[str] = set()  # groups whose custom resources are still being torn down
    for entry in plan.delete:
        protected = _deletion_protected(kube, entry) if entry.owner is None else None
        if protected:  # kept, and checked again at every sync
            record(Change(ref=entry.ref, action=Action.SKIPPED, message=protected))
            retry.extend([entry, *plan.owned.get(entry.ref, [])])
            continue
        if entry.is_custom_resource:
            children = plan.owned.get(entry.ref, [])
            done_changes, done = teardown(entry, children, options)
            for change in done_changes:
                record(change)
            if not done:
                retry.extend([entry, *children])
                held_groups.add(entry.ref.group)
            continue
        if entry.is_crd and entry.ref.name.partition(".")[2] in held_groups:
            record(Change(ref=entry.ref, action=Action.FAILED, message="not deleted yet: "
                          "custom resources of its group are still being torn down"))
            retry.append(entry)
            continue
        change = delete_if_owned(kube, entry.ref, entry.owner, dry_run=dry_run,
                                 inventory=options.inventory,
                                 identities=options.identities)
        record(change)
        if change.action is Action.FAILED:
            retry.append(entry)
    return changes, plan.keep.merge(retry)


def cleanup_absent(kube: Kube, absent: Iterable[tuple[ObjRef, ObjRef]], *,
                   claimed: Collection[ObjRef] = (), dry_run: bool = False,
                   on_change: OnChange | None = None, inventory: str = "",
                   identities: Identities | None = None) -> ChangeSet:
    """Orkestra's DeleteIfOwned: each (object, owner) whose entry condition turned false is
    deleted when it exists, carries that owner's markers (and, with `inventory`, no other
    sync root's identity) and no entry claims it, as the owner's ServiceAccount with
    `identities`. A missing object is no change at all (this runs every sync)."""
    changes = ChangeSet()
    record = _recorder(changes, on_change)
    seen: set[ObjRef] = set()
    for ref, owner in absent:
        if ref in claimed or ref in seen:
            continue
        seen.add(ref)
        change, existed = attempt_delete(kube, ref, owner, dry_run=dry_run,
                                         inventory=inventory, identities=identities)
        if existed or change.action is Action.FAILED:
            record(dataclasses.replace(change, message=_prefixed("condition false",
                                                                  change.message)))
    return changes


def _deletion_protected(kube: Kube, entry: InventoryEntry) -> str | None:
    """Why a CRD or custom resource may not be deleted (None: it may): Orkestra's
    deletion protection label on the live object. A failed read is left to the delete
    path, which reads it again."""
    try:
        live = kube.get_or_none(kube.resource(entry.ref.api_version, entry.ref.kind),
                                entry.ref.namespace, entry.ref.name)
    except ClusterError:
        return None
    labels = ((live or {}).get("metadata") or {}).get("labels") or {}
    if labels.get(DELETION_PROTECTION_LABEL) != "true":
        return None
    return (f"not deleted: deletion protection (label {DELETION_PROTECTION_LABEL}=true); "
            "remove the label, or set security.deletionProtection.enabled: false, to let it "
            "go")


def _prefixed(prefix: str, message: str) -> str:
    return f"{prefix}: {message}" if message else prefix


def _recorder(changes: ChangeSet, on_change: OnChange | None) -> Callable[[Change], Any]:
    def record(change: Change) -> None:
        changes.changes.append(change)
        if on_change is not None:
            on_change(change)
    return record
