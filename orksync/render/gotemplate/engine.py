"""GoTemplateEngine: renders Go text/template strings exactly as Go + Orkestra do.

Pure. No I/O. A template is parsed (Go's parser, ported), compiled to a Jinja2 AST that
calls the `_go` runtime, and executed in a jinja2 ImmutableSandboxedEnvironment with no
globals, filters or tests. Compiled templates are cached per engine by source text.

Known divergences from Go (intentional, see the differential tests):
- Complex constants and `:=` inside parentheses are rejected at compile time; `%p`
  prints as a bad verb. `{{template}}` calls nest at most 100 deep (Go: 100000).
- `slice` on a list cannot reach past its length. Go can reach up to the slice's hidden
  capacity, an implementation detail (encoding/json leaves spare capacity, Kubernetes'
  deep copies do not); the extra elements would be nil anyway.
- Parenthesis nesting and control nesting are limited to 100 levels.

Bounds: a template has at most MAX_ACTIONS `{{` (compiling costs about a quarter of a
millisecond per action), `max_steps` (range iterations and calls) and `max_output` per
render. A render
started while another runs in the same context (a user note calling the engine) shares
the outer render's step count and costs NESTED_RENDER_COST steps, so that notes calling
each other cannot multiply the work past the outer bound.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from types import MethodType
from typing import Any

from jinja2 import StrictUndefined
from jinja2.environment import Template
from jinja2.exceptions import SecurityError
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment

from ..govalues import NO_VALUE, format_value
from . import deferred
from . import nodes as n
from .builtins import BUILTIN_NAMES
from .codegen import compile_ast
from .errors import GoExecError, GoParseError, GoTemplateError, LimitError
from .gotypes import GoInt
from .parser import is_empty_tree, parse, parse_templates
from .runtime import RUNTIME_API, Runtime

GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"  # noqa: E501
_TEMPLATE_FILE = "<template>"
_NO_BLOCKS: dict[str, Any] = {}
_STRAY_SURROGATE = re.compile("[\ud800-\udc7f\udd00-\udfff]")
NESTED_RENDER_COST = 100
MAX_ACTIONS = 5_000
ROOT_NAME = "f"  # the name Orkestra's resolver gives the template: {{template "f"}} is itself


def too_many_actions(source: str, *, openers: tuple[str, ...] = ("{{",)) -> str | None:
    """Why `source` is refused before parsing (more than MAX_ACTIONS actions), or None."""
    if sum(source.count(o) for o in openers) > MAX_ACTIONS:
        return f"template has more than {MAX_ACTIONS} actions"
    return None

_ACTIVE: ContextVar[Runtime | None] = ContextVar("orksync_go_render", default=None)


class _GoSandbox(ImmutableSandboxedEnvironment):
    """The sandbox, with a fast path for the runtime's own (safe) methods."""

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        if type(__obj) is MethodType and type(__obj.__self__) is Runtime:
            return __obj(*args)  # Jinja only adds its own _loop_vars/_block_vars kwargs
        return super().call(__context, __obj, *args, **kwargs)

    def getattr(self, obj: Any, attribute: str) -> Any:
        if type(obj) is Runtime:
            if attribute in RUNTIME_API:
                return getattr(obj, attribute)
            raise SecurityError(f"access to {attribute!r} is not allowed")
        return super().getattr(obj, attribute)


def _go_print(value: Any) -> str:
    """How an action prints its value (fmt.Fprint of the value, nil as <no value>; a value
    computed from a random value as its expression token)."""
    if type(value) is str:
        return value
    if type(value) is deferred.Deferred:
        return value.token()
    return format_value(value)


def _make_env() -> _GoSandbox:
    env = _GoSandbox(
        finalize=_go_print, autoescape=False, undefined=StrictUndefined,
        keep_trailing_newline=True, cache_size=0, auto_reload=False,
    )
    env.globals.clear()
    env.filters.clear()
    env.tests.clear()
    return env


ENV = _make_env()


def go_utf8(text: str) -> str:
    """Replace each byte of invalid UTF-8 (carried as surrogate escapes) by U+FFFD, as
    Go's encoders do with a string holding invalid UTF-8."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    text = _STRAY_SURROGATE.sub("\ufffd", text)
    data = text.encode("utf-8", "surrogateescape")
    return "".join(_decode_per_byte(data))


def _decode_per_byte(data: bytes) -> list[str]:
    out, i = [], 0
    while i < len(data):
        try:
            out.append(data[i:].decode("utf-8"))
            break
        except UnicodeDecodeError as exc:
            out.append(data[i : i + exc.start].decode("utf-8"))
            out.append("\ufffd")
            i += exc.start + 1
    return out


def orkestra_post(text: str) -> str:
    """Orkestra's post-processing: TrimSpace, then remove every `<no value>`."""
    return text.strip(GO_SPACE).replace(NO_VALUE, "")


@dataclass(slots=True)
class _Compiled:
    """A template compiled: its Jinja2 template and constants, or the error that stopped
    it. A template of literal text and one-field actions (`plain`) keeps its parse tree
    instead, and is compiled to Jinja2 only when a render first runs it (a field whose
    value is not a string or an integer, a note's render): most are printed without
    running, and compiling one to Jinja2 costs several times its parse. `consts` is set
    before `template`, so a thread that sees the template sees its constants."""

    template: Template | None
    consts: dict[str, GoInt]
    value_path: tuple[str, ...] | None
    error: GoTemplateError | None = None
    # text and field paths: a template made only of literal text and `{{ .a.b }}` actions
    plain: tuple[str | tuple[str, ...], ...] | None = None
    tree: n.ListNode | None = None  # a plain template's, until it is compiled
    # the templates {{template}} runs ({{define}}, {{block}}): name -> renderer
    defines: dict[str, Callable[[Runtime, Any], str]] | None = None

    def raise_error(self) -> None:
        if self.error is not None:
            e = self.error
            raise GoTemplateError(e.message, e.source, e.position)

    def position(self, exc: BaseException) -> int | None:
        tb, lineno = exc.__traceback__, None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == _TEMPLATE_FILE:
                lineno = tb.tb_lineno
            tb = tb.tb_next
        if lineno is None or self.template is None:
            return None
        return self.template.get_corresponding_lineno(lineno) - 1


def _jinja(root: n.ListNode, functions: Mapping[str, Callable[..., Any]],
           filename: str = _TEMPLATE_FILE) -> tuple[Template, dict[str, GoInt]]:
    """A parsed template compiled to a sandboxed Jinja2 template, and its constants."""
    tree, ints = compile_ast(root, functions)
    tree.set_environment(ENV)
    code = ENV.compile(tree, filename=filename)
    template = ENV.template_class.from_code(ENV, code, {}, None)
    return template, {name: GoInt(value) for value, name in ints.items()}


def _renderer(template: Template, consts: dict[str, GoInt]) -> Callable[[Runtime, Any], str]:
    """How {{template}} runs a defined template: with its own variables, `$` and dot the
    value passed, sharing the caller's runtime (its budget and depth)."""
    def render(runtime: Runtime, dot: Any) -> str:
        variables: dict[str, Any] = {"_go": runtime, "_d": dot}
        variables.update(consts)
        context = Context(ENV, variables, None, _NO_BLOCKS)
        out = "".join(template.root_render_func(context))
        return runtime.limit(out)

    return render


def _value_path(root: n.ListNode) -> tuple[str, ...] | None:
    """The field path of a template that is exactly one action like {{ .spec.x }}."""
    if len(root.nodes) != 1 or not isinstance(root.nodes[0], n.ActionNode):
        return None
    return _field_path(root.nodes[0].pipe)


def _plain_parts(root: n.ListNode) -> tuple[str | tuple[str, ...], ...] | None:
    """A template made only of literal text and one-field actions (`{{ .metadata.name
    }}-config`): its text pieces and field paths, in order; None for any other."""
    parts: list[str | tuple[str, ...]] = []
    for node in root.nodes:
        if isinstance(node, n.TextNode):
            parts.append(node.text)
            continue
        path = _field_path(node.pipe) if isinstance(node, n.ActionNode) else None
        if path is None:
            return None
        parts.append(path)
    return tuple(parts)


def _field_path(pipe: n.PipeNode) -> tuple[str, ...] | None:
    """The field path of an action's pipeline that is one field of the data ({{ .a.b }},
    {{ $.a }}, {{ . }})."""
    if pipe.decl or len(pipe.cmds) != 1 or len(pipe.cmds[0].args) != 1:
        return None
    arg = pipe.cmds[0].args[0]
    if isinstance(arg, n.DotNode):
        return ()
    if isinstance(arg, n.FieldNode):
        return arg.idents
    if isinstance(arg, n.VariableNode) and arg.idents[0] == "$":
        return arg.idents[1:]
    return None


def _main_tree(root: n.ListNode, defined: dict[str, n.ListNode]
               ) -> tuple[n.ListNode, dict[str, n.ListNode]]:
    """The tree a template runs as: `{{define "f"}}`'s body when it defines `f`, the name
    Orkestra's resolver gives the template (then nothing else may be outside a define)."""
    if ROOT_NAME in defined:
        if not is_empty_tree(root):
            raise GoParseError(f"template: multiple definition of template {ROOT_NAME!r}", 0)
        root = defined[ROOT_NAME]
    return root, defined


class GoTemplateEngine:
    """Renders Go templates with a fixed function map (one engine per Katalog)."""

    def __init__(
        self,
        functions: Mapping[str, Callable[..., Any]],
        *,
        max_output: int = 1_000_000,
        max_steps: int = 1_000_000,
        cache_size: int = 4096,
    ) -> None:
        self._functions = dict(functions)
        self._names = frozenset(self._functions) | BUILTIN_NAMES
        self._max_output = max_output
        self._max_steps = max_steps
        self._get = functools.lru_cache(maxsize=cache_size)(self._compile)

    # -- public API -------------------------------------------------------------------
    def render(self, source: str, data: Mapping[str, Any], *, orkestra: bool = True) -> str:
        """Render like Orkestra (orkestra=True: a text without `{{` is returned as is,
        the output is TrimSpace'd and `<no value>` removed) or return Go's raw output."""
        if orkestra and "{{" not in source:
            return source
        compiled = self._get(source)
        if compiled.error is not None:
            compiled.raise_error()
        if orkestra and compiled.plain is not None:
            text = self._plain_text(compiled.plain, data)
            if text is not None:
                return orkestra_post(text)
        out = self._execute(compiled, source, data)
        return orkestra_post(out) if orkestra else out

    def _plain_text(self, parts: tuple[str | tuple[str, ...], ...], data: Any) -> str | None:
        """What a template of literal text and one-field actions (`{{ .metadata.name
        }}-config`, most templates of a Katalog) prints, without running it, when the
        answer is plain: every field is a string or an int reached through dicts only, the
        output is ASCII, and the template is not a note's (whose run counts towards the
        calling template's budget). Anything else (None) runs the template, errors
        included."""
        if _ACTIVE.get() is not None:
            return None
        out = []
        for part in parts:
            if type(part) is str:
                out.append(part)
                continue
            value = data
            for key in part:
                if type(value) is not dict:
                    return None
                value = value.get(key)
            if type(value) is not str:
                if type(value) is not int:
                    return None
                value = str(value)  # fmt.Fprint of an int (not a bool, not a GoInt): decimal
            out.append(value)
        text = "".join(out)
        if not text.isascii() or len(text) > self._max_output:
            return None
        return text

    def render_value(self, source: str, data: Mapping[str, Any]) -> Any:
        """For a template that is one plain field path (`{{ .spec.x }}`, `{{ . }}`,
        `{{ $.a }}`), return the raw value when it is not a string (None when missing);
        otherwise (and for strings) the same as render()."""
        if "{{" not in source:
            return source
        compiled = self._get(source.strip(GO_SPACE))
        if compiled.error is None and compiled.value_path is not None:
            try:
                value = Runtime(self._functions, 0, 0).fl(data, compiled.value_path)
            except GoExecError as exc:
                raise GoTemplateError(exc.message, source, 0) from exc
            if not isinstance(value, str):
                return value
            return orkestra_post(value)
        return self.render(source, data)

    def check(self, source: str) -> None:
        """Parse and compile only; raise GoTemplateError on syntax errors and unknown
        functions (a plain template's compilation to Jinja2, which has no error of its own
        to find, waits for its first run: _Compiled)."""
        if "{{" in source:
            self._get(source).raise_error()

    def referenced_functions(self, source: str) -> set[str]:
        """Names of the non-builtin functions a template calls (known or not)."""
        if "{{" not in source:
            return set()
        try:
            _, idents = parse(source, self._names, check_functions=False)
        except GoParseError as exc:
            raise GoTemplateError(exc.message, source, exc.position) from None
        except RecursionError:
            raise GoTemplateError("template too complex", source) from None
        return {i for i in idents if i in self._functions or i not in BUILTIN_NAMES}

    def parse_tree(self, source: str) -> tuple[n.ListNode, dict[str, n.ListNode]]:
        """The parse tree a template runs as, and the templates it defines ({{define}},
        {{block}}) by name, for static checks (orksync.render.fieldcheck). Raises
        GoTemplateError when it does not parse (unknown functions are accepted) or has
        more actions than a render accepts."""
        refusal = too_many_actions(source)
        if refusal:
            raise GoTemplateError(refusal, source)
        try:
            return _main_tree(*parse_templates(source, self._names, check_functions=False)[:2])
        except GoParseError as exc:
            raise GoTemplateError(exc.message, source, exc.position) from None
        except RecursionError:
            raise GoTemplateError("template too complex", source) from None

    # -- internals --------------------------------------------------------------------
    def _compile(self, source: str) -> _Compiled:
        refusal = too_many_actions(source)
        if refusal:
            return _Compiled(None, {}, None, GoTemplateError(refusal, source))
        try:
            root, defined = _main_tree(*parse_templates(source, self._names)[:2])
            plain = _plain_parts(root) if not defined else None
            if plain is not None:
                return _Compiled(None, {}, _value_path(root), plain=plain, tree=root)
            defines = {name: _renderer(*_jinja(body, self._functions, "<define>"))
                       for name, body in defined.items()}
            template, consts = _jinja(root, self._functions)
            if defines and ROOT_NAME not in defines:
                defines[ROOT_NAME] = _renderer(template, consts)
        except GoParseError as exc:
            return _Compiled(None, {}, None, GoTemplateError(exc.message, source, exc.position))
        except (RecursionError, SyntaxError, MemoryError):
            return _Compiled(None, {}, None, GoTemplateError("template too complex", source))
        return _Compiled(template, consts, _value_path(root), defines=defines)

    def _execute(self, compiled: _Compiled, source: str, data: Any) -> str:
        if compiled.template is None:  # a plain template's first run
            assert compiled.tree is not None
            try:
                template, compiled.consts = _jinja(compiled.tree, self._functions)
            except (RecursionError, SyntaxError, MemoryError):
                raise GoTemplateError("template too complex", source) from None
            compiled.template = template
        runtime = Runtime(self._functions, self._max_steps, self._max_output)
        if compiled.defines:
            runtime.templates = compiled.defines
        outer = _ACTIVE.get()
        token = _ACTIVE.set(runtime)
        # the random values of a render and of the notes it runs share one numbering
        defer_scope = deferred.DeferScope() if outer is None else None
        scope_token = deferred.scope().set(defer_scope) if defer_scope is not None else None
        try:
            if outer is not None:  # a note rendering inside a render: one budget for both
                runtime.max_steps = min(runtime.max_steps, outer.max_steps)
                runtime.steps = outer.steps + NESTED_RENDER_COST - 1
                try:
                    runtime.step()
                except GoExecError as exc:
                    raise GoTemplateError(exc.message, source) from None
            out = self._run(compiled, source, data, runtime)
            if defer_scope is not None and defer_scope.count:
                out = deferred.finish(out)
            return out
        finally:
            _ACTIVE.reset(token)
            if scope_token is not None:
                deferred.scope().reset(scope_token)
            if outer is not None:
                outer.steps = runtime.steps

    def _run(self, compiled: _Compiled, source: str, data: Any, runtime: Runtime) -> str:
        assert compiled.template is not None
        variables: dict[str, Any] = {"_go": runtime, "_d": data}
        if compiled.consts:
            variables.update(compiled.consts)
        context = Context(ENV, variables, None, _NO_BLOCKS)  # = new_context(shared=True)
        parts: list[str] = []
        size, limit = 0, self._max_output
        try:
            for chunk in compiled.template.root_render_func(context):
                size += len(chunk)
                if size > limit:
                    raise LimitError("output too large")
                parts.append(chunk)
        except GoExecError as exc:
            raise GoTemplateError(exc.message, source, compiled.position(exc)) from exc
        except RecursionError as exc:
            raise GoTemplateError("template too complex", source) from exc
        except Exception as exc:
            message = f"template execution failed: {type(exc).__name__}: {exc}"
            raise GoTemplateError(message, source, compiled.position(exc)) from exc
        out = "".join(parts)
        return out if out.isascii() else go_utf8(out)
