"""Values computed from random values, deferred to the moment the value is generated.

Pure. No I/O. A random note (`randomHex 8`) has no value while a Katalog renders: the value
is generated in the cluster when the Secret is written (orksync.secrets.random). What a
template computes from it (`printf "%.6s" (randomHex 8)`, `len (randomHex 5)`,
`randomAlphanumeric 32 | toBase64`) is therefore not computed either: every builtin and note
given a `Deferred` argument returns a `Deferred` holding the call, and an action printing one
writes its expression token (`<generate:expr:...>`), which the apply evaluates with the same
notes over the real values (orksync.render.notes.expressions). Nothing computes on a
placeholder's text.

The arguments of a deferred call other than random values are recorded in the expression,
so in the rendered object: a Secret read from the cluster (`.children.secrets`, or `.` that
holds it) is refused there, since its values would be written out. What cannot be deferred
is an error naming the random call: a condition (`if`, `with`, `range`, `and`, `or`, `not`)
on a computed value, since it decides what is rendered; a field of one; an expression
longer than 64 KiB once encoded. A random value itself is never empty, so it may be
tested (`{{ or .spec.password (randomHex 16) }}`).

Identity: every random value a render makes has an id (its number in the render, nested
renders of Katalog notes included), so that one value used twice (`{{ $p := randomHex 8 }}{{
$p }}:{{ sha256sum $p }}`) is one value when generated. `finish` writes a random value that
is printed as it is and used nowhere else in its text as the plain token
(`<generate:randomHex:8>`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from orksync.secrets.random import (
    GENERATE_TOKEN_RE,
    decode_expression,
    expression_token,
    placeholder,
)

from .errors import GoExecError
from .gotypes import GoInt, GoStrings, GoUint8

__all__ = [
    "DeferScope",
    "Deferred",
    "any_deferred",
    "call",
    "encode",
    "finish",
    "leaf",
    "lift",
    "scope",
]

_TYPE_NAMES = {"s": "string", "i": "int", "I": "int64", "u": "uint8", "f": "float64",
               "b": "bool", "S": "[]string", "m": "map[string]interface {}",
               "l": "[]interface {}", "a": "interface {}"}


class Deferred:
    """A value computed from random values: `node` is its expression (the JSON form of
    orksync.secrets.random), `go_type` the type code of its Go type (orksync.render.notes
    .gosig's codes, `a` when unknown) and `origin` the call that made it, for messages."""

    __slots__ = ("go_type", "node", "origin", "root")

    def __init__(self, node: Any, go_type: str, origin: str, root: str = "") -> None:
        self.node = node
        self.go_type = go_type
        self.origin = origin
        self.root = root or origin  # the random call it comes from

    @property
    def is_leaf(self) -> bool:
        return isinstance(self.node, dict) and "r" in self.node

    @property
    def type_name(self) -> str:
        return _TYPE_NAMES.get(self.go_type, "interface {}")

    def __bool__(self) -> bool:
        if self.is_leaf:  # a random value of length 0 is "" (a plain string), never a leaf
            return True
        raise GoExecError(
            f"the result of {self.origin} is computed from a random value, which is generated "
            "when the Secret is written: it cannot decide a condition (if, with, range, and, "
            "or, not), which decides what is rendered")

    def __str__(self) -> str:
        # what prints a deferred value calls token(); str() is what code computing on text
        # calls (the Jinja dialect's own filters and operators, `%`, `~` aside): refused
        raise GoExecError(
            f"{self.origin} is computed from a random value, which is generated when the "
            "Secret is written: only a note or builtin can compute on it (the Jinja "
            "dialect's own filters and operators cannot), or an action print it")

    def __eq__(self, other: object) -> bool:
        raise GoExecError(f"{self.origin} is computed from a random value: it cannot be "
                          "compared when rendering (use the `eq` note or builtin)")

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"Deferred({self.origin})"

    def token(self) -> str:
        if self.is_leaf and self.node["r"][2] is None:
            func, n, _ = self.node["r"]
            return placeholder(func, n)
        try:
            return expression_token(self.node)
        except ValueError as exc:
            raise GoExecError(f"{self.origin}: {exc}") from None

    def field_error(self, key: str) -> GoExecError:
        return GoExecError(f"can't evaluate field {key} of the result of {self.origin}, which "
                           "is computed from a random value (generated when the Secret is "
                           "written)")


@dataclass(slots=True)
class DeferScope:
    """The random values of one render (and of the Katalog notes it runs)."""

    count: int = 0


_SCOPE: ContextVar[DeferScope | None] = ContextVar("orksync_defer_scope", default=None)


def scope() -> ContextVar[DeferScope | None]:
    """The context variable holding the current render's scope (set by the engine)."""
    return _SCOPE


def leaf(func: str, n: int | None) -> Deferred:
    """A random value: numbered in the current render's scope, unnumbered outside one."""
    current = _SCOPE.get()
    ident = None
    if current is not None:
        current.count += 1
        ident = current.count
    origin = func if n is None else f"{func} {n}"
    return Deferred({"r": [func, n, ident]}, "s", origin)


def any_deferred(args: tuple[Any, ...]) -> bool:
    """Whether an argument is deferred (every builtin and note call asks: a plain loop,
    cheaper than any() over a generator)."""
    for arg in args:  # noqa: SIM110
        if type(arg) is Deferred:
            return True
    return False


def call(kind: str, name: str, args: tuple[Any, ...], go_type: str) -> Deferred:
    """The call of the note (`kind` "f") or builtin ("g") `name` with `args`, deferred."""
    root = next(a.root for a in args if type(a) is Deferred)
    return Deferred({kind: name, "a": [encode(a) for a in args]}, go_type,
                    f"{name} over {root}", root)


def encode(value: Any) -> Any:
    """The JSON form of a constant argument of a deferred call (see orksync.secrets.random)."""
    if type(value) is Deferred:
        return value.node
    if value is None or value is True or value is False or type(value) is str:
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        code = "i" if isinstance(value, GoInt) else "u" if isinstance(value, GoUint8) else "I"
        return {code: int(value)}
    if isinstance(value, float):
        return {"x": repr(value) if math.isfinite(value) else str(value)}
    if isinstance(value, GoStrings):
        return {"S": [str(v) for v in value]}
    if isinstance(value, list | tuple):
        return {"l": [encode(v) for v in value]}
    if isinstance(value, Mapping):
        if value.get("kind") == "Secret" and value.get("apiVersion") == "v1":
            raise GoExecError("a Secret read from the cluster cannot be combined with a random "
                              "value: the expression, written in the rendered object, would "
                              "hold its values")
        return {"m": {str(k): encode(v) for k, v in value.items()}}
    raise GoExecError(f"a value of type {type(value).__name__} cannot be combined with a "
                      "random value")


def decode(node: Any) -> Any:
    """A constant of the JSON form as the template value it was (the inverse of encode)."""
    if node is None or isinstance(node, bool | str):
        return node
    if isinstance(node, dict) and len(node) == 1:
        (code, value), = node.items()
        if code == "i":
            return GoInt(value)
        if code == "I":
            return int(value)
        if code == "u":
            return GoUint8(value)
        if code == "x":
            return float(value)
        if code == "S":
            return GoStrings(str(v) for v in value)
        if code == "l":
            return [decode(v) for v in value]
        if code == "m":
            return {k: decode(v) for k, v in value.items()}
    raise ValueError("not a constant of an expression")


def _leaf_ids(node: Any) -> Iterator[int]:
    if isinstance(node, dict):
        if "r" in node:
            if node["r"][2] is not None:
                yield node["r"][2]
            return
        for value in node.values():
            yield from _leaf_ids(value)
    elif isinstance(node, list):
        for value in node:
            yield from _leaf_ids(value)


def _decoded(match: re.Match[str]) -> Any:
    """The expression of an expression token (None for a plain token, or a text that only
    looks like an expression token)."""
    if not match.group("expr"):
        return None
    try:
        return decode_expression(match.group("expr"))
    except ValueError:
        return None


def finish(text: str) -> str:
    """A render's output with each random value printed as it is, and used nowhere else
    in the text, written as its plain token (`<generate:randomHex:8>`)."""
    matches, nodes = [], []
    for match in GENERATE_TOKEN_RE.finditer(text):
        node = _decoded(match)
        if node is not None:
            matches.append(match)
            nodes.append(node)
    if not matches:
        return text
    uses: dict[int, int] = {}
    for node in nodes:
        for ident in set(_leaf_ids(node)):
            uses[ident] = uses.get(ident, 0) + 1
    out, pos = [], 0
    for match, node in zip(matches, nodes, strict=True):
        if isinstance(node, dict) and "r" in node and uses.get(node["r"][2], 0) == 1:
            out.append(text[pos:match.start()])
            out.append(placeholder(node["r"][0], node["r"][1]))
            pos = match.end()
    out.append(text[pos:])
    return "".join(out)


def lift(text: str) -> str | Deferred:
    """A text holding expression tokens (the output of a Katalog note given a random value)
    as a Deferred printing the same; any other text as it is."""
    parts: list[Any] = []
    pos = 0
    for match in GENERATE_TOKEN_RE.finditer(text):
        node = _decoded(match)
        if node is None:
            continue
        if match.start() > pos:
            parts.append(text[pos:match.start()])
        parts.append(node)
        pos = match.end()
    if not parts:
        return text
    if pos < len(text):
        parts.append(text[pos:])
    return Deferred({"t": parts}, "s", "a Katalog note over a random value")
