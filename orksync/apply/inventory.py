"""The inventory of what one sync root applied (stored compressed in a ConfigMap), and the
prune plan computed from it: only what a recorded inventory lists and the render no
longer holds is deleted, never after an error. Pure
(docs/operations.md#the-inventory-and-the-prune-plan)."""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import re
import zlib
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from orksync.errors import InputError, OrksyncError
from orksync.model import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    OWNER_ANNOTATION,
    OWNER_LABEL,
    SERVICE_ACCOUNT_DIRECTIVE,
    ChangeSet,
    ObjRef,
    RenderedObject,
    RenderedSet,
    Source,
    is_plain,
)
from orksync.secrets.ca import with_ca_secrets

DEFAULT_NAMESPACE = "orksync-system"
CONFIGMAP_PREFIX = "orksync-inventory-"
FORMAT = "v1"
DATA_KEY = "entries"
MAX_COMPRESSED = 900 * 1024  # under the 1 MiB ConfigMap limit, with room for metadata
PRUNE_ANNOTATION = "orksync.io/prune"
INVENTORY_ANNOTATION = "orksync.io/inventory"  # on every applied object: <namespace>/<name>
SOURCE_ANNOTATION = "orksync.io/source"  # on the inventory: the repository URL or local path
SOURCE_PATH_ANNOTATION = "orksync.io/source-path"  # on the inventory: the directory inside it
# on the inventory: the shard label every object of its root was found carrying
# (orksync.agent.relabel); written by that pass, not by the inventory's own writes
LABELLED_ANNOTATION = "orksync.io/labelled"
# what tells an inventory ConfigMap from the objects orksync writes (which carry the same
# managed-by label) in a label selector: `!orksync.io/inventory`
INVENTORY_LABEL = "orksync.io/inventory"
PRUNE_DISABLED = "disabled"
CRD_KIND = "CustomResourceDefinition"
CRD_GROUP = "apiextensions.k8s.io"


@functools.cache
def _kind_order() -> tuple[dict[tuple[str, str], int], int]:
    """Orkestra's group order by (apiVersion, kind), and the place of `custom` entries.
    Built on first use: the kind registry imports every builder, which a sync that
    deletes nothing (and `orksync apply DIR` at start-up) does not need."""
    from orksync.render.kinds import KINDS, ORDER

    return {(k.api_version, k.kind): ORDER[k.key] for k in KINDS if k.kind}, ORDER["custom"]


class InventoryError(OrksyncError):
    """A stored inventory that cannot be read or written (never silently replaced)."""


@dataclass(frozen=True, slots=True, kw_only=True, order=True)
class InventoryEntry:
    ref: ObjRef
    owner: ObjRef | None = None  # the custom resource that rendered it; None: CRD or CR
    uid: str | None = None  # informational: deletes use the UID read with the ownership check
    plain: bool = False  # a plain manifest of the repository (orksync.model.is_plain)
    # a custom resource's: the ServiceAccount its children were written as ("": the agent)
    account: str = ""
    # the repository file it was applied from, for objects no custom resource owns (plain
    # manifests, custom resources, CRDs; "": a child, or recorded by an earlier orksync):
    # while that file has an error, the prune holds it (`plan_prune`)
    file: str = ""

    @property
    def is_crd(self) -> bool:
        return is_crd(self.ref)

    @property
    def is_custom_resource(self) -> bool:
        return self.owner is None and not self.plain and not self.is_crd


def _order(entry: InventoryEntry) -> tuple[str, str, str, str]:
    """The entries' order (the dataclass's, decided by `ref` since refs are unique in an
    Inventory) as a key of plain strings: a sort of 1,000 entries no longer calls the
    generated `__lt__` of the entry and of its ref some 20,000 times."""
    ref = entry.ref
    return ref.api_version, ref.kind, ref.namespace, ref.name


def is_crd(ref: ObjRef) -> bool:
    return ref.kind == CRD_KIND and ref.group == CRD_GROUP


@dataclass(frozen=True, slots=True)
class Inventory:
    """A set of entries, unique by identity, kept sorted, and the source that wrote them
    (None: not recorded, an inventory of an earlier orksync or not written yet)."""

    entries: tuple[InventoryEntry, ...] = ()
    source: Source | None = None
    # custom resources runtime.cleanup deleted, with the fingerprint of their body in Git
    # (orksync.render.cleanup): not applied again while Git holds them unchanged
    cleaned: tuple[tuple[ObjRef, str], ...] = ()
    # as read: the LABELLED_ANNOTATION's value ("": none); an inventory built or changed
    # by a sync carries none (`of`, `with_*`), and writes none
    labelled: str = field(default="", compare=False)

    @classmethod
    def of(cls, entries: Iterable[InventoryEntry]) -> Inventory:
        by_ref: dict[ObjRef, InventoryEntry] = {}
        for entry in entries:
            by_ref[entry.ref] = entry  # later entries win
        return cls(tuple(sorted(by_ref.values(), key=_order)))

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[InventoryEntry]:
        return iter(self.entries)

    def __contains__(self, ref: object) -> bool:
        return ref in self.by_ref()

    def by_ref(self) -> dict[ObjRef, InventoryEntry]:
        return {e.ref: e for e in self.entries}

    def refs(self) -> set[ObjRef]:
        return {e.ref for e in self.entries}

    def owned_by(self, owner: ObjRef) -> list[InventoryEntry]:
        return [e for e in self.entries if e.owner == owner]

    def merge(self, other: Iterable[InventoryEntry]) -> Inventory:
        """This inventory plus `other` (other's entry wins for the same identity), with
        this inventory's source."""
        return Inventory(Inventory.of([*self.entries, *other]).entries, self.source,
                         self.cleaned)

    def with_part(self, crs: Collection[ObjRef], part: Inventory) -> Inventory:
        """This inventory with the entries and notes of these custom resources (and of
        their children) replaced by `part`'s."""
        rest = [e for e in self.entries if e.ref not in crs and e.owner not in crs]
        return Inventory(Inventory.of([*rest, *part.entries]).entries, self.source,
                         self.cleaned).with_cleaned(
            [*(c for c in self.cleaned if c[0] not in crs), *part.cleaned])

    def with_source(self, source: Source | None) -> Inventory:
        return Inventory(self.entries, source, self.cleaned)

    def with_cleaned(self, cleaned: Iterable[tuple[ObjRef, str]]) -> Inventory:
        return Inventory(self.entries, self.source, tuple(sorted(set(cleaned), key=lambda c: (
            c[0].api_version, c[0].kind, c[0].namespace, c[0].name))))

    # --- the ConfigMap -----------------------------------------------------------------

    def encode(self) -> bytes:
        owners = sorted({e.owner for e in self.entries if e.owner is not None})
        index = {o: i for i, o in enumerate(owners)}
        doc = {"owners": [_ref_row(o) for o in owners],
               "entries": [[*_ref_row(e.ref), None if e.owner is None else index[e.owner],
                            e.uid, *_tail(e)] for e in self.entries]}
        if self.cleaned:  # absent otherwise: the format of an inventory without any
            doc["cleaned"] = [[*_ref_row(ref), digest] for ref, digest in self.cleaned]
        raw = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        return zlib.compress(raw, 9)

    @classmethod
    def decode(cls, blob: bytes) -> Inventory:
        try:
            doc = json.loads(zlib.decompress(blob))
            owners = [_row_ref(r) for r in doc["owners"]]
            entries = [InventoryEntry(ref=_row_ref(r[:4]),
                                      owner=None if r[4] is None else owners[r[4]],
                                      uid=r[5], plain=r[6:7] == [1],
                                      account=str(r[7] or "") if len(r) > 7 else "",
                                      file=str(r[8] or "") if len(r) > 8 else "")
                       for r in doc["entries"]]
            cleaned = [(_row_ref(r[:4]), str(r[4])) for r in doc.get("cleaned") or []]
        except (zlib.error, ValueError, KeyError, IndexError, TypeError) as err:
            raise InventoryError(f"unreadable inventory: {err}") from err
        return cls.of(entries).with_cleaned(cleaned)

    def to_configmap(self, name: str, namespace: str = DEFAULT_NAMESPACE) -> dict[str, Any]:
        blob = self.encode()
        if len(blob) > MAX_COMPRESSED:
            raise InventoryError(f"{len(self)} entries compress to {len(blob)} bytes, more "
                                 f"than a ConfigMap holds ({MAX_COMPRESSED}); split the "
                                 "repository into several sync roots",
                                 subject=f"ConfigMap/{namespace}/{configmap_name(name)}")
        annotations = {"orksync.io/sync-name": name}
        if self.source is not None:
            annotations[SOURCE_ANNOTATION] = self.source.location
            annotations[SOURCE_PATH_ANNOTATION] = self.source.path
        return {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": configmap_name(name), "namespace": namespace,
                             "labels": {MANAGED_BY_LABEL: MANAGED_BY,
                                        "app.kubernetes.io/component": "inventory",
                                        INVENTORY_LABEL: "true"},
                             "annotations": annotations},
                "data": {"format": f"{FORMAT}: binaryData.{DATA_KEY} = zlib(JSON), "
                                   "see orksync.apply.inventory",
                         "count": str(len(self))},
                "binaryData": {DATA_KEY: base64.b64encode(blob).decode("ascii")}}

    @classmethod
    def from_configmap(cls, body: Mapping[str, Any] | None) -> Inventory:
        if body is None:
            return cls()
        subject = str(ObjRef.of(body))
        fmt = str((body.get("data") or {}).get("format") or "")
        if fmt.split(":")[0] != FORMAT:
            raise InventoryError(f"unknown inventory format {fmt!r}", subject=subject)
        annotations = (body.get("metadata") or {}).get("annotations") or {}
        location = annotations.get(SOURCE_ANNOTATION)
        source = Source(location=str(location),
                        path=str(annotations.get(SOURCE_PATH_ANNOTATION) or "")) \
            if location else None
        labelled = str(annotations.get(LABELLED_ANNOTATION) or "")
        encoded = (body.get("binaryData") or {}).get(DATA_KEY)
        if not encoded:
            return cls(source=source, labelled=labelled)
        try:
            read = cls.decode(base64.b64decode(encoded, validate=True))
        except (ValueError, InventoryError) as err:
            raise InventoryError(str(err), subject=subject) from err
        return cls(read.entries, source, read.cleaned, labelled)


def configmap_name(name: str) -> str:
    """`orksync-inventory-<name>`; a name that is not a valid DNS subdomain is cleaned and
    suffixed with a digest of the original so two names never share an inventory."""
    clean = re.sub(r"[^a-z0-9.-]+", "-", name.lower()).strip(".-")
    if clean != name or len(CONFIGMAP_PREFIX + clean) > 253:
        digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:8]
        clean = f"{clean[:200]}-{digest}".strip(".-")
    return CONFIGMAP_PREFIX + clean


def inventory_identity(name: str, namespace: str = DEFAULT_NAMESPACE) -> str:
    """The value of INVENTORY_ANNOTATION on the objects sync root `name` applies."""
    return f"{namespace}/{name}"


def source_conflict(stored: Inventory, source: Source) -> str | None:
    """Why a sync of `source` may not use the stored inventory (None: it may): it holds
    objects of another recorded source, which the sync's prune would delete. An inventory
    without a recorded source is adopted, and so is an empty one (nothing to lose)."""
    if stored.source is None or stored.source == source or not len(stored):
        return None
    return (f"this inventory holds {len(stored)} object(s) synced from {stored.source}, not "
            f"from {source}: refusing to sync (its prune would delete them). Give each "
            "source its own inventory with --name (the sync root's name, default: "
            "default), or, when the same repository moved, take the inventory over with "
            "--adopt-inventory (orksync sync, apply, diff and agent)")


def check_source(stored: Inventory, source: Source | None, *, name: str,
                 namespace: str = DEFAULT_NAMESPACE) -> None:
    """Raise InventoryError, naming the ConfigMap, when `source_conflict` says no. None
    (a source that is not known) checks nothing."""
    conflict = source_conflict(stored, source) if source is not None else None
    if conflict:
        raise InventoryError(conflict, subject=f"ConfigMap/{namespace}/{configmap_name(name)}")


def _tail(entry: InventoryEntry) -> tuple[int | str, ...]:
    """The optional items of an entry's row: `plain`, `account`, `file`, each written only
    when it or an item after it is set (an older orksync reads the ones it knows)."""
    if entry.file:
        return int(entry.plain), entry.account, entry.file
    if entry.account:
        return int(entry.plain), entry.account
    return (1,) if entry.plain else ()


def _ref_row(ref: ObjRef) -> list[str]:
    return [ref.api_version, ref.kind, ref.namespace, ref.name]


def _row_ref(row: list[str]) -> ObjRef:
    api_version, kind, namespace, name = (str(v) for v in row)
    return ObjRef(api_version=api_version, kind=kind, namespace=namespace, name=name)


# --- ownership at delete time (lesson 2) -------------------------------------------------


def ownership_problem(live: Mapping[str, Any], owner: ObjRef | None,
                      inventory: str = "") -> str | None:
    """Why orksync may not delete this live object (None: it may). A child must still
    carry orksync's label and both markers of its owner; a CRD or custom resource
    orksync's label; nobody may carry `orksync.io/prune: disabled`; with `inventory`
    (`inventory_identity` of the deleting sync root), an object whose INVENTORY_ANNOTATION
    names another inventory is not deleted (one without it, written by an earlier orksync,
    is judged by the other markers)."""
    meta = live.get("metadata") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    if annotations.get(PRUNE_ANNOTATION) == PRUNE_DISABLED:
        return f"not deleted: annotated {PRUNE_ANNOTATION}: {PRUNE_DISABLED}"
    if labels.get(MANAGED_BY_LABEL) != MANAGED_BY:
        return f"not deleted: label {MANAGED_BY_LABEL} is not {MANAGED_BY} any more"
    written_by = annotations.get(INVENTORY_ANNOTATION)
    if inventory and written_by and written_by != inventory:
        return (f"not deleted: annotation {INVENTORY_ANNOTATION} names the inventory "
                f"{written_by}, not {inventory} (another sync root wrote it last)")
    if owner is None:
        return None
    if labels.get(OWNER_LABEL) != owner.name:
        return f"not deleted: label {OWNER_LABEL} does not name {owner.name}"
    if annotations.get(OWNER_ANNOTATION) != str(owner):
        return f"not deleted: annotation {OWNER_ANNOTATION} does not name {owner}"
    return None


# --- the plan ----------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class PrunePlan:
    delete: list[InventoryEntry]  # in delete order: children, custom resources, CRDs
    refused: list[str]  # why something was not (or nothing was) deleted
    keep: Inventory  # the inventory to store when every delete succeeds
    owned: dict[ObjRef, list[InventoryEntry]] = field(default_factory=dict)
    halted: bool = False  # nothing at all may be deleted in this run
    empty: bool = False  # halted: an empty render against a non-empty inventory

    @property
    def custom_resources(self) -> set[ObjRef]:
        return {e.ref for e in self.delete if e.is_custom_resource}


def delete_order(entry: InventoryEntry) -> tuple[int, int, ObjRef]:
    """Reverse apply order: children (reverse of Orkestra's group order), then custom
    resources, then plain manifests (the same reverse order: a Namespace last), then
    CRDs."""
    if entry.owner is not None or entry.plain:
        order, custom = _kind_order()
        index = order.get((entry.ref.api_version, entry.ref.kind), custom)
        return (2 if entry.plain else 0, -index, entry.ref)
    return (3 if entry.is_crd else 1, 0, entry.ref)


def plan_prune(old: Inventory, rendered: RenderedSet, changes: ChangeSet, *,
               allow_empty: bool = False, allow_orphaning_children: bool = False,
               prune_crds: bool = False) -> PrunePlan:
    # the CA Secret of a `tls:` Secret is written with it, not rendered: it is recorded
    # and pruned as if rendered beside it (orksync.secrets.ca)
    rendered = with_ca_secrets(rendered, [(e.ref, e.owner) for e in old])
    old_by_ref = old.by_ref()
    failed = {c.ref for c in changes.failed}

    def entry_of(obj: RenderedObject) -> InventoryEntry:
        prior = old_by_ref.get(obj.ref)
        uid = prior.uid if prior is not None and prior.owner == obj.owner else None
        return InventoryEntry(ref=obj.ref, owner=obj.owner, uid=uid, plain=is_plain(obj),
                              account=str(obj.directives.get(SERVICE_ACCOUNT_DIRECTIVE) or ""),
                              file=obj.origin.file if obj.owner is None else "")

    applied = [entry_of(o) for o in rendered.objects if o.ref not in failed]
    new_refs = {o.ref for o in rendered.objects}
    halt = []
    if rendered.errors:
        halt.append(f"the render had {len(rendered.errors)} error(s): nothing is pruned")
        halt.extend(_file_holds(old, rendered.errors, new_refs))
    if failed:
        halt.append(f"{len(failed)} object(s) failed to apply: nothing is pruned")
    if halt:
        return PrunePlan(delete=[], refused=halt, keep=old.merge(applied), halted=True)
    if not rendered.objects and len(old) and not allow_empty:
        return PrunePlan(delete=[], refused=[
            f"the render is empty and the inventory holds {len(old)} object(s): refusing "
            "to delete everything; to delete them, run again with --allow-empty"], keep=old,
            halted=True, empty=True)

    guarded = dict(rendered.skipped)
    retained = {ref for ref, _ in rendered.retained}  # condition false, never cleaned up
    candidates = [e for e in old if e.ref not in new_refs and e.ref not in retained]
    leaving = {e.ref for e in candidates if e.is_custom_resource}
    orphaning = _orphaning(old, rendered) if not allow_orphaning_children else set()
    kept: list[InventoryEntry] = [e for e in old if e.ref in retained and e.ref not in new_refs]
    delete: list[InventoryEntry] = []
    owned: dict[ObjRef, list[InventoryEntry]] = {}
    refused: list[str] = []
    for owner in sorted(orphaning):
        count = len(old.owned_by(owner))
        refused.append(f"{owner} renders no children where it had {count}: refusing to "
                       "prune them (allow orphaning children to confirm)")
    for entry in candidates:
        guard_ref = entry.ref if entry.ref in guarded else entry.owner
        if guard_ref is not None and guard_ref in guarded:
            kept.append(entry)
            refused.append(f"{entry.ref}: not pruned: {guarded[guard_ref]}")
        elif entry.owner is not None and entry.owner in orphaning:
            kept.append(entry)
        elif entry.owner is not None and entry.owner in leaving:
            owned.setdefault(entry.owner, []).append(entry)
        elif entry.is_crd and not prune_crds:
            kept.append(entry)
            refused.append(f"{entry.ref} left the repository but CRDs are not pruned "
                           "(deleting one deletes every custom resource of its kind)")
        else:
            delete.append(entry)
    delete.sort(key=delete_order)
    return PrunePlan(delete=delete, refused=refused, keep=Inventory.of([*applied, *kept]),
                     owned=owned)


def _file_holds(old: Inventory, errors: Iterable[Exception], rendered: Collection[ObjRef],
                shown: int = 10) -> list[str]:
    """One line per file that has an error (it did not load, or a document of it did not
    render) and from which objects of `old` that are not `rendered` were last applied
    (`InventoryEntry.file`): such a file says nothing about whether they left Git, so the
    render's errors hold their prune. Names the first `shown` objects of each."""
    broken = {e.file for e in errors if isinstance(e, InputError) and e.file}
    by_file: dict[str, list[InventoryEntry]] = {}
    for entry in old:
        if entry.file in broken and entry.ref not in rendered:
            by_file.setdefault(entry.file, []).append(entry)
    lines = []
    for file, held in sorted(by_file.items()):
        names = ", ".join(str(e.ref) for e in held[:shown]) + (
            f" and {len(held) - shown} more" if len(held) > shown else "")
        children = " (and their children)" if any(e.is_custom_resource for e in held) else ""
        lines.append(f"{file} has errors in this sync: the prune of the {len(held)} "
                     f"object(s) last applied from it is held: {names}{children}")
    return lines


def _orphaning(old: Inventory, rendered: RenderedSet) -> set[ObjRef]:
    """Custom resources still rendered, with children in the inventory and none now."""
    rendered_crs = {o.ref for o in rendered.objects
                    if o.owner is None and not is_crd(o.ref) and not is_plain(o)}
    now = Counter(o.owner for o in rendered.objects if o.owner is not None)
    now.update(owner for _, owner in rendered.retained)  # still wanted, only not written
    before = {e.owner for e in old if e.owner is not None}
    return {cr for cr in rendered_crs if cr in before and not now[cr]}
