"""Rendering one custom resource's onCreate / onReconcile blocks into child objects:
conditions, forEach, templates, builders, labels, copies, the namespace guard. Pure: the
clock reaches conditions only through the Katalog's Templates, the cluster only through
an optional LiveView (orksync.render.children).

The data templates see: the custom resource from the repository, plus `.cross`, `.ork`,
`.inputs`, `.external` (the results of the blocks' calls in a live render with an
egress, orksync.render.external; empty otherwise) and `.children` (orksync.render.children). With a
LiveView (`orksync sync`, the agent, `orksync render --live`), `.status` is the custom
resource's live status, `.cross.<as>.status` the live status of the other custom resource
and `.children` holds the live objects; without one (an offline render) all three are
empty, as on Orkestra's first reconcile. Spec and metadata always come from the
repository. A failed read of the cluster is a RenderError for the custom resources that
needed it: nothing of them is applied, and nothing is cleaned up on a guess."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orksync.errors import ClusterError, RenderError
from orksync.katalog.model import CustomResource
from orksync.katalog.motifs import MOTIF_KEY, motif_inputs
from orksync.katalog.tenancy import service_account_of
from orksync.model import (
    MANAGED_SELECTOR,
    ObjRef,
    Origin,
    RenderedObject,
    copy_tree,
)
from orksync.render.children import PLACEHOLDER_KEY, LiveView, children_map, children_view
from orksync.render.coercion import lookup
from orksync.render.conditions import evaluate_conditions
from orksync.render.cross import cross_data
from orksync.render.entry import EntryPlan, EntryRenderer, make_plan
from orksync.render.external import (
    Egress,
    Request,
    call_result,
    host_refusal,
    read_calls,
    skipped_result,
)
from orksync.render.gotemplate import GoTemplateError
from orksync.render.guard import (
    ClusterScope,
)
from orksync.render.kinds import (
    BLOCK_CONTROL_KEYS,
    BY_KEY,
    KINDS,
    PLACEHOLDER_KEYS,
    KindSpec,
)
from orksync.render.notes.gocore import api_server_numbers
from orksync.render.prepare import PrepareError, prepare
from orksync.render.templates import Templates
from orksync.runtime.memo import IdentityCache

BLOCKS = ("onCreate", "onReconcile")


def cr_data(cr: CustomResource, *, deep: bool = True) -> dict[str, Any]:
    """The data map templates see: the custom resource plus Orkestra's injected keys.
    `deep=False`: the custom resource's own maps are shared, not copied (for a caller
    that copies the result before anything can change it: the renderer's prepare)."""
    # numbers as the API server delivers them to Orkestra (`1000000.0` is an int64)
    body = api_server_numbers(cr.body)
    data = copy_tree(body) if deep else dict(body)
    data.setdefault("spec", {})
    data.setdefault("status", {})
    data.update({"inputs": {}, "cross": {}, "external": {}, "children": {},
                 "ork": {"katalog": cr.entry.katalog, "crd": cr.entry.key}})
    return data


class CrRenderer:
    """One custom resource's render: the data its templates see (prepared, validated,
    `.cross`, `.children`, `.external`), then its blocks walked entry by entry
    (orksync.render.entry turns each entry into objects)."""

    def __init__(self, cr: CustomResource, templates: Templates, origin: Origin,
                 others: Sequence[CustomResource] = (),
                 scope: ClusterScope | None = None, live: LiveView | None = None,
                 egress: Egress | None = None) -> None:
        self.cr = cr
        self.templates = templates
        self.box = cr.entry.operator_box
        self.objects = EntryRenderer(cr, templates, origin, scope)
        # what the render of this custom resource reports, collected by its entries
        self.warnings = self.objects.warnings
        self.skipped = self.objects.skipped
        self.absent = self.objects.absent
        self.retained = self.objects.retained
        self.cr_namespace = self.objects.cr_namespace
        self.fail = self.objects.fail  # a problem of a field below operatorBox
        self.warn = self.objects.warn
        # `cross` sees no custom resource in a namespace the guard refuses (filtered only
        # for an entry that reads `cross`: done for every custom resource, it made a render
        # quadratic in their number)
        if cr.entry.operator_box.get("cross"):
            others = [o for o in others if not o.ref.namespace
                      or self.objects.guard.refusal(o.ref.namespace) is None]
        try:
            data = cr_data(cr, deep=False)  # prepare() copies it
            if live is not None:
                data["status"] = copy_tree((live.get(cr.ref) or {}).get("status") or {})
            data["cross"], problems = cross_data(cr, cr.entry.operator_box.get("cross"), others,
                                                 templates.text, data, live)
            if problems:
                raise PrepareError("; ".join(problems))
            self.data, verdict, notes = prepare(data, cr.entry.raw, templates.render,
                                                templates.clock)
        except (PrepareError, GoTemplateError) as err:
            raise RenderError(str(err), file=cr.source.file, obj=str(cr.ref),
                              path=cr.entry.path) from err
        except ClusterError as err:
            raise RenderError(f"cannot read the live cluster: {err}", file=cr.source.file,
                              obj=str(cr.ref)) from err
        self.warnings.extend(f"{cr.source.file}: {cr.ref}: {w}" for w in [*notes, *verdict.warned])
        if verdict.denied:
            raise RenderError("validation denied: " + "; ".join(verdict.denied),
                              file=cr.source.file, obj=str(cr.ref),
                              path=f"{cr.entry.path}.validation")
        # with a LiveView: (template key, object) .children looked up
        self.declared: list[tuple[str, ObjRef]] = []
        self.data["children"] = self.children(live)
        self.calls_made = egress is not None
        if any(isinstance(block, Mapping) and block.get("external")
               for block in (self.box.get(name) for name in BLOCKS)):
            self.data["external"] = self.external(egress)

    def external(self, egress: Egress | None) -> dict[str, Any]:
        """`.external`: the blocks' calls made in order (onReconcile's first), each
        seeing the results before it (orksync.render.external). A call that failed
        without `continueOnError`, a URL the egress allow-list refuses, a template error:
        this custom resource's render error. Without `egress` (an offline render) no
        call is made: each one's result is that of a call not made (`called: "false"`)."""
        results: dict[str, Any] = {}
        self.data["external"] = results
        for block_name in ("onReconcile", "onCreate"):
            block = self.box.get(block_name)
            if not isinstance(block, Mapping) or not block.get("external"):
                continue
            calls = read_calls(block, block_name)
            if isinstance(calls, tuple):
                raise self.fail(*calls)
            for call in calls:
                if egress is None or ((call.when or call.or_) and not evaluate_conditions(
                        self.data, call.when, call.or_, self.templates.render,
                        clock=self.templates.clock)):
                    results[call.name] = skipped_result()
                    continue
                try:
                    url = self.templates.text(call.url, self.data).strip()
                    body = self.templates.text(call.body, self.data)
                except GoTemplateError as err:
                    raise self.fail(call.path, f"template error: {err}") from err
                refusal = host_refusal(call.url, url, self.cr.entry.external_hosts)
                if refusal:
                    raise self.fail(f"{call.path}.url", refusal)
                result = call_result(call, egress.call(Request(
                    method=call.method, url=url, headers=call.headers,
                    body=body.encode("utf-8"), timeout=call.timeout)))
                results[call.name] = result
                if result["error"] and not call.continue_on_error:
                    raise self.fail(call.path, f"external call {call.name!r} failed: "
                                    f"{result['error']} (continueOnError is false)")
        return results

    def children(self, live: LiveView | None) -> dict[str, Any]:
        """`.children`: the declared objects found live (offline: none, placeholders
        only). One LIST per kind, shared by every custom resource of the render."""
        if live is None:  # placeholders only: the same for every custom resource of the entry
            shape = _OFFLINE_CHILDREN.get(self.box, None, lambda: tuple(
                (key, bool(value)) for key, value in children_map(
                    [(key, _NO_REF) for key in self.declared_keys()], {}).items()))
            # each custom resource gets maps of its own: an empty plural, a placeholder
            return {key: {PLACEHOLDER_KEY: True, "status": {}} if placeholder else {}
                    for key, placeholder in shape}
        declared = self.declared = self.declared_children()
        try:
            live = children_view(live, self.cr.ref,
                                 service_account_of(self.cr.entry.tenancy, self.cr_namespace))
            found = {ref: obj for _, ref in declared
                     if (obj := live.get(ref, MANAGED_SELECTOR)) is not None}
        except ClusterError as err:
            raise RenderError(f"cannot read its children from the cluster: {err}",
                              file=self.cr.source.file, obj=str(self.cr.ref)) from err
        return children_map(declared, found)

    def declared_keys(self) -> list[str]:
        return [spec.key for name in BLOCKS if isinstance(self.box.get(name), Mapping)
                for spec in KINDS if self.box[name].get(spec.key)]

    def declared_children(self) -> list[tuple[str, ObjRef]]:
        """Every object the blocks declare, whatever the conditions (Orkestra reads back
        the names of both blocks), in declaration order: (template key, identity)."""
        out: list[tuple[str, ObjRef]] = []
        for block_name in BLOCKS:
            block = self.box.get(block_name)
            if not isinstance(block, Mapping):
                continue
            for spec in KINDS:
                entries = block.get(spec.key)
                if not isinstance(entries, list):
                    continue
                for i, raw in enumerate(entries):
                    if not isinstance(raw, Mapping):
                        continue
                    path = f"{block_name}.{spec.key}[{i}]"
                    entry, base = self.scoped(raw, path)
                    for data in self.expand(entry, path, base):
                        out.extend((spec.key, ref)
                                   for ref in self.objects.absent_refs(spec, entry, data))
        return out

    def scoped(self, entry: Mapping[str, Any], path: str
               ) -> tuple[Mapping[str, Any], dict[str, Any]]:
        """An entry imported from a motif sees `.inputs` = that motif's inputs."""
        marker = entry.get(MOTIF_KEY)
        if not isinstance(marker, Mapping):
            return entry, self.data
        return _without_marker(entry), self.motif_scope(marker, path)

    def motif_scope(self, marker: Mapping[str, Any], path: str) -> dict[str, Any]:
        try:
            return {**self.data, "inputs": motif_inputs(marker, self.data,
                                                        self.templates.render)}
        except GoTemplateError as err:
            raise self.fail(path, f"{marker['import']}.with ({marker['file']}): "
                            f"template error: {err}") from err

    def block(self, name: str) -> list[RenderedObject]:
        block = self.box.get(name)
        if block is None:
            return []
        if not isinstance(block, Mapping):
            raise self.fail(name, "must be a map of resource lists")
        if not self.objects.conditions(block, self.data, name):
            # Orkestra skips the whole block: nothing written, nothing cleaned up, so the
            # prune must keep what the block wrote while its condition held.
            for spec, entry, data, _ in self.entries(block, name):
                self.retained.extend(self.objects.absent_refs(spec, entry, data))
            return []
        steps = _block_plan(block, name, self.cr.entry.raw)
        if steps is None:  # a mistake in the block: found and reported on the way
            self.block_warnings(block, name)
            return [obj for spec, entry, data, path in self.entries(block, name)
                    for obj in self.objects.entry(spec, entry, data, name, path)]
        if steps.ignored:
            self.block_warnings(block, name)
        out: list[RenderedObject] = []
        for step in steps.entries:
            base = self.data if step.marker is None else \
                self.motif_scope(step.marker, step.path)
            for data in self.expand(step.entry, step.path, base) if step.for_each else (base,):
                out.extend(self.objects.entry(step.spec, step.entry, data, name, step.path,
                                              step.plan))
        return out

    def block_warnings(self, block: Mapping[str, Any], name: str) -> None:
        """The keys of a block that write nothing, said; an unknown key is an error."""
        for key, value in block.items():
            role = _key_role(key, value)
            if role == "placeholder":
                self.warn(f"{name}.{key}", "is declared by Orkestra but not implemented "
                          "there or here; ignored")
            elif role == "external" and not self.calls_made:
                self.warn(f"{name}.external", "HTTP calls are made in a live render only "
                          "(sync, diff REPO, render --live, the agent); .external.<name> "
                          "is empty in this one")
            elif role == "unknown":
                raise self.fail(f"{name}.{key}", "unknown resource key")

    def entries(self, block: Mapping[str, Any], name: str
                ) -> Iterator[tuple[KindSpec, Mapping[str, Any], dict[str, Any], str]]:
        """Every entry of a block in Orkestra's group order, once per forEach element, with
        its data scope (motif inputs included) and its path."""
        for spec in KINDS:
            entries = block.get(spec.key)
            if entries is None:
                continue
            if not isinstance(entries, list):
                raise self.fail(f"{name}.{spec.key}", "must be a list of entries")
            for i, entry in enumerate(entries):
                path = f"{name}.{spec.key}[{i}]"
                if not isinstance(entry, Mapping):
                    raise self.fail(path, "must be a map")
                entry, base = self.scoped(entry, path)
                for data in self.expand(entry, path, base):
                    yield spec, entry, data, path

    def expand(self, entry: Mapping[str, Any], path: str,
               base: dict[str, Any]) -> list[dict[str, Any]]:
        """forEach: one data scope per element (the item is in scope for every field)."""
        spec = entry.get("forEach")
        if spec is None:
            return [base]
        if not isinstance(spec, Mapping) or not spec.get("field"):
            raise self.fail(f"{path}.forEach", "needs field (a dot path)")
        alias = str(spec.get("as") or "item")
        value = lookup(base, str(spec["field"]))
        scopes = []
        if isinstance(value, list):
            for i, item in enumerate(value):
                scopes.append({**base, "item": item, alias: item, "index": i})
        elif isinstance(value, Mapping):
            for i, key in enumerate(sorted(value, key=str)):
                item = value[key]
                scopes.append({**base, "item": item, alias: item, "index": i,
                               "key": key, "value": item})
        elif value not in (None, ""):
            raise self.fail(f"{path}.forEach.field",
                            f"{spec['field']} is a {type(value).__name__}, not a list or map")
        return scopes


@dataclass(frozen=True, slots=True)
class _Step:
    """One entry of a block, as every custom resource renders it."""

    spec: KindSpec
    entry: Mapping[str, Any]  # without its motif marker
    path: str  # onCreate.deployments[0]
    plan: EntryPlan
    marker: Mapping[str, Any] | None  # the motif it was imported from: `.inputs` to render
    for_each: bool


@dataclass(frozen=True, slots=True)
class _BlockPlan:
    entries: tuple[_Step, ...]  # in Orkestra's group order
    ignored: bool  # has keys that write nothing (placeholders, external): warned per CR


def _block_plan(block: Mapping[str, Any], name: str,
                crd_raw: Mapping[str, Any]) -> _BlockPlan | None:
    """The entries of a well-formed block in the order they render, their paths and
    plans, worked out once per block (None when the block has a mistake: the render
    walks it step by step and reports the mistake where it is met)."""
    return _BLOCKS.get(block, (name, id(crd_raw)),
                       lambda: _make_block_plan(block, name, crd_raw))


def _key_role(key: str, value: Any) -> str | None:
    """What a block's key is when it is neither a kind's entries nor a control key:
    "placeholder" or "external" (it writes nothing, and each custom resource's render
    says so), "unknown" (an error); None otherwise."""
    if key in PLACEHOLDER_KEYS:
        return "placeholder"
    if key == "external" and value:
        return "external"
    if key not in BY_KEY and key not in BLOCK_CONTROL_KEYS:
        return "unknown"
    return None


def _make_block_plan(block: Mapping[str, Any], name: str,
                     crd_raw: Mapping[str, Any]) -> _BlockPlan | None:
    roles = {_key_role(key, value) for key, value in block.items()}
    if "unknown" in roles:
        return None
    ignored = bool(roles - {None})
    steps = []
    for spec in KINDS:
        entries = block.get(spec.key)
        if entries is None:
            continue
        if not isinstance(entries, list) or not all(isinstance(e, Mapping) for e in entries):
            return None
        for i, raw in enumerate(entries):
            marker = raw.get(MOTIF_KEY)
            entry = _without_marker(raw) if isinstance(marker, Mapping) else raw
            steps.append(_Step(spec=spec, entry=entry, path=f"{name}.{spec.key}[{i}]",
                               plan=make_plan(spec, entry, name, crd_raw),
                               marker=marker if isinstance(marker, Mapping) else None,
                               for_each=entry.get("forEach") is not None))
    return _BlockPlan(entries=tuple(steps), ignored=ignored)


def _without_marker(entry: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k != MOTIF_KEY}


_BLOCKS: IdentityCache[_BlockPlan | None] = IdentityCache()


# an operatorBox's offline `.children`: (key, whether it is a placeholder) in order
_OFFLINE_CHILDREN: IdentityCache[tuple[tuple[str, bool], ...]] = IdentityCache()


_NO_REF = ObjRef(api_version="", kind="", name="")  # a declared kind, names not needed
