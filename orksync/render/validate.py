"""Load-time checks of a Katalog, before any custom resource is rendered: every template
compiles (syntax, unknown functions), every condition is well formed (Orkestra silently
passes an unknown operator; orksync refuses it here). Pure."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from orksync.errors import RenderError
from orksync.katalog.model import CrdEntry, Katalog
from orksync.katalog.motifs import MOTIF_KEY
from orksync.render.conditions import validate_condition
from orksync.render.gotemplate import GoTemplateError
from orksync.render.prepare import rule_problems
from orksync.render.templates import TemplateEngine
from orksync.yamlio import dotted, locate

CONDITION_KEYS = ("when", "or", "anyOf")


def katalog_problems(katalog: Katalog, engine: TemplateEngine) -> dict[str, list[RenderError]]:
    """Problems per CRD entry key (entries without problems are absent)."""
    out: dict[str, list[RenderError]] = {}
    for entry in katalog.crds:
        problems = list(entry_problems(katalog, entry, engine))
        if problems:
            out[entry.key] = problems
    return out


def entry_problems(katalog: Katalog, entry: CrdEntry,
                   engine: TemplateEngine) -> Iterator[RenderError]:
    def fail(path: list[str | int], message: str) -> RenderError:
        return RenderError(message, file=entry.source.file,
                           line=locate(entry.source.path, entry.source.index,
                                       ["spec", "crds", entry.key, *path]),
                           path=dotted([*entry.path.split("."), *path]),
                           obj=f"Katalog/{katalog.name}")

    for rule_path, message in rule_problems(entry.raw, check=engine.check):
        yield fail(rule_path, message)
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
