"""The template function library ("notes"): Orkestra's built-in notes, orksync's
extensions, and Katalog-level user notes, as a name → Python callable map for the
Go-template engine.

Pure. No I/O, clock and randomness injected: `builtin_functions` takes the clock used by
the time notes and the `RandomSource` used by the random notes.

Orkestra's 260 notes are ported from its pkg/note with their Go signatures (`gosig`):
`orkestra` (as, conditional, data, strings, types, math, lists and maps, safe access),
`orkestra_validation` (validation, network, domain, Kubernetes names), `orkestra_kube`
(object metadata and status, containers, services, replicas), `orkestra_workloads` (the
notes inspecting pods, jobs and the other children, serve annotations, Prometheus) and
`orkestra_time` (time, durations, cron, semver, quantities, random). Through the Go
engine their arguments are checked as text/template checks them (a note given a value
of the wrong Go type fails, naming the note and the argument); called directly they
convert leniently. A note that cannot use its arguments raises `NoteError` (a
ValueError); the engine reports it as a template error.

orksync's own notes (`EXTENSIONS`, which Orkestra does not have) are in `extensions`,
whose `CATALOG` documents them. `catalog()` lists every note: Orkestra's with their Go
signatures, then the extensions.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from orksync.render.gotemplate import deferred
from orksync.render.notes import (
    extensions,
    orkestra,
    orkestra_kube,
    orkestra_time,
    orkestra_validation,
    orkestra_workloads,
)
from orksync.render.notes._common import NoteError
from orksync.render.notes.gosig import GoNote
from orksync.secrets.random import RandomSource

__all__ = ["EXTENSIONS", "NoteError", "builtin_functions", "catalog",
           "orkestra_notes", "user_notes"]

MAX_NOTE_DEPTH = 32
EXTENSIONS = frozenset({"concat", "conditionStatus", "fromJSON", "getBool", "getInt",
                        "getList", "getMap", "getOrDefault", "getString", "now",
                        "quantityAdd", "quantityCompare", "quantityToBytes",
                        "quantityToMillis", "subtractQuantity"})
"""orksync's own notes, which Orkestra does not have: a Katalog that uses one does not
load in Orkestra (`orksync validate` warns)."""


def orkestra_notes(*, clock: Callable[[], datetime],
                   random: RandomSource) -> list[GoNote]:
    """Orkestra's notes, ported with their Go signatures, in its registration order."""
    return [*orkestra.NOTES, *orkestra_validation.NOTES, *orkestra_time.cron_notes(),
            *orkestra_time.time_notes(clock), *orkestra_time.random_notes(random),
            *orkestra_time.quantity_notes(), *orkestra_kube.NOTES, *orkestra_workloads.NOTES,
            *orkestra_time.semver_notes()]


def builtin_functions(*, clock: Callable[[], datetime],
                      random: RandomSource) -> dict[str, Callable[..., Any]]:
    """Every built-in note, by Orkestra name: Orkestra's (`orkestra_notes`) and orksync's
    extensions (`EXTENSIONS`). `clock` must return the current time (aware; a naive
    value is taken as UTC); `random` produces the random notes' values
    (`PlaceholderRandom` when rendering to disk, `CryptoRandom` at apply time)."""
    functions: dict[str, Callable[..., Any]] = {
        name: _deferring(name, fn) for name, fn in extensions.notes(clock).items()}
    for fn in orkestra_notes(clock=clock, random=random):
        functions[fn.__name__] = fn
    return functions


def catalog() -> list[tuple[str, str, str, str]]:
    """(topic module, name, signature, meaning) for every built-in note: Orkestra's with
    their Go signatures, then orksync's extensions (`extensions.CATALOG`)."""
    rows: list[tuple[str, str, str, str]] = []
    epoch = datetime(2000, 1, 1, tzinfo=UTC)
    for fn in orkestra_notes(clock=lambda: epoch, random=_NoRandom()):
        topic = fn.impl.__module__.rsplit(".", 1)[-1]
        meaning = " ".join((fn.impl.__doc__ or "").split()) or \
            f"Orkestra's `{fn.__name__}` (pkg/note), same behaviour"
        rows.append((topic, fn.__name__, f"{fn.__name__} {fn.sig.go_text()}", meaning))
    rows += [("extensions", name, signature, meaning)
             for name, signature, meaning in extensions.CATALOG]
    return rows


def _deferring(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """An extension note (a plain function) that defers its call when given a value
    computed from a random value, as the Go-signed notes do (gotemplate.deferred)."""
    @functools.wraps(fn)
    def call(*args: Any) -> Any:
        if deferred.any_deferred(args):
            return deferred.call("f", name, args, "a")
        return fn(*args)

    return call


class _NoRandom:
    def token(self, func: str, n: int | None) -> str:
        raise ValueError("the catalog never runs a note")


def _bool_or_text(result: str) -> str | bool:
    text = result.strip()
    if text == "true":
        return True
    if text == "false":
        return False
    return text


def user_notes(notes: Mapping[str, Any],
               render: Callable[[str, Mapping[str, Any]], str]) -> dict[str, Callable[..., Any]]:
    """Katalog-level `notes:` (name → template expression) as callables.

    Decisions:

    * A note's value is its expression text; Orkestra's object form `{expression: …}` is
      accepted too.
    * Calling a note renders its expression with `render(expression, args_data)`, where
      `args_data` holds the call's positional arguments as `.args` (a list) and `.arg0`,
      `.arg1`, … (`{{ myNote .spec.tier "x" }}` → `.arg0` = the tier, `.arg1` = "x").
      `render` is the engine's render function; to let expressions also read the CR
      (`.spec…`, as in Orkestra, where notes see the resolver data) the engine passes a
      `render` that overlays `args_data` on the current data scope.
    * The rendered text is trimmed; exactly `true`/`false` become bools (so a note works
      in `{{ if }}` and `and`/`or`), any other result stays text.
    * Notes may call each other; a call chain deeper than 32 (a note calling itself) is a
      NoteError instead of a Python recursion error.
    """
    depth = [0]

    def make(name: str, expression: str) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            if depth[0] >= MAX_NOTE_DEPTH:
                raise NoteError(f"note {name}: calls nested deeper than {MAX_NOTE_DEPTH} "
                                "(does it call itself?)")
            scope: dict[str, Any] = {"args": list(args)}
            scope.update({f"arg{i}": arg for i, arg in enumerate(args)})
            depth[0] += 1
            try:
                result = _bool_or_text(render(expression, scope))
                # a note computing on a random value prints expression tokens: its result is
                # the deferred value they stand for, so the caller computes on that
                return deferred.lift(result) if isinstance(result, str) else result
            finally:
                depth[0] -= 1

        call.__name__ = name
        return call

    out: dict[str, Callable[..., Any]] = {}
    for name, spec in notes.items():
        expression = spec.get("expression") if isinstance(spec, Mapping) else spec
        if not isinstance(expression, str):
            raise NoteError(f"note {name}: the expression must be a string")
        out[str(name)] = make(str(name), expression)
    return out
