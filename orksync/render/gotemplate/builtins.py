"""text/template's builtin functions (funcs.go) with Go semantics.

Pure. No I/O. Raise `GoExecError` exactly where Go's builtins return an error. `and`,
`or` and `not` are compiled inline (see codegen); `call` always fails since templates
cannot produce function values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote_plus

from ..govalues import NO_VALUE
from .errors import GoExecError
from .gosprintf import sprint
from .gostrconv import is_print
from .gotypes import GoInt, GoUint8, from_go_bytes, go_len, go_type_name, is_int, to_go_bytes

# Minimum and maximum number of arguments (None: variadic) of every builtin.
ARITY: dict[str, tuple[int, int | None]] = {
    "and": (1, None), "or": (1, None), "not": (1, 1), "len": (1, 1),
    "index": (1, None), "slice": (1, None), "call": (1, None),
    "eq": (1, None), "ne": (2, 2), "lt": (2, 2), "le": (2, 2), "gt": (2, 2), "ge": (2, 2),
    "print": (0, None), "printf": (1, None), "println": (0, None),
    "html": (0, None), "js": (0, None), "urlquery": (0, None),
}
BUILTIN_NAMES = frozenset(ARITY)

_BOOL, _INT, _FLOAT, _STRING, _NIL, _OTHER = range(6)


def _kind(v: Any) -> int:
    if v is None:
        return _NIL
    if v is True or v is False:
        return _BOOL
    if isinstance(v, int):
        return _INT
    if isinstance(v, float):
        return _FLOAT
    return _STRING if isinstance(v, str) else _OTHER


def _incompatible(a: Any, b: Any) -> GoExecError:
    return GoExecError(
        f"incompatible types for comparison: {go_type_name(a)} and {go_type_name(b)}"
    )


def _eq1(a: Any, ka: int, b: Any) -> bool:
    kb = _kind(b)
    if ka != kb:
        if a is not None and b is not None:
            raise _incompatible(a, b)
        return False
    if ka == _NIL:
        return True
    if ka == _OTHER:
        raise GoExecError(f"non-comparable type {go_type_name(b)}")
    return bool(a == b)


def eq(a: Any, *others: Any) -> bool:
    """eq a b c ... = a==b || a==c || ...; mixing basic kinds is an error."""
    if not others:
        raise GoExecError("missing argument for comparison")
    ka = _kind(a)
    return any(_eq1(a, ka, b) for b in others)


def ne(a: Any, b: Any) -> bool:
    return not eq(a, b)


def lt(a: Any, b: Any) -> bool:
    ka, kb = _kind(a), _kind(b)
    if ka in (_NIL, _OTHER) or kb in (_NIL, _OTHER):
        raise GoExecError("invalid type for comparison")
    if ka != kb:
        raise _incompatible(a, b)
    if ka == _BOOL:
        raise GoExecError("invalid type for comparison")
    return bool(a < b)


def le(a: Any, b: Any) -> bool:
    return lt(a, b) or eq(a, b)


def gt(a: Any, b: Any) -> bool:
    return not le(a, b)


def ge(a: Any, b: Any) -> bool:
    return not lt(a, b)


def length(item: Any) -> GoInt:
    if item is None:
        raise GoExecError("len of nil pointer")
    if isinstance(item, str):
        return GoInt(go_len(item))
    if isinstance(item, list | tuple | Mapping):
        return GoInt(len(item))
    raise GoExecError(f"len of type {go_type_name(item)}")


class Iface:
    """A value Go holds as an interface{} where `slice` wants an integer: a field read
    from a map. `slice` refuses it whatever it holds."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _index_arg(index: Any, cap: int) -> int:
    if isinstance(index, Iface):
        raise GoExecError("cannot index slice/array with type interface {}")
    if index is None:
        raise GoExecError("cannot index slice/array with nil")
    if not is_int(index):
        raise GoExecError(f"cannot index slice/array with type {go_type_name(index)}")
    if index < 0 or index > cap:
        raise GoExecError(f"index out of range: {index}")
    return int(index)


def index(item: Any, *indexes: Any) -> Any:
    """index x 1 2 = x[1][2]; a missing map key yields nil."""
    if item is None:
        raise GoExecError("index of untyped nil")
    for idx in indexes:
        if item is None:
            raise GoExecError("index of nil pointer")
        if isinstance(item, str | list | tuple):
            seq = to_go_bytes(item) if isinstance(item, str) else item
            i = _index_arg(idx, len(seq))
            if i == len(seq):
                raise GoExecError(f"reflect: slice index out of range: {i}")
            item = GoUint8(seq[i]) if isinstance(item, str) else seq[i]
        elif isinstance(item, Mapping):
            if idx is None:
                raise GoExecError("value is nil; should be of type string")
            if not isinstance(idx, str):
                raise GoExecError(f"value has type {go_type_name(idx)}; should be string")
            item = item.get(idx)
        else:
            raise GoExecError(f"can't index item of type {go_type_name(item)}")
    return item


def slice_(item: Any, *indexes: Any) -> Any:
    """slice x 1 2 = x[1:2]. A list's capacity is taken to be its length (see module
    docstring of engine: Go could slice up to the hidden capacity)."""
    if item is None:
        raise GoExecError("slice of untyped nil")
    if len(indexes) > 3:
        raise GoExecError(f"too many slice indexes: {len(indexes)}")
    if isinstance(item, str):
        if len(indexes) == 3:
            raise GoExecError("cannot 3-index slice a string")
        seq: Any = to_go_bytes(item)
    elif isinstance(item, list | tuple):
        seq = item
    else:
        raise GoExecError(f"can't slice item of type {go_type_name(item)}")
    idx = [0, len(seq), 0]
    for i, index_ in enumerate(indexes):
        idx[i] = _index_arg(index_, len(seq))
    if idx[0] > idx[1]:
        raise GoExecError(f"invalid slice index: {idx[0]} > {idx[1]}")
    if len(indexes) == 3 and idx[1] > idx[2]:
        raise GoExecError(f"invalid slice index: {idx[1]} > {idx[2]}")
    part = seq[idx[0] : idx[1]]
    return from_go_bytes(part) if isinstance(item, str) else list(part)


def eval_args(args: tuple[Any, ...]) -> str:
    """evalArgs: Sprint of the arguments, nil printing as <no value>."""
    if len(args) == 1 and isinstance(args[0], str):
        return args[0]
    return sprint([NO_VALUE if a is None else a for a in args])


_HTML = {"\0": "\ufffd", '"': "&#34;", "'": "&#39;", "&": "&amp;", "<": "&lt;", ">": "&gt;"}
_HTML_TABLE = str.maketrans(_HTML)


def html(*args: Any) -> str:
    return eval_args(args).translate(_HTML_TABLE)


_JS = {"\\": "\\\\", "'": "\\'", '"': '\\"', "<": "\\u003C", ">": "\\u003E",
       "&": "\\u0026", "=": "\\u003D"}


def _js_char(ch: str) -> str:
    o = ord(ch)
    if o < 0x80:
        return _JS.get(ch) or (f"\\u00{o:02X}" if o < 0x20 else ch)
    if 0xDC80 <= o <= 0xDCFF or is_print(o):
        return ch
    return f"\\u{o:04X}"


def js(*args: Any) -> str:
    s = eval_args(args)
    if all(" " <= ch < "\x80" and ch not in _JS for ch in s):
        return s
    return "".join(_js_char(ch) for ch in s)


def urlquery(*args: Any) -> str:
    return quote_plus(to_go_bytes(eval_args(args)), safe="")
