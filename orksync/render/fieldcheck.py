"""Templates checked against the CRD: every `.spec...` and `.status...` path an entry
reads, looked up in its CRD's `openAPIV3Schema`, since the API server prunes what the
schema does not declare. Pure (docs/katalog-schema.md#templates-checked-against-the-crd)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from orksync.errors import RenderError
from orksync.katalog.model import CrdEntry, CrdManifest, Katalog
from orksync.katalog.motifs import MOTIF_KEY
from orksync.katalog.schema import SKIPPED_TOP_LEVEL, version_schema
from orksync.katalog.validate import MAX_KATALOG_ACTIONS
from orksync.render.gotemplate import GoTemplateEngine, GoTemplateError
from orksync.render.gotemplate import nodes as n
from orksync.render.templates import TemplateEngine
from orksync.yamls.doc import dotted
from orksync.yamls.io import locator

__all__ = ["Miss", "Shape", "field_problems", "path_misses", "root_shape", "template_misses"]

Schema = Mapping[str, Any]
FieldPath = list[str | int]

CHECKED_ROOTS = ("spec", "status")
CONDITION_LISTS = ("when", "or", "anyOf")
MAX_PROBLEMS_PER_ENTRY = 100  # listed one by one; the rest are counted
MAX_TEMPLATE_CALLS = 100  # {{template}} bodies walked per template (recursion included)
# a YAML literal block scalar's header at the end of a line: `key: |`, `- |-`, `|2+`
_LITERAL_BLOCK = re.compile(r"(?:^|[\s:-])\|[-+0-9]*\s*(?:#.*)?$")


@dataclass(frozen=True, slots=True)
class Shape:
    """What the walk knows of a value: the schema it has (None: unknown, not checked) and
    the path of the custom resource it was read at, for messages (`.spec.db`,
    `.spec.list[]` for an element). `root`: the custom resource's data itself, of which
    only `spec` and `status` are checked, and the `names` a forEach puts beside them
    (`item`, its alias: an element of the list it expands)."""

    schema: Schema | None
    path: str = ""
    root: bool = False
    names: tuple[tuple[str, Shape], ...] = ()


UNKNOWN = Shape(None)


@dataclass(frozen=True, slots=True)
class Miss:
    """A path read that the schema does not have: where in the template (character
    offset), the path (`.spec.teir`) and what exists instead (`nearest field: .spec.tier`,
    `.spec.image is a string`)."""

    pos: int
    read: str
    hint: str

    def message(self, schema_of: str) -> str:
        return f"reads {self.read}, which the schema of {schema_of} does not have ({self.hint})"


def root_shape(schema: Schema, each: tuple[str, str] | None = None) -> Shape:
    """The custom resource's data; with `each` (a forEach's field path and alias), the
    element of that field as `.item` and `.<alias>` (and `.value` for a map's)."""
    top = Shape(schema, "", root=True)
    if each is None:
        return top
    field, alias = each
    element = _element(_Walk({}, set()).path(top, [p for p in field.split(".") if p], 0))
    if element.schema is None:
        return top
    names = [("item", element), (alias, element)]
    if element.path.endswith(".*"):
        names.append(("value", element))
    return Shape(schema, "", root=True, names=tuple(names))


def _field(shape: Shape, name: str) -> tuple[Shape, tuple[str, str] | None]:
    """The shape of `name` read on `shape`, and (path, hint) when the schema says the
    value can never hold it."""
    schema = shape.schema
    if shape.root and name not in CHECKED_ROOTS:
        return next((bound for key, bound in shape.names if key == name), UNKNOWN), None
    if schema is None:
        return UNKNOWN, None
    path = f"{shape.path}.{name}"
    raw = schema.get("properties")
    properties: Schema = raw if isinstance(raw, Mapping) else {}
    sub = properties.get(name)
    if isinstance(sub, Mapping):
        return Shape(sub, path), None
    additional = schema.get("additionalProperties")
    if isinstance(additional, Mapping):
        return Shape(additional, path), None
    if additional is True or schema.get("x-kubernetes-preserve-unknown-fields") is True or \
            (schema.get("x-kubernetes-embedded-resource") is True and
             name in SKIPPED_TOP_LEVEL) or schema.get("x-kubernetes-int-or-string"):
        return UNKNOWN, None
    kind = schema.get("type")
    if properties or kind == "object":
        return UNKNOWN, (path, _nearest(shape, name, properties))
    if kind in ("string", "integer", "number", "boolean", "array"):
        return UNKNOWN, (path, f"{shape.path} is {_a(str(kind))}")
    return UNKNOWN, None


def _nearest(shape: Shape, name: str, properties: Schema) -> str:
    names = sorted(str(k) for k in properties)
    near = difflib.get_close_matches(name, names, n=1)
    if near:
        return f"nearest field: {shape.path}.{near[0]}"
    where = shape.path or "the custom resource"
    if not names:
        return f"{where} declares no field"
    shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
    return f"{where} has: {shown}"


def _element(shape: Shape) -> Shape:
    """An element of `shape` as `range` and `index` reach it: an array's items, a map's
    additionalProperties; unknown otherwise."""
    schema = shape.schema
    if schema is None or shape.root:
        return UNKNOWN
    items = schema.get("items")
    if schema.get("type") in ("array", None) and isinstance(items, Mapping):
        return Shape(items, f"{shape.path}[]")
    additional = schema.get("additionalProperties")
    if isinstance(additional, Mapping):
        return Shape(additional, f"{shape.path}.*")
    return UNKNOWN


def _a(type_name: str) -> str:
    return ("an " if type_name[:1] in "aeiou" else "a ") + type_name


class _Walk:
    """One template's parse tree walked beside the schema (the module doc's rules)."""

    def __init__(self, defines: Mapping[str, n.ListNode], assigned: set[str]) -> None:
        self.defines = defines
        self.assigned = assigned  # variables some `=` assigns: unknown everywhere
        self.misses: list[Miss] = []
        self.calls = 0
        self.active: set[tuple[str, str]] = set()  # {{template}} calls being walked

    def body(self, node: n.ListNode, dot: Shape, scope: dict[str, Shape]) -> None:
        for child in node.nodes:
            self.statement(child, dot, scope)

    def statement(self, node: n.Node, dot: Shape, scope: dict[str, Shape]) -> None:
        if isinstance(node, n.ActionNode):
            self.pipe(node.pipe, dot, scope)
        elif isinstance(node, n.RangeNode):
            inner = dict(scope)
            element = _element(self.pipe(node.pipe, dot, inner, declare=False))
            decl = [v.idents[0] for v in node.pipe.decl]
            if decl:
                inner[decl[-1]] = UNKNOWN if decl[-1] in self.assigned else element
                if len(decl) == 2:
                    inner[decl[0]] = UNKNOWN  # the index or key
            self.body(node.body, element, dict(inner))
            if node.else_body is not None:
                self.body(node.else_body, dot, dict(inner))
        elif isinstance(node, n.BranchNode):  # if, with
            inner = dict(scope)
            value = self.pipe(node.pipe, dot, inner)
            self.body(node.body, value if isinstance(node, n.WithNode) else dot, dict(inner))
            if node.else_body is not None:
                self.body(node.else_body, dot, dict(inner))
        elif isinstance(node, n.TemplateNode):
            value = self.pipe(node.pipe, dot, scope) if node.pipe is not None else UNKNOWN
            self.call(node.name, value)

    def call(self, name: str, value: Shape) -> None:
        """{{template name value}}: the body with dot and `$` the value, once per value."""
        body = self.defines.get(name)
        key = (name, value.path)
        if body is None or value.schema is None or key in self.active or \
                self.calls >= MAX_TEMPLATE_CALLS:
            return
        self.calls += 1
        self.active.add(key)
        try:
            self.body(body, value, {"$": value})
        finally:
            self.active.discard(key)

    def pipe(self, pipe: n.PipeNode, dot: Shape, scope: dict[str, Shape], *,
             declare: bool = True) -> Shape:
        value = UNKNOWN
        for i, cmd in enumerate(pipe.cmds):
            value = self.command(cmd, dot, scope, piped=i > 0)
        if declare:
            for var in pipe.decl:
                name = var.idents[0]
                scope[name] = UNKNOWN if pipe.is_assign or name in self.assigned else value
        return value

    def command(self, cmd: n.CommandNode, dot: Shape, scope: dict[str, Shape], *,
                piped: bool) -> Shape:
        first, *rest = cmd.args
        if isinstance(first, n.IdentifierNode):  # a function call
            shapes = [self.operand(arg, dot, scope) for arg in rest]
            if first.name == "index" and not piped and shapes:
                return self.index(shapes[0], rest[1:], first.pos)
            return UNKNOWN
        value = self.operand(first, dot, scope)
        for arg in rest:
            self.operand(arg, dot, scope)
        return value if not rest and not piped else UNKNOWN

    def operand(self, node: n.Node, dot: Shape, scope: dict[str, Shape]) -> Shape:
        if isinstance(node, n.FieldNode):
            return self.path(dot, node.idents, node.pos)
        if isinstance(node, n.VariableNode):
            return self.path(scope.get(node.idents[0], UNKNOWN), node.idents[1:], node.pos)
        if isinstance(node, n.DotNode):
            return dot
        if isinstance(node, n.ChainNode):
            return self.path(self.operand(node.node, dot, scope), node.fields, node.pos)
        if isinstance(node, n.PipeNode):
            return self.pipe(node, dot, scope)
        return UNKNOWN

    def path(self, shape: Shape, idents: Sequence[str], pos: int) -> Shape:
        for name in idents:
            shape, problem = _field(shape, name)
            if problem is not None:
                self.misses.append(Miss(pos, *problem))
            if shape.schema is None:
                return UNKNOWN
        return shape

    def index(self, shape: Shape, keys: Sequence[n.Node], pos: int) -> Shape:
        for key in keys:
            if shape.schema is None:
                return UNKNOWN
            if isinstance(key, n.StringNode):
                shape = self.path(shape, [key.text], pos)
            else:
                shape = _element(shape)
        return shape


def _assigned(nodes: Sequence[n.Node]) -> Iterator[str]:
    """The variables some `=` of the tree assigns."""
    for node in nodes:
        if isinstance(node, n.PipeNode):
            if node.is_assign:
                yield from (v.idents[0] for v in node.decl)
            for cmd in node.cmds:
                yield from _assigned(cmd.args)
        elif isinstance(node, n.ListNode):
            yield from _assigned(node.nodes)
        elif isinstance(node, n.ActionNode):
            yield from _assigned([node.pipe])
        elif isinstance(node, n.BranchNode):
            yield from _assigned([node.pipe, node.body])
            if node.else_body is not None:
                yield from _assigned([node.else_body])
        elif isinstance(node, n.TemplateNode) and node.pipe is not None:
            yield from _assigned([node.pipe])
        elif isinstance(node, n.ChainNode):
            yield from _assigned([node.node])


def template_misses(engine: GoTemplateEngine, source: str, schema: Schema, *,
                    each: tuple[str, str] | None = None) -> list[Miss]:
    """The reads of one template that `schema` (a CRD version's openAPIV3Schema) does not
    have; none for a template that does not parse (that is reported as an error).
    `each`: the forEach (field path, alias) the template renders under."""
    try:
        root, defines = engine.parse_tree(source)
    except GoTemplateError:
        return []
    assigned = set(_assigned([root, *defines.values()]))
    walk = _Walk(defines, assigned)
    top = root_shape(schema, each)
    walk.body(root, top, {"$": top})
    return list(dict.fromkeys(walk.misses))  # one per place and path (a Miss is a value)


def path_misses(path: str, schema: Schema) -> list[Miss]:
    """A condition's dot path (`spec.tier`) checked as a template's `.spec.tier` is."""
    walk = _Walk({}, set())
    walk.path(root_shape(schema), [p for p in path.strip().split(".") if p], 0)
    return walk.misses


# --- a Katalog's entries -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Scope:
    """Where a read sits: the motif file it was imported from ("": the Katalog's own),
    whether a forEach alias hides `spec` or `status` (nothing is checked then), and the
    forEach (field path, alias) it renders under."""

    motif: str = ""
    shadowed: bool = False
    each: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class _Read:
    """A template (`template`) or a condition's dot path, at `path` in the entry."""

    path: FieldPath
    text: str
    template: bool
    scope: _Scope


def field_problems(katalog: Katalog, crds: Sequence[CrdManifest],
                   engine: TemplateEngine) -> dict[str, list[RenderError]]:
    """Per entry key of `katalog`, one error per path its templates and conditions read
    that the schema of its CRD does not have (entries without any are absent). An entry
    whose CRD is not in `crds`, or declares no schema for its version, is not checked; nor
    is a Katalog the render refuses for its number of actions."""
    if not isinstance(engine, GoTemplateEngine) or _actions(katalog) > MAX_KATALOG_ACTIONS:
        return {}
    by_type = {(m.group, m.kind): m for m in crds}
    lines = _Lines()
    out: dict[str, list[RenderError]] = {}
    for entry in katalog.crds:
        crd = by_type.get((entry.group, entry.kind))
        schema = version_schema(crd.body, entry.version)[0] if crd is not None else None
        if crd is None or schema is None:
            continue
        problems = list(_entry_problems(katalog, entry, crd, schema, engine, lines))
        if problems:
            out[entry.key] = problems
    return out


def _actions(katalog: Katalog) -> int:
    """The template actions of the Katalog's entries (`{{`), as the render counts them."""
    count = 0
    stack: list[Any] = [entry.raw for entry in katalog.crds]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            count += value.count("{{")
        elif isinstance(value, Mapping):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return count


def _entry_problems(katalog: Katalog, entry: CrdEntry, crd: CrdManifest, schema: Schema,
                    engine: GoTemplateEngine, lines: _Lines) -> Iterator[RenderError]:
    """One error per path read and place, at most MAX_PROBLEMS_PER_ENTRY (then one
    saying how many more); the Katalog file is parsed for lines only when there is one."""
    own = _own_paths(entry.raw)
    reads: list[_Read] = []
    _collect(entry.raw, [], reads, _Scope())
    where = f"{crd.kind} {entry.api_version} ({crd.source.file})"
    obj = f"Katalog/{katalog.name}"
    find: Callable[[Sequence[str | int]], int | None] | None = None
    said: set[tuple[str, int | None, str, str]] = set()
    for read in reads:
        path, text, motif = read.path, read.text, read.scope.motif
        misses = [m for m in (template_misses(engine, text, schema, each=read.scope.each)
                              if read.template else path_misses(text, schema))
                  if not _declared_by_entry(m.read, own)]
        if not misses:
            continue
        at = ["spec", "crds", entry.key, *entry.written_at(path)]
        first = None
        if not motif:
            find = find or locator(entry.source.path, entry.source.index)
            first = find(at)
        file = motif or entry.source.file
        for miss in misses:
            line, offset = first, text.count("\n", 0, miss.pos)
            if line is not None and offset and lines.literal_block(entry.source.path, line):
                line += 1 + offset  # the template's own line in a `|` block
            key = (file, line, dotted(at), miss.read)
            if key in said:
                continue  # the same path read again on the same line
            said.add(key)
            if len(said) > MAX_PROBLEMS_PER_ENTRY:
                continue
            yield RenderError(miss.message(where), file=file, line=line, path=dotted(at),
                              obj=obj)
    if len(said) > MAX_PROBLEMS_PER_ENTRY:
        yield RenderError(f"{len(said) - MAX_PROBLEMS_PER_ENTRY} more paths read that the "
                          f"schema of {where} does not have, not listed",
                          file=entry.source.file, path=entry.path, obj=obj)


def _collect(value: Any, path: FieldPath, reads: list[_Read], scope: _Scope,
             condition: bool = False) -> None:
    """Every template and condition dot path under `value` (an entry), into `reads`;
    `condition`: `value` is an item of a condition list, whose `field` is a read."""
    if isinstance(value, str):
        if "{{" in value and not scope.shadowed:
            reads.append(_Read(path, value, True, scope))
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            _collect(item, [*path, i], reads, scope, condition)
        return
    if not isinstance(value, Mapping):
        return
    marker = value.get(MOTIF_KEY)
    if isinstance(marker, Mapping):
        scope = replace(scope, motif=str(marker.get("file") or scope.motif))
    if condition:
        _path_read(value.get("field"), [*path, "field"], reads, scope)
    each = value.get("forEach")
    if isinstance(each, Mapping):
        field, alias = each.get("field"), str(each.get("as") or "item")
        field = field.lstrip(".") if isinstance(field, str) else field
        _path_read(field, [*path, "forEach", "field"], reads, scope)
        scope = replace(scope, shadowed=scope.shadowed or alias in CHECKED_ROOTS,
                        each=(field, alias) if isinstance(field, str) and
                        "{{" not in field else None)
    for key, item in value.items():
        key = str(key)
        if key != MOTIF_KEY:
            _collect(item, [*path, key], reads, scope, key in CONDITION_LISTS or
                     (key == "rules" and path[-1:] == ["validation"]))


def _path_read(value: Any, path: FieldPath, reads: list[_Read], scope: _Scope) -> None:
    """A condition's `field` that is a dot path (a template is collected as one)."""
    if isinstance(value, str) and value.strip() and "{{" not in value and \
            not scope.shadowed and not value.startswith("."):
        reads.append(_Read(path, value, False, scope))


def _own_paths(raw: Mapping[str, Any]) -> list[str]:
    """The paths of the data the entry writes itself before its templates run:
    `normalize.spec` keys (under spec) and `mutation.rules[].field`, as `.spec.x`."""
    out: list[str] = []
    for holder in (raw, raw.get("operatorBox")):
        if not isinstance(holder, Mapping):
            continue
        normalize = holder.get("normalize")
        spec = normalize.get("spec") if isinstance(normalize, Mapping) else None
        if isinstance(spec, Mapping):
            out.extend(f".spec.{str(key).strip('.')}" for key in spec)
        mutation = holder.get("mutation")
        rules = mutation.get("rules") if isinstance(mutation, Mapping) else None
        for rule in rules if isinstance(rules, list) else ():
            target = rule.get("field") if isinstance(rule, Mapping) else None
            if isinstance(target, str) and target.strip():
                out.append("." + target.strip().lstrip("."))
    return out


def _declared_by_entry(read: str, own: Sequence[str]) -> bool:
    """Whether `read` is a path the entry writes itself, or lies under or above one."""
    return any(read == p or read.startswith(p + ".") or p.startswith(read + ".")
               for p in own)


class _Lines:
    """The lines of the Katalog files, read once each, to place a template's own line."""

    def __init__(self) -> None:
        self.files: dict[Path, list[str]] = {}

    def literal_block(self, path: Path, line: int) -> bool:
        """Whether the field at `line` holds a literal block scalar (`key: |`), whose
        lines are the template's lines one for one."""
        text = self.files.get(path)
        if text is None:
            try:
                text = path.read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                text = []
            self.files[path] = text
        return 0 < line <= len(text) and bool(_LITERAL_BLOCK.search(text[line - 1]))
