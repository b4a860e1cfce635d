"""The values of the random notes: placeholders and expression tokens when rendering to
disk, real values when applying (`fill_generated`). Randomness only in `CryptoRandom`
(docs/rendered-output.md#random-values)."""

from __future__ import annotations

import base64
import binascii
import json
import re
import secrets
import string
import uuid
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

__all__ = ["ALPHANUMERIC", "GENERATE_TOKEN_RE", "MAX_EXPRESSION", "MAX_RANDOM_N", "RANDOM_FUNCS",
           "CryptoRandom", "ExpressionSource", "Leaf", "PlaceholderRandom", "RandomSource",
           "decode_expression", "encode_expression", "expression_token", "fill_generated",
           "placeholder"]

ALPHANUMERIC = string.ascii_letters + string.digits
MAX_RANDOM_N = 4096
RANDOM_FUNCS = ("randomAlphanumeric", "randomHex", "randomBase64", "uuidv4")
_SIZED = RANDOM_FUNCS[:3]

MAX_EXPRESSION = 65536  # characters of an expression token's payload

GENERATE_TOKEN_RE = re.compile(
    r"<generate:(?:(?P<func>randomAlphanumeric|randomHex|randomBase64):(?P<n>[1-9][0-9]{0,3})"
    rf"|(?P<uuid>uuidv4)|expr:(?P<expr>[A-Za-z0-9_-]{{1,{MAX_EXPRESSION}}}))>")

Leaf = Callable[[str, int | None, int | None], str]
"""The value of one random leaf of an expression: (func, n, id) -> value."""


@runtime_checkable
class RandomSource(Protocol):
    """Produces the value of one random note call: `func` is the note name, `n` its
    argument (None for `uuidv4`)."""

    def token(self, func: str, n: int | None) -> str: ...


def _check(func: str, n: int | None) -> None:
    if func not in RANDOM_FUNCS:
        raise ValueError(f"unknown random function {func!r}: expected one of "
                         f"{', '.join(RANDOM_FUNCS)}")
    if func == "uuidv4":
        if n is not None:
            raise ValueError("uuidv4 takes no argument")
        return
    if n is None or isinstance(n, bool) or not isinstance(n, int):
        raise ValueError(f"{func} needs an integer length, got {n!r}")
    if not 1 <= n <= MAX_RANDOM_N:
        raise ValueError(f"{func} {n}: the length must be between 1 and {MAX_RANDOM_N}")


def placeholder(func: str, n: int | None) -> str:
    """The placeholder token for one call, e.g. `<generate:randomHex:16>`."""
    _check(func, n)
    return "<generate:uuidv4>" if func == "uuidv4" else f"<generate:{func}:{n}>"


@runtime_checkable
class ExpressionSource(RandomSource, Protocol):
    """A random source that also evaluates an expression token's expression (decoded),
    taking its random leaves from `leaf`, and finishes a text whose expressions it
    evaluated as the template engine finishes a render's output (Orkestra's resolver trims
    it and removes `<no value>`: an expression can print either)."""

    def evaluate(self, expression: Any, leaf: Leaf) -> str: ...

    def finish(self, text: str) -> str: ...


def encode_expression(expression: Any) -> str:
    """The payload of an expression token: compact JSON, unpadded URL-safe base64."""
    text = json.dumps(expression, separators=(",", ":"), ensure_ascii=False)
    payload = base64.urlsafe_b64encode(text.encode("utf-8", "surrogatepass"))
    out = payload.decode("ascii").rstrip("=")
    if len(out) > MAX_EXPRESSION:
        raise ValueError(f"an expression over random values is longer than {MAX_EXPRESSION} "
                         "characters once encoded")
    return out


def expression_token(expression: Any) -> str:
    """`<generate:expr:PAYLOAD>` for an expression (see the module docstring)."""
    return f"<generate:expr:{encode_expression(expression)}>"


def decode_expression(payload: str) -> Any:
    """The expression of a token's payload; ValueError when it is not one."""
    try:
        raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
        return json.loads(raw.decode("utf-8", "surrogatepass"))
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise ValueError("a <generate:expr:...> token that does not decode") from None


class PlaceholderRandom:
    """Render-to-disk source: returns the placeholder token, never a random value; an
    expression stays its token."""

    def token(self, func: str, n: int | None) -> str:
        return placeholder(func, n)

    def evaluate(self, expression: Any, leaf: Leaf) -> str:
        return expression_token(expression)

    def finish(self, text: str) -> str:
        return text


class CryptoRandom:
    """Apply-time source: real values from the operating system's CSPRNG (`secrets`)."""

    def token(self, func: str, n: int | None) -> str:
        _check(func, n)
        if func == "uuidv4":
            return str(uuid.UUID(bytes=secrets.token_bytes(16), version=4))
        assert n is not None
        if func == "randomAlphanumeric":
            return "".join(secrets.choice(ALPHANUMERIC) for _ in range(n))
        if func == "randomHex":
            return secrets.token_hex(n)
        return base64.urlsafe_b64encode(secrets.token_bytes(n)).decode("ascii")


def fill_generated(text: str, random: RandomSource) -> str:
    """Replace every placeholder token in `text` with a fresh value from `random`
    (each token gets its own value), and every expression token with its expression's
    value, evaluated by `random` (an `ExpressionSource`) over fresh random values: the
    leaves of the same id are one value throughout `text`. Raises ValueError for an
    out-of-range length, an expression that cannot be evaluated, or an expression token
    given a source that cannot evaluate it."""
    values: dict[int, str] = {}
    evaluated = False

    def leaf(func: str, n: int | None, ident: int | None) -> str:
        if ident is None:
            return random.token(func, n)
        if ident not in values:
            values[ident] = random.token(func, n)
        return values[ident]

    def replace(match: re.Match[str]) -> str:
        nonlocal evaluated
        if match.group("expr"):
            if not isinstance(random, ExpressionSource):
                raise ValueError("a value computed from a random value needs an evaluator")
            evaluated = True
            return random.evaluate(decode_expression(match.group("expr")), leaf)
        if match.group("uuid"):
            return random.token("uuidv4", None)
        return random.token(match.group("func"), int(match.group("n")))

    filled = GENERATE_TOKEN_RE.sub(replace, text)
    if evaluated:
        assert isinstance(random, ExpressionSource)
        filled = random.finish(filled)
    return filled
