"""Go dynamic types of template values.

Pure. No I/O. Data values are what JSON/YAML decoding yields; a plain Python `int` is a
Go int64 (Kubernetes' unstructured decoding), `GoInt` marks a Go `int` (integer
literals, `len`, range indices) and `GoUint8` a byte (`index` on a string). The
distinction only shows in fmt output (`%T`, `%!s(int=1)`, `%#v`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class GoInt(int):
    """A Go `int` (as opposed to the int64 that data numbers are)."""

    __slots__ = ()


class GoStrings(list[str]):
    """A Go `[]string` (a function's result): printed like a list, but a function that
    looks for a `[]interface{}` (Orkestra's `len`, `listLen`, `typeOf`) does not take it
    for one."""

    __slots__ = ()


class GoUint8(int):
    """A Go `uint8` (a byte of a string)."""

    __slots__ = ()


class GoUint64(int):
    """A Go `uint64` (a YAML integer above the int64 range, as yaml.v3 decodes it)."""

    __slots__ = ()


def go_type_name(value: Any) -> str:
    """The Go type name fmt prints for %T and in %!verb(type=value)."""
    if value is None:
        return "<nil>"
    if value is True or value is False:
        return "bool"
    if isinstance(value, int):
        if isinstance(value, GoInt):
            return "int"
        if isinstance(value, GoUint64):
            return "uint64"
        return "uint8" if isinstance(value, GoUint8) else "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "map[string]interface {}"
    if isinstance(value, GoStrings):
        return "[]string"
    if isinstance(value, list | tuple):
        return "[]interface {}"
    type_name = getattr(value, "type_name", None)  # a deferred value (deferred.Deferred)
    if isinstance(type_name, str):
        return type_name
    return f"?{type(value).__name__}?"


def is_int(value: Any) -> bool:
    """An integer that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def to_go_bytes(s: str) -> bytes:
    """The bytes of a Go string carried as a Python str (surrogate-escaped bytes)."""
    return s.encode("utf-8", "surrogateescape")


def from_go_bytes(b: bytes) -> str:
    """A Go byte string as a Python str; invalid UTF-8 bytes become surrogate escapes."""
    return b.decode("utf-8", "surrogateescape")


def go_len(s: str) -> int:
    """len() of a Go string: its length in bytes."""
    return len(s) if s.isascii() else len(to_go_bytes(s))
