"""Kubernetes object notes: metadata, nested access, conditions and replica counts.

Pure. No I/O, clock and randomness injected. Every note is nil-safe: a missing object
(`.children.deployment` before the Deployment exists) gives the empty answer.

`get` walks a path of keys (list indices allowed, as an extension) and returns "" when a
segment is missing (Orkestra returns nil, which renders as "" too). `resourceExists`
returns the TEXT "true"/"false" (semantics §4.2) — compare it with `eq … "true"` or use
it as a condition field; in `{{ if }}` any non-empty text is true. orksync treats an
empty map as not existing (Orkestra: any non-nil map), and, as Orkestra's noteExists, the
`.children` placeholder of a kind with no live object (`{_placeholder: true, ...}`).
Replica counts are ints, 0 when absent; `desiredReplicas` defaults to 1 like Kubernetes.

| Function | Signature | Meaning |
|---|---|---|
| `meta` | `meta obj` | obj.metadata, {} when absent |
| `labels` | `labels obj` | obj.metadata.labels, {} when absent |
| `annotations` | `annotations obj` | obj.metadata.annotations, {} when absent |
| `spec` | `spec obj` | obj.spec, {} when absent |
| `status` | `status obj` | obj.status, {} when absent |
| `get` | `get obj key...` | the value at obj.key1.key2…, "" when missing |
| `getLabel` | `getLabel obj key` | the label's value, "" when absent |
| `getAnnotation` | `getAnnotation obj key` | the annotation's value, "" when absent |
| `hasLabel` | `hasLabel obj key` | whether the label is set to a non-empty value |
| `hasAnnotation` | `hasAnnotation obj key` | whether the annotation is set to a non-empty value |
| `resourceName` | `resourceName obj` | metadata.name, "" when absent |
| `resourceNamespace` | `resourceNamespace obj` | metadata.namespace, "" when absent |
| `creationTimestamp` | `creationTimestamp obj` | metadata.creationTimestamp, "" when absent |
| `phase` | `phase obj` | status.phase, "" when absent |
| `hasCondition` | `hasCondition obj type` | whether that condition is "True" |
| `conditionStatus` | `conditionStatus obj type` | that condition's status, "" when absent |
| `conditionReason` | `conditionReason obj type` | that condition's reason, "" when absent |
| `conditionMessage` | `conditionMessage obj type` | that condition's message, "" when absent |
| `resourceExists` | `resourceExists obj` | "true" for a non-empty map (no placeholder) |
| `readyReplicas` | `readyReplicas obj` | status.readyReplicas as an int, 0 when absent |
| `availableReplicas` | `availableReplicas obj` | status.availableReplicas, 0 when absent |
| `updatedReplicas` | `updatedReplicas obj` | status.updatedReplicas as an int, 0 when absent |
| `desiredReplicas` | `desiredReplicas obj` | spec.replicas as an int, 1 when absent |
| `allReplicasReady` | `allReplicasReady obj` | whether ready = desired replicas |
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from orksync.render.notes._common import Note, NoteError, to_number, to_str, walk


def _section(obj: Any, *keys: str) -> dict[str, Any]:
    found, value = walk(obj, keys)
    return dict(value) if found and isinstance(value, Mapping) else {}


def _text_at(obj: Any, *keys: str) -> str:
    found, value = walk(obj, keys)
    if not found or value is None or isinstance(value, Mapping | list):
        return ""
    return to_str(value)


def _count(obj: Any, default: int, *keys: str) -> int:
    found, value = walk(obj, keys)
    if not found or value is None or isinstance(value, bool | Mapping | list):
        return default
    try:
        number = to_number(value, "replicas")
    except NoteError:
        return default
    return int(number) if math.isfinite(number) else default


def _get(obj: Any, *keys: Any) -> Any:
    found, value = walk(obj, keys)
    return value if found and value is not None else ""


def _condition(obj: Any, kind: Any) -> Mapping[str, Any] | None:
    found, conditions = walk(obj, ("status", "conditions"))
    if not found or not isinstance(conditions, list):
        return None
    wanted = to_str(kind)
    for condition in conditions:
        if isinstance(condition, Mapping) and to_str(condition.get("type")) == wanted:
            return condition
    return None


def _condition_field(field: str) -> Note:
    def read(obj: Any, kind: Any) -> str:
        condition = _condition(obj, kind)
        return to_str(condition.get(field)) if condition is not None else ""

    return read


def _has_condition(obj: Any, kind: Any) -> bool:
    condition = _condition(obj, kind)
    return condition is not None and to_str(condition.get("status")) == "True"


def _metadata_value(section: str) -> Note:
    def read(obj: Any, key: Any) -> str:
        return _text_at(_section(obj, "metadata", section), to_str(key))

    return read


def _all_ready(obj: Any) -> bool:
    if not isinstance(obj, Mapping) or not obj:
        return False
    return _count(obj, 0, "status", "readyReplicas") == _count(obj, 1, "spec", "replicas")


def notes() -> dict[str, Note]:
    label, annotation = _metadata_value("labels"), _metadata_value("annotations")
    return {
        "meta": lambda obj: _section(obj, "metadata"),
        "labels": lambda obj: _section(obj, "metadata", "labels"),
        "annotations": lambda obj: _section(obj, "metadata", "annotations"),
        "spec": lambda obj: _section(obj, "spec"),
        "status": lambda obj: _section(obj, "status"),
        "get": _get,
        "getLabel": label,
        "getAnnotation": annotation,
        "hasLabel": lambda obj, key: label(obj, key) != "",
        "hasAnnotation": lambda obj, key: annotation(obj, key) != "",
        "resourceName": lambda obj: _text_at(obj, "metadata", "name"),
        "resourceNamespace": lambda obj: _text_at(obj, "metadata", "namespace"),
        "creationTimestamp": lambda obj: _text_at(obj, "metadata", "creationTimestamp"),
        "phase": lambda obj: _text_at(obj, "status", "phase"),
        "hasCondition": _has_condition,
        "conditionStatus": _condition_field("status"),
        "conditionReason": _condition_field("reason"),
        "conditionMessage": _condition_field("message"),
        "resourceExists": lambda obj: "true" if isinstance(obj, Mapping) and obj and
        not obj.get("_placeholder") else "false",
        "readyReplicas": lambda obj: _count(obj, 0, "status", "readyReplicas"),
        "availableReplicas": lambda obj: _count(obj, 0, "status", "availableReplicas"),
        "updatedReplicas": lambda obj: _count(obj, 0, "status", "updatedReplicas"),
        "desiredReplicas": lambda obj: _count(obj, 1, "spec", "replicas"),
        "allReplicasReady": _all_ready,
    }
