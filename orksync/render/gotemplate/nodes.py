"""AST of a Go template (mirrors text/template/parse's node types).

Pure. No I/O. `pos` is the character offset of the node in the template source.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .literals import Number


@dataclass(slots=True, eq=False)
class Node:
    pos: int


# -- operands --------------------------------------------------------------------------
@dataclass(slots=True, eq=False)
class DotNode(Node):
    pass


@dataclass(slots=True, eq=False)
class NilNode(Node):
    pass


@dataclass(slots=True, eq=False)
class BoolNode(Node):
    value: bool


@dataclass(slots=True, eq=False)
class NumberNode(Node):
    number: Number


@dataclass(slots=True, eq=False)
class StringNode(Node):
    text: str


@dataclass(slots=True, eq=False)
class FieldNode(Node):
    """`.a.b`: field chain on dot."""

    idents: tuple[str, ...]


@dataclass(slots=True, eq=False)
class VariableNode(Node):
    """`$x` or `$x.a.b` (idents[0] is the variable name, `$` included)."""

    idents: tuple[str, ...]


@dataclass(slots=True, eq=False)
class IdentifierNode(Node):
    """A function name."""

    name: str


@dataclass(slots=True, eq=False)
class ChainNode(Node):
    """`(pipeline).a.b` or `fn.a`: fields on a non-field operand."""

    node: Node
    fields: tuple[str, ...]


@dataclass(slots=True, eq=False)
class CommandNode(Node):
    args: list[Node] = field(default_factory=list)


@dataclass(slots=True, eq=False)
class PipeNode(Node):
    """A pipeline; `decl` are the declared/assigned variables (`:=` or `=`)."""

    decl: list[VariableNode] = field(default_factory=list)
    is_assign: bool = False
    cmds: list[CommandNode] = field(default_factory=list)


# -- statements ------------------------------------------------------------------------
@dataclass(slots=True, eq=False)
class ListNode(Node):
    nodes: list[Node] = field(default_factory=list)


@dataclass(slots=True, eq=False)
class TextNode(Node):
    text: str


@dataclass(slots=True, eq=False)
class ActionNode(Node):
    pipe: PipeNode


@dataclass(slots=True, eq=False)
class BranchNode(Node):
    pipe: PipeNode
    body: ListNode
    else_body: ListNode | None


@dataclass(slots=True, eq=False)
class IfNode(BranchNode):
    pass


@dataclass(slots=True, eq=False)
class WithNode(BranchNode):
    pass


@dataclass(slots=True, eq=False)
class RangeNode(BranchNode):
    pass


@dataclass(slots=True, eq=False)
class BreakNode(Node):
    pass


@dataclass(slots=True, eq=False)
class ContinueNode(Node):
    pass


@dataclass(slots=True, eq=False)
class TemplateNode(Node):
    """`{{template "name" pipeline}}` (also what `{{block}}` leaves in its place)."""

    name: str
    pipe: PipeNode | None
