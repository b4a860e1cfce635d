"""Load-time checks of a Katalog, before any custom resource is rendered: every template
compiles (syntax, unknown functions), every condition is well formed (Orkestra silently
passes an unknown operator; orksync refuses it here), and the onCreate / onReconcile
blocks have their shape (maps of resource lists of entries, known resource keys, entries
without keys no builder reads (docs/differences.md T7: `replicass:` is an error naming the
nearest known key; `namespace`/`toNamespaces` on a cluster-scoped kind are only warned
about, by the renderer), a `forEach.field`, a literal `custom` apiVersion and kind that
are valid). A problem here is
one error for the Katalog; the renderer would otherwise report it once per custom
resource (it keeps its own checks for callers that render without this validation). Pure."""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from typing import Any

from orksync.errors import RenderError
from orksync.katalog.model import CrdEntry, Katalog
from orksync.katalog.motifs import MOTIF_KEY
from orksync.names import api_version_problem, kind_problem
from orksync.render.conditions import validate_condition
from orksync.render.gotemplate import GoTemplateError
from orksync.render.kinds import BLOCK_CONTROL_KEYS, BY_KEY, PLACEHOLDER_KEYS, unknown_fields
from orksync.render.notes import EXTENSIONS
from orksync.render.prepare import rule_problems
from orksync.render.resource import BLOCKS
from orksync.render.templates import TemplateEngine
from orksync.yamldoc import dotted
from orksync.yamlio import locate, split_path

CONDITION_KEYS = ("when", "or", "anyOf")


MAX_KATALOG_ACTIONS = 20_000  # compiling costs about a quarter of a millisecond per action


def katalog_problems(katalog: Katalog, engine: TemplateEngine) -> dict[str, list[RenderError]]:
    """Problems per CRD entry key (entries without problems are absent)."""
    too_many = _too_many_actions(katalog)
    if too_many is not None:
        return too_many
    out: dict[str, list[RenderError]] = {}
    for entry in katalog.crds:
        problems = list(entry_problems(katalog, entry, engine))
        if problems:
            out[entry.key] = problems
    return out


def entry_problems(katalog: Katalog, entry: CrdEntry,
                   engine: TemplateEngine) -> Iterator[RenderError]:
    def fail(path: list[str | int], message: str) -> RenderError:
        path = entry.written_at(path)  # as written: grouped layout or flat
        return RenderError(message, file=entry.source.file,
                           line=locate(entry.source.path, entry.source.index,
                                       ["spec", "crds", entry.key, *path]),
                           path=dotted([*entry.path.split("."), *path]),
                           obj=f"Katalog/{katalog.name}")

    for rule_path, message in rule_problems(entry.raw, check=engine.check):
        yield fail(rule_path, message)
    for shape_path, message in shape_problems(entry.operator_box):
        yield fail(["operatorBox", *shape_path], message)
    for path, value in _walk(entry.operator_box, ["operatorBox"]):
        if isinstance(value, str) and "{{" in value:
            try:
                engine.check(value)
            except GoTemplateError as err:
                yield fail(path, f"template error: {err}")
        elif isinstance(value, list) and path and path[-1] in CONDITION_KEYS:
            for i, cond in enumerate(value):
                for problem in validate_condition(cond):
                    yield fail([*path, i], problem)


def cross_warnings(katalog: Katalog) -> list[str]:
    """One warning per `cross` item whose `crd` names no CRD entry of its Katalog: it never
    finds anything (`.cross.<as>` is always not found), as in Orkestra, which says nothing.
    Names the file, the line and the field."""
    keys = {entry.key for entry in katalog.crds}
    out: list[str] = []
    for entry in katalog.crds:
        items = entry.operator_box.get("cross")
        for i, item in enumerate(items if isinstance(items, list) else []):
            crd = item.get("crd") if isinstance(item, Mapping) else None
            if not isinstance(crd, str) or not crd or crd in keys:
                continue
            path = entry.written_at(["operatorBox", "cross", i, "crd"])
            line = locate(entry.source.path, entry.source.index,
                          ["spec", "crds", entry.key, *path])
            where = f"{entry.source.file}:{line}" if line else str(entry.source.file)
            near = difflib.get_close_matches(crd, sorted(keys), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            out.append(f"{where} Katalog/{katalog.name} "
                       f"{dotted([*entry.path.split('.'), *path])}: names {crd!r}, which is "
                       f"not a CRD entry of this Katalog{hint}: .cross.{item.get('as')} "
                       "never finds a custom resource")
    return out


def portability_warnings(katalog: Katalog, engine: TemplateEngine) -> list[str]:
    """One warning per template that calls one of orksync's own notes (`EXTENSIONS`):
    the Katalog renders here but does not load in Orkestra. Names the file, the line, the
    field and the note; a user note of the same name is the Katalog's own, not counted."""
    own = set(katalog.notes)
    out: list[str] = []
    for entry in katalog.crds:
        for path, value in _walk(entry.raw, []):
            if not isinstance(value, str) or "{{" not in value:
                continue
            try:
                used = engine.referenced_functions(value)
            except GoTemplateError:
                continue  # reported as an error by entry_problems
            for name in sorted((used & EXTENSIONS) - own):
                line = locate(entry.source.path, entry.source.index,
                              ["spec", "crds", entry.key, *path])
                where = f"{entry.source.file}:{line}" if line else str(entry.source.file)
                out.append(f"{where} Katalog/{katalog.name} "
                           f"{dotted([*entry.path.split('.'), *path])}: `{name}` is an "
                           "orksync extension that Orkestra does not have: this Katalog "
                           "is not portable to Orkestra")
    return out


def _too_many_actions(katalog: Katalog) -> dict[str, list[RenderError]] | None:
    """More template actions in the Katalog than MAX_KATALOG_ACTIONS: one error on the
    first entry (the others are reported as not checked), before anything compiles."""
    actions = sum(n.count("{{") + n.count("{%") for n in katalog.notes.values())
    for entry in katalog.crds:
        for _, value in _walk(entry.raw, []):
            if isinstance(value, str):
                actions += value.count("{{") + value.count("{%")
    if actions <= MAX_KATALOG_ACTIONS or not katalog.crds:
        return None
    first, *rest = katalog.crds
    out = {first.key: [RenderError(f"the Katalog has {actions} template actions, more than "
                                   f"{MAX_KATALOG_ACTIONS}: not checked, not rendered",
                                   file=first.source.file, obj=f"Katalog/{katalog.name}",
                                   path=first.path)]}
    for entry in rest:
        out[entry.key] = [RenderError("not checked: too many template actions in the "
                                      "Katalog, reported above", file=entry.source.file,
                                      obj=f"Katalog/{katalog.name}", path=entry.path)]
    return out


def _walk(value: Any, path: list[str | int]) -> Iterator[tuple[list[str | int], Any]]:
    yield path, value
    if isinstance(value, Mapping):
        for key, item in value.items():
            if key == MOTIF_KEY:
                continue  # motif inputs are checked where they render
            yield from _walk(item, [*path, str(key)])
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _walk(item, [*path, i])



def shape_problems(box: Mapping[str, Any]) -> Iterator[tuple[list[str | int], str]]:
    """(field path, problem) for each onCreate / onReconcile block of the wrong shape."""
    for name in BLOCKS:
        block = box.get(name)
        if block is None:
            continue
        if not isinstance(block, Mapping):
            yield [name], "must be a map of resource lists"
            continue
        for key, entries in block.items():
            if key in BY_KEY:
                yield from _entries_problems([name, str(key)], str(key), entries)
            elif key not in BLOCK_CONTROL_KEYS and key not in PLACEHOLDER_KEYS:
                yield [name, str(key)], unknown_resource_key(str(key))


def unknown_resource_key(key: str) -> str:
    """`unknown resource key (did you mean 'deployments'?)`."""
    nearest = difflib.get_close_matches(key, [*BY_KEY, *PLACEHOLDER_KEYS], n=1)
    return "unknown resource key" + (f" (did you mean {nearest[0]!r}?)" if nearest else "")


def _entries_problems(path: list[str | int], key: str,
                      entries: Any) -> Iterator[tuple[list[str | int], str]]:
    if entries is None:
        return
    if not isinstance(entries, list):
        yield path, "must be a list of entries"
        return
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            yield [*path, i], "must be a map"
            continue
        each = entry.get("forEach")
        if each is not None and (not isinstance(each, Mapping) or not each.get("field")):
            yield [*path, i, "forEach"], "needs field (a dot path)"
        marker = entry.get(MOTIF_KEY)
        own = {k: v for k, v in entry.items() if k != MOTIF_KEY} \
            if isinstance(marker, Mapping) else entry
        origin = f" (imported from motif {marker.get('file')})" \
            if isinstance(marker, Mapping) else ""
        for unknown in unknown_fields(key, own):
            if not unknown.ignored:
                yield [*path, i, *split_path(unknown.path)], unknown.message(key) + origin
        if key != "custom":
            continue
        for field, rule in (("apiVersion", api_version_problem), ("kind", kind_problem)):
            value = entry.get(field)
            if isinstance(value, str) and value and "{{" not in value and rule(value):
                yield [*path, i, field], str(rule(value))
