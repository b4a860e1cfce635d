"""The namespace guard (`allowedNamespaces`, `restrictedNamespaces`; semantics §5.8). Pure.

Patterns: an exact name, `prefix*` or `*suffix`. Restricted wins; a non-empty allow list
must match. Applied to the custom resource's own namespace and to every namespaced child's
target namespace (each `toNamespaces` element included)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


def _matches(pattern: str, namespace: str) -> bool:
    if pattern == "*":
        return True
    if pattern.endswith("*"):
        return namespace.startswith(pattern[:-1])
    if pattern.startswith("*"):
        return namespace.endswith(pattern[1:])
    return namespace == pattern


@dataclass(frozen=True, slots=True)
class NamespaceGuard:
    allowed: tuple[str, ...] = ()
    restricted: tuple[str, ...] = ()

    @classmethod
    def of(cls, allowed: Iterable[object] | None, restricted: Iterable[object] | None
           ) -> NamespaceGuard:
        return cls(tuple(str(p) for p in allowed or () if str(p)),
                   tuple(str(p) for p in restricted or () if str(p)))

    def refusal(self, namespace: str) -> str | None:
        """Why `namespace` is refused, or None when it is allowed."""
        hit = next((p for p in self.restricted if _matches(p, namespace)), None)
        if hit is not None:
            return f"namespace {namespace} is restricted by the Katalog ({hit})"
        if self.allowed and not any(_matches(p, namespace) for p in self.allowed):
            return (f"namespace {namespace} is not in the Katalog's allowedNamespaces "
                    f"({', '.join(self.allowed)})")
        return None
