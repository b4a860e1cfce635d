"""The template engine of one Katalog: Orkestra's functions (random ones as placeholders),
the Katalog's user notes, and the data scope notes see. Pure."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from orksync.katalog.model import Katalog
from orksync.render.gotemplate import GoTemplateEngine
from orksync.render.jinja_dialect import JinjaTemplateEngine, make_engine
from orksync.render.notes import builtin_functions, user_notes
from orksync.secrets.random import PlaceholderRandom

TemplateEngine = GoTemplateEngine | JinjaTemplateEngine

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


_SCOPE: ContextVar[Mapping[str, Any]] = ContextVar("orksync_template_scope",
                                                   default=MappingProxyType({}))


@dataclass(slots=True)
class Templates:
    """The template engine of one Katalog: built-in functions plus its user notes."""

    engine: TemplateEngine
    clock: Clock
    scoped: bool = True  # notes read the calling template's data (_SCOPE); without notes, none does

    def render(self, source: str, data: Mapping[str, Any]) -> str:
        if not self.scoped:
            return self.engine.render(source, data)
        token = _SCOPE.set(data)
        try:
            return self.engine.render(source, data)
        finally:
            _SCOPE.reset(token)

    def text(self, value: Any, data: Mapping[str, Any]) -> str:
        """A field that may be a template, as Orkestra's resolver gives it: a text
        without `{{` verbatim (untrimmed), a template rendered (absent is "")."""
        text = "" if value is None else str(value)
        return self.render(text, data) if "{{" in text else text


def templates_for(katalog: Katalog, clock: Clock, **limits: Any) -> Templates:
    """The Katalog's Templates; `limits` override the engine's bounds (make_engine)."""
    functions = builtin_functions(clock=clock, random=PlaceholderRandom())
    holder: list[TemplateEngine] = []
    if katalog.notes:
        def note_render(expression: str, args: Mapping[str, Any]) -> str:
            # a note sees the data of the template that calls it, plus its arguments
            return holder[0].render(expression, {**_SCOPE.get(), **args})

        functions.update(user_notes(katalog.notes, note_render))
    holder.append(make_engine(katalog.dialect, functions, **limits))
    return Templates(engine=holder[0], clock=clock, scoped=bool(katalog.notes))
