"""`HookRenderer`: a CRD entry's `onDelete` blocks rendered against a live custom resource,
the orksync.lifecycle.teardown.OnDeleteRenderer over the render engine. Pure.

Imported only where a repository was loaded (orksync.sync.hook_renderers): applying
a rendered directory has no Katalogs and never loads the template engines.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any

from orksync.errors import InputError
from orksync.katalog.model import CrdEntry, CustomResource
from orksync.model import ObjRef, RenderedObject
from orksync.render.conditions import evaluate_conditions
from orksync.render.engine import render_custom_resource
from orksync.render.guard import NamespaceGuard
from orksync.render.kinds import KINDS
from orksync.render.resource import cr_data
from orksync.render.templates import Templates

__all__ = ["HookRenderer"]


class HookRenderer:
    """The OnDeleteRenderer over the render engine: a CRD entry's hook blocks rendered
    against a live custom resource (its status included). Pure."""

    def __init__(self, entry: CrdEntry, templates: Templates) -> None:
        self.entry = entry
        self.templates = templates
        self.guard = NamespaceGuard.for_entry(entry)

    def _cr(self, live: Mapping[str, Any], block: Mapping[str, Any]) -> CustomResource:
        entry = dataclasses.replace(self.entry, operator_box={"onCreate": dict(block)})
        return CustomResource(ref=ObjRef.of(live), body=copy.deepcopy(dict(live)),
                              source=self.entry.source, entry=entry)

    def active(self, live: Mapping[str, Any], block: Mapping[str, Any]) -> bool:
        """The block's own `when` / `or` (`anyOf`)."""
        data = cr_data(self._cr(live, {}))
        or_ = block.get("or") if block.get("or") is not None else block.get("anyOf")
        return evaluate_conditions(data, block.get("when"), or_, self.templates.render,
                                   clock=self.templates.clock)

    def jobs(self, live: Mapping[str, Any], block: Mapping[str, Any]) -> list[RenderedObject]:
        """The block's `jobs` entries, built exactly as onCreate Jobs are."""
        if not block.get("jobs"):
            return []
        result = render_custom_resource(self._cr(live, {"jobs": block["jobs"]}),
                                        self.templates)
        return [o for o in result.children if o.ref.kind == "Job"]

    def refs(self, live: Mapping[str, Any], block: Mapping[str, Any]
             ) -> list[tuple[ObjRef, str | None]]:
        """The objects a stage declares (Jobs excepted), with the guard's refusal if any.
        Only names are rendered (no forEach, as in Orkestra)."""
        cr = self._cr(live, {})
        data = cr_data(cr)
        out: list[tuple[ObjRef, str | None]] = []
        for spec in KINDS:
            entries = block.get(spec.key)
            if spec.key == "jobs" or not isinstance(entries, list):
                continue
            for i, item in enumerate(entries):
                if not isinstance(item, Mapping) or not self.active(live, item):
                    continue
                api_version, kind, namespaced = spec.api_version, spec.kind, spec.namespaced
                name = self.templates.text(item.get("name"), data)
                namespace = self.templates.text(item.get("namespace"), data)
                if spec.key == "custom":
                    raw_meta = item.get("metadata")
                    meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
                    api_version = self.templates.text(item.get("apiVersion"), data)
                    kind = self.templates.text(item.get("kind"), data)
                    name = self.templates.text(meta.get("name"), data) or name
                    namespace = self.templates.text(meta.get("namespace"), data) or namespace
                    namespaced = self.templates.text(meta.get("namespaced"), data).lower() not in (
                        "false", "0", "no")
                name = name or spec.default_name(cr.ref.name)
                if not (name and kind and api_version):
                    raise InputError(f"{self.entry.path}.operatorBox.onDelete: {spec.key}[{i}]"
                                     " needs a name (and custom entries apiVersion and kind)")
                namespace = (namespace or cr.ref.namespace or "default") if namespaced else ""
                ref = ObjRef(api_version=api_version, kind=kind, namespace=namespace, name=name)
                out.append((ref, self.guard.refusal(namespace) if namespace else None))
        return out
