"""Parser for Go text/template, a port of text/template/parse/parse.go.

Pure. No I/O. Builds the AST of `nodes.py` and performs the same parse-time checks as Go
(undefined functions and variables, {{break}} outside {{range}}, empty commands, ...).
`define` and `block` bodies are returned by name beside the main tree (`parse_templates`);
complex constants and variable declarations inside parentheses are rejected.
"""

from __future__ import annotations

from collections.abc import Callable, Container

from . import nodes as n
from .errors import GoParseError
from .lexer import T, Token, lex
from .literals import parse_char, parse_float, parse_number, unquote_string

MAX_PAREN_DEPTH = 100
MAX_CONTROL_DEPTH = 100

_OPERAND_START = {
    T.BOOL, T.CHAR_CONST, T.COMPLEX, T.DOT, T.FIELD, T.IDENT, T.NUMBER, T.NIL,
    T.RAW_STRING, T.STRING, T.VARIABLE, T.LPAREN,
}
_NON_EXECUTABLE = (n.BoolNode, n.DotNode, n.NilNode, n.NumberNode, n.StringNode)


class _End(n.Node):
    """{{end}} marker returned by `_text_or_action`."""


class _Else(n.Node):
    """{{else}} marker returned by `_text_or_action`."""


class Parser:
    """Parses one template. `functions` holds the callable names (builtins included);
    `check_functions=False` accepts unknown function names (Go's SkipFuncCheck)."""

    def __init__(self, source: str, functions: Container[str], *, check_functions: bool = True):
        self.source = source
        self.functions = functions
        self.check_functions = check_functions
        self.tokens = lex(
            source, break_ok="break" not in functions, continue_ok="continue" not in functions
        )
        self.i = 0
        self.vars: list[str] = ["$"]
        self.range_depth = 0
        self.paren_depth = 0
        self.control_depth = 0
        self.identifiers: set[str] = set()
        self.defines: dict[str, n.ListNode] = {}

    # -- token stream ---------------------------------------------------------------
    def _token(self, index: int) -> Token:
        tok = self.tokens[min(index, len(self.tokens) - 1)]
        if tok.typ is T.ERROR:
            raise GoParseError(tok.val, tok.pos)
        return tok

    def next(self) -> Token:
        tok = self._token(self.i)
        self.i += 1
        return tok

    def peek(self) -> Token:
        return self._token(self.i)

    def next_non_space(self) -> Token:
        tok = self.next()
        while tok.typ is T.SPACE:
            tok = self.next()
        return tok

    def peek_non_space(self) -> Token:
        tok = self.next_non_space()
        self.i -= 1
        return tok

    def error(self, msg: str, tok: Token | None = None) -> GoParseError:
        pos = tok.pos if tok is not None else self._token(max(self.i - 1, 0)).pos
        return GoParseError(msg, pos)

    def unexpected(self, tok: Token, context: str) -> GoParseError:
        return self.error(f"unexpected {tok.describe()} in {context}", tok)

    def expect(self, typ: T, context: str) -> Token:
        tok = self.next_non_space()
        if tok.typ is not typ:
            raise self.unexpected(tok, context)
        return tok

    # -- top level ------------------------------------------------------------------
    def parse(self) -> n.ListNode:
        root = n.ListNode(self.peek().pos)
        while self.peek().typ is not T.EOF:
            if self.peek().typ is T.LEFT_DELIM:
                start = self.i
                self.next()
                kw = self.next_non_space()
                if kw.typ is T.DEFINE:
                    self._definition()
                    continue
                self.i = start
            node = self._text_or_action()
            if isinstance(node, _End | _Else):
                word = "end" if isinstance(node, _End) else "else"
                raise self.error(f"unexpected {{{{{word}}}}}")
            root.nodes.append(node)
        return root

    def _item_list(self) -> tuple[n.ListNode, n.Node]:
        lst = n.ListNode(self.peek_non_space().pos)
        while self.peek_non_space().typ is not T.EOF:
            node = self._text_or_action()
            if isinstance(node, _End | _Else):
                return lst, node
            lst.nodes.append(node)
        raise self.error("unexpected EOF", self.peek())

    def _text_or_action(self) -> n.Node:
        tok = self.next_non_space()
        if tok.typ is T.TEXT:
            return n.TextNode(tok.pos, tok.val)
        if tok.typ is T.LEFT_DELIM:
            return self._action()
        raise self.unexpected(tok, "input")

    def _action(self) -> n.Node:
        tok = self.next_non_space()
        handlers: dict[T, Callable[[Token], n.Node]] = {
            T.BREAK: self._break_control,
            T.CONTINUE: self._continue_control,
            T.ELSE: self._else_control,
            T.END: self._end_control,
            T.IF: lambda t: self._control(n.IfNode, "if"),
            T.RANGE: lambda t: self._control(n.RangeNode, "range"),
            T.WITH: lambda t: self._control(n.WithNode, "with"),
        }
        if tok.typ is T.TEMPLATE:
            return self._template_control()
        if tok.typ is T.BLOCK:
            return self._block_control()
        handler = handlers.get(tok.typ)
        if handler is not None:
            return handler(tok)
        self.i -= 1
        start = self.peek()
        return n.ActionNode(start.pos, self._pipeline("command", T.RIGHT_DELIM))

    # -- define / template / block ------------------------------------------------------
    def _template_name(self, tok: Token, context: str) -> str:
        if tok.typ not in (T.STRING, T.RAW_STRING):
            raise self.unexpected(tok, context)
        return unquote_string(tok.val, tok.pos)

    def _sub_tree(self, context: str) -> n.ListNode:
        """A template body of its own (define, block): a fresh variable scope, no
        enclosing range, up to its {{end}}."""
        saved = (self.vars, self.range_depth)
        self.vars, self.range_depth = ["$"], 0
        try:
            body, end = self._item_list()
        finally:
            self.vars, self.range_depth = saved
        if not isinstance(end, _End):
            raise self.error(f"unexpected {{{{else}}}} in {context}")
        return body

    def _add(self, name: str, body: n.ListNode, pos: int) -> None:
        """parse.Tree.add: a second non-empty definition of a name is an error; an empty
        one never replaces a non-empty one."""
        old = self.defines.get(name)
        if old is None or is_empty_tree(old):
            self.defines[name] = body
        elif not is_empty_tree(body):
            raise GoParseError(f"template: multiple definition of template {name!r}", pos)

    def _definition(self) -> None:
        context = "define clause"
        tok = self.next_non_space()
        if tok.typ not in (T.STRING, T.RAW_STRING):
            raise self.unexpected(tok, context)
        name = self._template_name(tok, context)
        self.expect(T.RIGHT_DELIM, context)
        self._add(name, self._sub_tree(context), tok.pos)

    def _template_control(self) -> n.Node:
        context = "template clause"
        tok = self.next_non_space()
        name = self._template_name(tok, context)
        pipe = None
        if self.peek_non_space().typ is not T.RIGHT_DELIM:
            pipe = self._pipeline(context, T.RIGHT_DELIM)
        else:
            self.next_non_space()
        return n.TemplateNode(tok.pos, name, pipe)

    def _block_control(self) -> n.Node:
        context = "block clause"
        tok = self.next_non_space()
        name = self._template_name(tok, context)
        pipe = self._pipeline(context, T.RIGHT_DELIM)
        self._add(name, self._sub_tree(context), tok.pos)
        return n.TemplateNode(tok.pos, name, pipe)

    def _loop_control(self, tok: Token, name: str) -> n.Node:
        after = self.next_non_space()
        if after.typ is not T.RIGHT_DELIM:
            raise self.unexpected(after, f"{{{{{name}}}}}")
        if self.range_depth == 0:
            raise self.error(f"{{{{{name}}}}} outside {{{{range}}}}", tok)
        return n.BreakNode(tok.pos) if name == "break" else n.ContinueNode(tok.pos)

    def _break_control(self, tok: Token) -> n.Node:
        return self._loop_control(tok, "break")

    def _continue_control(self, tok: Token) -> n.Node:
        return self._loop_control(tok, "continue")

    def _else_control(self, tok: Token) -> n.Node:
        peek = self.peek_non_space()
        if peek.typ in (T.IF, T.WITH):
            return _Else(peek.pos)
        self.expect(T.RIGHT_DELIM, "else")
        return _Else(tok.pos)

    def _end_control(self, tok: Token) -> n.Node:
        self.expect(T.RIGHT_DELIM, "end")
        return _End(tok.pos)

    # -- control structures --------------------------------------------------------
    def _control(self, cls: type[n.BranchNode], context: str) -> n.Node:
        if self.control_depth >= MAX_CONTROL_DEPTH:
            raise self.error("template nested too deeply")
        saved_vars = len(self.vars)
        self.control_depth += 1
        try:
            return self._parse_control(cls, context)
        finally:
            self.control_depth -= 1
            del self.vars[saved_vars:]

    def _parse_control(self, cls: type[n.BranchNode], context: str) -> n.Node:
        pipe = self._pipeline(context, T.RIGHT_DELIM)
        if context == "range":
            self.range_depth += 1
        body, nxt = self._item_list()
        if context == "range":
            self.range_depth -= 1
        else_body = None
        if isinstance(nxt, _Else):
            kw = self.peek().typ
            if context in ("if", "with") and kw is {"if": T.IF, "with": T.WITH}[context]:
                self.next()
                else_body = n.ListNode(nxt.pos, [self._control(cls, context)])
            else:
                else_body, nxt = self._item_list()
                if not isinstance(nxt, _End):
                    raise self.error("expected end; found {{else}}")
        return cls(pipe.pos, pipe, body, else_body)

    # -- pipelines --------------------------------------------------------------------
    def _pipeline(self, context: str, end: T) -> n.PipeNode:
        pipe = n.PipeNode(self.peek_non_space().pos)
        self._declarations(pipe, context)
        while True:
            tok = self.next_non_space()
            if tok.typ is end:
                self._check_pipeline(pipe, context)
                return pipe
            if tok.typ not in _OPERAND_START:
                raise self.unexpected(tok, context)
            self.i -= 1
            pipe.cmds.append(self._command())

    def _declarations(self, pipe: n.PipeNode, context: str) -> None:
        while self.peek_non_space().typ is T.VARIABLE:
            start = self.i
            var = self.next_non_space()
            nxt = self.peek_non_space()
            if nxt.typ in (T.ASSIGN, T.DECLARE):
                pipe.is_assign = nxt.typ is T.ASSIGN
                self.next_non_space()
                self._declare(pipe, var)
                return
            if nxt.typ is T.CHAR and nxt.val == ",":
                self.next_non_space()
                self._declare(pipe, var)
                if context == "range" and len(pipe.decl) < 2:
                    if self.peek_non_space().typ in (T.VARIABLE, T.RIGHT_DELIM, T.RPAREN):
                        continue
                    raise self.error("range can only initialize variables")
                raise self.error(f"too many declarations in {context}")
            self.i = start  # not a declaration: the variable starts a command
            return

    def _declare(self, pipe: n.PipeNode, var: Token) -> None:
        if self.paren_depth and not pipe.is_assign:
            raise self.error("variable declaration inside parentheses is not supported", var)
        pipe.decl.append(n.VariableNode(var.pos, (var.val,)))
        self.vars.append(var.val)

    def _check_pipeline(self, pipe: n.PipeNode, context: str) -> None:
        if not pipe.cmds:
            raise self.error(f"missing value for {context}")
        for i, cmd in enumerate(pipe.cmds[1:]):
            if isinstance(cmd.args[0], _NON_EXECUTABLE):
                raise self.error(f"non executable command in pipeline stage {i + 2}")

    def _command(self) -> n.CommandNode:
        cmd = n.CommandNode(self.peek_non_space().pos)
        while True:
            self.peek_non_space()
            operand = self._operand()
            if operand is not None:
                cmd.args.append(operand)
            tok = self.next()
            if tok.typ is T.SPACE:
                continue
            if tok.typ in (T.RIGHT_DELIM, T.RPAREN):
                self.i -= 1
            elif tok.typ is not T.PIPE:
                raise self.unexpected(tok, "operand")
            break
        if not cmd.args:
            raise self.error("empty command")
        return cmd

    def _operand(self) -> n.Node | None:
        node = self._term()
        if node is None or self.peek().typ is not T.FIELD:
            return node
        fields: list[str] = []
        while self.peek().typ is T.FIELD:
            fields.append(self.next().val[1:])
        if isinstance(node, n.FieldNode):
            return n.FieldNode(node.pos, node.idents + tuple(fields))
        if isinstance(node, n.VariableNode):
            return n.VariableNode(node.pos, node.idents + tuple(fields))
        if isinstance(node, _NON_EXECUTABLE):
            raise self.error("unexpected . after term", self.tokens[self.i - 1])
        return n.ChainNode(node.pos, node, tuple(fields))

    def _term(self) -> n.Node | None:
        tok = self.next_non_space()
        typ, pos = tok.typ, tok.pos
        if typ is T.IDENT:
            if self.check_functions and tok.val not in self.functions:
                raise self.error(f'function "{tok.val}" not defined', tok)
            self.identifiers.add(tok.val)
            return n.IdentifierNode(pos, tok.val)
        simple: dict[T, Callable[[], n.Node]] = {
            T.DOT: lambda: n.DotNode(pos),
            T.NIL: lambda: n.NilNode(pos),
            T.VARIABLE: lambda: self._use_var(tok),
            T.FIELD: lambda: n.FieldNode(pos, (tok.val[1:],)),
            T.BOOL: lambda: n.BoolNode(pos, tok.val == "true"),
            T.CHAR_CONST: lambda: n.NumberNode(pos, parse_char(tok.val, pos)),
            T.NUMBER: lambda: self._number(tok),
            T.COMPLEX: lambda: self._complex(tok),
            T.STRING: lambda: n.StringNode(pos, unquote_string(tok.val, pos)),
            T.RAW_STRING: lambda: n.StringNode(pos, unquote_string(tok.val, pos)),
            T.LPAREN: self._paren,
        }
        make = simple.get(typ)
        if make is None:
            self.i -= 1
            return None
        return make()

    def _number(self, tok: Token) -> n.Node:
        if tok.val.endswith("i") and parse_float(tok.val[:-1]) is not None:
            self._complex(tok)
        return n.NumberNode(tok.pos, parse_number(tok.val, tok.pos))

    def _complex(self, tok: Token) -> n.Node:
        raise self.error("complex constants are not supported", tok)

    def _paren(self) -> n.Node:
        if self.paren_depth >= MAX_PAREN_DEPTH:
            raise self.error("max expression depth exceeded")
        self.paren_depth += 1
        try:
            return self._pipeline("parenthesized pipeline", T.RPAREN)
        finally:
            self.paren_depth -= 1

    def _use_var(self, tok: Token) -> n.Node:
        if tok.val not in self.vars:
            raise self.error(f'undefined variable "{tok.val}"', tok)
        return n.VariableNode(tok.pos, (tok.val,))


def parse(
    source: str, functions: Container[str], *, check_functions: bool = True
) -> tuple[n.ListNode, set[str]]:
    """Parse a template; return its AST and the function names it references (the
    bodies of its {{define}}s and {{block}}s included)."""
    root, _, identifiers = parse_templates(source, functions, check_functions=check_functions)
    return root, identifiers


def parse_templates(
    source: str, functions: Container[str], *, check_functions: bool = True
) -> tuple[n.ListNode, dict[str, n.ListNode], set[str]]:
    """Parse a template: its main tree, the templates it defines ({{define}},
    {{block}}) by name, and the function names it references."""
    parser = Parser(source, functions, check_functions=check_functions)
    root = parser.parse()
    return root, parser.defines, parser.identifiers


def is_empty_tree(node: n.Node) -> bool:
    """parse.IsEmptyTree: only blank text."""
    if isinstance(node, n.ListNode):
        return all(is_empty_tree(child) for child in node.nodes)
    if isinstance(node, n.TextNode):
        return node.text.strip(" \t\n\r\v\f\x85\xa0") == ""
    return False
