"""`cross` (semantics §1.7): a Katalog entry reads other custom resources into
`.cross.<as>`. Which custom resource matches, and its `metadata` and `spec`, come from the
repository being rendered (Git is the source of truth for them); its `status` comes from
the live cluster when the render has a LiveView (`orksync sync`, the agent,
`orksync render --live`: one LIST per cross kind, shared by every custom resource), and is
empty otherwise (an offline render, or a custom resource not created yet). Not found gives
Orkestra's placeholder `{found: "false", name, namespace, spec: {}, status: {}}`, and so
does a custom resource whose entry opted out of cross reads (`crossAccess: false`, its own
or its Katalog's): Orkestra's by-name read finds nothing then; orksync's by-label read
too, where Orkestra's ignores the opt-out. Pure (the cluster only through the injected
LiveView)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from orksync.katalog.model import CustomResource
from orksync.render.children import LiveView
from orksync.render.notes.gocore import api_server_numbers


def cross_data(cr: CustomResource, specs: Any, crs: Sequence[CustomResource],
               text: Callable[[Any, Mapping[str, Any]], str],
               data: Mapping[str, Any], live: LiveView | None = None
               ) -> tuple[dict[str, Any], list[str]]:
    """`.cross` for one custom resource, and problems (path, message) found on the way.
    `text(value, data)` renders a field that may be a template (Templates.text); `live`
    gives the matched custom resource's status (ClusterError when it cannot be read)."""
    out: dict[str, Any] = {}
    problems: list[str] = []
    if specs is None:
        return out, problems
    if not isinstance(specs, list):
        return out, ["cross: must be a list"]
    for i, spec in enumerate(specs):
        if not isinstance(spec, Mapping) or not spec.get("crd") or not spec.get("as"):
            problems.append(f"cross[{i}]: needs crd (a Katalog CRD entry name) and as")
            continue
        selector = spec.get("selector") or {}
        if not isinstance(selector, Mapping):
            problems.append(f"cross[{i}].selector: must be a map")
            continue
        name = text(selector.get("name"), data)
        namespace = text(selector.get("namespace"), data) or cr.ref.namespace
        labels = selector.get("matchLabels") or spec.get("labelSelector") or \
            spec.get("labels") or {}
        if isinstance(labels, Mapping) and "matchLabels" in labels:
            labels = labels["matchLabels"] or {}
        wanted = {str(k): text(v, data) for k, v in dict(labels).items()}
        match = next((other for other in crs if other.entry.katalog == cr.entry.katalog
                      and other.entry.key == spec["crd"]
                      and (not name or other.ref.name == name)
                      and (not other.ref.namespace or other.ref.namespace == namespace)
                      and all((other.body["metadata"].get("labels") or {}).get(k) == v
                              for k, v in wanted.items())
                      and other.ref != cr.ref), None)
        if match is None or not match.entry.cross_access:  # crossAccess: false: opted out
            out[str(spec["as"])] = {"found": "false", "name": name, "namespace": namespace,
                                    "spec": {}, "status": {}}
        else:
            # the other custom resource as the API server delivers it (`2.0` is an int64)
            found = api_server_numbers(copy.deepcopy(match.body))
            found.setdefault("spec", {})
            current = live.get(match.ref) if live is not None else None
            found["status"] = copy.deepcopy((current or {}).get("status") or {})
            found["found"] = "true"
            out[str(spec["as"])] = found
    return out, problems
