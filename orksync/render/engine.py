"""Render a loaded Catalog into a RenderedSet: every CRD, every custom resource and the
children its Katalog declares under onCreate / onReconcile.

Pure and deterministic: no randomness (random functions render placeholders that the
secrets layer resolves against the live cluster), the clock only through the injected
`clock` (time-window conditions), the cluster only through the optional injected `live`
view (`.children`, the custom resources' own `.status`, `.cross.<as>.status`; see
orksync.render.resource): the same repository and the same cluster state give the same
render. One broken custom resource becomes one error in the set; the others still render.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from orksync.errors import InputError, RenderError
from orksync.gcpause import gc_paused
from orksync.katalog.model import Catalog, CrdManifest, CustomResource
from orksync.model import ObjRef, Origin, RenderedObject, RenderedSet, WritePolicy
from orksync.render.children import LiveView
from orksync.render.guard import ClusterScope, NamespaceGuard
from orksync.render.resource import BLOCKS, STAGE_CR, STAGE_CRD, CrRenderer
from orksync.render.templates import Clock, Templates, templates_for, utc_now
from orksync.render.validate import katalog_problems

__all__ = ["CrResult", "Templates", "render_catalog", "render_custom_resource",
           "templates_for"]

log = logging.getLogger(__name__)


@gc_paused
def render_catalog(catalog: Catalog, *, clock: Clock = utc_now,
                   strict_cluster_scope: bool = False,
                   live: LiveView | None = None) -> RenderedSet:
    """`strict_cluster_scope`: a CRD entry without `allowedClusterScopedKinds` may create
    no cluster-scoped object (docs/multi-tenancy.md); `live`: the cluster, for `.children`,
    `.status` and `.cross.<as>.status` (None: offline)."""
    objects: list[RenderedObject] = [_crd_object(m) for m in catalog.crds]
    errors: list[Exception] = list(catalog.errors)
    warnings: list[str] = list(catalog.warnings)
    templates = {k.name: templates_for(k, clock) for k in catalog.katalogs}
    broken: dict[tuple[str, str], int] = {}
    for katalog in catalog.katalogs:
        for key, problems in katalog_problems(katalog, templates[katalog.name].engine).items():
            errors.extend(problems)
            broken[(katalog.name, key)] = len(problems)
    claimed: dict[ObjRef, ObjRef] = {}  # child -> the custom resource that rendered it
    reported: dict[tuple[object, ...], ObjRef] = {}  # a Katalog error -> the first CR it hit
    skipped: list[tuple[ObjRef, str]] = []
    absent: list[tuple[ObjRef, ObjRef]] = []
    retained: list[tuple[ObjRef, ObjRef]] = []
    scope = ClusterScope.of(catalog.crds, strict=strict_cluster_scope)
    declared: list[tuple[ObjRef, ObjRef, str]] = []
    for cr in catalog.crs:
        guard = NamespaceGuard.for_entry(cr.entry)
        refusal = guard.refusal(cr.ref.namespace) if cr.ref.namespace else None
        if refusal:
            skipped.append((cr.ref, refusal))
            continue
        count = broken.get((cr.entry.katalog, cr.entry.key))
        if count:
            errors.append(RenderError(
                f"not rendered: Katalog {cr.entry.katalog} entry {cr.entry.key} has "
                f"{count} error(s), reported above", file=cr.source.file, obj=str(cr.ref)))
            continue
        try:
            result = render_custom_resource(cr, templates[cr.entry.katalog], catalog.crs,
                                            scope=scope, live=live)
        except InputError as err:
            errors.append(_once(err, cr, reported))
            continue
        conflict = next((o for o in result.children if o.ref in claimed), None)
        if conflict is not None:
            errors.append(RenderError(
                f"renders {conflict.ref}, which {claimed[conflict.ref]} renders too; "
                "an object has one owner", file=cr.source.file, obj=str(cr.ref)))
            continue
        for child in result.children:
            claimed[child.ref] = cr.ref
        objects.append(result.resource)
        objects.extend(result.children)
        warnings.extend(result.warnings)
        skipped.extend(result.skipped)
        absent.extend((ref, cr.ref) for ref in result.absent)
        retained.extend((ref, cr.ref) for ref in result.retained)
        declared.extend((ref, cr.ref, key) for key, ref in result.declared)
    objects.sort(key=lambda o: (o.stage, o.ref))
    return RenderedSet(objects=tuple(objects), errors=tuple(errors), warnings=tuple(warnings),
                       skipped=tuple(skipped), absent=tuple(absent),
                       retained=tuple(retained), declared=tuple(declared))


def _once(err: InputError, cr: CustomResource,
          reported: dict[tuple[object, ...], ObjRef]) -> InputError:
    """The error itself the first time; for the next custom resource that fails the same
    way at the same place of its Katalog, a short error saying so (one cause, one error)."""
    if err.file != cr.entry.source.file:
        return err  # located in the custom resource's own file: its own error
    key = (err.file, err.line, err.path, err.detail)
    first = reported.setdefault(key, cr.ref)
    if first == cr.ref:
        return err
    return RenderError(f"not rendered: {err.detail} (the same error as {first}, reported "
                       "above)", file=cr.source.file, obj=str(cr.ref), path=err.path)


def _crd_object(m: CrdManifest) -> RenderedObject:
    body = {k: v for k, v in m.body.items() if k != "status"}
    body["metadata"] = {k: v for k, v in (m.body.get("metadata") or {}).items()
                        if k in ("name", "labels", "annotations")}
    return RenderedObject(ref=ObjRef.of(body), body=body, policy=WritePolicy.APPLY,
                          origin=Origin(file=m.source.file), stage=STAGE_CRD)


@dataclass(slots=True)
class CrResult:
    resource: RenderedObject
    children: list[RenderedObject] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    skipped: list[tuple[ObjRef, str]] = field(default_factory=list)
    absent: list[ObjRef] = field(default_factory=list)  # condition false: clean up if owned
    retained: list[ObjRef] = field(default_factory=list)  # condition false, never cleaned up
    # (template key, object): its .children, in declaration order (live render only)
    declared: list[tuple[str, ObjRef]] = field(default_factory=list)


def render_custom_resource(cr: CustomResource, templates: Templates,
                           others: Sequence[CustomResource] = (), *,
                           scope: ClusterScope | None = None,
                           live: LiveView | None = None) -> CrResult:
    """`others`: the repository's custom resources, for `cross` reads; `scope`: what is
    known about the scope of kinds, and the strict switch (default: built-ins only);
    `live`: the cluster, for `.children`, `.status` and `.cross.<as>.status` (None:
    offline)."""
    origin = Origin(file=cr.source.file, katalog=cr.entry.katalog, crd=cr.entry.key,
                    cr=str(cr.ref))
    result = CrResult(resource=RenderedObject(ref=cr.ref, body=cr.body,
                                              policy=WritePolicy.APPLY, origin=origin,
                                              stage=STAGE_CR))
    renderer = CrRenderer(cr, templates, origin, others, scope, live)
    by_ref: dict[ObjRef, RenderedObject] = {}
    for block_name in BLOCKS:
        for obj in renderer.block(block_name):
            prior = by_ref.get(obj.ref)
            if prior is not None:
                result.warnings.append(f"{cr.source.file}: {cr.ref}: {obj.origin.entry} "
                                       f"renders {obj.ref} again after {prior.origin.entry}; "
                                       "the later entry is used")
            by_ref[obj.ref] = obj
    result.children = list(by_ref.values())
    result.warnings.extend(renderer.warnings)
    result.skipped.extend(renderer.skipped)
    result.absent = sorted({ref for ref in renderer.absent if ref not in by_ref})
    result.retained = sorted({ref for ref in renderer.retained if ref not in by_ref})
    result.declared = list(dict.fromkeys(renderer.declared))
    return result
