"""ConfigMap and `custom` (any apiVersion/kind): Orkestra's builders (semantics §2.4). Pure.

ConfigMap: `data` values as strings (YAML numbers and booleans are written as text, like
Orkestra's map[string]string). `fromConfigMap`/`fromNamespace`/`toNamespaces` are left to
the engine (the source is read and declared keys win; copies go to other namespaces).

custom: `apiVersion` and `kind` are required and must be valid (`group/version` or
`version`; a letter, then letters and digits), since they name the object's file.
`metadata {name, namespace, namespaced, labels, annotations}` names the object:
metadata.name (else the engine's name), `namespaced` (default true; false →
cluster-scoped, no namespace), metadata.namespace (else the engine's namespace). Labels:
metadata.labels under the entry's labels and the system labels (system keys win);
annotations: metadata.annotations plus top-level `annotations`. `spec` is copied with
every string leaf coerced by try_coerce (§4.5: "3" → 3, "true" → true, JSON text →
object). Every other top-level key is passed through inline as rendered, not coerced (so a
ConfigMap written as custom keeps `data` strings). `status` and `hasStatus` are not part
of the object: the engine keeps them aside to write the status subresource after the
apply. Top-level `name`/`namespace`/`labels`/`annotations` and the entry controls (when,
or, forEach, reconcile, ...) are never copied into the object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orksync.names import (
    api_version_problem,
    kind_problem,
    label_key_problem,
    label_value_problem,
    subdomain_problem,
)
from orksync.render.builders import BuildContext, BuildError
from orksync.render.builders.common import (
    as_bool,
    as_text,
    node,
    required,
    string_map,
    sub,
    text_map,
)
from orksync.render.coercion import try_coerce

# Keys of a custom entry that are not copied into the object.
CUSTOM_CONTROL_KEYS = frozenset({
    "apiVersion", "kind", "metadata", "spec", "status", "hasStatus", "name", "namespace",
    "labels", "annotations", "when", "or", "anyOf", "reconcile", "forEach", "sleep",
    "forceConflict", "toNamespaces",
})
CUSTOM_METADATA_KEYS = ("name", "namespace", "namespaced", "labels", "annotations")


def build_config_map(entry: Mapping[str, Any], ctx: BuildContext) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": _meta(ctx.name, ctx.namespace, ctx.labels, {})}
    data = text_map(entry.get("data"), "data")
    if data:
        body["data"] = data
    return body


def build_custom(entry: Mapping[str, Any], ctx: BuildContext) -> dict[str, Any]:
    api_version = required(entry.get("apiVersion"), "apiVersion", " (such as example.com/v1)")
    kind = required(entry.get("kind"), "kind")
    for field, problem in (("apiVersion", api_version_problem(api_version)),
                           ("kind", kind_problem(kind))):
        if problem:
            raise BuildError(field, problem)
    meta = node(entry.get("metadata"), "metadata")
    name = as_text(meta.get("name"), "metadata.name") or ctx.name
    problem = subdomain_problem(name)
    if problem:
        raise BuildError("metadata.name", problem)
    namespace = ""
    if as_bool(meta.get("namespaced"), "metadata.namespaced", default=True):
        namespace = as_text(meta.get("namespace"), "metadata.namespace") or ctx.namespace \
            or ctx.cr_namespace
        problem = subdomain_problem(namespace) if namespace else None
        if problem:
            raise BuildError("metadata.namespace", problem)
    elif as_text(meta.get("namespace"), "metadata.namespace"):
        raise BuildError("metadata.namespace", "cannot be set when metadata.namespaced is false")
    labels = string_map(meta.get("labels"), "metadata.labels")
    for key, value in labels.items():
        problem = label_key_problem(key) or label_value_problem(value)
        if problem:
            raise BuildError(sub("metadata.labels", key), problem)
    annotations = {**string_map(meta.get("annotations"), "metadata.annotations"),
                   **string_map(entry.get("annotations"), "annotations")}
    body: dict[str, Any] = {"apiVersion": api_version, "kind": kind,
                            "metadata": _meta(name, namespace, {**labels, **ctx.labels},
                                              annotations)}
    for key, value in entry.items():
        if key not in CUSTOM_CONTROL_KEYS:
            body[key] = value
    if entry.get("spec") is not None:
        body["spec"] = coerce_leaves(node(entry["spec"], "spec"))
    # status/hasStatus stay out of the body: the engine writes the status subresource.
    return body


def coerce_leaves(value: Any) -> Any:
    """try_coerce applied to every string leaf of a nested map/list."""
    if isinstance(value, Mapping):
        return {k: coerce_leaves(v) for k, v in value.items()}
    if isinstance(value, list):
        return [coerce_leaves(v) for v in value]
    return try_coerce(value)


def _meta(name: str, namespace: str, labels: Mapping[str, str],
          annotations: Mapping[str, str]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta
