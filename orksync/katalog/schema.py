"""Custom resources checked against their CRD's `openAPIV3Schema`, offline. Pure.

The API server refuses (or silently prunes) a custom resource that does not fit the
structural schema of its CRD; `orksync validate` finds the same problems in the
repository, naming the custom resource's file, line and field, before anything reaches a
cluster. `schema_problems(value, schema)` walks a value beside its schema and yields
(field path, problem) for:

* a field the schema does not declare: not in `properties`, where neither
  `additionalProperties` (true or a schema) nor `x-kubernetes-preserve-unknown-fields:
  true` lets it in, the nearest declared field suggested (difflib);
* a value of the wrong `type` (`x-kubernetes-int-or-string` takes an integer or a string;
  an integer is a `number` too; a boolean is never an integer);
* a `required` field that is missing;
* a value outside `enum`.

What it does not check (the API server does): formats, patterns, bounds and lengths, CEL
rules, `allOf`/`anyOf`/`oneOf`/`not` (value validations only: a structural schema
declares every field in `properties`), `metadata` (the API server's own schema). A null
value is not checked: in an apply it means "no value".
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from orksync.errors import InputError
from orksync.katalog.model import Catalog
from orksync.model import RenderedObject
from orksync.yamls.doc import dotted
from orksync.yamls.io import locate, split_path

__all__ = ["SKIPPED_TOP_LEVEL", "catalog_schema_errors", "schema_problems", "version_schema"]

# The fields of a custom resource the walk leaves to the API server: identity and metadata
# are not in the CRD's hands; `status` is written through its own subresource.
SKIPPED_TOP_LEVEL = frozenset({"apiVersion", "kind", "metadata"})

Path = list[str | int]


class SchemaError(InputError):
    """A custom resource that does not fit its CRD's schema."""


def catalog_schema_errors(catalog: Catalog, rendered: Iterable[RenderedObject] = ()
                          ) -> list[InputError]:
    """Every custom resource of the repository checked against the schema its CRD (from
    the repository) gives its version: one error per problem, naming the custom
    resource's file and line, the object and the field. `rendered`: children the
    Katalogs rendered; those of a kind the repository's CRDs define are checked too,
    located at the Katalog entry that rendered them."""
    crds = {(m.group, m.kind): m for m in catalog.crds}
    errors: list[InputError] = []
    for cr in catalog.crs:
        schema, status = _schema_for(crds, cr.body)
        if schema is None:
            continue
        for path, problem in schema_problems(_checked(cr.body, status), schema):
            errors.append(SchemaError(problem, file=cr.source.file, obj=str(cr.ref),
                                      path=dotted(path),
                                      line=locate(cr.source.path, cr.source.index, path)))
    entries = {(k.name, e.key): e for k in catalog.katalogs for e in k.crds}
    for obj in rendered:
        entry = entries.get((obj.origin.katalog, obj.origin.crd))
        if obj.owner is None or entry is None:
            continue
        schema, status = _schema_for(crds, obj.body)
        if schema is None:
            continue
        at = ["spec", "crds", entry.key, "operatorBox", *split_path(obj.origin.entry)]
        for path, problem in schema_problems(_checked(obj.body, status), schema):
            errors.append(SchemaError(
                f"rendered by {dotted(at)} for {obj.owner}: {problem}",
                file=entry.source.file, obj=str(obj.ref), path=dotted(path),
                line=locate(entry.source.path, entry.source.index, [*at, *path])))
    return errors


def _schema_for(crds: Mapping[tuple[str, str], Any], body: Mapping[str, Any]
                ) -> tuple[Mapping[str, Any] | None, bool]:
    group, _, version = str(body.get("apiVersion") or "").rpartition("/")
    crd = crds.get((group, str(body.get("kind") or "")))
    if crd is None or not group:
        return None, False
    return version_schema(crd.body, version)


def _checked(body: Mapping[str, Any], status_subresource: bool) -> Mapping[str, Any]:
    """The body as the API server reads it on a write: without `status` when the status
    has its own subresource (it is ignored there)."""
    if status_subresource and "status" in body:
        return {k: v for k, v in body.items() if k != "status"}
    return body


def version_schema(crd: Mapping[str, Any], version: str
                   ) -> tuple[Mapping[str, Any] | None, bool]:
    """The `openAPIV3Schema` of `version` in a CRD body (the top-level `spec.validation`
    of v1beta1 as a fallback) and whether that version has the status subresource;
    (None, False) when the CRD declares no schema for it."""
    spec = crd.get("spec")
    if not isinstance(spec, Mapping):
        return None, False
    for item in spec.get("versions") or []:
        if isinstance(item, Mapping) and item.get("name") == version:
            schema = (item.get("schema") or {}).get("openAPIV3Schema") \
                if isinstance(item.get("schema"), Mapping) else None
            if schema is None:
                validation = spec.get("validation")
                schema = validation.get("openAPIV3Schema") \
                    if isinstance(validation, Mapping) else None
            subresources = item.get("subresources") or spec.get("subresources") or {}
            status = isinstance(subresources, Mapping) and "status" in subresources
            return (schema if isinstance(schema, Mapping) else None), status
    return None, False


def schema_problems(value: Any, schema: Mapping[str, Any], path: Path | None = None, *,
                    top: bool = True) -> Iterator[tuple[Path, str]]:
    """(field path, problem) for each place `value` does not fit `schema`. At the top
    (`top`), `apiVersion`, `kind` and `metadata` are not checked."""
    yield from _walk(value, schema, path or [], top)


_TYPES: dict[str, tuple[str, ...]] = {
    "object": ("object",), "array": ("array",), "string": ("string",),
    "integer": ("integer",), "number": ("integer", "number"), "boolean": ("boolean",),
}


def _type_of(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list):
        return "array"
    return type(value).__name__


def _walk(value: Any, schema: Mapping[str, Any], path: Path,
          top: bool = False) -> Iterator[tuple[Path, str]]:
    if value is None:
        return
    actual = _type_of(value)
    if schema.get("x-kubernetes-int-or-string"):
        if actual not in ("integer", "string"):
            yield path, f"must be an integer or a string, not {_a(actual)}"
        return
    wanted = schema.get("type")
    if isinstance(wanted, str) and wanted in _TYPES and actual not in _TYPES[wanted]:
        yield path, f"must be {_a(wanted)}, not {_a(actual)}"
        return
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and value not in enum:
        shown = ", ".join(repr(e) for e in enum[:10]) + (", ..." if len(enum) > 10 else "")
        yield path, f"{value!r} is not one of {shown}"
    if actual == "object":
        yield from _object(value, schema, path, top)
    elif actual == "array":
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, item in enumerate(value):
                yield from _walk(item, items, [*path, i])


def _object(value: Mapping[str, Any], schema: Mapping[str, Any], path: Path,
            top: bool) -> Iterator[tuple[Path, str]]:
    raw_properties = schema.get("properties")
    properties: Mapping[str, Any] = raw_properties if isinstance(raw_properties, Mapping) \
        else {}
    additional = schema.get("additionalProperties")
    preserve = schema.get("x-kubernetes-preserve-unknown-fields") is True
    embedded = schema.get("x-kubernetes-embedded-resource") is True
    for name in schema.get("required") or []:
        if isinstance(name, str) and name not in value and not (top and name in
                                                                  SKIPPED_TOP_LEVEL):
            yield [*path, name], "is required by the CRD's schema and missing"
    for key, item in value.items():
        key = str(key)
        if (top or embedded) and key in SKIPPED_TOP_LEVEL:
            continue
        sub = properties.get(key)
        if isinstance(sub, Mapping):
            yield from _walk(item, sub, [*path, key])
        elif isinstance(additional, Mapping):
            yield from _walk(item, additional, [*path, key])
        elif additional is True or preserve:
            continue
        elif properties or additional is False or "type" in schema:
            nearest = difflib.get_close_matches(key, list(properties), n=1)
            hint = f" (did you mean {nearest[0]!r}?)" if nearest else ""
            yield [*path, key], f"unknown field {key!r}: not in the CRD's schema{hint}"


def _a(type_name: str) -> str:
    return ("an " if type_name[:1] in "aeiou" else "a ") + type_name
