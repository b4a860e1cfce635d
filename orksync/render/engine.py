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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeAlias

from orksync.errors import ClusterError, InputError, RenderError
from orksync.katalog.model import (
    DELETION_PROTECTION_LABEL,
    Catalog,
    CrdEntry,
    CrdManifest,
    CustomResource,
    PlainManifest,
)
from orksync.katalog.tenancy import service_account_of
from orksync.katalog.validate import cross_warnings
from orksync.model import (
    SERVICE_ACCOUNT_DIRECTIVE,
    STAGE_PLAIN,
    STAGE_PLAIN_NAMESPACES,
    STAGE_PLAIN_SETUP,
    ObjRef,
    Origin,
    RenderedObject,
    RenderedSet,
    WritePolicy,
    copy_tree,
)
from orksync.names import label_value_problem
from orksync.render.children import LiveView
from orksync.render.cleanup import cleanup_block, cleanup_due, fingerprint
from orksync.render.conditions import evaluate_conditions
from orksync.render.entry import STAGE_CR, STAGE_CRD
from orksync.render.external import Egress
from orksync.render.fieldcheck import field_problems
from orksync.render.gotemplate import GoTemplateError
from orksync.render.guard import ClusterScope, NamespaceGuard
from orksync.render.kinds import KINDS, ORDER
from orksync.render.placeholders import placeholder_outside_secret
from orksync.render.resource import BLOCKS, CrRenderer, cr_data
from orksync.render.templates import Clock, Templates, templates_for, utc_now
from orksync.render.user_profiles import shadow_warnings
from orksync.render.validate import katalog_problems, portability_warnings
from orksync.runtime.gcpause import gc_paused
from orksync.yamls.io import locate, split_path

__all__ = ["CrResult", "CrSummary", "Extras", "Merger", "Outcome", "RefKey", "RenderPlan",
           "Templates", "crd_object", "dependency_refusal", "plain_object", "ref_key",
           "render_catalog", "render_custom_resource", "templates_for"]

log = logging.getLogger(__name__)


@gc_paused
def render_catalog(catalog: Catalog, *, clock: Clock = utc_now,
                   strict_cluster_scope: bool = False, strict_fields: bool = False,
                   live: LiveView | None = None, egress: Egress | None = None,
                   progress: Callable[[int], None] | None = None,
                   select: Callable[[CustomResource], bool] | None = None) -> RenderedSet:
    """`strict_cluster_scope`: a CRD entry without `allowedClusterScopedKinds` may create
    no cluster-scoped object (docs/multi-tenancy.md); `live`: the cluster, for `.children`,
    `.status` and `.cross.<as>.status` (None: offline); `egress`: makes the `external:`
    calls (orksync.render.external; None: none is made); `progress`: called with 1 after
    each custom resource (orksync.runtime.progress); `select`: the custom resources to render (the
    others are only read, by `.cross`; a shard's); `strict_fields`: a template path the
    CRD's schema does not have is an error of its entry, not a warning
    (orksync.render.fieldcheck)."""
    plan = RenderPlan(catalog, clock=clock, strict_cluster_scope=strict_cluster_scope,
                      strict_fields=strict_fields)
    merged = plan.merger()
    objects: list[RenderedObject] = [crd_object(m) for m in catalog.crds]
    objects.extend(plain_object(m) for m in catalog.plain)
    for cr in catalog.crs:
        if select is not None and not select(cr):
            continue
        result = plan.outcome(cr, live, egress)
        if merged.accept(cr, result):
            assert isinstance(result, CrResult)
            objects.append(result.resource)
            objects.extend(result.children)
        if progress is not None:
            progress(1)
    objects.sort(key=lambda o: (o.stage, o.ref))
    return merged.rendered_set(tuple(objects))


# What rendering one custom resource came to: its objects, the guard's refusal of its
# namespace (("refused", reason)), its Katalog entry's errors (("broken", count)),
# runtime.cleanup's verdict that it is to be deleted (("cleanup", reason)), or the error
# that stopped it.
Outcome: TypeAlias = "CrResult | tuple[str, str] | tuple[str, int] | InputError"


class RenderPlan:
    """What the render of a repository needs before its first custom resource: the
    compiled templates of every Katalog, the Katalog entries that are broken, what is
    known about the scope of kinds. `outcome` renders one custom resource on its own
    (the part that may run in parallel); a `Merger` takes the outcomes in the
    repository's order and decides what the render keeps (the part that may not)."""

    def __init__(self, catalog: Catalog, *, clock: Clock = utc_now,
                 strict_cluster_scope: bool = False, strict_fields: bool = False) -> None:
        self.catalog = catalog
        self.errors: list[Exception] = list(catalog.errors)
        self.templates = {k.name: templates_for(k, clock) for k in catalog.katalogs}
        # a Katalog entry's problems, by (Katalog, entry key)
        self.broken: dict[tuple[str, str], tuple[InputError, ...]] = {}
        for katalog in catalog.katalogs:
            engine = self.templates[katalog.name].engine
            for key, problems in katalog_problems(katalog, engine).items():
                self.errors.extend(problems)
                self.broken[(katalog.name, key)] = tuple(problems)
        self.scope = ClusterScope.of(catalog.crds, strict=strict_cluster_scope)
        # the custom resources of each entry some entry's dependsOn names, by (Katalog,
        # entry key)
        named = {(e.katalog, name) for e in catalog.entries() for name, _ in e.depends_on}
        self.dependencies: dict[tuple[str, str], list[CustomResource]] = {
            key: [] for key in named}
        for cr in catalog.crs:
            found = self.dependencies.get((cr.entry.katalog, cr.entry.key))
            if found is not None:
                found.append(cr)
        # the catalog's warnings, one per template calling an orksync-only note, one per
        # profile of a Katalog that shadows a built-in one, and the cross reads' warnings
        self.warnings: list[str] = list(catalog.warnings) + [
            warning for katalog in catalog.katalogs
            for warning in [*portability_warnings(katalog, self.templates[katalog.name].engine),
                            *shadow_warnings(katalog)]]
        self.warnings.extend(w for katalog in catalog.katalogs for w in cross_warnings(katalog))
        # each Katalog's entries by the (apiVersion, kind) they reconcile: a custom
        # resource a `custom:` block creates of one of them is rendered through it
        self.nested: dict[str, dict[tuple[str, str], CrdEntry]] = {
            katalog.name: {(e.api_version, e.kind): e for e in katalog.crds}
            for katalog in catalog.katalogs}
        self._check_fields(strict_fields)

    def _check_fields(self, strict: bool) -> None:
        """The paths templates read that their CRD's schema does not have: warnings, or
        with `strict` errors of the entry (its custom resources are then not rendered,
        and the render prunes nothing)."""
        for katalog in self.catalog.katalogs:
            engine = self.templates[katalog.name].engine
            for key, problems in field_problems(katalog, self.catalog.crds, engine).items():
                if not strict:
                    self.warnings.extend(f"{p}" for p in problems)
                    continue
                self.errors.extend(problems)
                self.broken[(katalog.name, key)] = \
                    self.broken.get((katalog.name, key), ()) + tuple(problems)

    def outcome(self, cr: CustomResource, live: LiveView | None = None,
                egress: Egress | None = None) -> Outcome:
        guard = NamespaceGuard.for_entry(cr.entry)
        refusal = guard.refusal(cr.ref.namespace) if cr.ref.namespace else None
        if refusal:
            return ("refused", refusal)
        problems = self.broken.get((cr.entry.katalog, cr.entry.key))
        if problems:
            return ("broken", len(problems))
        try:
            closed = gate_refusal(cr, self.templates[cr.entry.katalog], live)
        except (InputError, GoTemplateError, ValueError, TypeError) as err:
            return RenderError(f"preReconcile gate: {err}", file=cr.source.file,
                               obj=str(cr.ref), path=f"{cr.entry.path}.operatorBox."
                               "preReconcile")
        except ClusterError as err:
            return RenderError(f"cannot read the live cluster: {err}", file=cr.source.file,
                               obj=str(cr.ref))
        if closed:
            return ("refused", closed)
        block = cleanup_block(cr.entry) if live is not None else None
        if block is not None:  # runtime.cleanup: decided on the live custom resource only
            templates = self.templates[cr.entry.katalog]
            try:
                data = cr_data(cr)
                data["status"] = copy_tree((live.get(cr.ref) or {}).get("status") or {}) \
                    if live is not None else {}
                due = cleanup_due(block, data, templates, templates.clock())
            except (InputError, GoTemplateError, ValueError, TypeError) as err:
                return RenderError(f"runtime.cleanup: {err}", file=cr.source.file,
                                   obj=str(cr.ref), path=f"{cr.entry.path}.operatorBox."
                                   "runtime.cleanup")
            except ClusterError as err:
                return RenderError(f"cannot read the live cluster: {err}",
                                   file=cr.source.file, obj=str(cr.ref))
            if due:
                return ("cleanup", due)
        if cr.entry.depends_on and live is not None:
            try:
                waiting = dependency_refusal(cr, self.dependencies, live)
            except ClusterError as err:
                return RenderError(f"cannot read the live cluster: {err}",
                                   file=cr.source.file, obj=str(cr.ref))
            if waiting:
                return ("refused", waiting)
        try:
            result = render_custom_resource(cr, self.templates[cr.entry.katalog],
                                            self.catalog.crs, scope=self.scope, live=live,
                                            egress=egress,
                                            nested=self.nested.get(cr.entry.katalog, {}))
        except InputError as err:
            return err
        misplaced = placeholder_outside_secret(result.children, cr=str(cr.ref),
                                               entry=cr.entry)
        return misplaced if misplaced is not None else result

    def merger(self) -> Merger:
        # custom resources Orkestra would not reconcile: neither rendered nor pruned;
        # the plain manifests claim their objects before any custom resource renders
        return Merger(errors=list(self.errors), warnings=list(self.warnings),
                      broken=self.broken, skipped=list(self.catalog.left_out),
                      claimed={ref_key(m.ref): m.source.file for m in self.catalog.plain})


@dataclass(slots=True)
class Merger:
    """The outcomes of the custom resources, taken in the repository's order: the first
    custom resource to render an object owns it, a later one that renders it too is an
    error, and an error of a Katalog that several custom resources hit is reported in
    full once."""

    errors: list[Exception]
    warnings: list[str]
    # a broken Katalog entry's problems, by (Katalog, entry key): the causes of the error
    # of each custom resource it leaves out
    broken: Mapping[tuple[str, str], tuple[InputError, ...]] = field(default_factory=dict)
    skipped: list[tuple[ObjRef, str]] = field(default_factory=list)
    absent: list[tuple[ObjRef, ObjRef]] = field(default_factory=list)
    retained: list[tuple[ObjRef, ObjRef]] = field(default_factory=list)
    declared: list[tuple[ObjRef, ObjRef, str]] = field(default_factory=list)
    # custom resources runtime.cleanup deletes: (identity, fingerprint of the Git body)
    cleaned: list[tuple[ObjRef, str]] = field(default_factory=list)
    # child -> its CR; a plain manifest's object -> its file
    claimed: dict[RefKey, ObjRef | str] = field(default_factory=dict)
    # a Katalog error -> the first custom resource it hit
    reported: dict[tuple[object, ...], ObjRef] = field(default_factory=dict)

    def accept(self, cr: CustomResource, outcome: Outcome | CrSummary) -> bool:
        """Record one custom resource's outcome; True when its objects are kept."""
        if isinstance(outcome, InputError):
            self.errors.append(_once(outcome, cr, self.reported))
            return False
        if isinstance(outcome, tuple):
            what, detail = outcome
            if what == "refused":
                self.skipped.append((cr.ref, str(detail)))
            elif what == "cleanup":  # not applied: the sync's prune deletes it
                self.cleaned.append((cr.ref, fingerprint(cr.body)))
                self.warnings.append(f"{cr.source.file}: {cr.ref}: {detail}: deleted (its "
                                     "onDelete runs), and not applied again while Git holds "
                                     "it unchanged")
            else:
                self.errors.append(RenderError(
                    f"not rendered: Katalog {cr.entry.katalog} entry {cr.entry.key} has "
                    f"{detail} error(s), reported above", file=cr.source.file,
                    obj=str(cr.ref),
                    causes=self.broken.get((cr.entry.katalog, cr.entry.key), ())))
            return False
        keys = outcome.child_keys()
        if not self.claimed.keys().isdisjoint(keys):
            conflict = next(key for key in keys if key in self.claimed)
            api_version, kind, namespace, name = conflict
            ref = ObjRef(api_version=api_version, kind=kind, namespace=namespace, name=name)
            other = self.claimed[conflict]
            who = f"the manifest {other} declares" if isinstance(other, str) else \
                f"{other} renders too"
            self.errors.append(RenderError(
                f"renders {ref}, which {who}; an object has one owner",
                file=cr.source.file, obj=str(cr.ref)))
            return False
        self.claimed.update(dict.fromkeys(keys, cr.ref))
        extras = _extras(outcome)
        if extras is not None:  # seldom
            warnings, skipped, absent, retained, declared = extras
            self.warnings.extend(warnings)
            self.skipped.extend(skipped)
            self.absent.extend((ref, cr.ref) for ref in absent)
            self.retained.extend((ref, cr.ref) for ref in retained)
            self.declared.extend((ref, cr.ref, key) for key, ref in declared)
        return True

    def rendered_set(self, objects: tuple[RenderedObject, ...]) -> RenderedSet:
        return RenderedSet(objects=objects, errors=tuple(self.errors),
                           warnings=tuple(self.warnings), skipped=tuple(self.skipped),
                           absent=tuple(self.absent), retained=tuple(self.retained),
                           declared=tuple(self.declared), cleaned=tuple(self.cleaned))


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
                       "above)", file=cr.source.file, obj=str(cr.ref), path=err.path,
                       causes=(err,))


def crd_object(m: CrdManifest) -> RenderedObject:
    body = {k: v for k, v in m.body.items() if k != "status"}
    body["metadata"] = {k: v for k, v in (m.body.get("metadata") or {}).items()
                        if k in ("name", "labels", "annotations")}
    if m.deletion_protected:  # read back by the prune, which never deletes it
        labels = body["metadata"].get("labels")
        body["metadata"]["labels"] = {**(labels if isinstance(labels, Mapping) else {}),
                                      DELETION_PROTECTION_LABEL: "true"}
    return RenderedObject(ref=ObjRef.of(body), body=body, policy=WritePolicy.APPLY,
                          origin=Origin(file=m.source.file), stage=STAGE_CRD)


# The plain stage of the kinds a Katalog may also render: Namespaces first, then what
# comes before the custom kinds in Orkestra's group order (Secrets, ConfigMaps, quotas,
# RBAC, ServiceAccounts); every other kind after them.
_PLAIN_STAGES = {(k.api_version, k.kind): STAGE_PLAIN_NAMESPACES if k.key == "namespaces"
                 else STAGE_PLAIN_SETUP for k in KINDS if k.kind
                 and ORDER[k.key] < ORDER["custom"]}


def plain_object(m: PlainManifest) -> RenderedObject:
    """A plain manifest as it is applied: server-side apply every sync, in its kind's
    plain stage (orksync.model.PLAIN_STAGES)."""
    stage = _PLAIN_STAGES.get((m.ref.api_version, m.ref.kind), STAGE_PLAIN)
    return RenderedObject(ref=m.ref, body=m.body, policy=WritePolicy.APPLY,
                          origin=Origin(file=m.source.file), stage=stage)


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

    def child_keys(self) -> list[RefKey]:
        return [ref_key(child.ref) for child in self.children]

    def extras(self) -> Extras | None:
        """What a Merger takes of it besides its children, None when there is nothing
        (the common case, and the cheapest to send between processes)."""
        return _extras(self)


# (apiVersion, kind, namespace, name): an object's identity as plain text, which costs
# little to compare and to send between processes
RefKey: TypeAlias = tuple[str, str, str, str]
# CrResult's warnings, skipped, absent, retained and declared
Extras: TypeAlias = tuple[list[str], list[tuple[ObjRef, str]], list[ObjRef], list[ObjRef],
                          list[tuple[str, ObjRef]]]


def _extras(outcome: CrResult | CrSummary) -> Extras | None:
    """An outcome's warnings, skipped, absent, retained and declared; None when all are
    empty."""
    if outcome.warnings or outcome.skipped or outcome.absent or outcome.retained or \
            outcome.declared:
        return (outcome.warnings, outcome.skipped, outcome.absent, outcome.retained,
                outcome.declared)
    return None


def ref_key(ref: ObjRef) -> RefKey:
    return (ref.api_version, ref.kind, ref.namespace, ref.name)


@dataclass(slots=True)
class CrSummary:
    """A CrResult without its objects (they were written where it was rendered): what a
    Merger needs of it."""

    keys: list[RefKey]
    warnings: list[str] = field(default_factory=list)
    skipped: list[tuple[ObjRef, str]] = field(default_factory=list)
    absent: list[ObjRef] = field(default_factory=list)
    retained: list[ObjRef] = field(default_factory=list)
    declared: list[tuple[str, ObjRef]] = field(default_factory=list)

    def child_keys(self) -> list[RefKey]:
        return self.keys

    @classmethod
    def of(cls, keys: list[RefKey], extras: Extras | None) -> CrSummary:
        return cls(keys) if extras is None else cls(keys, *extras)


GATES = ("enqueueGate", "reconcileGate")


def gate_refusal(cr: CustomResource, templates: Templates,
                 live: LiveView | None = None) -> str:
    """Why the entry's preReconcile gates hold `cr` back ("" when they pass): each gate's
    `when` (all) and `or` (one of) conditions, evaluated on the custom resource (with its
    live status when the render is live), as Orkestra evaluates them before reconciling.
    A custom resource held back is neither rendered nor pruned. Sentinels and external
    calls are not evaluated (the Katalog's load warned or refused them)."""
    box = cr.entry.operator_box
    pre = box.get("preReconcile") if isinstance(box, Mapping) else None
    if not isinstance(pre, Mapping):
        return ""
    data: dict[str, object] | None = None
    for name in GATES:
        gate = pre.get(name)
        if not isinstance(gate, Mapping):
            continue
        when = gate.get("when")
        or_ = gate.get("or") if gate.get("or") is not None else gate.get("anyOf")
        if not when and not or_:
            continue
        if data is None:
            data = cr_data(cr)
            if live is not None:
                data["status"] = copy_tree((live.get(cr.ref) or {}).get("status") or {})
        if not evaluate_conditions(data, when, or_, templates.render, clock=templates.clock):
            return (f"left out: preReconcile.{name} does not pass (Orkestra does not "
                    "reconcile it)")
    return ""


def dependency_refusal(cr: CustomResource,
                       dependencies: Mapping[tuple[str, str], Sequence[CustomResource]],
                       live: LiveView) -> str:
    """Why the entry's dependsOn holds `cr` back ("" when it does not): a custom resource
    of an entry it names with `healthy` (or `ready`) whose live Ready condition is not
    True (absent, not applied yet, or not healthy: orksync.status.health). A custom
    resource held back is neither rendered nor pruned; a later sync renders it once the
    dependency is healthy. `started` waits for nothing: a sync applies the dependency's
    kind with this one's."""
    for name, state in cr.entry.depends_on:
        if state != "healthy":
            continue
        for other in dependencies.get((cr.entry.katalog, name), ()):
            found = live.get(other.ref)
            conditions = ((found or {}).get("status") or {}).get("conditions") or []
            ready = next((c for c in conditions if isinstance(c, Mapping)
                          and c.get("type") == "Ready"), None)
            if ready is None or ready.get("status") != "True":
                why = "not applied yet" if found is None else \
                    f"Ready is {(ready or {}).get('status') or 'not reported yet'}"
                return (f"waiting: dependsOn {name}: {other.ref} is not healthy yet "
                        f"({why}); rendered by a sync after it is")
    return ""


def entry_labels(cr: CustomResource, templates: Templates,
                 data: Mapping[str, object]) -> dict[str, str]:
    """The entry's `labels` for this custom resource: each value rendered against it (its
    data as the templates see it), as Orkestra resolves them before patching them onto the
    custom resource. A template error or a value that is no label value fails it."""
    labels = cr.entry.raw.get("labels")
    if not isinstance(labels, Mapping) or not labels:
        return {}
    out: dict[str, str] = {}
    for key, template in labels.items():
        path = f"{cr.entry.path}.labels.{key}"
        try:
            value = templates.text(str(template), data)
        except GoTemplateError as err:
            problem: str | None = f"template error: {err}"
        else:
            problem = label_value_problem(value)
        if problem:
            source = cr.entry.source
            raise RenderError(problem, file=source.file, obj=str(cr.ref), path=path,
                              line=locate(source.path, source.index, split_path(path)))
        out[str(key)] = value
    return out


# How deep custom resources created by `custom:` blocks are rendered through their own
# entries (the top custom resource is depth 0), and how far apart the stages of each level
# are, so that a level's children are applied after the custom resource that owns them.
MAX_NESTED_DEPTH = 4
NESTED_STAGE_STEP = 100


def render_custom_resource(cr: CustomResource, templates: Templates,
                           others: Sequence[CustomResource] = (), *,
                           scope: ClusterScope | None = None,
                           live: LiveView | None = None,
                           egress: Egress | None = None,
                           nested: Mapping[tuple[str, str], CrdEntry] | None = None,
                           chain: tuple[CustomResource, ...] = ()) -> CrResult:
    """`others`: the repository's custom resources, for `cross` reads; `scope`: what is
    known about the scope of kinds, and the strict switch (default: built-ins only);
    `live`: the cluster, for `.children`, `.status` and `.cross.<as>.status` (None:
    offline); `egress`: makes the `external:` calls (None: none is made); `nested`: the
    entries of the same Katalog by (apiVersion, kind): a child of one of these kinds (a
    `custom:` block creating a custom resource Orkestra's own controller for that kind
    would reconcile) is rendered through its entry in the same render, its children owned
    by it (`render_nested`); `chain`: the custom resources above `cr` in such a nesting."""
    origin = Origin(file=cr.source.file, katalog=cr.entry.katalog, crd=cr.entry.key,
                    cr=str(cr.ref))
    account = service_account_of(cr.entry.tenancy, cr.ref.namespace)
    renderer = CrRenderer(cr, templates, origin, others, scope, live, egress)
    body = cr.body
    labels = entry_labels(cr, templates, renderer.data)
    if labels:
        meta = body["metadata"]
        own = meta.get("labels")
        body = {**body, "metadata": {
            **meta, "labels": {**(own if isinstance(own, Mapping) else {}), **labels}}}
    result = CrResult(resource=RenderedObject(
        ref=cr.ref, body=body, policy=WritePolicy.APPLY, origin=origin, stage=STAGE_CR,
        directives={SERVICE_ACCOUNT_DIRECTIVE: account} if account else {}))
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
    if nested:
        render_nested(cr, result, templates, others, scope=scope, live=live, egress=egress,
                      nested=nested, chain=chain)
    return result


def render_nested(cr: CustomResource, result: CrResult, templates: Templates,
                  others: Sequence[CustomResource], *, scope: ClusterScope | None,
                  live: LiveView | None, egress: Egress | None,
                  nested: Mapping[tuple[str, str], CrdEntry],
                  chain: tuple[CustomResource, ...]) -> None:
    """Render every child of `result` that is a custom resource of an entry of the same
    Katalog through that entry, and add what it renders to `result`: its children are
    owned by it (in its tree, torn down with it by the garbage collector) and staged after
    it. A chain that comes back to a kind it passed through, or that nests deeper than
    MAX_NESTED_DEPTH, is an error naming the chain: Orkestra's controllers would create
    custom resources without end."""
    path = (*chain, cr)
    for child in list(result.children):
        entry = nested.get((child.ref.api_version, child.ref.kind))
        if entry is None or child.owner != cr.ref:
            continue
        names = " -> ".join(f"{c.ref.kind}/{c.ref.name}" for c in path) + \
            f" -> {child.ref.kind}/{child.ref.name}"
        where = f"{child.origin.entry} creates {child.ref}, a custom resource of Katalog entry " \
            f"{entry.key}, rendered through that entry ({names})"
        if any(c.entry.kind == entry.kind and c.entry.group == entry.group for c in path):
            raise RenderError(f"{where}: the chain comes back to kind {entry.kind}; custom "
                              "resources that create each other are refused",
                              file=path[0].source.file, obj=str(path[0].ref))
        if len(path) > MAX_NESTED_DEPTH:
            raise RenderError(f"{where}: custom resources nest more than "
                              f"{MAX_NESTED_DEPTH} deep", file=path[0].source.file,
                              obj=str(path[0].ref))
        inner = CustomResource(ref=child.ref, body=dict(child.body), source=cr.source,
                               entry=entry)
        try:
            below = render_custom_resource(inner, templates, others, scope=scope, live=live,
                                           egress=egress, nested=nested, chain=path)
        except RenderError as err:
            if chain:
                raise
            raise RenderError(f"{where}: {err.detail}", file=cr.source.file,
                              obj=str(cr.ref), path=err.path, causes=(err,)) from err
        step = NESTED_STAGE_STEP * (len(chain) + 1)
        result.children.extend(replace(obj, stage=obj.stage + step)
                               if obj.owner == inner.ref else obj for obj in below.children)
        result.warnings.extend(below.warnings)
        result.skipped.extend(below.skipped)
        result.absent.extend(below.absent)
        result.retained.extend(below.retained)
        result.declared.extend(below.declared)
