"""Go signatures of Orkestra's notes: text/template's argument rules, and Go result types.

Pure. No I/O. Orkestra's notes are Go functions with typed parameters; text/template
checks each argument against its parameter type before the call (exec.go `evalArg` and
`validateType`), and the Go type of a result decides what later notes see (a `[]string`
is not the `[]interface{}` that `len` or `listLen` look for). `go_note` attaches the
signature to a Python implementation:

* Called through the Go engine (`go_call`), the arguments are checked as text/template
  checks them: a `string` parameter takes a string only (an int64 from the custom
  resource, or a missing value, is an error naming the note and the argument); an `int`
  parameter takes a Go `int` (`GoInt`: a literal, `len`, a range index), never the int64
  of a custom resource's number; `int64` the reverse; `float64` a float only. Literal
  arguments are converted when the template compiles (`convert_literal`), as Go converts
  a constant to the parameter's type.
* Called directly (the Jinja2 dialect, Python callers), the arguments are converted
  leniently to the parameter types (nil is the zero value).

Type codes of a signature `"s,i->s"`: `a` interface{}, `s` string, `i` int, `I` int64,
`f` float64, `b` bool, `S` []string, `m` map[string]interface{}, `l` []interface{};
a trailing `...` makes the last parameter variadic; a result may be followed by `!`
(the Go function also returns an error, raised as NoteError by the implementation).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from orksync.render.gotemplate import deferred
from orksync.render.gotemplate.deferred import Deferred, any_deferred
from orksync.render.gotemplate.gotypes import GoInt, GoStrings, go_type_name
from orksync.render.govalues import format_value
from orksync.render.notes._common import NoteError

__all__ = ["GO_TYPES", "GoStrings", "go_note", "signature_of"]

GO_TYPES = {"a": "interface {}", "s": "string", "i": "int", "I": "int64", "f": "float64",
            "b": "bool", "S": "[]string", "m": "map[string]interface {}",
            "l": "[]interface {}"}
_ZERO: dict[str, Callable[[], Any]] = {"a": lambda: None, "s": str, "i": lambda: GoInt(0),
                                       "I": int, "f": float, "b": bool,
                                       "S": lambda: GoStrings(), "m": dict, "l": list}


def is_list(value: Any) -> bool:
    """A Go `[]interface{}` (a list of the custom resource, or a note's `[]interface{}`)."""
    return type(value) is list


def is_map(value: Any) -> bool:
    return isinstance(value, Mapping)


def _strict_ok(code: str, value: Any) -> bool:
    kind = type(value)
    if code == "s":
        return kind is str or (isinstance(value, str) and kind is not GoStrings)
    if code == "i":
        return kind is GoInt
    if code == "I":
        return kind is int
    if code == "f":
        return kind is float
    if code == "b":
        return kind is bool
    if code == "S":
        return kind is GoStrings
    if code == "m":
        return isinstance(value, Mapping)
    if code == "l":
        return kind is list
    return True


def _describe(value: Any) -> str:
    return go_type_name(value)


def _lenient(code: str, value: Any) -> Any:
    if code == "a":
        return value
    if value is None:
        return _ZERO[code]()
    if code == "s":
        return value if isinstance(value, str) else format_value(value)
    if code in "iI":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise NoteError(f"expected {GO_TYPES[code]}; got {_describe(value)}")
        return GoInt(int(value)) if code == "i" else int(value)
    if code == "f":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise NoteError(f"expected float64; got {_describe(value)}")
        return float(value)
    if code == "b":
        if not isinstance(value, bool):
            raise NoteError(f"expected bool; got {_describe(value)}")
        return value
    if code == "S":
        if not isinstance(value, list):
            raise NoteError(f"expected []string; got {_describe(value)}")
        return GoStrings(v if isinstance(v, str) else format_value(v) for v in value)
    if code == "m" and not isinstance(value, Mapping):
        raise NoteError(f"expected map; got {_describe(value)}")
    if code == "l" and not isinstance(value, list):
        raise NoteError(f"expected []interface {{}}; got {_describe(value)}")
    return value


def _result(code: str, value: Any) -> Any:
    if code == "i":
        return GoInt(value)
    if code == "I":
        return int(value)
    if code == "f":
        return float(value)
    if code == "S":
        return value if type(value) is GoStrings else GoStrings(value)
    return value


def _defer(name: str, sig: Signature, args: tuple[Any, ...], strict: bool) -> Deferred:
    """The call of a note given a value computed from a random value, deferred (see
    gotemplate.deferred); through the Go engine (`strict`), its Go type checked against the
    parameter's as text/template would check the value's."""
    for i, value in enumerate(args):
        code = sig.param(i)
        if strict and type(value) is Deferred and code != "a" and \
                value.go_type not in (code, "a"):
            raise NoteError(f"argument {i + 1}: wrong type for value; expected "
                            f"{GO_TYPES[code]}; got {value.type_name}")
    return deferred.call("f", name, args, sig.result)


class Signature:
    """Parameter codes, whether the last is variadic, and the result code."""

    __slots__ = ("params", "result", "variadic")

    def __init__(self, text: str) -> None:
        params, _, result = text.partition("->")
        codes = [p.strip() for p in params.split(",") if p.strip()]
        self.variadic = bool(codes) and codes[-1].endswith("...")
        self.params = tuple(c.rstrip(".") for c in codes)
        self.result = result.strip().rstrip("!") or "a"

    def param(self, index: int) -> str:
        if self.variadic and index >= len(self.params) - 1:
            return self.params[-1]
        return self.params[index]

    def arity_error(self, name: str, given: int) -> str | None:
        want = len(self.params)
        if self.variadic:
            if given >= want - 1:
                return None
            return f"wrong number of args for {name}: want at least {want - 1} got {given}"
        if given != want:
            return f"wrong number of args for {name}: want {want} got {given}"
        return None

    def go_text(self) -> str:
        parts = [GO_TYPES[c] for c in self.params]
        if self.variadic:
            parts[-1] = "..." + parts[-1]
        return f"({', '.join(parts)}) {GO_TYPES.get(self.result, self.result)}"


class GoNote:
    """A note implementation with its Go signature (see the module docstring)."""

    __slots__ = ("__name__", "impl", "sig")

    def __init__(self, name: str, sig: Signature, impl: Callable[..., Any]) -> None:
        self.__name__ = name
        self.sig = sig
        self.impl = impl

    def __call__(self, *args: Any) -> Any:
        wrong = self.sig.arity_error(self.__name__, len(args))
        if wrong:
            raise NoteError(wrong)
        if any_deferred(args):
            return _defer(self.__name__, self.sig, args, strict=False)
        converted = []
        for i, value in enumerate(args):
            try:
                converted.append(_lenient(self.sig.param(i), value))
            except NoteError as exc:
                raise NoteError(f"argument {i + 1}: {exc}") from None
        return _result(self.sig.result, self.impl(*converted))

    def go_call(self, *args: Any) -> Any:
        """The call as text/template makes it: arguments checked, not converted."""
        wrong = self.sig.arity_error(self.__name__, len(args))
        if wrong:
            raise NoteError(wrong)
        sig = self.sig
        for i, value in enumerate(args):
            code = sig.param(i)
            if code != "a" and type(value) is not Deferred and not _strict_ok(code, value):
                if value is None:
                    if code in "Sm":  # a missing value reaches a typed note as interface {}
                        got = "interface {}"
                    else:
                        raise NoteError(f"argument {i + 1} is missing (nil); expected "
                                        f"{GO_TYPES[code]}")
                else:
                    got = _describe(value)
                raise NoteError(f"argument {i + 1}: wrong type for value; expected "
                                f"{GO_TYPES[code]}; got {got}")
        if any_deferred(args):
            return _defer(self.__name__, sig, args, strict=True)
        return _result(sig.result, self.impl(*args))


def go_note(name: str, sig: str) -> Callable[[Callable[..., Any]], GoNote]:
    """Decorator: the note `name` with Go signature `sig` (see the module docstring)."""
    signature = Signature(sig)

    def wrap(impl: Callable[..., Any]) -> GoNote:
        return GoNote(name, signature, impl)

    return wrap


def registrar(table: list[GoNote]) -> Callable[[str, str], Callable[[Callable[..., Any]], GoNote]]:
    """A `go_note` decorator that also appends each note to `table`."""
    def note(name: str, sig: str) -> Callable[[Callable[..., Any]], GoNote]:
        def register(impl: Callable[..., Any]) -> GoNote:
            wrapped = go_note(name, sig)(impl)
            table.append(wrapped)
            return wrapped

        return register

    return note


def signature_of(fn: Any) -> Signature | None:
    return fn.sig if isinstance(fn, GoNote) else None
