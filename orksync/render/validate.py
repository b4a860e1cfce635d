"""The render layer's side of the Katalog's load-time checks: the `Vocabulary`
orksync.katalog.validate asks (resource keys and their fields, the condition language,
the template compiler, valueType conversion), and the portability warning, which needs
the template engine. Pure."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from orksync.errors import RenderError
from orksync.katalog import validate as katalog_validate
from orksync.katalog.model import Katalog
from orksync.katalog.validate import Vocabulary, walk
from orksync.render.conditions import CONDITION_KEYS, validate_condition
from orksync.render.gotemplate import GoTemplateError
from orksync.render.govalues import format_value
from orksync.render.kinds import BLOCK_CONTROL_KEYS, BY_KEY, PLACEHOLDER_KEYS, unknown_fields
from orksync.render.notes import EXTENSIONS
from orksync.render.prepare import convert
from orksync.render.resource import BLOCKS
from orksync.render.templates import TemplateEngine
from orksync.yamls.doc import dotted
from orksync.yamls.io import locate

__all__ = ["katalog_problems", "portability_warnings", "rule_problems",
           "vocabulary"]

def _unknown_fields(key: str, entry: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    for unknown in unknown_fields(key, entry):
        if not unknown.ignored:  # warned about by the renderer, not an error
            yield unknown.path, unknown.message(key)


def _template_problem(check: Callable[[str], None]) -> Callable[[str], str | None]:
    def problem(text: str) -> str | None:
        try:
            check(text)
        except GoTemplateError as err:
            return str(err)
        return None
    return problem


def vocabulary(check: Callable[[str], None] | None = None) -> Vocabulary:
    """What the Katalog's checks ask of this layer; `check` (an engine's `check`) also
    compiles the templates."""
    return Vocabulary(
        blocks=BLOCKS, resource_keys=BY_KEY, control_keys=BLOCK_CONTROL_KEYS,
        placeholder_keys=PLACEHOLDER_KEYS, unknown_fields=_unknown_fields,
        condition_keys=CONDITION_KEYS, condition_problems=validate_condition,
        convert=convert, describe=format_value,
        template_problem=_template_problem(check) if check is not None else None)


def katalog_problems(katalog: Katalog, engine: TemplateEngine) -> dict[str, list[RenderError]]:
    """Problems per CRD entry key of `katalog`, its templates compiled by `engine`."""
    return katalog_validate.katalog_problems(katalog, vocabulary(engine.check))


def rule_problems(entry_raw: Mapping[str, Any], *, check: Callable[[str], None] | None = None
                  ) -> list[tuple[list[str | int], str]]:
    """A CRD entry's normalize / mutation / validation problems (orksync.katalog.validate)."""
    return katalog_validate.rule_problems(entry_raw, vocabulary(check))


def portability_warnings(katalog: Katalog, engine: TemplateEngine) -> list[str]:
    """One warning per template that calls one of orksync's own notes (`EXTENSIONS`):
    the Katalog renders here but does not load in Orkestra. Names the file, the line, the
    field and the note; a user note of the same name is the Katalog's own, not counted."""
    own = set(katalog.notes)
    out: list[str] = []
    for entry in katalog.crds:
        for path, value in walk(entry.raw, []):
            if not isinstance(value, str) or "{{" not in value:
                continue
            try:
                used = engine.referenced_functions(value)
            except GoTemplateError:
                continue  # reported as an error by katalog_problems
            for name in sorted((used & EXTENSIONS) - own):
                line = locate(entry.source.path, entry.source.index,
                              ["spec", "crds", entry.key, *path])
                where = f"{entry.source.file}:{line}" if line else str(entry.source.file)
                out.append(f"{where} Katalog/{katalog.name} "
                           f"{dotted([*entry.path.split('.'), *path])}: `{name}` is an "
                           "orksync extension that Orkestra does not have: this Katalog "
                           "is not portable to Orkestra")
    return out
