"""Generated cases of templates computing on random values, for
tests/templates/test_random_expressions.py.

Every text/template builtin and every Orkestra note that takes a string (or any value) is
applied to each random note. A case is an expression `E` over the variable `$v`; the
template of a case binds `$v` to the random call and prints the value itself, a separator,
then `E`:

    {{ $v := randomHex 8 }}{{ $v }}|~|{{ printf "%.6s" $v }}

so that one output holds the generated value and the result computed from it (orksync
generates `$v` once for the whole text, as Go does). `literal(template, value)` is the same
template with the random call replaced by the value as a Go string literal: what Orkestra
computes from that value, the oracle's answer to compare with.
"""

from __future__ import annotations

import base64
import random
import re
import string
import uuid
from collections.abc import Callable
from typing import Any

from tests.templates import orkoracle_cases as oc

SEP = "|~|"
RANDOM_CALLS = {"randomAlphanumeric": "randomAlphanumeric 16", "randomHex": "randomHex 8",
                "randomBase64": "randomBase64 12", "uuidv4": "uuidv4"}
SHAPES = {"randomAlphanumeric": re.compile(r"[A-Za-z0-9]{16}"),
          "randomHex": re.compile(r"[0-9a-f]{16}"),
          "randomBase64": re.compile(r"[A-Za-z0-9_-]{16}"),
          "uuidv4": re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-"
                               r"[0-9a-f]{12}")}

# text/template's builtins, each applied to $v (and in a pipeline)
BUILTINS = [
    "len $v", "index $v 0", "index $v 5", "slice $v 2", "slice $v 1 5", "slice $v 0 40",
    'eq $v "x"', "eq $v $v", 'ne $v "x"', 'lt $v "m"', 'le $v "m"', 'gt $v "m"', 'ge $v "m"',
    "print $v", "print $v 1 $v", 'printf "%.6s" $v', 'printf "%q" $v', 'printf "%x" $v',
    'printf "%10.4s|%-8.3s|" $v $v', 'printf "%v-%d-%T" $v 3 $v', 'printf "%5.2v" $v',
    "println $v", "html $v", 'html "<" $v', "js $v", "urlquery $v", 'urlquery $v "&" $v',
    '$v | printf "%s!"', "$v | urlquery", "$v | len", 'and $v "x"', 'or $v "x"', "not $v",
    'or "" $v', "call $v",
]
# the results a shape check names (see the test)
NAMED = {'printf "%.6s" $v': "prefix6", "urlquery $v": "urlquery", "toBase64 $v": "base64",
         "len $v": "len", "sha256sum $v": "sha256"}


def note_cases(functions: dict[str, Any], names: list[str], seed: int) -> list[str]:
    """For every note that takes a string (a `string` parameter, else an `interface{}`
    one): `$v` in the first such position, the other arguments drawn as the oracle
    differential draws them; a second draw with `$v` piped when it is the last argument."""
    rng = random.Random(seed)
    out: list[str] = ["toBase64 $v", "sha256sum $v"]
    for name in sorted(names):
        sig = getattr(functions.get(name), "sig", None)
        if sig is None or not sig.params:
            continue
        params = list(sig.params)
        at = params.index("s") if "s" in params else params.index("a") if "a" in params \
            else None
        if at is None:
            continue
        hint = oc._hint(name)
        for k in range(2):
            args = [("$v" if i == at else _arg(rng, code, hint))
                    for i, code in enumerate(params)]
            if k == 1 and at == len(params) - 1:
                out.append(f"$v | {name} {' '.join(args[:-1])}".rstrip())
            else:
                out.append(f"{name} {' '.join(args)}")
    return list(dict.fromkeys(out))


def _arg(rng: random.Random, code: str, hint: list[str] | None) -> str:
    """An argument of Go type `code`, mostly of the right type (sometimes not: both sides
    must then fail alike)."""
    if hint and code in "as" and rng.random() < 0.7:
        return rng.choice(hint)
    return oc._arg(rng, code, kube=False, hint=hint)


def template(func: str, expression: str) -> str:
    return f"{{{{ $v := {RANDOM_CALLS[func]} }}}}{{{{ $v }}}}{SEP}{{{{ {expression} }}}}"


def literal(text: str, func: str, value: str) -> str:
    """`text` with its random call replaced by `value` as a Go string literal."""
    return text.replace(f"$v := {RANDOM_CALLS[func]} ", f'$v := "{value}" ', 1)


def split(output: str) -> tuple[str, str]:
    value, _, result = output.partition(SEP)
    return value, result


class SeededRandom:
    """A RandomSource of reproducible values of the random notes' shapes."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def token(self, func: str, n: int | None) -> str:
        if func == "uuidv4":
            return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        assert n is not None
        if func == "randomAlphanumeric":
            return "".join(self.rng.choice(string.ascii_letters + string.digits)
                           for _ in range(n))
        data = self.rng.randbytes(n)
        if func == "randomHex":
            return data.hex()
        return base64.urlsafe_b64encode(data).decode("ascii")


def shape_problem(kind: str, value: str, result: str) -> str | None:
    """What is wrong with a named result (NAMED) computed from `value`, or None."""
    checks: dict[str, Callable[[], bool]] = {
        "prefix6": lambda: result == value[:6] and len(result) == 6,
        "urlquery": lambda: result == value.replace("=", "%3D"),
        "base64": lambda: base64.b64decode(result, validate=True).decode() == value,
        "len": lambda: result == str(len(value)),
        "sha256": lambda: re.fullmatch(r"[0-9a-f]{8}", result) is not None,  # Orkestra's: 8
    }
    return None if checks[kind]() else f"{kind} of {len(value)} characters: {len(result)}"
