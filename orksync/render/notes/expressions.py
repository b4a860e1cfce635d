"""The evaluation of an expression over random values (`<generate:expr:...>`), when the
values are generated.

Pure. No I/O; the clock and the random values are passed in. A template that computes on a
random value renders the expression instead of a value (orksync.render.gotemplate.deferred);
the Secret's write evaluates it here with the same notes and builtins, the random leaves
taken from `leaf` (orksync.secrets.random.fill_generated, which gives the leaves of one id
one value).

An error while evaluating names the note or builtin that failed, never its message: the
message of a note can quote its argument (`strconv.Atoi: parsing "3fa2..."`), which is the
generated value.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from orksync.render.gotemplate.deferred import decode
from orksync.render.gotemplate.engine import go_utf8, orkestra_post
from orksync.render.gotemplate.runtime import _BUILTIN_METHODS, Runtime
from orksync.render.govalues import format_value
from orksync.render.notes import builtin_functions
from orksync.secrets.random import Leaf, PlaceholderRandom

__all__ = ["ExpressionError", "evaluate", "finish"]

MAX_STEPS = 100_000
MAX_OUTPUT = 1_000_000


class ExpressionError(ValueError):
    """An expression over random values could not be evaluated; the message names the
    failing call and holds no value."""


def evaluate(expression: Any, leaf: Leaf, *, now: datetime) -> str:
    """The text an expression prints, its random leaves from `leaf`."""
    functions = _functions(now)
    runtime = Runtime(functions, MAX_STEPS, MAX_OUTPUT)
    return _printed(_Evaluator(functions, runtime, leaf).value(expression))


@functools.lru_cache(maxsize=4)
def _functions(now: datetime) -> dict[str, Callable[..., Any]]:
    """The notes, their clock at `now` (one table for the expressions of one write)."""
    return builtin_functions(clock=lambda: now, random=PlaceholderRandom())


def finish(text: str) -> str:
    """A template's text once its expressions are evaluated, finished as the engine finishes
    a render's output (Orkestra's resolver: trimmed, `<no value>` removed)."""
    return orkestra_post(text)


def _printed(value: Any) -> str:
    """How an action prints a value (invalid UTF-8 as U+FFFD, as a render's output)."""
    text = value if isinstance(value, str) else format_value(value)
    return text if text.isascii() else go_utf8(text)


class _Evaluator:
    def __init__(self, functions: Mapping[str, Callable[..., Any]], runtime: Runtime,
                 leaf: Leaf) -> None:
        self.functions = functions
        self.runtime = runtime
        self.leaf = leaf

    def value(self, node: Any) -> Any:
        if isinstance(node, dict):
            if "r" in node:
                func, n, ident = node["r"]
                return self.leaf(str(func), None if n is None else int(n),
                                 None if ident is None else int(ident))
            if "f" in node or "g" in node:
                return self.call(node)
            if "t" in node:
                return "".join(_printed(self.value(part)) for part in node["t"])
            if len(node) == 1 and next(iter(node)) in "lm":
                (code, items), = node.items()
                if code == "l":
                    return [self.value(v) for v in items]
                return {k: self.value(v) for k, v in items.items()}
        return decode(node)

    def call(self, node: dict[str, Any]) -> Any:
        note = "f" in node
        name = str(node["f"] if note else node["g"])
        args = [self.value(a) for a in node.get("a") or ()]
        if note:
            fn = self.functions.get(name)
            if fn is None:
                raise ExpressionError(f"unknown note {name!r} in an expression")
            call = getattr(fn, "go_call", fn)
        else:
            method = _BUILTIN_METHODS.get(name)
            if method is None:
                raise ExpressionError(f"unknown builtin {name!r} in an expression")
            call = lambda *a: method(self.runtime, *a)  # noqa: E731
        try:
            return call(*args)
        except Exception:
            raise ExpressionError(f"{name} failed on the generated value (its message is "
                                  "not shown: it could hold the value)") from None
