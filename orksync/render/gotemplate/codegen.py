"""Code generator: Go template AST -> Jinja2 AST calling the `_go` runtime.

Pure. No I/O. The generated template only ever reads the context names it was given
(`_go` the runtime, `_d` the data, `_k<n>` int constants) and its own local names; every
Go operation is a call of a `_go` method, so template text never turns into Python
attribute access. Go variables become Jinja locals (renamed per declaration, so Go's
scoping is resolved here) or, when assigned with `=`, mutable cells `[value, strict]`.
"""

from __future__ import annotations

import itertools
from collections.abc import Container, Mapping
from dataclasses import dataclass, field
from typing import Any

from jinja2 import nodes as j

from . import nodes as n
from .builtins import ARITY
from .codegen_scope import ROOT_DECL, Binding, Ctx, Scope, breaks_in_else

_GO_TYPES = {"s": "string", "i": "int", "I": "int64", "f": "float64", "b": "bool",
             "S": "[]string", "m": "map[string]interface {}", "l": "[]interface {}"}

Stmt = j.Stmt
Expr = j.Expr


def _call(method: str, args: list[Expr]) -> Expr:
    return j.Call(j.Getattr(j.Name("_go", "load"), method, "load"), args, [], None, None)


def _fail(message: str) -> Expr:
    return _call("fail", [j.Const(message)])


def _store(name: str) -> j.Name:
    return j.Name(name, "store")


def _load(name: str) -> j.Name:
    return j.Name(name, "load")


@dataclass
class _Loop:
    """A Python loop of the generated code: a range body, or the one-shot loop that
    wraps a range's else-list containing {{break}}."""

    wrapper: bool
    flag: str = ""
    used_continue: bool = False


@dataclass
class Compiler:
    """One compilation pass. `cells` are the declarations that must live in cells;
    the pass records in `assigned` the declarations targeted by `=`."""

    user_functions: Container[str]
    cells: set[Any]
    assigned: set[Any] = field(default_factory=set)
    int_consts: dict[int, str] = field(default_factory=dict)
    loops: list[_Loop] = field(default_factory=list)
    counter: itertools.count[int] = field(default_factory=itertools.count)

    def name(self, prefix: str) -> str:
        return f"_{prefix}{next(self.counter)}"

    # -- template and statements ------------------------------------------------------
    def template(self, root: n.ListNode) -> j.Template:
        scope = Scope()
        body: list[Stmt] = []
        if ROOT_DECL in self.cells:
            body.append(j.Assign(_store("_root"), j.List([_load("_d"), j.Const(False)])))
            scope.declare("$", Binding("_root", ROOT_DECL, cell=True))
        else:
            scope.declare("$", Binding("_d", ROOT_DECL, strict=False))
        for stmt in body:
            stmt.set_lineno(1)
        body += self.stmts(root, Ctx("_d", False, scope))
        return j.Template(body, lineno=1)

    def stmts(self, lst: n.ListNode, ctx: Ctx) -> list[Stmt]:
        out: list[Stmt] = []
        for node in lst.nodes:
            compiled = self.stmt(node, ctx)
            for s in compiled:
                s.set_lineno(node.pos + 1)
            out += compiled
        return out

    def stmt(self, node: n.Node, ctx: Ctx) -> list[Stmt]:
        if isinstance(node, n.TextNode):
            return [j.Output([j.TemplateData(node.text)])]
        if isinstance(node, n.ActionNode):
            return self.action(node.pipe, ctx)
        if isinstance(node, n.RangeNode):
            return self.range_(node, ctx)
        if isinstance(node, n.IfNode | n.WithNode):
            return self.if_with(node, ctx)
        if isinstance(node, n.TemplateNode):
            return self.template_call(node, ctx)
        if isinstance(node, n.BreakNode):
            return [j.Break()]
        assert isinstance(node, n.ContinueNode)
        return self.continue_()

    def action(self, pipe: n.PipeNode, ctx: Ctx) -> list[Stmt]:
        value = self.pipe_value(pipe, ctx)
        if not pipe.decl:
            return [j.Output([value])]
        if pipe.is_assign:
            return [self.assign(pipe.decl[0], value, ctx.scope, strict=False)]
        return [self.declare(pipe.decl[0], value, ctx.scope, strict=False)]

    def template_call(self, node: n.TemplateNode, ctx: Ctx) -> list[Stmt]:
        """{{template "name" pipeline}}: the named template runs with the pipeline's value
        as dot and `$`, seeing none of the caller's variables (it is compiled apart)."""
        if node.pipe is None:
            return [j.Output([_call("tmpl", [j.Const(node.name), j.Const(None)])])]
        value = self.pipe_value(node.pipe, ctx)
        if not node.pipe.decl:
            return [j.Output([_call("tmpl", [j.Const(node.name), value])])]
        tmp = self.name("t")
        pre: list[Stmt] = [j.Assign(_store(tmp), value)]
        var = node.pipe.decl[0]
        if node.pipe.is_assign:
            pre.append(self.assign(var, _load(tmp), ctx.scope, strict=False))
        else:
            pre.append(self.declare(var, _load(tmp), ctx.scope, strict=False))
        return [*pre, j.Output([_call("tmpl", [j.Const(node.name), _load(tmp)])])]

    def declare(self, var: n.VariableNode, value: Expr, scope: Scope, strict: bool) -> Stmt:
        cell = var in self.cells
        jname = self.name("c" if cell else "v")
        scope.declare(var.idents[0], Binding(jname, var, cell=cell, strict=strict))
        return j.Assign(_store(jname), j.List([value, j.Const(strict)]) if cell else value)

    def assign(self, var: n.VariableNode, value: Expr, scope: Scope, strict: bool) -> Stmt:
        binding = scope.lookup(var.idents[0])
        if binding is None:
            return j.ExprStmt(_fail(f"undefined variable: {var.idents[0]}"))
        self.assigned.add(binding.decl)
        if not binding.cell:  # first pass only: cells are not known yet
            return j.ExprStmt(value)
        return j.ExprStmt(_call("cset", [_load(binding.jname), value, j.Const(strict)]))

    def continue_(self) -> list[Stmt]:
        loop = self.loops[-1]
        if not loop.wrapper:
            return [j.Continue()]
        loop.used_continue = True
        return [j.ExprStmt(_call("cset", [_load(loop.flag), j.Const(True), j.Const(False)])),
                j.Break()]

    # -- if / with --------------------------------------------------------------------
    def if_with(self, node: n.IfNode | n.WithNode, ctx: Ctx) -> list[Stmt]:
        scope = ctx.scope.child()
        is_with = isinstance(node, n.WithNode)
        pre, test = self.control_value(node.pipe, ctx, scope, need_name=is_with)
        body_dot = (test.name, True) if is_with and isinstance(test, j.Name) else ctx.dot_info
        body = self.stmts(node.body, Ctx(*body_dot, scope.child()))
        else_: list[Stmt] = []
        if node.else_body is not None:
            else_ = self.stmts(node.else_body, Ctx(ctx.dot, ctx.dot_strict, scope.child()))
        return [*pre, j.If(test, body, [], else_)]

    def control_value(
        self, pipe: n.PipeNode, ctx: Ctx, scope: Scope, need_name: bool
    ) -> tuple[list[Stmt], Expr]:
        """Evaluate an if/with pipeline, declaring or assigning its variable."""
        value = self.pipe_value(pipe, ctx)
        if not pipe.decl and not need_name:
            return [], value
        tmp = self.name("t")
        pre: list[Stmt] = [j.Assign(_store(tmp), value)]
        if pipe.decl:
            var = pipe.decl[0]
            if pipe.is_assign:
                pre.append(self.assign(var, _load(tmp), ctx.scope, strict=False))
            elif var in self.cells:
                pre.append(self.declare(var, _load(tmp), scope, strict=False))
            else:
                scope.declare(var.idents[0], Binding(tmp, var, strict=False))
        return pre, _load(tmp)

    # -- range ------------------------------------------------------------------------
    def range_(self, node: n.RangeNode, ctx: Ctx) -> list[Stmt]:
        pipe = node.pipe
        value = self.pipe_value(pipe, ctx)
        pre: list[Stmt] = []
        if pipe.decl:
            rv = self.name("r")
            pre.append(j.Assign(_store(rv), value))
            value = _load(rv)
        scope = ctx.scope.child()
        body_scope, else_scope = scope.child(), scope.child()
        idx, elem = self.name("i"), self.name("e")
        per_iter = self.range_vars(pipe, value, ctx, (scope, body_scope, else_scope), pre,
                                   (idx, elem))
        self.loops.append(_Loop(wrapper=False))
        body = per_iter + self.stmts(node.body, Ctx(elem, True, body_scope))
        self.loops.pop()
        iterable = _call("rng", [value, j.Const(len(pipe.decl))])
        target = j.Tuple([_store(idx), _store(elem)], "store")
        if node.else_body is None:
            return [*pre, j.For(target, iterable, body, [], None, False)]
        it = self.name("it")
        else_ = self.range_else(node.else_body, Ctx(ctx.dot, ctx.dot_strict, else_scope))
        loop = j.For(target, _load(it), body, [], None, False)
        return [*pre, j.Assign(_store(it), iterable), j.If(_load(it), [loop], [], else_)]

    def range_vars(
        self,
        pipe: n.PipeNode,
        value: Expr,
        ctx: Ctx,
        scopes: tuple[Scope, Scope, Scope],
        pre: list[Stmt],
        names: tuple[str, str],
    ) -> list[Stmt]:
        """Bind range variables; return the statements run at each iteration."""
        scope, body_scope, else_scope = scopes
        idx, elem = names
        per_iter: list[Stmt] = []
        # With two variables the first is the index and the second the element.
        sources = [elem] if len(pipe.decl) == 1 else [idx, elem]
        for var, source in zip(pipe.decl, sources, strict=False):
            if pipe.is_assign:
                pre.append(self.assign(var, value, ctx.scope, strict=False))
                per_iter.append(self.assign(var, _load(source), ctx.scope, strict=True))
            elif var in self.cells:
                cell = self.declare(var, value, scope, strict=False)
                pre.append(cell)
                assert isinstance(cell, j.Assign) and isinstance(cell.target, j.Name)
                per_iter.append(j.ExprStmt(_call(
                    "cset", [_load(cell.target.name), _load(source), j.Const(True)])))
            else:
                assert isinstance(value, j.Name)
                else_scope.declare(var.idents[0], Binding(value.name, var, strict=False))
                body_scope.declare(var.idents[0], Binding(source, var, strict=True))
        return per_iter

    def range_else(self, else_body: n.ListNode, ctx: Ctx) -> list[Stmt]:
        """A {{break}} in a range's else-list ends that range: wrap the list in a
        one-shot loop (a {{continue}} there still continues the enclosing range)."""
        if not breaks_in_else(else_body):
            return self.stmts(else_body, ctx)
        loop = _Loop(wrapper=True, flag=self.name("flag"))
        self.loops.append(loop)
        inner = self.stmts(else_body, ctx)
        self.loops.pop()
        out: list[Stmt] = [j.For(_store(self.name("w")), _call("once", []), inner, [], None, False)]
        if loop.used_continue:
            out.insert(0, j.Assign(_store(loop.flag), j.List([j.Const(False), j.Const(False)])))
            out.append(j.If(_call("flag", [_load(loop.flag)]), self.continue_(), [], []))
        return out

    # -- pipelines and commands -------------------------------------------------------
    def pipe_value(self, pipe: n.PipeNode, ctx: Ctx) -> Expr:
        value: Expr | None = None
        for cmd in pipe.cmds:
            value = self.command(cmd, value, ctx)
        assert value is not None
        return value

    def paren(self, pipe: n.PipeNode, ctx: Ctx) -> Expr:
        """A parenthesized pipeline (which may assign a variable with `=`)."""
        value = self.pipe_value(pipe, ctx)
        if not pipe.decl:
            return value
        binding = ctx.scope.lookup(pipe.decl[0].idents[0])
        if binding is None:
            return _fail(f"undefined variable: {pipe.decl[0].idents[0]}")
        self.assigned.add(binding.decl)
        return _call("cassign", [_load(binding.jname), value]) if binding.cell else value

    def command(self, cmd: n.CommandNode, final: Expr | None, ctx: Ctx) -> Expr:
        first, args = cmd.args[0], cmd.args[1:]
        has_args = bool(args) or final is not None
        if isinstance(first, n.IdentifierNode):
            return self.function(first.name, args, final, ctx)
        if isinstance(first, n.FieldNode):
            return self.fields(_load(ctx.dot), ctx.dot_strict, first.idents, final, has_args)
        if isinstance(first, n.ChainNode):
            recv, strict = self.chain_receiver(first, ctx)
            return self.fields(recv, strict, first.fields, final, has_args)
        if isinstance(first, n.VariableNode):
            return self.variable(first, final, has_args, ctx)
        if isinstance(first, n.NilNode):
            return _fail("nil is not a command")
        if has_args:
            return _fail("can't give argument to non-function")
        if isinstance(first, n.PipeNode):
            return self.paren(first, ctx)
        return self.arg(first, ctx)

    def fields(self, recv: Expr, strict: bool, keys: tuple[str, ...], final: Expr | None,
               has_args: bool) -> Expr:
        if has_args:
            return _call("fa", [final or j.Const(None), recv, j.Const(keys), j.Const(strict)])
        return _call("f" if strict else "fl", [recv, j.Const(keys)])

    def chain_receiver(self, chain: n.ChainNode, ctx: Ctx) -> tuple[Expr, bool]:
        if isinstance(chain.node, n.PipeNode):
            return self.paren(chain.node, ctx), False
        assert isinstance(chain.node, n.IdentifierNode)
        return self.function(chain.node.name, [], None, ctx), True

    def variable(self, var: n.VariableNode, final: Expr | None, has_args: bool,
                 ctx: Ctx) -> Expr:
        name, keys = var.idents[0], var.idents[1:]
        binding = ctx.scope.lookup(name)
        if binding is None:
            return _fail(f"undefined variable: {name}")
        if not keys:
            if has_args:
                return _fail(f"can't give argument to non-function {name}")
            return _call("cv", [_load(binding.jname)]) if binding.cell else _load(binding.jname)
        if binding.cell:
            if has_args:
                return _call("fac", [final or j.Const(None), _load(binding.jname), j.Const(keys)])
            return _call("fc", [_load(binding.jname), j.Const(keys)])
        return self.fields(_load(binding.jname), binding.strict, keys, final, has_args)

    def arg(self, node: n.Node, ctx: Ctx) -> Expr:
        """An argument, evaluated as Go does for an interface{} parameter."""
        if isinstance(node, n.DotNode):
            return _load(ctx.dot)
        if isinstance(node, n.NilNode):
            return j.Const(None)
        if isinstance(node, n.BoolNode | n.StringNode):
            return j.Const(node.value if isinstance(node, n.BoolNode) else node.text)
        if isinstance(node, n.NumberNode):
            return self.number(node)
        if isinstance(node, n.PipeNode):
            return self.paren(node, ctx)
        if isinstance(node, n.IdentifierNode):
            return self.function(node.name, [], None, ctx)
        cmd = n.CommandNode(node.pos, [node])
        return self.command(cmd, None, ctx)

    def number(self, node: n.NumberNode) -> Expr:
        try:
            value = node.number.ideal()
        except OverflowError as exc:
            return _fail(str(exc))
        if isinstance(value, float):
            return j.Const(value)
        name = self.int_consts.setdefault(int(value), f"_k{len(self.int_consts)}")
        return _load(name)

    def function(self, name: str, args: list[n.Node], final: Expr | None, ctx: Ctx) -> Expr:
        sig = self.signature(name)
        if sig is not None:
            argv = [self.typed_arg(a, sig.param(i), ctx) if i < len(sig.params) or sig.variadic
                    else self.arg(a, ctx) for i, a in enumerate(args)]
        else:
            argv = [self.arg(a, ctx) for a in args]
        if name == "slice":
            argv = [_call("iface", [v]) if i and _field_read(a) else v
                    for i, (a, v) in enumerate(zip(args, argv, strict=True))]
        if name in self.user_functions:
            if final is None:
                return _call("call", [j.Const(name), *argv])
            return _call("callf", [j.Const(name), final, *argv])
        nargs = len(argv) + (final is not None)
        low, high = ARITY[name]
        if nargs < low or (high is not None and nargs > high):
            want = f"at least {low}" if high is None else str(low)
            return _fail(f"wrong number of args for {name}: want {want} got {nargs}")
        if name in ("and", "or"):
            return self.and_or(name, argv, final)
        if name == "not":
            return j.Not(final if final is not None else argv[0])
        if final is None:
            return _call("b_" + name, argv)
        return _call("callf", [j.Const(name), final, *argv])

    def signature(self, name: str) -> Any:
        """The Go signature of a function of the function map (`notes.gosig`), if any."""
        if not isinstance(self.user_functions, Mapping) or name not in self.user_functions:
            return None
        return getattr(self.user_functions[name], "sig", None)

    def typed_arg(self, node: n.Node, code: str, ctx: Ctx) -> Expr:
        """An argument for a parameter of Go type `code` (gosig's codes): a literal is
        converted as exec.go's evalArg converts a constant, or fails as it does."""
        if code == "a" or not isinstance(
                node, n.NumberNode | n.StringNode | n.BoolNode | n.NilNode):
            return self.arg(node, ctx)
        if isinstance(node, n.NilNode):
            if code in "Sml":
                return _call("nil_of", [j.Const(code)])
            return _fail(f"cannot assign nil to {_GO_TYPES[code]}")
        if code == "s" and isinstance(node, n.StringNode):
            return j.Const(node.text)
        if code == "b" and isinstance(node, n.BoolNode):
            return j.Const(node.value)
        if isinstance(node, n.NumberNode):
            number = node.number
            if code == "i" and number.is_int:
                name = self.int_consts.setdefault(number.int64, f"_k{len(self.int_consts)}")
                return _load(name)
            if code == "I" and number.is_int:
                return j.Const(number.int64)
            if code == "f" and number.is_float:
                return j.Const(number.float64)
        expected = {"s": "string", "i": "integer", "I": "integer", "f": "float",
                    "b": "bool"}.get(code)
        text = _literal_text(node)
        if expected is None:
            return _fail(f"can't handle {text} for arg of type {_GO_TYPES[code]}")
        return _fail(f"expected {expected}; found {text}")

    def and_or(self, name: str, argv: list[Expr], final: Expr | None) -> Expr:
        op = j.And if name == "and" else j.Or
        combined: Expr | None = None
        for a in argv:
            combined = a if combined is None else op(combined, a)
        if final is None:
            assert combined is not None
            return combined
        if combined is None:
            combined = j.Const(name == "and")
        return _call("andf" if name == "and" else "orf", [final, combined])


def _field_read(node: n.Node) -> bool:
    """A field read straight from a map (`.spec.i`, `$.spec.i`, `(x).i`): Go hands it to
    a reflect.Value parameter as an interface{}, which `slice` does not unwrap."""
    return isinstance(node, n.FieldNode | n.ChainNode) or (
        isinstance(node, n.VariableNode) and len(node.idents) > 1)


def _literal_text(node: n.Node) -> str:
    if isinstance(node, n.NumberNode):
        return node.number.text
    if isinstance(node, n.StringNode):
        return '"' + node.text + '"'
    if isinstance(node, n.BoolNode):
        return "true" if node.value else "false"
    return "nil"


def compile_ast(
    root: n.ListNode, user_functions: Container[str]
) -> tuple[j.Template, dict[int, str]]:
    """Compile a parsed template; return the Jinja AST and the int constants it uses
    (value -> context name)."""
    first = Compiler(user_functions, cells=set())
    first.template(root)
    second = Compiler(user_functions, cells=first.assigned)
    return second.template(root), second.int_consts
