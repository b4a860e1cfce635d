"""The native Jinja2 template dialect a Katalog can opt into instead of Go templates, with
the API of `GoTemplateEngine`, sandboxed and bounded. Pure
(docs/katalog-semantics.md#the-jinja2-dialect)."""

from __future__ import annotations

import functools
import json
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from jinja2 import Undefined, nodes
from jinja2.environment import Environment, Template
from jinja2.exceptions import SecurityError, TemplateError, TemplateSyntaxError
from jinja2.nodes import EvalContext
from jinja2.runtime import Context, Macro
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.visitor import NodeTransformer

from orksync.render.gotemplate import GoTemplateEngine, GoTemplateError, deferred
from orksync.render.gotemplate.engine import (
    GO_SPACE,
    NESTED_RENDER_COST,
    orkestra_post,
    too_many_actions,
)
from orksync.render.gotemplate.runtime import wrong_args

__all__ = [
    "DIALECTS",
    "DIALECT_ANNOTATION",
    "JinjaTemplateEngine",
    "make_engine",
    "template_dialect",
]

DIALECT_ANNOTATION = "orksync.io/template-dialect"
DIALECTS = ("go", "jinja2")
_FILE = "<template>"
_LOOP = "__orksync_loop"
_CONCAT = "__orksync_concat"
_BOUND_NAMES = frozenset({"loop", "caller", "varargs", "kwargs", "self", "super"})
_REFUSED = {nodes.Extends: "extends", nodes.Include: "include", nodes.Import: "import",
            nodes.FromImport: "import"}
_PERCENT = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?")
_BRACES = re.compile(r"\{[^{}]*\}")
_NESTED_FIELD = re.compile(r"\{[^{}]*\{")
_MACRO_COST = 9
_CONTEXTS = (Environment, Context, EvalContext)
_WIDTHS = frozenset({"center", "ljust", "rjust", "zfill", "indent"})
_MAX_INT_BITS = 1 << 16


class _Limit(Exception):
    """A resource bound was exceeded."""


class _CallError(Exception):
    """A library function failed (converted to GoTemplateError with the position)."""


@dataclass(slots=True)
class _Budget:
    max_steps: int
    max_output: int
    deadline: float
    steps: int = 0

    def step(self) -> None:
        self.steps += 1
        if self.steps > self.max_steps:
            raise _Limit("template too expensive")
        if not self.steps & 255 and time.monotonic() > self.deadline:
            raise _Limit("template took too long")

    def size(self, value: Any) -> Any:
        if _weight(value, self.max_output) > self.max_output:
            raise _Limit("value too large")
        return value


_BUDGET: ContextVar[_Budget | None] = ContextVar("orksync_jinja_budget", default=None)


def _budget() -> _Budget:
    budget = _BUDGET.get()
    if budget is None:  # called outside a render: a throwaway budget, still bounded
        return _Budget(1_000_000, 1_000_000, time.monotonic() + 5)
    return budget


def _weight(value: Any, limit: int) -> int:
    """Roughly how many characters `value` prints as; stops counting past `limit`."""
    total, stack = 0, [value]
    while stack and total <= limit:
        item = stack.pop()
        if isinstance(item, str | bytes):
            total += len(item)
        elif isinstance(item, list | tuple | set | frozenset):
            total += 2 + len(item)
            if total <= limit:
                stack.extend(item)
        elif isinstance(item, Mapping):
            total += 2 + 2 * len(item)
            if total <= limit:
                stack.extend(item.keys())
                stack.extend(item.values())
        elif isinstance(item, int) and not isinstance(item, bool):
            total += item.bit_length() // 3 + 1
        else:
            total += 8
    return total


def _text(value: Any) -> str:
    """How an output expression (and `~`) prints a value."""
    if value is None or isinstance(value, Undefined):
        return ""
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if type(value) is deferred.Deferred:  # computed from a random value: its token
        return value.token()
    if isinstance(value, Mapping | list | tuple):
        _budget().size(value)  # shared references count for every time they print
        return json.dumps(value, separators=(",", ":"), default=str)
    return str(value)


def _check_format(fmt: str, pattern: re.Pattern[str], limit: int) -> None:
    for spec in pattern.findall(fmt):
        for part in spec if isinstance(spec, tuple) else (spec,):
            for number in re.findall(r"\*|\d+", part):
                if number == "*" or int(number) > limit:
                    raise _Limit("format width too large")


def _precheck(name: str, subject: Any, args: list[Any], kwargs: Mapping[str, Any],
              limit: int) -> None:
    """Refuse, before doing it, a str method or filter call whose result would be huge."""
    extra = [*args, *kwargs.values()]
    if name in _WIDTHS and any(isinstance(a, int) and a > limit for a in extra):
        raise _Limit("width too large")
    if not isinstance(subject, str):
        return
    if name == "expandtabs" and extra and isinstance(extra[0], int) \
            and extra[0] * subject.count("\t") > limit:
        raise _Limit("result too large")
    if name == "replace" and len(extra) >= 2:
        old, new = str(extra[0]), str(extra[1])
        if (subject.count(old) if old else len(subject) + 1) * len(new) > limit:
            raise _Limit("result too large")
    if name == "format":
        _check_format(subject, _PERCENT, limit)


class _Sandbox(ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def getattr(self, obj: Any, attribute: str) -> Any:
        if isinstance(attribute, str) and attribute.startswith("_"):
            self.unsafe_undefined(obj, attribute)
        if isinstance(obj, Mapping):
            return obj[attribute] if attribute in obj else self.undefined(obj=obj,
                                                                            name=attribute)
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        if isinstance(obj, Mapping):
            try:
                return obj[argument] if argument in obj else self.undefined(obj=obj,
                                                                            name=argument)
            except TypeError:  # an unhashable key
                return self.undefined(obj=obj, name=argument)
        return super().getitem(obj, argument)

    def unsafe_undefined(self, obj: Any, attribute: str) -> Undefined:
        raise SecurityError(f"access to attribute {attribute!r} of "
                            f"{type(obj).__name__!r} object is unsafe")

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        budget = _budget()
        budget.step()
        if isinstance(__obj, Macro):
            budget.steps += _MACRO_COST  # a macro call costs about as much as 10 steps
        for arg in (*args, *kwargs.values()):
            budget.size(arg)
        owner = getattr(__obj, "__self__", None)
        if isinstance(owner, str):
            _precheck(getattr(__obj, "__name__", ""), owner, list(args), kwargs,
                      budget.max_output)
        return budget.size(super().call(__context, __obj, *args, **kwargs))

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        fmt = str(value.__self__)

        def checked(*args: Any, **kwargs: Any) -> str:
            budget = _budget()
            _check_format(fmt, _BRACES, budget.max_output)
            if _NESTED_FIELD.search(fmt):  # widths from arguments: {:{w}}
                for arg in (*args, *kwargs.values()):
                    if isinstance(arg, int) and arg > budget.max_output:
                        raise _Limit("format width too large")
            return budget.size(wrapped(*args, **kwargs))

        return checked

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        budget = _budget()
        budget.step()
        limit = budget.max_output
        ints = isinstance(left, int) and isinstance(right, int)
        if operator == "*" and ints:
            if left.bit_length() + right.bit_length() > _MAX_INT_BITS:
                raise _Limit("number too large")
        elif operator == "*":
            seq, count = (left, right) if isinstance(right, int) else (right, left)
            if isinstance(seq, str | list | tuple) and isinstance(count, int) \
                    and count > 0 and _weight(seq, limit) * count > limit:
                raise _Limit("result too large")
        elif operator == "**" and ints and right > 0 and abs(left) > 1 \
                and right * abs(left).bit_length() > _MAX_INT_BITS:
            raise _Limit("number too large")
        elif operator == "+" and isinstance(left, str | list | tuple) \
                and isinstance(right, str | list | tuple):
            budget.size([left, right])
        elif operator == "%" and isinstance(left, str):
            _check_format(left, _PERCENT, limit)
        return budget.size(self.binop_table[operator](left, right))


def _bounded_loop(iterable: Iterable[Any]) -> Iterator[Any]:
    budget = _budget()
    for item in iterable:
        budget.step()
        yield item


def _concat(*parts: Any) -> str:
    budget = _budget()
    texts = [_text(p) for p in parts]
    if sum(map(len, texts)) > budget.max_output:
        raise _Limit("result too large")
    return "".join(texts)


class _Bound(NodeTransformer):
    """Routes loops and `~` through the budget."""

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        call = nodes.Call(nodes.Name(_LOOP, "load"), [node.iter], [], None, None)
        node.iter = call.set_lineno(node.lineno)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        return nodes.Call(nodes.Name(_CONCAT, "load"), node.nodes, [], None, None) \
            .set_lineno(node.lineno)


def _bounded_filter(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """A Jinja built-in filter under the budget: inputs and result bounded, widths and
    multiplying arguments checked before the work is done."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        budget = _budget()
        budget.step()
        limit = budget.max_output
        for arg in (*args, *kwargs.values()):
            budget.size(arg)
        values = [a for a in args if not isinstance(a, _CONTEXTS)]
        if values:
            _precheck(name, values[0], values[1:], kwargs, limit)
        if name == "sum" and not isinstance(kwargs.get("start", values[2] if len(values) > 2
                                                       else 0), int | float):
            raise _CallError("sum: only numbers can be summed in the sandbox")
        return budget.size(fn(*args, **kwargs))

    return call


_KEEP_JINJA = frozenset({"namespace"})  # Jinja globals a note of the same name does not hide


def _wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        values = [None if isinstance(a, Undefined) else a for a in args]
        try:
            return fn(*values)
        except (GoTemplateError, _Limit, SecurityError, _CallError):
            raise
        except Exception as exc:
            wrong = wrong_args(name, fn, len(values)) if isinstance(exc, TypeError) else None
            raise _CallError(wrong or f"error calling {name}: {exc}") from exc

    call.__name__ = name
    return call


def _value_path(tree: nodes.Template) -> tuple[str, ...] | None:
    """The key path of a template that is exactly `{{ a.b['c'] }}`."""
    if len(tree.body) != 1 or not isinstance(tree.body[0], nodes.Output) \
            or len(tree.body[0].nodes) != 1:
        return None
    node, path = tree.body[0].nodes[0], []
    while True:
        if isinstance(node, nodes.Getattr):
            path.append(node.attr)
        elif isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const) \
                and isinstance(node.arg.value, str):
            path.append(node.arg.value)
        elif isinstance(node, nodes.Name):
            return (node.name, *reversed(path))
        else:
            return None
        node = node.node


def _offset(source: str, lineno: int | None) -> int | None:
    if not lineno:
        return None
    position = 0
    for _ in range(lineno - 1):
        position = source.find("\n", position) + 1
        if position == 0:
            return None
    return position


@dataclass(frozen=True, slots=True)
class _Compiled:
    template: Template | None
    value_path: tuple[str, ...] | None
    error: GoTemplateError | None = None

    def raise_error(self) -> None:
        if self.error is not None:
            raise GoTemplateError(self.error.message, self.error.source, self.error.position)


class JinjaTemplateEngine:
    """Renders Jinja2 templates with a fixed function library (one engine per Katalog)."""

    def __init__(self, functions: Mapping[str, Callable[..., Any]], *,
                 max_output: int = 1_000_000, max_steps: int = 1_000_000,
                 max_seconds: float = 5.0, cache_size: int = 4096) -> None:
        self._functions = dict(functions)
        self._limits = (max_steps, max_output, max_seconds)
        env = _Sandbox(undefined=Undefined, finalize=_text, autoescape=False,
                       keep_trailing_newline=True, cache_size=0, auto_reload=False)
        env.globals.pop("lipsum", None)
        self._jinja_globals = frozenset(env.globals)
        self._jinja_filters = frozenset(env.filters)
        library = {n: _wrap(n, f) for n, f in self._functions.items()}
        env.globals.update({n: f for n, f in library.items() if n not in _KEEP_JINJA})
        env.globals.update({_LOOP: _bounded_loop, _CONCAT: _concat})
        env.filters = {n: _bounded_filter(n, f) for n, f in env.filters.items()}
        env.filters.update({n: f for n, f in library.items() if n not in self._jinja_filters})
        self._env = env
        self._get = functools.lru_cache(maxsize=cache_size)(self._compile)

    # -- public API -------------------------------------------------------------------
    def render(self, source: str, data: Mapping[str, Any], *, orkestra: bool = True) -> str:
        """Render like Orkestra (orkestra=True: a text without `{{` is returned as is,
        the output is trimmed and `<no value>` removed) or return the raw output."""
        if orkestra and "{{" not in source:
            return source
        compiled = self._get(source)
        compiled.raise_error()
        out = self._execute(compiled, source, data)
        return orkestra_post(out) if orkestra else out

    def render_value(self, source: str, data: Mapping[str, Any]) -> Any:
        """For a template that is one plain variable path (`{{ spec.x }}`), the raw value
        when it is not a string (None when missing); otherwise the same as render()."""
        if "{{" not in source:
            return source
        compiled = self._get(source.strip(GO_SPACE))
        path = compiled.value_path
        if compiled.error is None and path is not None and path[0] in data:
            value: Any = data
            for key in path:
                value = value.get(key) if isinstance(value, Mapping) else None
            return orkestra_post(value) if isinstance(value, str) else value
        return self.render(source, data)

    def check(self, source: str) -> None:
        """Compile only; raise GoTemplateError on syntax errors and unknown names."""
        if "{{" in source:
            self._get(source).raise_error()

    def referenced_functions(self, source: str) -> set[str]:
        """Names of the library functions (or unknown names) a template calls or pipes
        into; Jinja's own globals and filters and names bound in the template excluded."""
        if "{{" not in source:
            return set()
        tree = self._parse(source)
        calls, filters, _ = self._names(tree)
        return {n for n in calls if n not in self._jinja_globals} | \
            {n for n in filters if n not in self._jinja_filters}

    # -- internals --------------------------------------------------------------------
    def _parse(self, source: str) -> nodes.Template:
        try:
            return self._env.parse(source)
        except TemplateSyntaxError as exc:
            raise GoTemplateError(f"template: {exc.message}", source,
                                  _offset(source, exc.lineno)) from None
        except RecursionError:
            raise GoTemplateError("template too complex", source) from None

    def _names(self, tree: nodes.Template) -> tuple[set[str], set[str], set[str]]:
        bound = set(_BOUND_NAMES)
        bound.update(n.name for n in tree.find_all(nodes.Name) if n.ctx in ("store", "param"))
        bound.update(m.name for m in tree.find_all(nodes.Macro))
        calls = {c.node.name for c in tree.find_all(nodes.Call)
                 if isinstance(c.node, nodes.Name) and c.node.name not in bound}
        filters = {f.name for f in tree.find_all(nodes.Filter)}
        tests = {t.name for t in tree.find_all(nodes.Test)}
        return calls, filters, tests

    def _compile(self, source: str) -> _Compiled:
        refusal = too_many_actions(source, openers=("{{", "{%"))
        if refusal:
            return _Compiled(None, None, GoTemplateError(refusal, source))
        try:
            tree = self._parse(source)
            for node_type, what in _REFUSED.items():
                node = tree.find(node_type)
                if node is not None:
                    raise GoTemplateError(f"template: {what} is not supported", source,
                                          _offset(source, node.lineno))
            calls, filters, tests = self._names(tree)
            unknown = sorted(calls - set(self._env.globals)) or None
            kind = "function"
            if unknown is None:
                unknown, kind = sorted(filters - set(self._env.filters)) or None, "filter"
            if unknown is None:
                unknown, kind = sorted(tests - set(self._env.tests)) or None, "test"
            if unknown:
                raise GoTemplateError(f"template: {kind} {unknown[0]!r} not defined", source)
            value_path = _value_path(tree)
            tree = _Bound().visit(tree)
            tree.set_environment(self._env)
            code = self._env.compile(tree, filename=_FILE)
            template = self._env.template_class.from_code(
                # a plain dict, not make_globals' ChainMap: every render copies the
                # globals (one per note) into its context, and a ChainMap copies slowly
                self._env, code, dict(self._env.globals), None)
        except GoTemplateError as exc:
            return _Compiled(None, None, exc)
        except TemplateSyntaxError as exc:
            return _Compiled(None, None, GoTemplateError(f"template: {exc.message}", source,
                                                         _offset(source, exc.lineno)))
        except (RecursionError, SyntaxError, MemoryError):
            return _Compiled(None, None, GoTemplateError("template too complex", source))
        return _Compiled(template, value_path)

    def _position(self, template: Template, source: str, exc: BaseException) -> int | None:
        tb, lineno = exc.__traceback__, None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == _FILE:
                lineno = tb.tb_lineno
            tb = tb.tb_next
        return None if lineno is None else \
            _offset(source, template.get_corresponding_lineno(lineno))

    def _execute(self, compiled: _Compiled, source: str, data: Mapping[str, Any]) -> str:
        template = compiled.template
        assert template is not None
        max_steps, max_output, max_seconds = self._limits
        budget = outer = _BUDGET.get()
        if budget is None:
            budget = _Budget(max_steps, max_output, time.monotonic() + max_seconds)
        else:  # a note rendering inside a render: the outer budget, and a price
            budget.steps += NESTED_RENDER_COST - 1
            try:
                budget.step()
            except _Limit as exc:
                raise GoTemplateError(str(exc), source) from None
        token = _BUDGET.set(budget)
        # the random values of a render and of the notes it runs share one numbering
        defer_scope = deferred.DeferScope() if outer is None else None
        scope_token = deferred.scope().set(defer_scope) if defer_scope is not None else None
        parts: list[str] = []
        size = 0
        try:
            for chunk in template.root_render_func(template.new_context(dict(data))):
                size += len(chunk)
                if size > max_output:
                    raise _Limit("output too large")
                parts.append(chunk)
        except GoTemplateError:
            raise
        except (_Limit, _CallError) as exc:
            raise GoTemplateError(str(exc), source, self._position(template, source, exc)) \
                from None
        except SecurityError as exc:
            raise GoTemplateError(f"sandbox: {exc}", source,
                                  self._position(template, source, exc)) from None
        except RecursionError:
            raise GoTemplateError("template too complex", source) from None
        except (TemplateError, OverflowError, ArithmeticError) as exc:
            raise GoTemplateError(str(exc) or type(exc).__name__, source,
                                  self._position(template, source, exc)) from exc
        except Exception as exc:
            raise GoTemplateError(f"template execution failed: {type(exc).__name__}: {exc}",
                                  source, self._position(template, source, exc)) from exc
        finally:
            _BUDGET.reset(token)
            if scope_token is not None:
                deferred.scope().reset(scope_token)
        out = "".join(parts)
        return deferred.finish(out) if defer_scope is not None and defer_scope.count else out


def template_dialect(katalog_doc: Mapping[str, Any]) -> str:
    """The dialect a Katalog document asks for ("go" unless annotated); ValueError when
    the annotation names an unknown dialect."""
    meta = katalog_doc.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    value = annotations.get(DIALECT_ANNOTATION) if isinstance(annotations, Mapping) else None
    dialect = "go" if value in (None, "") else str(value).strip().lower()
    if dialect not in DIALECTS:
        raise ValueError(f"metadata.annotations.{DIALECT_ANNOTATION}: unknown template "
                         f"dialect {value!r} (known: {', '.join(DIALECTS)})")
    return dialect


def make_engine(dialect: str, functions: Mapping[str, Callable[..., Any]],
                **limits: Any) -> GoTemplateEngine | JinjaTemplateEngine:
    """The template engine for a dialect."""
    if dialect == "jinja2":
        return JinjaTemplateEngine(functions, **limits)
    if dialect == "go":
        return GoTemplateEngine(functions, **{k: v for k, v in limits.items()
                                              if k != "max_seconds"})
    raise ValueError(f"unknown template dialect {dialect!r}")

