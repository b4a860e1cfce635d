"""Compile-time scopes of Go template variables.

Pure. No I/O. Scoping follows what Go's executor does at run time (a variable declared
in an {{if}} list is not visible in its {{else}} list; a variable declared in a block is
gone after {{end}}), so each Go variable reference resolves to one declaration here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import nodes as n

ROOT_DECL = object()  # the declaration of `$`


@dataclass(slots=True)
class Binding:
    """Where a Go variable lives in the generated code: a Jinja local (`strict` tells
    whether a nil in it is a typed nil interface) or a cell `[value, strict]`."""

    jname: str
    decl: Any
    cell: bool = False
    strict: bool = False


class Scope:
    """A block's variables, chained to the enclosing block."""

    __slots__ = ("parent", "vars")

    def __init__(self, parent: Scope | None = None) -> None:
        self.parent = parent
        self.vars: dict[str, Binding] = {}

    def child(self) -> Scope:
        return Scope(self)

    def declare(self, name: str, binding: Binding) -> None:
        self.vars[name] = binding

    def lookup(self, name: str) -> Binding | None:
        scope: Scope | None = self
        while scope is not None:
            binding = scope.vars.get(name)
            if binding is not None:
                return binding
            scope = scope.parent
        return None


@dataclass(slots=True)
class Ctx:
    """Compilation context: the Jinja name holding dot, whether a nil dot is a typed
    nil (range elements), and the current scope."""

    dot: str
    dot_strict: bool
    scope: Scope

    @property
    def dot_info(self) -> tuple[str, bool]:
        return self.dot, self.dot_strict


def breaks_in_else(lst: n.ListNode) -> bool:
    """Whether a range's else-list holds a {{break}} that ends that range (one not
    inside a nested range)."""
    for node in lst.nodes:
        if isinstance(node, n.BreakNode):
            return True
        if isinstance(node, n.IfNode | n.WithNode) and (
            breaks_in_else(node.body)
            or (node.else_body is not None and breaks_in_else(node.else_body))
        ):
            return True
    return False
