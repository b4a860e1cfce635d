"""Reading and writing a custom resource's `/status`: `write_status` server-side applies what
orksync.status.desired computed, under its own field manager and only when it differs;
`read_children` builds the `.children` map from the live objects; `status_cross` gives
status fields their `.cross`. I/O (docs/operations.md#custom-resource-status)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from orksync.cluster.kube import Kube
from orksync.cluster.live import LiveReader
from orksync.errors import ClusterError
from orksync.katalog.model import Catalog, CustomResource
from orksync.model import MANAGED_SELECTOR, ObjRef, RenderedObject
from orksync.render.children import children_map, kind_key_of
from orksync.render.cross import cross_data
from orksync.render.gotemplate import GoTemplateError
from orksync.status.desired import status_data, status_equal

__all__ = ["FIELD_MANAGER", "OWNER_LABEL", "created_custom_resources", "read_children",
           "status_cross", "write_status"]

log = logging.getLogger(__name__)


FIELD_MANAGER = "orksync-status"
OWNER_LABEL = "orkestra-owner"


def write_status(kube: Kube, cr_ref: ObjRef, status: Mapping[str, Any], *,
                 field_manager: str = FIELD_MANAGER,
                 live: Mapping[str, Any] | None = None) -> bool:
    """Server-side apply `status` to the custom resource's `/status`. Returns True when a
    write was sent and accepted. `live` is the custom resource as last read (the caller
    has it from desired_status); without it one GET is made. No request at all when the
    live status already equals the desired one."""
    res = kube.resource(cr_ref.api_version, cr_ref.kind)
    if "status" not in res.subresources:  # discovery says: no request could succeed
        log.debug("%s: its CRD has no status subresource; status not written", cr_ref)
        return False
    if live is None:
        live = kube.get_or_none(res, cr_ref.namespace, cr_ref.name)
        if live is None:
            log.debug("%s: not found; status not written", cr_ref)
            return False
    if status_equal(live.get("status"), status):
        return False
    meta: dict[str, Any] = {"name": cr_ref.name}
    if cr_ref.namespace and res.namespaced:
        meta["namespace"] = cr_ref.namespace
    body = {"apiVersion": cr_ref.api_version, "kind": cr_ref.kind, "metadata": meta,
            "status": dict(status)}
    try:
        kube.apply(res, body, field_manager=field_manager, force=True, subject=str(cr_ref),
                   subresource="status", metadata_only=True)
    except ClusterError as err:
        if err.status == 404:
            log.debug("%s: no status subresource (or the object is gone); status not "
                      "written: %s", cr_ref, err)
            return False
        raise
    return True


def created_custom_resources(catalog: Catalog, crs: Sequence[CustomResource],
                             objects: Sequence[RenderedObject]) -> list[CustomResource]:
    """The custom resources that the `custom:` blocks of `crs` created and the render
    rendered through their own Katalog entry (orksync.render.engine.render_nested: a
    child of `crs`, or of such a custom resource, of a kind an entry of the same Katalog
    reconciles), each as a custom resource of that entry with the rendered body and the
    repository file of the custom resource at the top of its chain; deepest first, so
    that the status of each is written before that of the custom resource above it."""
    entries = {k.name: {(e.api_version, e.kind): e for e in k.crds} for k in catalog.katalogs}
    by_owner: dict[ObjRef, list[RenderedObject]] = {}
    for obj in objects:
        if obj.owner is not None:
            by_owner.setdefault(obj.owner, []).append(obj)
    found: list[tuple[int, CustomResource]] = []
    pending = [(cr, 0) for cr in crs]
    seen = {cr.ref for cr in crs}
    while pending:
        cr, depth = pending.pop()
        nested = entries.get(cr.entry.katalog, {})
        for child in by_owner.get(cr.ref, ()):
            entry = nested.get((child.ref.api_version, child.ref.kind))
            if entry is None or child.ref in seen:
                continue
            seen.add(child.ref)
            inner = CustomResource(ref=child.ref, body=dict(child.body), source=cr.source,
                                   entry=entry)
            found.append((depth + 1, inner))
            pending.append((inner, depth + 1))
    found.sort(key=lambda f: -f[0])
    return [cr for _, cr in found]


def status_cross(cr: CustomResource, cr_live: Mapping[str, Any], templates: Any,
                 others: Sequence[CustomResource], index: LiveReader) -> dict[str, Any]:
    """`.cross` for status fields: as in templates (orksync.render.cross), the other
    custom resource from the repository with its live status from `index`; a malformed
    `cross` block gives an empty map (the render reported it)."""
    data = status_data(cr_live, cr.entry, None)
    try:
        found, problems = cross_data(cr, cr.entry.operator_box.get("cross"), others,
                                     templates.text, data, index)
    except GoTemplateError as err:
        log.debug("%s: cross for status: %s", cr.ref, err)
        return {}
    return {} if problems else found


def read_children(kube: Kube, cr_ref: ObjRef,
                  rendered_children: Sequence[RenderedObject],
                  index: LiveReader | None = None, *,
                  declared: Sequence[tuple[str, ObjRef]] = ()) -> dict[str, Any]:
    """`.children` for status fields (orksync.render.children): the objects the custom
    resource declares (`declared`: (template key, object) from a live render, whatever
    their conditions, as the render saw them), then the rendered children not among them,
    found live, under
    Orkestra's keys (`deployment` / `deployments`, `pvc` / `persistentvolumeclaims`,
    `custom` / `customs`, ...); kinds with none found get the placeholder. With an
    `index`, children come from its per-kind lists of orksync-managed objects (no request
    per custom resource)."""
    known = {ref for _, ref in declared}
    keyed = [*declared, *((kind_key_of(o.ref), o.ref) for o in rendered_children
                          if o.ref not in known)]
    return _read_children(kube, cr_ref, keyed, index)


def _read_children(kube: Kube, cr_ref: ObjRef, declared: list[tuple[str, ObjRef]],
                   index: LiveReader | None) -> dict[str, Any]:
    wanted = [ref for _, ref in declared]
    found: dict[ObjRef, dict[str, Any]] = {}
    if index is not None:
        for ref in wanted:
            item = index.get(ref, MANAGED_SELECTOR)
            if item is not None:
                found[ref] = item
        return children_map(declared, found)
    groups = sorted({(r.api_version, r.kind, r.namespace) for r in wanted})
    selector = f"{OWNER_LABEL}={cr_ref.name}"
    refs = set(wanted)
    served: set[tuple[str, str]] = set()
    for api_version, kind, namespace in groups:
        try:
            res = kube.resource(api_version, kind)
            served.add((api_version, kind))
            for item in kube.list(res, namespace=namespace if res.namespaced else "",
                                  label_selector=selector):
                ref = ObjRef.of(item)
                if ref in refs:
                    found[ref] = item
        except ClusterError as err:
            log.debug("%s: cannot list %s %s for .children: %s", cr_ref, api_version, kind,
                      err)
    for ref in wanted:
        if ref in found or (ref.api_version, ref.kind) not in served:
            continue
        try:
            item = kube.get_or_none(kube.resource(ref.api_version, ref.kind), ref.namespace,
                                    ref.name)
        except ClusterError as err:
            log.debug("%s: cannot read %s for .children: %s", cr_ref, ref, err)
            continue
        if item is not None:
            found[ref] = item
    return children_map(declared, found)
