"""`orksync diff`: what a sync would change, per object, as unified diffs against the
server-side apply dry run, Secrets masked, the prune shown as deletions. I/O
(docs/operations.md#what-orksync-diff-compares)."""

from __future__ import annotations

import base64
import copy
import difflib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from orksync.apply.compare import HASH_ANNOTATION
from orksync.apply.crds import crd_kinds
from orksync.apply.delete import OnDeleteRenderer, find_hooks
from orksync.apply.impersonation import Identities, Impersonation
from orksync.apply.inventory import Inventory, InventoryEntry, ownership_problem, plan_prune
from orksync.apply.rollout import ROLLOUT_ANNOTATION, pod_template
from orksync.apply.run import FIELD_MANAGER
from orksync.apply.write import owner_reference_allowed
from orksync.cluster.kube import Kube, Resource
from orksync.errors import ClusterError
from orksync.model import (
    Action,
    Change,
    ChangeSet,
    ObjRef,
    RenderedObject,
    RenderedSet,
    WritePolicy,
)
from orksync.rendered.diff import ObjectDiff
from orksync.secrets.mask import mask_secret, scrub, secret_values
from orksync.yamls.io import dump_yaml

__all__ = ["DiffResult", "PruneInputs", "diff_objects", "normalise"]

log = logging.getLogger(__name__)

PLACEHOLDER_PREFIX = "<generate:"
_DROPPED_META = ("managedFields", "resourceVersion", "generation", "uid", "creationTimestamp")


@dataclass(slots=True, kw_only=True)
class PruneInputs:
    """What the deletions of a sync depend on besides the render: the sync root's stored
    inventory, its identity (`inventory_identity`) and the sync's prune flags."""

    stored: Inventory
    inventory: str
    allow_empty: bool = False
    allow_orphaning_children: bool = False
    prune_crds: bool = False
    hooks: Mapping[tuple[str, str], OnDeleteRenderer] | None = None


@dataclass(slots=True)
class DiffResult:
    diffs: list[tuple[ObjRef, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # deletions the sync would not make
    failed: list[ObjRef] = field(default_factory=list)  # objects whose dry run failed
    created: set[ObjRef] = field(default_factory=set)  # diffs of objects not in the cluster
    deleted: set[ObjRef] = field(default_factory=set)  # diffs of deletions

    @property
    def exit_code(self) -> int:
        """0 no difference, 1 differences, 2 errors."""
        if self.errors:
            return 2
        return 1 if self.diffs else 0

    def text(self) -> str:
        return "".join(d for _, d in self.diffs) + "".join(
            f"# prune refused: {reason}\n" for reason in self.refused)

    def object_diffs(self) -> list[ObjectDiff]:
        """Each diff with its action (created, changed or deleted), for `-o json`."""
        return [ObjectDiff(ref, "created" if ref in self.created else
                           "deleted" if ref in self.deleted else "changed", text)
                for ref, text in self.diffs]

    def in_namespace(self, namespace: str) -> DiffResult:
        """Only the diffs of objects in `namespace` (`orksync diff -n`); refusals and
        errors stay: they are about the whole sync."""
        return DiffResult(diffs=[(r, t) for r, t in self.diffs if r.namespace == namespace],
                          errors=self.errors, refused=self.refused, failed=self.failed,
                          created=self.created, deleted=self.deleted)


def normalise(obj: dict[str, Any] | None) -> dict[str, Any]:
    """A copy without the fields the server owns and without orksync's fingerprint."""
    if not obj:
        return {}
    out = copy.deepcopy(obj)
    out.pop("status", None)
    meta = out.get("metadata")
    if isinstance(meta, dict):
        for key in _DROPPED_META:
            meta.pop(key, None)
        annotations = meta.get("annotations")
        if isinstance(annotations, dict):
            annotations.pop(HASH_ANNOTATION, None)
            if not annotations:
                meta.pop("annotations", None)
    return out


def diff_objects(kube: Kube, rendered: RenderedSet, prune: PruneInputs | None = None, *,
                 impersonation: Impersonation | None = None) -> DiffResult:
    """The diff of every rendered object; with `prune`, also what the sync would delete
    (see the module doc). A child is read and dry-run as its custom resource's
    ServiceAccount, as the sync writes it (`impersonation`, and the rendered custom
    resources' directives; orksync.apply.impersonation): the diff shows nothing that
    identity may not read, and a write it may not make is an error here too."""
    settings = (impersonation or Impersonation()).with_entries(
        h.entry for h in ((prune.hooks or {}) if prune is not None else {}).values())
    identities = Identities(kube, settings, rendered.objects,
                            recorded=prune.stored if prune is not None else ())
    # Every value a rendered Secret carries is scrubbed from ALL output: the same value
    # often sits in the custom resource's spec or in an env var of a workload.
    values = [v for o in rendered.objects if o.ref.kind == "Secret"
              and o.ref.api_version == "v1" for v in secret_values(o.body)]
    result = DiffResult(errors=[scrub(str(e), values) for e in rendered.errors])
    owners: dict[ObjRef, dict[str, Any] | None] = {}
    coming = crd_kinds(rendered.objects)
    for obj in rendered.objects:
        try:
            one = _diff_one(kube, identities.kube_for(obj.owner), obj, owners, values,
                            coming, result.created)
        except ClusterError as err:
            result.errors.append(f"{obj.ref}: {err!s}")
            result.failed.append(obj.ref)
            continue
        if one:
            result.diffs.append((obj.ref, one))
        else:
            result.created.discard(obj.ref)
    if prune is not None:
        _diff_deletions(kube, identities, rendered, prune, result, values)
    # scrubbed at the end: the live Secrets' (old) values are known only now
    result.diffs = [(ref, scrub(text, values)) for ref, text in result.diffs]
    result.errors = [scrub(text, values) for text in result.errors]
    result.refused = [scrub(text, values) for text in result.refused]
    return result


def _diff_deletions(agent: Kube, identities: Identities, rendered: RenderedSet,
                    prune: PruneInputs, result: DiffResult, values: list[str]) -> None:
    """What the sync's prune, teardown and absent cleanup would delete, into `result`."""
    failed = ChangeSet(changes=[Change(ref=ref, action=Action.FAILED) for ref in result.failed])
    plan = plan_prune(prune.stored, rendered, failed, allow_empty=prune.allow_empty,
                      allow_orphaning_children=prune.allow_orphaning_children,
                      prune_crds=prune.prune_crds)
    result.refused.extend(plan.refused)

    def delete(ref: ObjRef, owner: ObjRef | None, why: str, *, check: bool = True) -> None:
        try:
            kube = identities.kube_for(owner) if owner is not None else agent
            res = kube.resource(ref.api_version, ref.kind)
            live = kube.get_or_none(res, ref.namespace if res.namespaced else "", ref.name)
        except ClusterError as err:
            if err.status == 404:  # its kind is not served: nothing to delete
                return
            result.errors.append(f"{ref}: {err!s}")
            return
        if live is None:
            return
        problem = ownership_problem(live, owner, prune.inventory) if check else None
        if problem:
            result.refused.append(f"{ref}: {problem}")
            return
        if ref.kind == "Secret" and ref.api_version == "v1":
            values.extend(secret_values(live))
        result.diffs.append((ref, _deletion_diff(ref, live, why)))
        result.deleted.add(ref)

    for entry in plan.delete:
        if entry.is_custom_resource:
            hooks = find_hooks(prune.hooks, entry.ref) if prune.hooks else None
            on_delete = hooks is not None and bool(hooks.entry.operator_box.get("onDelete"))
            delete(entry.ref, None, "deleted: the custom resource left the repository"
                   + ("; its onDelete runs first" if on_delete else ""))
            for child in plan.owned.get(entry.ref, []):
                delete(child.ref, entry.ref, _teardown_reason(entry.ref, child),
                       check=not _collected(entry.ref, child))
        elif entry.is_crd:
            delete(entry.ref, None, "deleted: the CRD left the repository (--prune-crds)")
        elif entry.plain:
            delete(entry.ref, None, "deleted: the manifest left the repository (pruned)")
        else:
            delete(entry.ref, entry.owner, "deleted: no longer rendered (pruned)")
    if plan.halted:
        return
    claimed = {o.ref for o in rendered.objects} | prune.stored.refs()
    seen: set[ObjRef] = set()
    for ref, owner in rendered.absent:
        if ref not in claimed and ref not in seen:
            seen.add(ref)
            delete(ref, owner, "deleted: its entry's condition turned false")


def _collected(owner: ObjRef, child: InventoryEntry) -> bool:
    """The garbage collector deletes this child with its owner (an owner reference covers
    it); the teardown deletes the others, after the ownership check."""
    return owner_reference_allowed(owner, child.ref, bool(child.ref.namespace))


def _teardown_reason(owner: ObjRef, child: InventoryEntry) -> str:
    how = "the garbage collector" if _collected(owner, child) else "its teardown"
    return f"deleted: {how} deletes it with {owner}"


def _deletion_diff(ref: ObjRef, live: dict[str, Any], why: str) -> str:
    before = normalise(live)
    if ref.kind == "Secret" and ref.api_version == "v1":
        before = mask_secret(before)
    lines = list(difflib.unified_diff(dump_yaml(before).splitlines(keepends=True), [],
                                      fromfile=f"a/{ref}", tofile="/dev/null"))
    text = "".join(lines[:2]) + f"# {why}\n" + "".join(lines[2:])
    return text if text.endswith("\n") else text + "\n"


def _diff_one(agent: Kube, kube: Kube, obj: RenderedObject,
              owners: dict[ObjRef, dict[str, Any] | None], values: list[str],
              coming: set[tuple[str, str]], created: set[ObjRef]) -> str:
    """`kube`: the connection `obj` is read and dry-run through (its owner's identity);
    `agent`: the agent's own, for its owner; `coming`: the kinds the rendered CRDs serve;
    `created`: `obj` is added when the cluster does not hold it."""
    notes: list[str] = []
    body = copy.deepcopy(dict(obj.body))
    try:
        res = kube.resource(obj.ref.api_version, obj.ref.kind)
    except ClusterError as err:
        if err.status != 404:
            raise
        if (obj.ref.api_version, obj.ref.kind) not in coming:
            raise ClusterError(
                f"kind {obj.ref.kind} in {obj.ref.api_version} is not served by the cluster "
                "and no CRD of the repository defines it (from "
                f"{obj.origin.file})", status=404, reason="NotFound") from err
        notes.append("kind not served yet (its CRD comes with this sync): not dry-run")
        created.add(obj.ref)
        return _render_diff(obj, None, body, notes)
    meta = body.setdefault("metadata", {})
    if not res.namespaced:
        meta.pop("namespace", None)
    live = kube.get_or_none(res, obj.ref.namespace if res.namespaced else "", obj.ref.name)
    if obj.owner is None:
        owners[obj.ref] = live
    if live is None:
        created.add(obj.ref)
    work = ""
    if obj.ref.kind == "Secret" and obj.ref.api_version == "v1":
        values.extend(secret_values(live))
        if live is not None:
            work = "".join(f"{obj.ref}: {line}\n"
                           for line in _secret_work(kube, res, obj, body, live))
    if live is not None and obj.policy in (WritePolicy.CREATE, WritePolicy.CREATE_ONLY):
        return work  # a sync leaves an existing create-if-absent object alone otherwise
    if obj.owner is not None:
        if obj.owner not in owners:
            try:
                owner_res = agent.resource(obj.owner.api_version, obj.owner.kind)
                owners[obj.owner] = agent.get_or_none(owner_res, obj.owner.namespace,
                                                      obj.owner.name)
            except ClusterError as err:
                if err.status != 404:
                    raise
                owners[obj.owner] = None  # its kind is not served yet
        owner = owners[obj.owner]
        uid = ((owner or {}).get("metadata") or {}).get("uid")
        if not uid:
            notes.append(f"owner {obj.owner} does not exist yet: dry-run without owner "
                         "references")
        elif owner_reference_allowed(obj.owner, obj.ref, res.namespaced):
            meta["ownerReferences"] = [{
                "apiVersion": obj.owner.api_version, "kind": obj.owner.kind,
                "name": obj.owner.name, "uid": uid, "controller": True,
                "blockOwnerDeletion": True}]
    _carry_rollout_annotation(body, live)
    try:
        _, after = kube.apply(res, body, field_manager=FIELD_MANAGER, force=True,
                              dry_run=True, subject=str(obj.ref))
    except ClusterError as err:
        if err.status == 404 and live is None:
            notes.append("its namespace does not exist yet: not dry-run")
            after = body
        else:
            raise
    return work + _render_diff(obj, live, after, notes)


def _secret_work(kube: Kube, res: Resource, obj: RenderedObject, body: dict[str, Any],
                 live: dict[str, Any]) -> tuple[str, ...]:
    """What a sync's plan would do to this existing Secret (see the module docstring)."""
    from orksync.apply.secrets import Generating
    from orksync.secrets.ca import ca_secret_name
    from orksync.secrets.plan import plan_secret
    from orksync.secrets.random import CryptoRandom

    source = None
    copy_from = obj.directives.get("fromSecret")
    if copy_from:
        source = kube.get_or_none(res, str(copy_from.get("namespace") or obj.ref.namespace),
                                  str(copy_from.get("name")))
    ca_live = None
    if obj.directives.get("tls"):
        ca_live = kube.get_or_none(res, obj.ref.namespace, ca_secret_name(obj.ref.name))
    # the values this plan generates stay in memory: only key names and reasons leave it
    now = datetime.now(UTC)
    plan = plan_secret(body, obj.directives, live, policy=obj.policy, now=now,
                       random=Generating(CryptoRandom(), now), source=source, ca_live=ca_live)
    if plan.failed:
        return (f"a sync would fail: {plan.reason.removeprefix('error: ')}",)
    return plan.work


def _carry_rollout_annotation(body: dict[str, Any], live: dict[str, Any] | None) -> None:
    live_template = pod_template(copy.deepcopy(live)) if live else None
    template = pod_template(body)
    if live_template is None or template is None:
        return
    value = ((live_template.get("metadata") or {}).get("annotations") or {}).get(
        ROLLOUT_ANNOTATION)
    if value:
        template.setdefault("metadata", {}).setdefault("annotations", {})[
            ROLLOUT_ANNOTATION] = value


def _render_diff(obj: RenderedObject, live: dict[str, Any] | None, after: dict[str, Any],
                 notes: list[str]) -> str:
    before_n, after_n = normalise(live), normalise(after)
    if obj.ref.kind == "Secret" and obj.ref.api_version == "v1":
        changed = _secret_changes(dict(obj.body), before_n, after_n)
        before_n = mask_secret(before_n) if before_n else {}
        after_n = mask_secret(after_n)
        notes.extend(f"data.{key} changed" for key in changed)
    before_text = dump_yaml(before_n) if before_n else ""
    after_text = dump_yaml(after_n)
    lines = list(difflib.unified_diff(before_text.splitlines(keepends=True),
                                      after_text.splitlines(keepends=True),
                                      fromfile=f"a/{obj.ref}", tofile=f"b/{obj.ref}"))
    if not lines and not (notes and live is not None and any(
            n.endswith(" changed") for n in notes)):
        return ""
    if not lines:  # only masked values changed: still a difference
        lines = [f"--- a/{obj.ref}\n", f"+++ b/{obj.ref}\n"]
    header = "".join(f"# {n}\n" for n in notes)
    if live is None:
        header = "# new object\n" + header
    text = "".join(lines[:2]) + header + "".join(lines[2:])
    return text if text.endswith("\n") else text + "\n"


def _decoded(values: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in (values or {}).items():
        try:
            out[key] = base64.b64decode(str(value)).decode("utf-8", "replace")
        except ValueError:
            out[key] = str(value)
    return out


def _secret_changes(rendered: dict[str, Any], before: dict[str, Any],
                    after: dict[str, Any]) -> list[str]:
    """Keys whose value differs between live and dry-run (compared raw, never printed);
    keys the generator owns (placeholder in the render) are taken from live."""
    generated = {k for k, v in {**_decoded(rendered.get("data")),
                                **{k: str(v) for k, v in
                                   (rendered.get("stringData") or {}).items()}}.items()
                 if PLACEHOLDER_PREFIX in v}
    live_data = dict(before.get("data") or {})
    new_data = after.setdefault("data", {}) if after.get("data") is not None or generated \
        else {}
    for key in generated:
        if key in live_data:
            new_data[key] = live_data[key]
    after.pop("stringData", None)
    if not before:
        return []
    keys = sorted(set(live_data) | set(new_data))
    return [k for k in keys if live_data.get(k) != new_data.get(k)]
