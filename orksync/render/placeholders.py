"""A random value's placeholder outside a Secret's `data` or `stringData`.

A random note renders a placeholder (`<generate:...>`) that the Secret runner replaces
with a value made in the cluster (orksync.secrets.random). Only a Secret's `data` and
`stringData` go through that runner; anywhere else (a ConfigMap, an env value, a label)
the placeholder would be written as text, which is never what the template meant, so the
custom resource is refused with an error naming the object and the field.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from orksync.errors import RenderError
from orksync.katalog.model import CrdEntry
from orksync.model import RenderedObject
from orksync.secrets.random import GENERATE_TOKEN_RE
from orksync.yamls.io import locate, split_path

_SECRET_VALUES = ("data", "stringData")


def placeholder_outside_secret(children: Sequence[RenderedObject], *, cr: str,
                               entry: CrdEntry) -> RenderError | None:
    """The error for the first child that carries a placeholder outside a Secret's
    values; None when none does."""
    for child in children:
        secret = child.ref.kind == "Secret" and child.ref.api_version == "v1"
        for path in _placeholder_paths(child.body, ()):
            if secret and path[0] in _SECRET_VALUES and len(path) == 2:
                continue
            field = ".".join(str(p) for p in path)
            block = f"{entry.path}.operatorBox.{child.origin.entry}" if child.origin.entry \
                else entry.path
            return RenderError(
                f"{child.ref} {field}: a random value is made only in a Secret's data or "
                "stringData (by the Secret's write, in the cluster); here its placeholder "
                "would be written as text. Put the value in a Secret and refer to it "
                "(secretKeyRef, a mounted Secret)", file=entry.source.file, obj=cr, path=block,
                line=locate(entry.source.path, entry.source.index, split_path(block)))
    return None


def _placeholder_paths(value: Any, path: tuple[str | int, ...]
                       ) -> Iterator[tuple[str | int, ...]]:
    if isinstance(value, str):
        if GENERATE_TOKEN_RE.search(value):
            yield path
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _placeholder_paths(item, (*path, str(key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _placeholder_paths(item, (*path, index))
