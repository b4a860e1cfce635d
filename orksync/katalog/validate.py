"""Load-time checks of a Katalog's CRD entries, before any custom resource renders: the
onCreate / onReconcile blocks have their shape, normalize / mutation / validation blocks
are well formed, `cross` names an entry, the Katalog is not too large to check. A problem
is one error for the Katalog instead of one per custom resource. Pure.

What the render layer knows (its resource keys and their fields, the condition language,
the template compiler, valueType conversion) is handed in as a `Vocabulary`, so this
layer never imports render/ (render/validate.py builds it; docs/architecture.md)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from orksync.errors import RenderError
from orksync.katalog.model import CrdEntry, Katalog
from orksync.katalog.motifs import MOTIF_KEY
from orksync.names import api_version_problem, kind_problem
from orksync.yamls.doc import dotted
from orksync.yamls.io import locate, split_path

__all__ = ["ACTIONS", "IDENTITY_FIELDS", "MAX_KATALOG_ACTIONS", "MUTATION_RULE_KEYS",
           "NOT_IN_RULES", "VALUE_TYPES", "Vocabulary", "cross_warnings", "entry_problems",
           "katalog_problems", "rule_condition_keys", "rule_problems", "shape_problems",
           "unknown_resource_key", "walk"]

Path = list[str | int]

CONDITION_LIST_KEYS = ("when", "or", "anyOf")
MAX_KATALOG_ACTIONS = 20_000  # compiling costs about a quarter of a millisecond per action
VALUE_TYPES = frozenset({"int", "integer", "float", "number", "bool", "boolean", "string"})
ACTIONS = ("deny", "warn")
IDENTITY_FIELDS = frozenset({"apiVersion", "kind", "metadata.name", "metadata.namespace"})
MUTATION_RULE_KEYS = frozenset({"field", "default", "override", "valueType", "when", "or",
                                "anyOf", "fires", MOTIF_KEY})
# condition keys a rule may not carry: the wall-clock and notification ones
NOT_IN_RULES = frozenset({"time", "dayOfWeek", "cron", "duration", "source", "notify"})
_DOTTED = re.compile(r"^[^.\s{}]+(\.[^.\s{}]+)*$")


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """The render layer's answers to the questions these checks ask."""

    blocks: tuple[str, ...]  # onCreate, onReconcile
    resource_keys: Collection[str]  # deployments, services, ...: the builders' keys
    control_keys: Collection[str]  # block keys that are not resources (when, ordered, ...)
    placeholder_keys: Collection[str]  # resource keys accepted and not built
    # (entry-relative path, message) of each field of a resource entry no builder reads
    unknown_fields: Callable[[str, Mapping[str, Any]], Iterable[tuple[str, str]]]
    condition_keys: frozenset[str]  # every key a condition may carry
    condition_problems: Callable[[Any], list[str]]  # a malformed condition's problems
    convert: Callable[[Any, str], Any]  # a value to a valueType; ValueError when it cannot
    describe: Callable[[Any], str]  # a value as a template prints it, for messages
    template_problem: Callable[[str], str | None] | None = None  # compiles a template


def rule_condition_keys(vocabulary: Vocabulary) -> frozenset[str]:
    """The condition keys a validation rule may carry."""
    return vocabulary.condition_keys - NOT_IN_RULES


def katalog_problems(katalog: Katalog, vocabulary: Vocabulary) -> dict[str, list[RenderError]]:
    """Problems per CRD entry key (entries without problems are absent)."""
    too_many = _too_many_actions(katalog)
    if too_many is not None:
        return too_many
    out: dict[str, list[RenderError]] = {}
    for entry in katalog.crds:
        problems = list(entry_problems(katalog, entry, vocabulary))
        if problems:
            out[entry.key] = problems
    return out


def entry_problems(katalog: Katalog, entry: CrdEntry,
                   vocabulary: Vocabulary) -> Iterator[RenderError]:
    def fail(path: Path, message: str) -> RenderError:
        path = entry.written_at(path)  # as written: grouped layout or flat
        return RenderError(message, file=entry.source.file,
                           line=locate(entry.source.path, entry.source.index,
                                       ["spec", "crds", entry.key, *path]),
                           path=dotted([*entry.path.split("."), *path]),
                           obj=f"Katalog/{katalog.name}")

    for rule_path, message in rule_problems(entry.raw, vocabulary):
        yield fail(rule_path, message)
    for shape_path, message in shape_problems(entry.operator_box, vocabulary):
        yield fail(["operatorBox", *shape_path], message)
    check = vocabulary.template_problem
    for path, value in walk(entry.operator_box, ["operatorBox"]):
        if isinstance(value, str) and "{{" in value:
            problem = check(value) if check is not None else None
            if problem:
                yield fail(path, f"template error: {problem}")
        elif isinstance(value, list) and path and path[-1] in CONDITION_LIST_KEYS:
            for i, cond in enumerate(value):
                for problem in vocabulary.condition_problems(cond):
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


def _too_many_actions(katalog: Katalog) -> dict[str, list[RenderError]] | None:
    """More template actions in the Katalog than MAX_KATALOG_ACTIONS: one error on the
    first entry (the others are reported as not checked), before anything compiles."""
    actions = sum(n.count("{{") + n.count("{%") for n in katalog.notes.values())
    for entry in katalog.crds:
        for _, value in walk(entry.raw, []):
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


def walk(value: Any, path: Path) -> Iterator[tuple[Path, Any]]:
    """Every node under `value` with its path, motif inputs left out (they are checked
    where they render)."""
    yield path, value
    if isinstance(value, Mapping):
        for key, item in value.items():
            if key == MOTIF_KEY:
                continue
            yield from walk(item, [*path, str(key)])
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from walk(item, [*path, i])


# ── onCreate / onReconcile ──────────────────────────────────────────────────────────

def shape_problems(box: Mapping[str, Any],
                   vocabulary: Vocabulary) -> Iterator[tuple[Path, str]]:
    """(field path, problem) for each onCreate / onReconcile block of the wrong shape."""
    for name in vocabulary.blocks:
        block = box.get(name)
        if block is None:
            continue
        if not isinstance(block, Mapping):
            yield [name], "must be a map of resource lists"
            continue
        for key, entries in block.items():
            if key in vocabulary.resource_keys:
                yield from _entries_problems([name, str(key)], str(key), entries, vocabulary)
            elif key not in vocabulary.control_keys and key not in vocabulary.placeholder_keys:
                yield [name, str(key)], unknown_resource_key(str(key), vocabulary)


def unknown_resource_key(key: str, vocabulary: Vocabulary) -> str:
    """`unknown resource key (did you mean 'deployments'?)`."""
    known = [*vocabulary.resource_keys, *vocabulary.placeholder_keys]
    nearest = difflib.get_close_matches(key, known, n=1)
    return "unknown resource key" + (f" (did you mean {nearest[0]!r}?)" if nearest else "")


def _entries_problems(path: Path, key: str, entries: Any,
                      vocabulary: Vocabulary) -> Iterator[tuple[Path, str]]:
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
        for field_path, message in vocabulary.unknown_fields(key, own):
            yield [*path, i, *split_path(field_path)], message + origin
        if key != "custom":
            continue
        for field, rule in (("apiVersion", api_version_problem), ("kind", kind_problem)):
            value = entry.get(field)
            if isinstance(value, str) and value and "{{" not in value and rule(value):
                yield [*path, i, field], str(rule(value))


# ── normalize / mutation / validation ───────────────────────────────────────────────

def _text(value: Any, vocabulary: Vocabulary) -> str:
    return "" if value is None else value if isinstance(value, str) \
        else vocabulary.describe(value)


def _field_problem(value: Any, vocabulary: Vocabulary, *, under_spec: bool = False) -> str:
    if not isinstance(value, str) or not value.strip():
        return f"needs a field (a dot path), got {vocabulary.describe(value)!r}"
    if "{{" in value:
        return ""
    if not _DOTTED.match(value):
        return f"{value!r} is not a dot path (write spec.replicas, no leading dot)"
    if under_spec and value.startswith("spec."):
        return f"paths are under spec already: write {value[5:]!r}, not {value!r}"
    if not under_spec and value in IDENTITY_FIELDS:
        return f"{value} identifies the custom resource and cannot be changed"
    return ""


def _templates(node: Any, path: Path, vocabulary: Vocabulary,
               out: list[tuple[Path, str]]) -> None:
    check = vocabulary.template_problem
    if check is None:
        return
    for at, value in walk(node, path):
        if isinstance(value, str) and "{{" in value:
            problem = check(value)
            if problem:
                out.append((at, f"template error: {problem}"))


def _conditions(rule: Mapping[str, Any], path: Path, vocabulary: Vocabulary,
                out: list[tuple[Path, str]]) -> None:
    for key in CONDITION_LIST_KEYS:
        value = rule.get(key)
        if value is None:
            continue
        if not isinstance(value, list):
            out.append(([*path, key], "must be a list of conditions"))
            continue
        for j, cond in enumerate(value):
            out.extend(([*path, key, j], p) for p in vocabulary.condition_problems(cond))
    fires = rule.get("fires")
    if fires is not None and not (isinstance(fires, Mapping)
                                  and all(isinstance(v, bool) for v in fires.values())):
        out.append(([*path, "fires"], "must be a map such as {reconcile: false}"))


def _config(raw: Mapping[str, Any], key: str, allowed: frozenset[str],
            out: list[tuple[Path, str]]) -> tuple[Path, list[Any]]:
    path: Path = [key]
    config = raw.get(key)
    if config is None:
        box = raw.get("operatorBox")
        config = box.get(key) if isinstance(box, Mapping) else None
        path = ["operatorBox", key]
    if config is None:
        return path, []
    if not isinstance(config, Mapping):
        out.append((path, "must be a map"))
        return path, []
    for k in config:
        if k in ("include", "external"):
            out.append(([*path, k], f"{key}.{k} is not supported by orksync (inline the "
                        "rules; orksync makes no calls while rendering)"))
        elif k not in allowed:
            out.append(([*path, k], f"unknown {key} key {k!r}"))
    rules = config.get("rules")
    if rules is not None and not isinstance(rules, list):
        out.append(([*path, "rules"], "must be a list of rules"))
        return path, []
    return path, list(rules or [])


def _normalize_problems(entry_raw: Mapping[str, Any], vocabulary: Vocabulary,
                        out: list[tuple[Path, str]]) -> None:
    path, _ = _config(entry_raw, "normalize", frozenset({"spec"}), out)
    spec_map = _block(entry_raw, "normalize").get("spec")
    if spec_map is not None and not isinstance(spec_map, Mapping):
        out.append(([*path, "spec"], "must be a map of path to template"))
    for key, template in (spec_map or {}).items() if isinstance(spec_map, Mapping) else ():
        problem = _field_problem(str(key), vocabulary, under_spec=True)
        if problem:
            out.append(([*path, "spec", str(key)], problem))
        _templates(template, [*path, "spec", str(key)], vocabulary, out)


def _mutation_problems(entry_raw: Mapping[str, Any], vocabulary: Vocabulary,
                       out: list[tuple[Path, str]]) -> None:
    path, rules = _config(entry_raw, "mutation", frozenset({"rules", "mutateFirst"}), out)
    for i, rule in enumerate(rules):
        at: Path = [*path, "rules", i]
        if not isinstance(rule, Mapping):
            out.append((at, "a mutation rule must be a map"))
            continue
        out.extend(([*at, k], f"unknown mutation rule key {k!r}") for k in rule
                   if k not in MUTATION_RULE_KEYS)
        problem = _field_problem(rule.get("field"), vocabulary)
        if problem:
            out.append(([*at, "field"], problem))
        has = [k for k in ("override", "default") if rule.get(k) is not None]
        if not has:
            out.append((at, "needs default: or override:"))
        elif len(has) == 2:
            out.append((at, "has both override: and default: (only override would be used)"))
        value_type = _text(rule.get("valueType"), vocabulary)
        if value_type and value_type not in VALUE_TYPES:
            out.append(([*at, "valueType"], f"unknown valueType {value_type!r}; known: "
                        + ", ".join(sorted(VALUE_TYPES))))
        elif value_type and has and not (isinstance(rule[has[0]], str)
                                         and "{{" in rule[has[0]]):
            try:
                vocabulary.convert(rule[has[0]], value_type)
            except ValueError as err:
                out.append(([*at, has[0]], str(err)))
        _conditions(rule, at, vocabulary, out)
        _templates(rule, at, vocabulary, out)


def _validation_problems(entry_raw: Mapping[str, Any], vocabulary: Vocabulary,
                         out: list[tuple[Path, str]]) -> None:
    condition_keys = rule_condition_keys(vocabulary)
    allowed = condition_keys | {"action", "message", "when", "or", "anyOf", "fires", "link",
                                "valueType", MOTIF_KEY}
    path, rules = _config(entry_raw, "validation", frozenset({"rules"}), out)
    for i, rule in enumerate(rules):
        at: Path = [*path, "rules", i]
        if not isinstance(rule, Mapping):
            out.append((at, "a validation rule must be a map"))
            continue
        out.extend(([*at, k], f"unknown validation rule key {k!r}") for k in rule
                   if k not in allowed)
        action = rule.get("action")
        if action is not None and action not in ACTIONS:
            out.append(([*at, "action"], f"unknown action {action!r} (deny or warn)"))
        condition = {k: v for k, v in rule.items() if k in condition_keys}
        out.extend((at, p) for p in vocabulary.condition_problems(condition))
        _conditions(rule, at, vocabulary, out)
        _templates(rule, at, vocabulary, out)


def _block(raw: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """The entry's `key` block, on the CRD entry or under operatorBox."""
    block = raw.get(key)
    if block is None:
        box = raw.get("operatorBox")
        block = box.get(key) if isinstance(box, Mapping) else None
    return block if isinstance(block, Mapping) else {}


def rule_problems(entry_raw: Mapping[str, Any],
                  vocabulary: Vocabulary) -> list[tuple[Path, str]]:
    """Load-time problems of a CRD entry's normalize / mutation / validation blocks, as
    (field path relative to the CRD entry, message); their templates are compiled when
    the vocabulary has a `template_problem`."""
    out: list[tuple[Path, str]] = []
    _normalize_problems(entry_raw, vocabulary, out)
    _mutation_problems(entry_raw, vocabulary, out)
    _validation_problems(entry_raw, vocabulary, out)
    return out
