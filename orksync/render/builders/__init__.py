"""One builder per kind: a rendered template entry in, a Kubernetes object body out.

Pure. A builder receives the entry with every template already rendered (strings) and
applies Orkestra's defaults and coercion for its kind. It raises BuildError naming the
field for input it cannot turn into a valid object.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


class BuildError(Exception):
    """Bad input for one field of one entry. `field` is relative to the entry."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(message)


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildContext:
    """What a builder may know besides its entry."""

    cr_name: str
    cr_namespace: str
    owner_key: str  # value of the orkestra-owner label
    name: str  # the object's final name (defaults applied)
    namespace: str  # the object's final namespace ("" for cluster-scoped kinds)
    labels: Mapping[str, str]  # user labels merged with the system labels


Builder = Callable[[Mapping[str, Any], BuildContext], "dict[str, Any] | Built"]


def metadata(ctx: BuildContext, annotations: Mapping[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": ctx.name}
    if ctx.namespace:
        meta["namespace"] = ctx.namespace
    meta["labels"] = dict(ctx.labels)
    if annotations:
        meta["annotations"] = {str(k): str(v) for k, v in annotations.items()}
    return meta


@dataclass(frozen=True, slots=True)
class Built:
    """A builder's result when the object needs instructions resolved at apply time
    (generated values, once, rotation, TLS, copies): they go to index.yaml, not the body."""

    body: dict[str, Any]
    directives: dict[str, Any]
