"""Deleting one object only if it is still ours, and what the custom-resource teardown
(orksync.lifecycle.teardown) and the prune share: the options of a delete, and the
protocol through which the teardown renders `onDelete` blocks. I/O."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from orksync.apply.inventory import InventoryEntry, ownership_problem
from orksync.apply.run import FIELD_MANAGER
from orksync.cluster.kube import Kube, Resource
from orksync.errors import ClusterError, InputError
from orksync.model import Action, Change, ObjRef, RenderedObject

if TYPE_CHECKING:
    from orksync.apply.impersonation import Identities
    from orksync.katalog.model import CrdEntry

DEFAULT_TIMEOUT = 300.0


@dataclass(slots=True, kw_only=True)
class DeletionOptions:
    timeout: float = DEFAULT_TIMEOUT  # seconds, when the Katalog gives no `timeout`
    poll: float = 2.0
    field_manager: str = FIELD_MANAGER
    dry_run: bool = False
    inventory: str = ""  # the deleting sync root's identity (inventory_identity); see below
    # an agent shard's `I-of-N`: the label `orksync.io/shard` on the onDelete Jobs it
    # creates, as on everything it writes (orksync.sync.mark_for_cleanup); "": none
    shard: str = ""
    # as whom a custom resource's children are deleted and its onDelete written
    # (orksync.apply.impersonation); None: as the agent
    identities: Identities | None = None
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    # False: a teardown whose onDelete Jobs have not finished (or whose ordered stage's
    # objects are not gone yet) returns at once, not done, its state WAITING, instead of
    # polling them until the timeout; the agent's full sync, whose work queue finishes
    # the teardown in the custom resource's own key, so that no other waits for it
    wait: bool = True


# --- what the teardown needs from the render engine ----------------------------------------


class OnDeleteRenderer(Protocol):
    """Renders one CRD entry's hook blocks against a LIVE custom resource (pure). The
    implementation over the render engine is orksync.lifecycle.hooks.HookRenderer."""

    entry: CrdEntry

    def active(self, live: Mapping[str, Any], block: Mapping[str, Any]) -> bool:
        """The block's own `when` / `or` (`anyOf`) hold."""
        ...

    def jobs(self, live: Mapping[str, Any], block: Mapping[str, Any]) -> list[RenderedObject]:
        """The block's `jobs` entries, built as onCreate Jobs are."""
        ...

    def refs(self, live: Mapping[str, Any], block: Mapping[str, Any]
             ) -> list[tuple[ObjRef, str | None]]:
        """The objects a stage declares (Jobs excepted), each with the namespace guard's
        refusal (None: allowed)."""
        ...


def find_hooks(hooks: Mapping[tuple[str, str], OnDeleteRenderer], ref: ObjRef
               ) -> OnDeleteRenderer | None:
    """The entry of a kind; another served version of the same group and kind will do."""
    found = hooks.get((ref.api_version, ref.kind))
    if found is None:
        found = next((h for (av, kind), h in hooks.items()
                      if kind == ref.kind and av.rpartition("/")[0] == ref.group), None)
    return found


def katalog_failures(errors: Iterable[Exception]) -> list[InputError]:
    """A render's errors about Katalogs and Komposers: a Katalog or an entry of one that
    did not load (with it, the onDelete renderers of its kinds)."""
    return [e for e in errors if isinstance(e, InputError)
            and e.obj.startswith(("Katalog/", "Komposer/"))]


def teardown_waits(hooks: Mapping[tuple[str, str], OnDeleteRenderer], ref: ObjRef,
                   errors: Sequence[Exception]) -> str | None:
    """Why the teardown of a custom resource deleted out of band waits (None: it may run):
    no onDelete renderer handles its kind while the render has errors (`errors`). Its
    Katalog may be among what did not load (a Katalog error, or a file that is not even
    YAML), and finishing the teardown now would remove the finalizer without its
    onDelete; it runs at the first sync without errors (its Katalog loaded, or gone from
    Git)."""
    if not errors or find_hooks(hooks, ref) is not None:
        return None
    cause = next(iter(katalog_failures(errors)), errors[0])
    return (f"being deleted: its teardown waits, since no Katalog entry of this sync "
            f"handles {ref.kind} ({ref.api_version}) and the render has errors ({cause}): "
            "finished now, its onDelete would not run")


# --- deleting one object if it is still ours -------------------------------------------


def delete_if_owned(kube: Kube, ref: ObjRef, owner: ObjRef | None, *,
                    propagation: str = "Background", dry_run: bool = False,
                    inventory: str = "", identities: Identities | None = None) -> Change:
    """GET, check ownership (skip with the reason; with `inventory`, an object another
    sync root wrote last is skipped too), DELETE with the UID just read as a precondition.
    A missing object (or kind) is `deleted`: already gone. With `identities`, the GET and
    the DELETE are sent as `owner`'s ServiceAccount."""
    return attempt_delete(kube, ref, owner, propagation=propagation, dry_run=dry_run,
                          inventory=inventory, identities=identities)[0]


def children_kube(kube: Kube, owner: ObjRef | None, identities: Identities | None) -> Kube:
    """The connection for the children of `owner` (orksync.apply.impersonation); raises
    ClusterError when their identity cannot be decided."""
    if identities is None or owner is None:
        return kube
    return identities.kube_for(owner)


def attempt_delete(kube: Kube, ref: ObjRef, owner: ObjRef | None, *,
                   propagation: str = "Background", dry_run: bool = False,
                   inventory: str = "", identities: Identities | None = None
                   ) -> tuple[Change, bool]:
    """delete_if_owned, plus whether the object existed when read."""
    try:
        kube = children_kube(kube, owner, identities)
        res = kube.resource(ref.api_version, ref.kind)
        live = kube.get_or_none(res, ref.namespace, ref.name)
    except ClusterError as err:
        if err.status == 404:
            return Change(ref=ref, action=Action.DELETED,
                          message="already gone (its kind is not served)"), False
        return Change(ref=ref, action=Action.FAILED, message=err.detail), False
    if live is None:
        return Change(ref=ref, action=Action.DELETED, message="already gone"), False
    problem = ownership_problem(live, owner, inventory)
    if problem:
        return Change(ref=ref, action=Action.SKIPPED, message=problem), True
    return delete_live(kube, res, ref, live, propagation=propagation, dry_run=dry_run), True


def delete_live(kube: Kube, res: Resource, ref: ObjRef, live: Mapping[str, Any], *,
            propagation: str, dry_run: bool) -> Change:
    if dry_run:
        return Change(ref=ref, action=Action.DELETED, message="dry run")
    try:
        kube.delete(res, ref.namespace, ref.name, propagation=propagation, subject=str(ref),
                    precondition_uid=(live.get("metadata") or {}).get("uid"))
    except ClusterError as err:
        if err.status == 404:
            return Change(ref=ref, action=Action.DELETED, message="already gone")
        if err.status == 409:
            return Change(ref=ref, action=Action.FAILED, message="replaced while being "
                          "deleted (its UID changed); retried on the next sync")
        return Change(ref=ref, action=Action.FAILED, message=err.detail)
    return Change(ref=ref, action=Action.DELETED)



TearDown = Callable[[InventoryEntry, Sequence[InventoryEntry], DeletionOptions],
                    tuple[list[Change], bool]]
"""Deletes a custom resource that left Git with its teardown: (changes, done); not done
keeps it and its children in the inventory. orksync.lifecycle.teardown provides it."""
