"""Runtime helpers called by the generated Jinja2 code (the `_go` object).

Pure. No I/O. One `Runtime` is created per render; it carries the function map and the
work budget. Go field access is a map lookup only (never a Python attribute); Go's two
kinds of nil are told apart by *strictness*: a nil obtained from a map lookup, a range
element or a function result is a typed nil interface on which a further field access
errors ("nil pointer evaluating interface {}.x"); the nil result of a pipeline is an
invalid value on which field access quietly yields nil again.

Variables that are assigned with `=` live in cells `[value, strict]`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from ..govalues import format_value
from . import builtins as b
from . import deferred
from .deferred import Deferred, any_deferred
from .errors import GoExecError, GoTemplateError, LimitError
from .gosprintf import sprint, sprintf, sprintln
from .gotypes import GoInt, GoStrings, go_type_name, is_int

EMPTY: tuple[()] = ()
MAX_TEMPLATE_DEPTH = 100  # Go allows 100000 nested {{template}} calls; see engine docstring


def _quote(name: str) -> str:
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _nil_field(key: str) -> GoExecError:
    return GoExecError(f"nil pointer evaluating interface {{}}.{key}")


def _bad_field(key: str, value: Any) -> GoExecError:
    if type(value) is Deferred:
        return value.field_error(key)
    return GoExecError(f"can't evaluate field {key} in type {go_type_name(value)}")


def _map_key(key: Any) -> tuple[int, Any]:
    return (0, key) if isinstance(key, str) else (1, str(key))


# The Go type code (notes.gosig's) of a builtin's result, when an argument is deferred
_RESULT_TYPES = {"len": "i", "index": "a", "html": "s", "js": "s", "urlquery": "s",
                 "print": "s", "println": "s", "printf": "s"}


def _defer_builtin(name: str, args: tuple[Any, ...]) -> Deferred:
    """A builtin given a value computed from a random value: the call, deferred."""
    go_type = _RESULT_TYPES.get(name, "b")
    if name == "slice":
        first = args[0]
        go_type = first.go_type if type(first) is Deferred else "s" if isinstance(
            first, str) else "a"
    return deferred.call("g", name, args, go_type)


def _builtin(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def method(self: Runtime, *args: Any) -> Any:
        self.steps += 1
        if self.steps > self.max_steps:
            raise LimitError("template too expensive")
        if any_deferred(args):
            return _defer_builtin(name, args)
        try:
            return fn(*args)
        except GoExecError as exc:
            raise GoExecError(f"error calling {name}: {exc.message}") from None

    method.__name__ = f"b_{name}"
    return method


@functools.lru_cache(maxsize=4096)
def _arity(fn: Callable[..., Any]) -> tuple[int, int | None] | None:
    """(least, most or None) positional arguments `fn` takes; None when unknown."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    least = sum(1 for p in positional if p.default is p.empty)
    variadic = any(p.kind is p.VAR_POSITIONAL for p in params)
    return least, None if variadic else len(positional)


def wrong_args(name: str, fn: Callable[..., Any], given: int) -> str | None:
    """Go's message when a function is called with the wrong number of arguments (Go
    checks it before the call; here it is checked when the call raised TypeError, so that
    the message names the function instead of a Python signature)."""
    arity = _arity(fn)
    if arity is None:
        return None
    least, most = arity
    if given < least or (most is not None and given > most):
        want = str(least) if least == most else \
            f"at least {least}" if most is None else f"{least} to {most}"
        return f"wrong number of args for {name}: want {want} got {given}"
    return None


class Runtime:
    """State and helpers of one template execution."""

    __slots__ = ("depth", "functions", "max_output", "max_steps", "steps", "templates")

    def __init__(
        self, functions: Mapping[str, Callable[..., Any]], max_steps: int, max_output: int
    ) -> None:
        self.functions = functions
        self.max_steps = max_steps
        self.max_output = max_output
        self.steps = 0
        self.depth = 0
        # the templates {{template}} can run: name -> renderer(runtime, dot) -> text
        self.templates: Mapping[str, Callable[[Runtime, Any], str]] = {}

    def step(self) -> None:
        self.steps += 1
        if self.steps > self.max_steps:
            raise LimitError("template too expensive")

    def limit(self, text: str) -> str:
        if len(text) > self.max_output:
            raise LimitError("output too large")
        return text

    # -- field access -----------------------------------------------------------------
    def f(self, recv: Any, keys: tuple[str, ...]) -> Any:
        """Strict field chain: `.a.b` on dot or on a typed value."""
        value = recv
        for key in keys:
            if type(value) is dict:
                value = value.get(key)
            elif value is None:
                raise _nil_field(key)
            elif isinstance(value, Mapping):
                value = value.get(key)
            else:
                raise _bad_field(key, value)
        return value

    def fl(self, recv: Any, keys: tuple[str, ...]) -> Any:
        """Lenient field chain: on a pipeline result (or nil data), nil yields nil."""
        return None if recv is None else self.f(recv, keys)

    def fc(self, cell: list[Any], keys: tuple[str, ...]) -> Any:
        """Field chain on a variable held in a cell."""
        value, strict = cell
        return None if value is None and not strict else self.f(value, keys)

    def fa(self, final: Any, recv: Any, keys: tuple[str, ...], strict: bool) -> Any:
        """A field chain given arguments: Go errors unless the receiver is invalid."""
        del final  # evaluated first, as Go evaluates the previous pipeline stage first
        if recv is None and not strict:
            return None
        value = self.f(recv, keys[:-1])
        last = keys[-1]
        if value is None:
            raise _nil_field(last)
        if isinstance(value, Mapping):
            raise GoExecError(f"{last} is not a method but has arguments")
        raise _bad_field(last, value)

    def fac(self, final: Any, cell: list[Any], keys: tuple[str, ...]) -> Any:
        return self.fa(final, cell[0], keys, cell[1])

    # -- variables --------------------------------------------------------------------
    def cv(self, cell: list[Any]) -> Any:
        return cell[0]

    def cset(self, cell: list[Any], value: Any, strict: bool) -> str:
        cell[0] = value
        cell[1] = strict
        return ""

    def cassign(self, cell: list[Any], value: Any) -> Any:
        cell[0] = value
        cell[1] = False
        return value

    def tmpl(self, name: str, dot: Any) -> str:
        """{{template name dot}}."""
        self.step()
        render = self.templates.get(name)
        if render is None:
            raise GoExecError(f"template {_quote(name)} not defined")
        if self.depth >= MAX_TEMPLATE_DEPTH:
            raise GoExecError(f"exceeded maximum template depth ({MAX_TEMPLATE_DEPTH})")
        self.depth += 1
        try:
            return render(self, dot)
        finally:
            self.depth -= 1

    def nil_of(self, code: str) -> Any:
        """A nil literal given to a parameter of type []string, map or []interface{}."""
        return GoStrings() if code == "S" else {} if code == "m" else []

    def iface(self, value: Any) -> Any:
        """A `slice` index read from a map field: Go passes it as an interface{}."""
        return b.Iface(value)

    def fail(self, message: str) -> Any:
        raise GoExecError(message)

    # -- range ------------------------------------------------------------------------
    def rng(self, value: Any, nvars: int) -> Iterable[tuple[Any, Any]]:
        """What `range` iterates: (index or key, element) pairs; empty means else."""
        if value is None:
            return EMPTY
        if isinstance(value, list | tuple):
            return self._iter_list(value) if value else EMPTY
        if isinstance(value, Mapping):
            return self._iter_map(value) if value else EMPTY
        if type(value) is Deferred:
            raise GoExecError(f"range over {value.origin}: it is computed from a random "
                              "value, generated when the Secret is written")
        if is_int(value):
            if nvars > 1:
                raise GoExecError(f"can't use {value} to iterate over more than one variable")
            return self._iter_int(value) if value > 0 else EMPTY
        raise GoExecError(f"range can't iterate over {format_value(value)}")

    def _iter_list(self, items: list[Any] | tuple[Any, ...]) -> Iterator[tuple[Any, Any]]:
        for i, item in enumerate(items):
            self.step()
            yield GoInt(i), item

    def _iter_map(self, mapping: Mapping[Any, Any]) -> Iterator[tuple[Any, Any]]:
        for key in sorted(mapping, key=_map_key):
            self.step()
            yield key, mapping[key]

    def _iter_int(self, n: int) -> Iterator[tuple[Any, Any]]:
        for i in range(n):
            self.step()
            yield None, GoInt(i)

    def once(self) -> tuple[int]:
        """A one-iteration loop, used to give {{break}} in a range's else its Go meaning."""
        return (0,)

    def flag(self, cell: list[Any]) -> bool:
        return bool(cell[0])

    # -- calls ------------------------------------------------------------------------
    def call(self, name: str, *args: Any) -> Any:
        """Call a function of the caller's function map."""
        self.step()
        fn = self.functions[name]
        try:
            result = getattr(fn, "go_call", fn)(*args)
        except GoExecError:
            raise
        except GoTemplateError as exc:  # a note's own template failed: its reason only
            raise GoExecError(f"error calling {name}: {exc.message}") from exc
        except Exception as exc:
            wrong = wrong_args(name, fn, len(args)) if isinstance(exc, TypeError) else None
            raise GoExecError(wrong or f"error calling {name}: {exc}") from exc
        if type(result) is str and len(result) > self.max_output:
            raise LimitError("output too large")
        return result

    def callf(self, name: str, final: Any, *args: Any) -> Any:
        """Call with a piped value, which Go passes as the last argument (evaluated first)."""
        if name in self.functions:
            return self.call(name, *args, final)
        return _BUILTIN_METHODS[name](self, *args, final)

    def andf(self, final: Any, decided: Any) -> Any:
        return decided if not decided else final

    def orf(self, final: Any, decided: Any) -> Any:
        return decided if decided else final

    # -- builtins ---------------------------------------------------------------------
    b_len = _builtin("len", b.length)
    b_index = _builtin("index", b.index)
    b_slice = _builtin("slice", b.slice_)
    b_eq = _builtin("eq", b.eq)
    b_ne = _builtin("ne", b.ne)
    b_lt = _builtin("lt", b.lt)
    b_le = _builtin("le", b.le)
    b_gt = _builtin("gt", b.gt)
    b_ge = _builtin("ge", b.ge)
    b_html = _builtin("html", b.html)
    b_js = _builtin("js", b.js)
    b_urlquery = _builtin("urlquery", b.urlquery)

    def b_print(self, *args: Any) -> Any:
        self.step()
        if any_deferred(args):
            return _defer_builtin("print", args)
        return self.limit(sprint(args, self.max_output))

    def b_println(self, *args: Any) -> Any:
        self.step()
        if any_deferred(args):
            return _defer_builtin("println", args)
        return self.limit(sprintln(args, self.max_output))

    def b_printf(self, fmt: Any, *args: Any) -> Any:
        self.step()
        if type(fmt) is Deferred and fmt.go_type not in "sa":
            raise GoExecError(f"wrong type for value; expected string; got {fmt.type_name}")
        if type(fmt) is Deferred or any_deferred(args):
            return _defer_builtin("printf", (fmt, *args))
        if not isinstance(fmt, str):
            raise GoExecError(f"wrong type for value; expected string; got {go_type_name(fmt)}")
        return self.limit(sprintf(fmt, args, self.max_output))

    def b_call(self, fn: Any, *args: Any) -> Any:
        self.step()
        if fn is None:
            raise GoExecError("error calling call: call of nil")
        raise GoExecError(f"error calling call: non-function of type {go_type_name(fn)}")


_BUILTIN_METHODS: dict[str, Callable[..., Any]] = {
    name[2:]: getattr(Runtime, name) for name in dir(Runtime) if name.startswith("b_")
}
RUNTIME_API = frozenset(
    name for name in dir(Runtime) if not name.startswith("_") and callable(getattr(Runtime, name))
)
